//! candle-nn layers that are one op of the model though they live in no op module (a batch
//! norm, a recurrent layer, a variable's write-back), and candle-nn's custom ops whose backward
//! arm [`crate::classify`] names by the op. Data tables with their sources.

/// candle-nn layers (and candle-core's `Var::set`) whose whole call is one op of the model,
/// though none lives in an op module: a batch norm, a recurrent layer's step or sequence, a
/// variable's write-back. Their frame encloses the tensor ops they are built from, so the
/// outermost op frame names the layer (`batch_norm`, not the `broadcast_sub` inside it), as
/// PyTorch's one `aten::batch_norm` / `aten::gru` does. By full function path, and (inlined
/// frames of a line-tables-only build) by short name and source file. Sources: candle-nn
/// 0.11.1 `src/batch_norm.rs` (`BatchNorm::forward_train`, `forward_eval`), `src/rnn.rs`
/// (`impl RNN for LSTM / GRU`: `step`; the trait's `seq`, `seq_init`), candle-core
/// `src/variable.rs` (`Var::set`: a copy into the variable's storage).
pub const LAYER_OPS: &[LayerOp] = &[
    layer(
        "candle_nn::batch_norm::BatchNorm::forward_train",
        "src/batch_norm.rs",
        "forward_train",
        "batch_norm",
    ),
    layer(
        "candle_nn::batch_norm::BatchNorm::forward_eval",
        "src/batch_norm.rs",
        "forward_eval",
        "batch_norm",
    ),
    layer(
        "<candle_nn::rnn::GRU as candle_nn::rnn::RNN>::step",
        "src/rnn.rs",
        "",
        "gru",
    ),
    layer(
        "<candle_nn::rnn::LSTM as candle_nn::rnn::RNN>::step",
        "src/rnn.rs",
        "",
        "lstm",
    ),
    layer("candle_nn::rnn::RNN::seq", "src/rnn.rs", "seq", "rnn_seq"),
    layer(
        "candle_nn::rnn::RNN::seq_init",
        "src/rnn.rs",
        "seq_init",
        "rnn_seq",
    ),
    layer(
        "candle_core::variable::Var::set",
        "src/variable.rs",
        "",
        "var_set",
    ),
];

/// candle-nn 0.11.1's custom ops that have a backward (`src/ops.rs`: only `Sigmoid`
/// implements `CustomOp1::bwd`; `SoftmaxLastDim`, `RmsNorm`, `LayerNorm`, `Sdpa` do not), with
/// the name their arm of candle-core's `backprop.rs` (`custom_op1.backward`) takes when their
/// `bwd` frame is inside it: what PyTorch's `SigmoidBackward0` does.
pub const NN_CUSTOM_OP_ARMS: &[(&str, &str)] = &[("candle_nn::ops::Sigmoid", "sigmoid.backward")];

/// One entry of [`LAYER_OPS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerOp {
    /// The function's full path as symbolised (no hash, no generic arguments).
    pub path: &'static str,
    /// Its source file inside its crate (`src/rnn.rs`).
    pub file: &'static str,
    /// Its short name in that file when it is unambiguous there (`seq_init`); empty when the
    /// short name is shared (`step` of LSTM and GRU) and only the full path names it.
    pub short: &'static str,
    /// The op it is (`gru`).
    pub op: &'static str,
}

const fn layer(
    path: &'static str,
    file: &'static str,
    short: &'static str,
    op: &'static str,
) -> LayerOp {
    LayerOp {
        path,
        file,
        short,
        op,
    }
}

/// The [`LAYER_OPS`] op a full function path is (a trailing `::h<hash>` ignored).
pub fn layer_op(function: &str) -> Option<&'static str> {
    let path = match function.rfind("::h") {
        Some(i)
            if function.len() - i == 19
                && function[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            &function[..i]
        }
        _ => function,
    };
    LAYER_OPS.iter().find(|l| l.path == path).map(|l| l.op)
}
