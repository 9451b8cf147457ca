//! Candle layers with `tracing` spans, in the shape of candle-transformers' `with_tracing`
//! wrappers: each holds `{ inner, span }`, is built by a function named like candle-nn's
//! constructor, and enters its span for the duration of `forward`.
//!
//! The spans are TRACE-level `tracing` spans created at construction. Nothing is recorded unless a
//! subscriber is installed; trace-probe's layer turns each enter/exit inside the captured step
//! into a module span of the trace. Install that layer **before** building the model: a span
//! created while no subscriber listens is disabled for good.
//!
//! Only differentiable operations are used: [`RmsNorm`] calls
//! [`candle_nn::RmsNorm::forward_diff`] (the fused `rms_norm` op has no backward in Candle 0.11.1).

use candle_core::{Module, Result, Tensor};
use candle_nn::VarBuilder;

/// A bias-free linear layer, `y = x Wᵀ`, with a `linear` span.
#[derive(Debug, Clone)]
pub struct Linear {
    inner: candle_nn::Linear,
    span: tracing::Span,
}

/// A linear layer without bias (`candle_nn::linear_no_bias`): weight `(out_dim, in_dim)` at
/// `vb.pp(..)` `weight`.
///
/// # Errors
/// Candle errors from the var builder (shape mismatch with an existing variable).
pub fn linear_no_bias(in_dim: usize, out_dim: usize, vb: VarBuilder) -> Result<Linear> {
    Ok(Linear {
        inner: candle_nn::linear_no_bias(in_dim, out_dim, vb)?,
        span: tracing::trace_span!("linear"),
    })
}

/// A linear layer with bias (`candle_nn::linear`): weight `(out_dim, in_dim)`, bias `(out_dim)`.
///
/// # Errors
/// Candle errors from the var builder.
pub fn linear(in_dim: usize, out_dim: usize, vb: VarBuilder) -> Result<Linear> {
    Ok(Linear {
        inner: candle_nn::linear(in_dim, out_dim, vb)?,
        span: tracing::trace_span!("linear"),
    })
}

impl Module for Linear {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        self.inner.forward(xs)
    }
}

/// Token embedding table `(vocab, hidden)` with an `embedding` span.
#[derive(Debug, Clone)]
pub struct Embedding {
    inner: candle_nn::Embedding,
    span: tracing::Span,
}

/// An embedding (`candle_nn::embedding`): `weight` of shape `(in_size, out_size)`.
///
/// # Errors
/// Candle errors from the var builder.
pub fn embedding(in_size: usize, out_size: usize, vb: VarBuilder) -> Result<Embedding> {
    Ok(Embedding {
        inner: candle_nn::embedding(in_size, out_size, vb)?,
        span: tracing::trace_span!("embedding"),
    })
}

impl Module for Embedding {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        self.inner.forward(xs)
    }
}

/// Root-mean-square normalisation over the last dimension with a learned gain, differentiable.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    inner: candle_nn::RmsNorm,
    span: tracing::Span,
}

/// An RMS norm (`candle_nn::rms_norm`): `weight` of shape `(size)`, `eps` added to the mean
/// square.
///
/// # Errors
/// Candle errors from the var builder.
pub fn rms_norm(size: usize, eps: f64, vb: VarBuilder) -> Result<RmsNorm> {
    Ok(RmsNorm {
        inner: candle_nn::rms_norm(size, eps, vb)?,
        span: tracing::trace_span!("rms-norm"),
    })
}

impl Module for RmsNorm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        self.inner.forward_diff(xs)
    }
}
