//! candle-nn's layer constructors, with module spans: each takes exactly candle-nn's arguments
//! and returns the candle-nn layer wrapped with a `tracing` span entered on every forward (the
//! shape of candle-transformers' `with_tracing` layers), which the profiler's `tracing` layer
//! turns into a `module` span of the trace. A plain candle-nn model has no spans of its own:
//! swap `candle_nn::linear` for `trace_probe::nn::linear` (or `use trace_probe::nn as cnn;`)
//! and the memory and time of each layer get a name.
//!
//! A layer built from a `VarBuilder` names its module span after the builder's path (`fc1`,
//! `model.layers.0.self_attn.q_proj`: the prefix of its parameters, recorded in the tracing
//! span's `module` field) and records its kind (`linear`, `embedding`, `layer-norm`, `rms-norm`,
//! `conv2d`, …, candle-transformers' span names) as the span's `module_kind`; a layer without
//! one (pooling, dropout) or at the builder's root is named after its kind. The module path nests
//! the spans under the spans of enclosing modules. Outside the captured step a forward costs one
//! disabled-span check more than candle-nn's (and one thread-local read).
//!
//! With [`crate::ProfileRun::backward_spans`] on, each forward of the captured step also marks
//! the layer's input and output for the per-module backward spans (see the crate README).
//!
//! ```
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_nn::{VarBuilder, VarMap};
//! # fn main() -> candle_core::Result<()> {
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
//! let fc = trace_probe::nn::linear(4, 2, vb.pp("fc"))?; // candle_nn::linear's signature
//! let y = fc.forward(&Tensor::ones((3, 4), DType::F32, &Device::Cpu)?)?;
//! assert_eq!(y.dims(), &[3, 2]);
//! # Ok(()) }
//! ```

use candle_core::{Module, ModuleT, Result, Tensor};
use candle_nn::rnn::RNN;
use candle_nn::VarBuilder;

/// A candle-nn module `M` with a module span around every forward. Derefs to `M`.
#[derive(Debug, Clone)]
pub struct Traced<M> {
    inner: M,
    span: tracing::Span,
}

impl<M> Traced<M> {
    /// Wraps `inner` with `span` (a TRACE-level span, e.g. `tracing::trace_span!("attn")`).
    pub fn new(inner: M, span: tracing::Span) -> Self {
        Self { inner, span }
    }

    /// The span entered on every forward.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The wrapped module, consuming the wrapper.
    pub fn into_inner(self) -> M {
        self.inner
    }
}

impl<M> std::ops::Deref for Traced<M> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.inner
    }
}

impl<M: Module> Module for Traced<M> {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        match crate::backward::call_for(&self.span) {
            None => self.inner.forward(xs),
            Some(call) => {
                let xs = crate::backward::mark_input(&call, xs);
                let ys = self.inner.forward(&xs)?;
                Ok(crate::backward::mark_output(&call, ys))
            }
        }
    }
}

impl Traced<candle_nn::RmsNorm> {
    /// `RmsNorm::forward_diff` inside the span: the differentiable RMS norm (candle-nn's
    /// `forward` uses a fused op without a backward on contiguous input).
    ///
    /// # Errors
    /// Candle errors of the op.
    pub fn forward_diff(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        match crate::backward::call_for(&self.span) {
            None => self.inner.forward_diff(xs),
            Some(call) => {
                let xs = crate::backward::mark_input(&call, xs);
                let ys = self.inner.forward_diff(&xs)?;
                Ok(crate::backward::mark_output(&call, ys))
            }
        }
    }
}

impl<M: RNN> RNN for Traced<M> {
    type State = M::State;

    fn zero_state(&self, batch_dim: usize) -> Result<Self::State> {
        self.inner.zero_state(batch_dim)
    }

    fn step(&self, input: &Tensor, state: &Self::State) -> Result<Self::State> {
        let _enter = self.span.enter();
        self.inner.step(input, state)
    }

    fn seq_init(&self, input: &Tensor, init_state: &Self::State) -> Result<Vec<Self::State>> {
        let _enter = self.span.enter();
        self.inner.seq_init(input, init_state)
    }

    fn states_to_tensor(&self, states: &[Self::State]) -> Result<Tensor> {
        self.inner.states_to_tensor(states)
    }
}

/// A candle-nn module with a train flag (`ModuleT`: batch norm, dropout) and a module span
/// around every forward. (Candle's blanket `impl<M: Module> ModuleT for M` rules out one type
/// for both.) Derefs to `M`.
#[derive(Debug, Clone)]
pub struct TracedT<M> {
    inner: M,
    span: tracing::Span,
}

