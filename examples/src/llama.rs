//! A small llama-style causal language model built only from differentiable Candle operations.
//!
//! Architecture (as in Llama 2, scaled down): token embedding → `num_layers` pre-norm blocks
//! (RMSNorm → multi-head causal self-attention with rotary position embeddings → residual;
//! RMSNorm → SwiGLU MLP → residual) → final RMSNorm → `lm_head`. The loss is the mean
//! cross-entropy of the next-token prediction over **every** position.
//!
//! Unlike candle-transformers' `Llama` in 0.11.1 (fused `rms_norm`, `rope` and
//! `softmax_last_dim`, none with a backward; last-position logits only), every parameter here gets
//! a gradient: [`candle_nn::RmsNorm::forward_diff`], [`candle_nn::rotary_emb::rope_slow`] and
//! [`candle_nn::ops::softmax`] are composed from differentiable primitives.
//!
//! Module spans: the layers come from trace-probe's probed constructors ([`trace_probe::nn`]:
//! candle-nn's constructors plus a `tracing` span — `linear`, `rms-norm`, `embedding`), the
//! blocks hold their own `tracing` spans (`model`, `block`, `attn`, `mlp`), the shape of
//! candle-transformers' `with_tracing` models.

use candle_core::{DType, Device, Module, Result, Tensor, D};
use candle_nn::VarBuilder;

use trace_probe::nn::{self, Traced};

type Linear = Traced<candle_nn::Linear>;
type Embedding = Traced<candle_nn::Embedding>;
type RmsNorm = Traced<candle_nn::RmsNorm>;

/// Sizes of the model and of one training batch.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// Vocabulary size (token ids are `0..vocab_size`).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP's hidden layer.
    pub intermediate_size: usize,
    /// Number of transformer blocks.
    pub num_layers: usize,
    /// Attention heads; must divide `hidden_size`, and the head size must be even (RoPE).
    pub num_heads: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Sequences per batch.
    pub batch_size: usize,
    /// Epsilon of the RMS norms.
    pub rms_norm_eps: f64,
    /// RoPE base frequency.
    pub rope_theta: f32,
}

impl Default for LlamaConfig {
    /// A tiny model (≈ 60 k parameters) whose training step takes milliseconds on a CPU.
    fn default() -> Self {
        Self {
            vocab_size: 64,
            hidden_size: 64,
            intermediate_size: 128,
            num_layers: 2,
            num_heads: 4,
            seq_len: 16,
            batch_size: 8,
            rms_norm_eps: 1e-5,
            rope_theta: 10_000.0,
        }
    }
}

impl LlamaConfig {
    /// Size of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }
}

#[derive(Debug, Clone)]
struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    num_heads: usize,
    head_dim: usize,
    span: tracing::Span,
}

impl Attention {
    fn new(cfg: &LlamaConfig, vb: VarBuilder) -> Result<Self> {
        let h = cfg.hidden_size;
        Ok(Self {
            q_proj: nn::linear_no_bias(h, h, vb.pp("q_proj"))?,
            k_proj: nn::linear_no_bias(h, h, vb.pp("k_proj"))?,
            v_proj: nn::linear_no_bias(h, h, vb.pp("v_proj"))?,
            o_proj: nn::linear_no_bias(h, h, vb.pp("o_proj"))?,
            num_heads: cfg.num_heads,
            head_dim: cfg.head_dim(),
            span: tracing::trace_span!("attn"),
        })
    }

    /// `xs`: `(batch, seq, hidden)`; `cos`/`sin`: `(seq, head_dim / 2)`; `mask`: `(seq, seq)`
    /// additive causal mask.
    fn forward(&self, xs: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let (b, t, c) = xs.dims3()?;
        let heads = |x: Tensor| -> Result<Tensor> {
            x.reshape((b, t, self.num_heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = heads(self.q_proj.forward(xs)?)?;
        let k = heads(self.k_proj.forward(xs)?)?;
        let v = heads(self.v_proj.forward(xs)?)?;
        let q = candle_nn::rotary_emb::rope_slow(&q, cos, sin)?;
        let k = candle_nn::rotary_emb::rope_slow(&k, cos, sin)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(mask)?;
        let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let ys = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, t, c))?;
        self.o_proj.forward(&ys)
    }
}

#[derive(Debug, Clone)]
struct Mlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
    span: tracing::Span,
}

impl Mlp {
    fn new(cfg: &LlamaConfig, vb: VarBuilder) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Self {
            gate_proj: nn::linear_no_bias(h, i, vb.pp("gate_proj"))?,
            up_proj: nn::linear_no_bias(h, i, vb.pp("up_proj"))?,
            down_proj: nn::linear_no_bias(i, h, vb.pp("down_proj"))?,
            span: tracing::trace_span!("mlp"),
        })
    }

    /// SwiGLU: `down(silu(gate(x)) * up(x))`.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let gate = self.gate_proj.forward(xs)?.silu()?;
        let up = self.up_proj.forward(xs)?;
        self.down_proj.forward(&(gate * up)?)
    }
}

#[derive(Debug, Clone)]
struct Block {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
    span: tracing::Span,
}

