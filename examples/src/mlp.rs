//! The multi-layer perceptron of the probe's exactness tests: 784-512-512-10 with ReLU and
//! cross-entropy (MNIST-sized), batch 64 by default; one hidden layer more, or a detached bias
//! (a parameter that loses its gradient), for the `candle-graph diff` fixtures.

use candle_core::{Module, Result, Tensor};
use candle_nn::VarBuilder;

use trace_probe::nn::{self, Traced};

type Linear = Traced<candle_nn::Linear>;

/// Sizes of the MLP and of one batch, and the variants `candle-graph diff` is shown on.
#[derive(Debug, Clone, PartialEq)]
pub struct MlpConfig {
    /// Input features.
    pub input_size: usize,
    /// Width of the hidden layers.
    pub hidden_size: usize,
    /// Hidden layers (2: 784-512-512-10); one more adds `fc4`, a model with one layer more.
    pub hidden_layers: usize,
    /// Number of classes.
    pub num_classes: usize,
    /// Examples per batch.
    pub batch_size: usize,
    /// A bug to show: the bias of layer `fc<N>` (1-based) is used detached in the forward
    /// pass, so that parameter gets no gradient (`missing`). `None`: no bug.
    pub detached_bias: Option<usize>,
}

impl Default for MlpConfig {
    /// 784-512-512-10, batch 64.
    fn default() -> Self {
        Self {
            input_size: 784,
            hidden_size: 512,
            hidden_layers: 2,
            num_classes: 10,
            batch_size: 64,
            detached_bias: None,
        }
    }
}

/// Linear layers `fc1` … `fc<hidden_layers + 1>` (with bias) and ReLUs, wrapped in an `mlp`
/// span.
#[derive(Debug, Clone)]
pub struct Mlp {
    layers: Vec<Linear>,
    detached_bias: Option<usize>,
    span: tracing::Span,
}

impl Mlp {
    /// Builds the layers from `vb` (`fc1.weight` `(hidden, input)`, …).
    ///
    /// # Errors
    /// Candle errors from the var builder; a `detached_bias` naming no layer.
    pub fn new(cfg: &MlpConfig, vb: VarBuilder) -> Result<Self> {
        let n = cfg.hidden_layers + 1;
        if let Some(d) = cfg.detached_bias.filter(|&d| d == 0 || d > n) {
            candle_core::bail!("mlp config: detached_bias fc{d} names no layer (fc1..=fc{n})");
        }
        let mut layers = Vec::with_capacity(n);
        for i in 0..n {
            let input = if i == 0 {
                cfg.input_size
            } else {
                cfg.hidden_size
            };
            let output = if i + 1 == n {
                cfg.num_classes
            } else {
                cfg.hidden_size
            };
            layers.push(nn::linear(input, output, vb.pp(format!("fc{}", i + 1)))?);
        }
        Ok(Self {
            layers,
            detached_bias: cfg.detached_bias,
            span: tracing::trace_span!("mlp"),
        })
    }

    /// Mean cross-entropy of `xs` `(batch, input)` f32 against `labels` `(batch)` u32.
    ///
    /// # Errors
    /// Candle errors (shape mismatches).
    pub fn loss(&self, xs: &Tensor, labels: &Tensor) -> Result<Tensor> {
        let logits = self.forward(xs)?;
        candle_nn::loss::cross_entropy(&logits, labels)
    }
}

/// `xs · Wᵀ + b` with the bias detached: the bug of [`MlpConfig::detached_bias`] (what a
/// hand-copied forward that called `.detach()` on a parameter does).
fn linear_with_detached_bias(layer: &Linear, xs: &Tensor) -> Result<Tensor> {
    let _enter = layer.span().enter();
    let ys = xs.broadcast_matmul(&layer.weight().t()?)?;
    match layer.bias() {
        Some(b) => ys.broadcast_add(&b.detach()),
        None => Ok(ys),
    }
}

impl Module for Mlp {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let mut xs = xs.clone();
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            xs = if self.detached_bias == Some(i + 1) {
                linear_with_detached_bias(layer, &xs)?
            } else {
                layer.forward(&xs)?
            };
            if i < last {
                xs = xs.relu()?;
            }
        }
        Ok(xs)
    }
}