impl<M> TracedT<M> {
    /// Wraps `inner` with `span`.
    pub fn new(inner: M, span: tracing::Span) -> Self {
        Self { inner, span }
    }

    /// The wrapped module, consuming the wrapper.
    pub fn into_inner(self) -> M {
        self.inner
    }
}

impl<M> std::ops::Deref for TracedT<M> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.inner
    }
}

impl<M: ModuleT> ModuleT for TracedT<M> {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Result<Tensor> {
        let _enter = self.span.enter();
        match crate::backward::call_for(&self.span) {
            None => self.inner.forward_t(xs, train),
            Some(call) => {
                let xs = crate::backward::mark_input(&call, xs);
                let ys = self.inner.forward_t(&xs, train)?;
                Ok(crate::backward::mark_output(&call, ys))
            }
        }
    }
}

/// Pooling used as a module (candle has it only as tensor methods): max or average over
/// `kernel` windows of the last two dimensions with `stride` (default: the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool2d {
    /// Max or average.
    pub kind: PoolKind,
    /// Window (height, width).
    pub kernel: (usize, usize),
    /// Stride (height, width).
    pub stride: (usize, usize),
}

/// What a [`Pool2d`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// `Tensor::max_pool2d_with_stride`.
    Max,
    /// `Tensor::avg_pool2d_with_stride`.
    Avg,
}

impl Module for Pool2d {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self.kind {
            PoolKind::Max => xs.max_pool2d_with_stride(self.kernel, self.stride),
            PoolKind::Avg => xs.avg_pool2d_with_stride(self.kernel, self.stride),
        }
    }
}

/// Max pooling over `kernel × kernel` windows, stride `kernel`, as a module (span
/// `max-pool2d`).
pub fn max_pool2d(kernel: usize) -> Traced<Pool2d> {
    max_pool2d_with_stride(kernel, kernel)
}

/// Max pooling with a stride, as a module (span `max-pool2d`).
pub fn max_pool2d_with_stride(kernel: usize, stride: usize) -> Traced<Pool2d> {
    Traced::new(
        Pool2d {
            kind: PoolKind::Max,
            kernel: (kernel, kernel),
            stride: (stride, stride),
        },
        tracing::trace_span!("max-pool2d"),
    )
}

/// Average pooling over `kernel × kernel` windows, stride `kernel`, as a module (span
/// `avg-pool2d`).
pub fn avg_pool2d(kernel: usize) -> Traced<Pool2d> {
    avg_pool2d_with_stride(kernel, kernel)
}

/// Average pooling with a stride, as a module (span `avg-pool2d`).
pub fn avg_pool2d_with_stride(kernel: usize, stride: usize) -> Traced<Pool2d> {
    Traced::new(
        Pool2d {
            kind: PoolKind::Avg,
            kernel: (kernel, kernel),
            stride: (stride, stride),
        },
        tracing::trace_span!("avg-pool2d"),
    )
}

