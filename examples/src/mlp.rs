//! The multi-layer perceptron of the probe's exactness tests: 784-512-512-10 with ReLU and
//! cross-entropy (MNIST-sized), batch 64 by default.

use candle_core::{Module, Result, Tensor};
use candle_nn::VarBuilder;

use trace_probe::nn::{self, Traced};

type Linear = Traced<candle_nn::Linear>;

/// Sizes of the MLP and of one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct MlpConfig {
    /// Input features.
    pub input_size: usize,
    /// Width of the two hidden layers.
    pub hidden_size: usize,
    /// Number of classes.
    pub num_classes: usize,
    /// Examples per batch.
    pub batch_size: usize,
}

impl Default for MlpConfig {
    /// 784-512-512-10, batch 64.
    fn default() -> Self {
        Self {
            input_size: 784,
            hidden_size: 512,
            num_classes: 10,
            batch_size: 64,
        }
    }
}

/// Three linear layers (`fc1`, `fc2`, `fc3`, with bias) and ReLUs, wrapped in an `mlp` span.
#[derive(Debug, Clone)]
pub struct Mlp {
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
    span: tracing::Span,
}

impl Mlp {
    /// Builds the layers from `vb` (`fc1.weight` `(hidden, input)`, …).
    ///
    /// # Errors
    /// Candle errors from the var builder.
    pub fn new(cfg: &MlpConfig, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            fc1: nn::linear(cfg.input_size, cfg.hidden_size, vb.pp("fc1"))?,
            fc2: nn::linear(cfg.hidden_size, cfg.hidden_size, vb.pp("fc2"))?,
            fc3: nn::linear(cfg.hidden_size, cfg.num_classes, vb.pp("fc3"))?,
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

impl Module for Mlp {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let xs = self.fc1.forward(xs)?.relu()?;
        let xs = self.fc2.forward(&xs)?.relu()?;
        self.fc3.forward(&xs)
    }
}