impl Block {
    fn new(cfg: &LlamaConfig, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            input_layernorm: nn::rms_norm(
                cfg.hidden_size,
                cfg.rms_norm_eps,
                vb.pp("input_layernorm"),
            )?,
            self_attn: Attention::new(cfg, vb.pp("self_attn"))?,
            post_attention_layernorm: nn::rms_norm(
                cfg.hidden_size,
                cfg.rms_norm_eps,
                vb.pp("post_attention_layernorm"),
            )?,
            mlp: Mlp::new(cfg, vb.pp("mlp"))?,
            span: tracing::trace_span!("block"),
        })
    }

    fn forward(&self, xs: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let attn =
            self.self_attn
                .forward(&self.input_layernorm.forward_diff(xs)?, cos, sin, mask)?;
        let xs = (xs + attn)?;
        let mlp = self
            .mlp
            .forward(&self.post_attention_layernorm.forward_diff(&xs)?)?;
        xs + mlp
    }
}

/// The llama-style model: parameters live in the `VarBuilder`'s `VarMap` under
/// `model.embed_tokens`, `model.layers.<i>.*`, `model.norm` and `lm_head`.
#[derive(Debug, Clone)]
pub struct Llama {
    embed_tokens: Embedding,
    layers: Vec<Block>,
    norm: RmsNorm,
    lm_head: Linear,
    cos: Tensor,
    sin: Tensor,
    mask: Tensor,
    vocab_size: usize,
    span: tracing::Span,
}

impl Llama {
    /// Builds the model with variables from `vb` (F32) and precomputes the RoPE tables and the
    /// causal mask for `cfg.seq_len` positions.
    ///
    /// # Errors
    /// Candle errors; an odd head size or `num_heads` not dividing `hidden_size` is rejected.
    pub fn new(cfg: &LlamaConfig, vb: VarBuilder) -> Result<Self> {
        if cfg.num_heads == 0 || cfg.hidden_size % cfg.num_heads != 0 || cfg.head_dim() % 2 != 0 {
            candle_core::bail!(
                "llama config: hidden_size {} must split into {} heads of even size",
                cfg.hidden_size,
                cfg.num_heads
            );
        }
        let device = vb.device().clone();
        let layers = (0..cfg.num_layers)
            .map(|i| Block::new(cfg, vb.pp(format!("model.layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let (cos, sin) = rope_tables(cfg, &device)?;
        Ok(Self {
            embed_tokens: nn::embedding(
                cfg.vocab_size,
                cfg.hidden_size,
                vb.pp("model.embed_tokens"),
            )?,
            layers,
            norm: nn::rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("model.norm"))?,
            lm_head: nn::linear_no_bias(cfg.hidden_size, cfg.vocab_size, vb.pp("lm_head"))?,
            cos,
            sin,
            mask: causal_mask(cfg.seq_len, &device)?,
            vocab_size: cfg.vocab_size,
            span: tracing::trace_span!("model"),
        })
    }

    /// Logits for every position: `ids` `(batch, seq)` u32 → `(batch, seq, vocab)` f32.
    ///
    /// # Errors
    /// Candle errors; `seq` must equal the configured `seq_len`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let mut xs = self.embed_tokens.forward(ids)?;
        for layer in &self.layers {
            xs = layer.forward(&xs, &self.cos, &self.sin, &self.mask)?;
        }
        self.lm_head.forward(&self.norm.forward_diff(&xs)?)
    }

    /// Mean next-token cross-entropy over every position: `ids` and `targets` `(batch, seq)`
    /// u32 → scalar f32.
    ///
    /// # Errors
    /// Candle errors (shape mismatches).
    pub fn loss(&self, ids: &Tensor, targets: &Tensor) -> Result<Tensor> {
        self.loss_slowed(ids, targets, 0)
    }

    /// [`Llama::loss`] with `rounds` of `exp` then `log` on the logits (an identity that costs
    /// two ops and their backward arms per round: a seeded op slowdown).
    ///
    /// # Errors
    /// Candle errors (shape mismatches).
    pub fn loss_slowed(&self, ids: &Tensor, targets: &Tensor, rounds: usize) -> Result<Tensor> {
        let mut logits = self.forward(ids)?;
        for _ in 0..rounds {
            logits = logits.exp()?.log()?;
        }
        let (b, t, _) = logits.dims3()?;
        candle_nn::loss::cross_entropy(
            &logits.reshape((b * t, self.vocab_size))?,
            &targets.reshape(b * t)?,
        )
    }
}

/// RoPE cos/sin tables `(seq_len, head_dim / 2)`: angle `pos / theta^(2i / head_dim)`.
fn rope_tables(cfg: &LlamaConfig, device: &Device) -> Result<(Tensor, Tensor)> {
    let d = cfg.head_dim();
    let inv_freq: Vec<f32> = (0..d / 2)
        .map(|i| 1.0 / cfg.rope_theta.powf(2.0 * i as f32 / d as f32))
        .collect();
    let inv_freq = Tensor::from_vec(inv_freq, (1, d / 2), device)?;
    let positions = Tensor::arange(0u32, cfg.seq_len as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((cfg.seq_len, 1))?;
    let angles = positions.broadcast_mul(&inv_freq)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// Additive causal mask `(seq_len, seq_len)`: 0 on and below the diagonal, -1e4 above (finite, so
/// tensor statistics stay finite; `exp(-1e4)` is 0 in f32).
fn causal_mask(seq_len: usize, device: &Device) -> Result<Tensor> {
    let mask: Vec<f32> = (0..seq_len)
        .flat_map(|i| (0..seq_len).map(move |j| if j > i { -1e4 } else { 0.0 }))
        .collect();
    Tensor::from_vec(mask, (seq_len, seq_len), device)
}