/// Defines a probed constructor: same name, arguments and errors as candle-nn's.
macro_rules! probed {
    ($(#[$doc:meta])* $wrap:ident, $name:ident, $span:literal, $ty:ty, ($($arg:ident: $argty:ty),*), $vb:ident) => {
        $(#[$doc])*
        ///
        /// # Errors
        #[doc = concat!("As `candle_nn::", stringify!($name), "`.")]
        pub fn $name($($arg: $argty),*) -> Result<$wrap<$ty>> {
            let module = $vb.prefix();
            Ok($wrap::new(
                candle_nn::$name($($arg),*)?,
                tracing::trace_span!($span, module = module.as_str()),
            ))
        }
    };
}

probed!(
    /// `candle_nn::linear` (span `linear`).
    Traced, linear, "linear", candle_nn::Linear, (in_dim: usize, out_dim: usize, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::linear_no_bias` (span `linear`).
    Traced, linear_no_bias, "linear", candle_nn::Linear,
    (in_dim: usize, out_dim: usize, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::linear_b` (span `linear`).
    Traced, linear_b, "linear", candle_nn::Linear,
    (in_dim: usize, out_dim: usize, bias: bool, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::embedding` (span `embedding`).
    Traced, embedding, "embedding", candle_nn::Embedding,
    (in_size: usize, out_size: usize, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::layer_norm_no_bias` (span `layer-norm`).
    Traced, layer_norm_no_bias, "layer-norm", candle_nn::LayerNorm,
    (size: usize, eps: f64, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::rms_norm` (span `rms-norm`). Its `forward` is candle-nn's fused op (no
    /// backward on contiguous input); [`Traced::forward_diff`] is the differentiable one.
    Traced, rms_norm, "rms-norm", candle_nn::RmsNorm, (size: usize, eps: f64, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::group_norm` (span `group-norm`).
    Traced, group_norm, "group-norm", candle_nn::GroupNorm,
    (num_groups: usize, num_channels: usize, eps: f64, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv1d` (span `conv1d`).
    Traced, conv1d, "conv1d", candle_nn::Conv1d,
    (in_channels: usize, out_channels: usize, kernel_size: usize, cfg: candle_nn::Conv1dConfig,
     vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv1d_no_bias` (span `conv1d`).
    Traced, conv1d_no_bias, "conv1d", candle_nn::Conv1d,
    (in_channels: usize, out_channels: usize, kernel_size: usize, cfg: candle_nn::Conv1dConfig,
     vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv2d` (span `conv2d`).
    Traced, conv2d, "conv2d", candle_nn::Conv2d,
    (in_channels: usize, out_channels: usize, kernel_size: usize, cfg: candle_nn::Conv2dConfig,
     vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv2d_no_bias` (span `conv2d`).
    Traced, conv2d_no_bias, "conv2d", candle_nn::Conv2d,
    (in_channels: usize, out_channels: usize, kernel_size: usize, cfg: candle_nn::Conv2dConfig,
     vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv_transpose1d` (span `conv-transpose1d`).
    Traced, conv_transpose1d, "conv-transpose1d", candle_nn::ConvTranspose1d,
    (in_channels: usize, out_channels: usize, kernel_size: usize,
     cfg: candle_nn::ConvTranspose1dConfig, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv_transpose1d_no_bias` (span `conv-transpose1d`).
    Traced, conv_transpose1d_no_bias, "conv-transpose1d", candle_nn::ConvTranspose1d,
    (in_channels: usize, out_channels: usize, kernel_size: usize,
     cfg: candle_nn::ConvTranspose1dConfig, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv_transpose2d` (span `conv-transpose2d`).
    Traced, conv_transpose2d, "conv-transpose2d", candle_nn::ConvTranspose2d,
    (in_channels: usize, out_channels: usize, kernel_size: usize,
     cfg: candle_nn::ConvTranspose2dConfig, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::conv_transpose2d_no_bias` (span `conv-transpose2d`).
    Traced, conv_transpose2d_no_bias, "conv-transpose2d", candle_nn::ConvTranspose2d,
    (in_channels: usize, out_channels: usize, kernel_size: usize,
     cfg: candle_nn::ConvTranspose2dConfig, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::lstm` (span `lstm`, entered by `step` and `seq`).
    Traced, lstm, "lstm", candle_nn::LSTM,
    (in_dim: usize, hidden_dim: usize, config: candle_nn::LSTMConfig, vb: VarBuilder),
    vb
);
probed!(
    /// `candle_nn::gru` (span `gru`, entered by `step` and `seq`).
    Traced, gru, "gru", candle_nn::GRU,
    (in_dim: usize, hidden_dim: usize, config: candle_nn::GRUConfig, vb: VarBuilder),
    vb
);

/// `candle_nn::layer_norm` (span `layer-norm`).
///
/// # Errors
/// As `candle_nn::layer_norm`.
pub fn layer_norm<C: Into<candle_nn::LayerNormConfig>>(
    size: usize,
    config: C,
    vb: VarBuilder,
) -> Result<Traced<candle_nn::LayerNorm>> {
    let module = vb.prefix();
    Ok(Traced::new(
        candle_nn::layer_norm(size, config, vb)?,
        tracing::trace_span!("layer-norm", module = module.as_str()),
    ))
}

/// `candle_nn::batch_norm` (span `batch-norm`); a `ModuleT` (train flag).
///
/// # Errors
/// As `candle_nn::batch_norm`.
pub fn batch_norm<C: Into<candle_nn::BatchNormConfig>>(
    num_features: usize,
    config: C,
    vb: VarBuilder,
) -> Result<TracedT<candle_nn::BatchNorm>> {
    let module = vb.prefix();
    Ok(TracedT::new(
        candle_nn::batch_norm(num_features, config, vb)?,
        tracing::trace_span!("batch-norm", module = module.as_str()),
    ))
}

/// `candle_nn::Dropout::new(drop_p)` (span `dropout`); a `ModuleT` (train flag).
pub fn dropout(drop_p: f32) -> TracedT<candle_nn::Dropout> {
    TracedT::new(
        candle_nn::Dropout::new(drop_p),
        tracing::trace_span!("dropout"),
    )
}
