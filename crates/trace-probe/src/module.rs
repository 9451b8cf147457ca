//! [`Probed`] / [`ProbedT`]: thin wrappers recording one module span per forward, shaped like
//! candle-transformers' `with_tracing` wrappers (`{ inner, span }`), with constructors that
//! mirror candle-nn's ([`linear`], [`embedding`], …).

use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{Module, ModuleT, Result, Tensor};
use candle_nn::VarBuilder;

use crate::session::TraceSession;

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// The span a wrapper opens on each forward: its name and instance key.
#[derive(Debug, Clone)]
pub struct ModuleSpan {
    session: TraceSession,
    name: String,
    instance: u64,
}

impl ModuleSpan {
    /// A module span site named `name` (a fresh instance key).
    pub fn new(session: &TraceSession, name: impl Into<String>) -> Self {
        Self {
            session: session.clone(),
            name: name.into(),
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Opens the module span (inactive outside the captured step: one atomic load).
    pub fn enter(&self) -> crate::SpanGuard {
        self.session.module_span(&self.name, Some(self.instance))
    }

    /// The span name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Any `candle_core::Module` plus one `module` span per forward. The span's module path is the
/// enclosing module span's path plus `/name`.
///
/// ```
/// use candle_core::{DType, Device, Module, Tensor};
/// use candle_nn::{VarBuilder, VarMap};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let session = trace_probe::TraceSession::new(trace_probe::ProfileRun::inference("demo", 1), std::io::sink())?;
/// let varmap = VarMap::new();
/// let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
/// let fc = trace_probe::probed::linear(&session, 4, 2, vb.pp("fc"))?;
/// let y = fc.forward(&Tensor::ones((3, 4), DType::F32, &Device::Cpu)?)?;
/// assert_eq!(y.dims(), &[3, 2]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Probed<M> {
    inner: M,
    span: ModuleSpan,
}

impl<M> Probed<M> {
    /// Wraps `inner`; its spans are named `name`.
    pub fn new(session: &TraceSession, name: impl Into<String>, inner: M) -> Self {
        Self {
            inner,
            span: ModuleSpan::new(session, name),
        }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The wrapped module, consuming the wrapper.
    pub fn into_inner(self) -> M {
        self.inner
    }
}

impl<M: Module> Module for Probed<M> {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _span = self.span.enter();
        self.inner.forward(xs)
    }
}

/// Any `candle_core::ModuleT` (train flag: dropout, batch norm) plus one `module` span per
/// forward. (Candle's blanket `impl<M: Module> ModuleT for M` rules out one type for both.)
#[derive(Debug, Clone)]
pub struct ProbedT<M> {
    inner: M,
    span: ModuleSpan,
}

impl<M> ProbedT<M> {
    /// Wraps `inner`; its spans are named `name`.
    pub fn new(session: &TraceSession, name: impl Into<String>, inner: M) -> Self {
        Self {
            inner,
            span: ModuleSpan::new(session, name),
        }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M: ModuleT> ModuleT for ProbedT<M> {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Result<Tensor> {
        let _span = self.span.enter();
        self.inner.forward_t(xs, train)
    }
}

fn name_of(vb: &VarBuilder) -> String {
    let prefix = vb.prefix();
    if prefix.is_empty() {
        "module".to_string()
    } else {
        prefix
    }
}

/// Probed `candle_nn::linear`; the span is named after the `VarBuilder` prefix.
///
/// # Errors
/// As `candle_nn::linear`.
pub fn linear(
    session: &TraceSession,
    in_dim: usize,
    out_dim: usize,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::Linear>> {
    let name = name_of(&vb);
    Ok(Probed::new(
        session,
        name,
        candle_nn::linear(in_dim, out_dim, vb)?,
    ))
}

/// Probed `candle_nn::linear_no_bias`.
///
/// # Errors
/// As `candle_nn::linear_no_bias`.
pub fn linear_no_bias(
    session: &TraceSession,
    in_dim: usize,
    out_dim: usize,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::Linear>> {
    let name = name_of(&vb);
    Ok(Probed::new(
        session,
        name,
        candle_nn::linear_no_bias(in_dim, out_dim, vb)?,
    ))
}

/// Probed `candle_nn::linear_b`.
///
/// # Errors
/// As `candle_nn::linear_b`.
pub fn linear_b(
    session: &TraceSession,
    in_dim: usize,
    out_dim: usize,
    bias: bool,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::Linear>> {
    let name = name_of(&vb);
    Ok(Probed::new(
        session,
        name,
        candle_nn::linear_b(in_dim, out_dim, bias, vb)?,
    ))
}

/// Probed `candle_nn::embedding`.
///
/// # Errors
/// As `candle_nn::embedding`.
pub fn embedding(
    session: &TraceSession,
    in_size: usize,
    out_size: usize,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::Embedding>> {
    let name = name_of(&vb);
    Ok(Probed::new(
        session,
        name,
        candle_nn::embedding(in_size, out_size, vb)?,
    ))
}

/// Probed `candle_nn::layer_norm`.
///
/// # Errors
/// As `candle_nn::layer_norm`.
pub fn layer_norm<C: Into<candle_nn::LayerNormConfig>>(
    session: &TraceSession,
    size: usize,
    config: C,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::LayerNorm>> {
    let name = name_of(&vb);
    Ok(Probed::new(
        session,
        name,
        candle_nn::layer_norm(size, config, vb)?,
    ))
}

/// Probed `candle_nn::rms_norm`.
///
/// # Errors
/// As `candle_nn::rms_norm`.
pub fn rms_norm(
    session: &TraceSession,
    size: usize,
    eps: f64,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::RmsNorm>> {
    let name = name_of(&vb);
    Ok(Probed::new(
        session,
        name,
        candle_nn::rms_norm(size, eps, vb)?,
    ))
}

/// Probed `candle_nn::conv1d`.
///
/// # Errors
/// As `candle_nn::conv1d`.
pub fn conv1d(
    session: &TraceSession,
    in_channels: usize,
    out_channels: usize,
    kernel_size: usize,
    config: candle_nn::Conv1dConfig,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::Conv1d>> {
    let name = name_of(&vb);
    let inner = candle_nn::conv1d(in_channels, out_channels, kernel_size, config, vb)?;
    Ok(Probed::new(session, name, inner))
}

/// Probed `candle_nn::conv2d`.
///
/// # Errors
/// As `candle_nn::conv2d`.
pub fn conv2d(
    session: &TraceSession,
    in_channels: usize,
    out_channels: usize,
    kernel_size: usize,
    config: candle_nn::Conv2dConfig,
    vb: VarBuilder,
) -> Result<Probed<candle_nn::Conv2d>> {
    let name = name_of(&vb);
    let inner = candle_nn::conv2d(in_channels, out_channels, kernel_size, config, vb)?;
    Ok(Probed::new(session, name, inner))
}
