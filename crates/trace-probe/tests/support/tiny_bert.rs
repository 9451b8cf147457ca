//! The tiny random-weight candle-transformers BERT the BERT tests profile: 2 layers, hidden
//! size 16, 2 heads, a 50-token vocabulary, no dropout (every figure of its step is the same
//! on every run).

use candle_transformers::models::bert::{Config, HiddenAct};

/// The configuration: small enough for a debug test, every BERT part present.
pub fn tiny_config() -> Config {
    Config {
        vocab_size: 50,
        hidden_size: 16,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        intermediate_size: 32,
        hidden_act: HiddenAct::Gelu,
        hidden_dropout_prob: 0.0,
        max_position_embeddings: 16,
        type_vocab_size: 2,
        initializer_range: 0.02,
        layer_norm_eps: 1e-12,
        pad_token_id: 0,
        ..Config::default()
    }
}
