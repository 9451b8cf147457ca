//! The four model families of the conformance suite, written in Candle 0.11.1 as a user porting
//! them from PyTorch would (plain candle-nn layers, no probe wrappers); their PyTorch twins are
//! in `scripts/conformance/torch_models.py`, same sizes, same op order.
//!
//! Every differentiable piece is one Candle really has a backward for: candle-nn's fused
//! `LayerNorm` and `softmax_last_dim` have none (a training step through them fails with
//! `BackwardNotSupported`), so the transformer uses `ops::layer_norm_slow` and `ops::softmax`,
//! as a user who hit that error would.

use candle_core::{DType, Device, Module, ModuleT, Result, Tensor, D};
use candle_nn::{rnn::RNN, Conv2dConfig, VarBuilder};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::data::Batch;

/// A model family of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// 784-512-512-10, ReLU, batch 128.
    Mlp,
    /// conv 1→16 3×3, batch norm, relu, max-pool 2, conv 16→32, batch norm, relu, max-pool 2,
    /// linear 1568→128, relu, linear 128→10; batch 32 of 1×28×28.
    Cnn,
    /// A one-layer GRU (64 → 128, 16 steps), its last state through linear 128→10; batch 32.
    Gru,
    /// One pre-norm encoder block: embedding (vocab 1024, d 128) + learned positions, layer
    /// norm, 4-head softmax attention, layer norm, 128→512 gelu (tanh) →128 feed-forward, final
    /// layer norm, linear →vocab; batch 8 × 32 tokens, loss over every token.
    Transformer,
}

impl Family {
    /// Every family, in the suite's order.
    pub const ALL: [Family; 4] = [Family::Mlp, Family::Cnn, Family::Gru, Family::Transformer];

    /// Its name (`mlp`, `cnn`, `gru`, `transformer`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Mlp => "mlp",
            Family::Cnn => "cnn",
            Family::Gru => "gru",
            Family::Transformer => "transformer",
        }
    }

    /// The family named `name`.
    pub fn parse(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// MLP sizes: batch, input, hidden, classes.
pub const MLP: (usize, usize, usize, usize) = (128, 784, 512, 10);
/// CNN sizes: batch, image side, conv1 channels, conv2 channels, classes.
pub const CNN: (usize, usize, usize, usize, usize) = (32, 28, 16, 32, 10);
/// The CNN's hidden linear width.
pub const CNN_HIDDEN: usize = 128;
/// GRU sizes: batch, steps, input features, hidden, classes.
pub const GRU: (usize, usize, usize, usize, usize) = (32, 16, 64, 128, 10);
/// Transformer sizes: batch, tokens, vocab, d_model, heads, feed-forward width.
pub const TRANSFORMER: (usize, usize, usize, usize, usize, usize) = (8, 32, 1024, 128, 4, 512);

/// A built model of one family.
#[derive(Debug)]
pub enum Model {
    /// See [`Family::Mlp`].
    Mlp(Vec<candle_nn::Linear>),
    /// See [`Family::Cnn`].
    Cnn(Box<CnnModel>),
    /// See [`Family::Gru`].
    Gru(Box<(candle_nn::GRU, candle_nn::Linear)>),
    /// See [`Family::Transformer`].
    Transformer(Box<Encoder>),
}

/// The CNN's layers.
#[derive(Debug)]
pub struct CnnModel {
    conv1: candle_nn::Conv2d,
    bn1: candle_nn::BatchNorm,
    conv2: candle_nn::Conv2d,
    bn2: candle_nn::BatchNorm,
    fc1: candle_nn::Linear,
    fc2: candle_nn::Linear,
}

/// The transformer's layers.
#[derive(Debug)]
pub struct Encoder {
    embed: candle_nn::Embedding,
    pos: Tensor,
    ln: [(Tensor, Tensor); 3],
    qkv: candle_nn::Linear,
    proj: candle_nn::Linear,
    ff1: candle_nn::Linear,
    ff2: candle_nn::Linear,
    head: candle_nn::Linear,
}

fn ln_params(vb: &VarBuilder, d: usize, name: &str) -> Result<(Tensor, Tensor)> {
    let vb = vb.pp(name);
    Ok((
        vb.get_with_hints(d, "weight", candle_nn::Init::Const(1.0))?,
        vb.get_with_hints(d, "bias", candle_nn::Init::Const(0.0))?,
    ))
}

impl Model {
    /// Builds `family`'s layers from `vb` (candle-nn's initialisers; the suite compares time,
    /// not values).
    ///
    /// # Errors
    /// Candle errors from the var builder.
    pub fn new(family: Family, vb: VarBuilder) -> Result<Self> {
        Ok(match family {
            Family::Mlp => {
                let (_, i, h, c) = MLP;
                Model::Mlp(vec![
                    candle_nn::linear(i, h, vb.pp("fc1"))?,
                    candle_nn::linear(h, h, vb.pp("fc2"))?,
                    candle_nn::linear(h, c, vb.pp("fc3"))?,
                ])
            }
            Family::Cnn => {
                let (_, side, c1, c2, classes) = CNN;
                let conv = Conv2dConfig {
                    padding: 1,
                    ..Default::default()
                };
                let bn = candle_nn::BatchNormConfig::default();
                Model::Cnn(Box::new(CnnModel {
                    conv1: candle_nn::conv2d(1, c1, 3, conv, vb.pp("conv1"))?,
                    bn1: candle_nn::batch_norm(c1, bn, vb.pp("bn1"))?,
                    conv2: candle_nn::conv2d(c1, c2, 3, conv, vb.pp("conv2"))?,
                    bn2: candle_nn::batch_norm(c2, bn, vb.pp("bn2"))?,
                    fc1: candle_nn::linear(c2 * (side / 4) * (side / 4), CNN_HIDDEN, vb.pp("fc1"))?,
                    fc2: candle_nn::linear(CNN_HIDDEN, classes, vb.pp("fc2"))?,
                }))
            }
            Family::Gru => {
                let (_, _, f, h, c) = GRU;
                Model::Gru(Box::new((
                    candle_nn::gru(f, h, Default::default(), vb.pp("gru"))?,
                    candle_nn::linear(h, c, vb.pp("fc"))?,
                )))
            }
            Family::Transformer => {
                let (_, t, v, d, _, ff) = TRANSFORMER;
                Model::Transformer(Box::new(Encoder {
                    embed: candle_nn::embedding(v, d, vb.pp("embed"))?,
                    pos: vb.get_with_hints(
                        (t, d),
                        "pos",
                        candle_nn::Init::Randn {
                            mean: 0.0,
                            stdev: 0.02,
                        },
                    )?,
                    ln: [
                        ln_params(&vb, d, "ln1")?,
                        ln_params(&vb, d, "ln2")?,
                        ln_params(&vb, d, "ln_f")?,
                    ],
                    qkv: candle_nn::linear(d, 3 * d, vb.pp("qkv"))?,
                    proj: candle_nn::linear(d, d, vb.pp("proj"))?,
                    ff1: candle_nn::linear(d, ff, vb.pp("ff1"))?,
                    ff2: candle_nn::linear(ff, d, vb.pp("ff2"))?,
                    head: candle_nn::linear(d, v, vb.pp("head"))?,
                }))
            }
        })
    }

    /// The mean cross-entropy of `batch` (training mode: batch norm uses the batch's
    /// statistics).
    ///
    /// # Errors
    /// Candle errors (shapes).
    pub fn loss(&self, batch: &Batch) -> Result<Tensor> {
        let logits = match self {
            Model::Mlp(layers) => {
                let mut xs = batch.inputs.clone();
                for (i, l) in layers.iter().enumerate() {
                    xs = l.forward(&xs)?;
                    if i + 1 < layers.len() {
                        xs = xs.relu()?;
                    }
                }
                xs
            }
            Model::Cnn(m) => {
                let xs = m.bn1.forward_t(&m.conv1.forward(&batch.inputs)?, true)?;
                let xs = xs.relu()?.max_pool2d(2)?;
                let xs = m.bn2.forward_t(&m.conv2.forward(&xs)?, true)?;
                let xs = xs.relu()?.max_pool2d(2)?;
                m.fc2
                    .forward(&m.fc1.forward(&xs.flatten_from(1)?)?.relu()?)?
            }
            Model::Gru(layers) => {
                let (gru, fc) = &**layers;
                let states = gru.seq(&batch.inputs)?;
                let last = states.last().map(|s| s.h().clone());
                let last = last.ok_or_else(|| candle_core::Error::Msg("no steps".into()))?;
                fc.forward(&last)?
            }
            Model::Transformer(m) => m.forward(&batch.inputs)?,
        };
        candle_nn::loss::cross_entropy(&logits, &batch.targets)
    }
}

/// `x` `(b, t, d)` normalised over `d` (candle-nn's differentiable layer norm).
fn layer_norm(x: &Tensor, (w, b): &(Tensor, Tensor)) -> Result<Tensor> {
    candle_nn::ops::layer_norm_slow(x, w, b, 1e-5)
}

impl Encoder {
    /// Tokens `(b, t)` u32 → logits `(b·t, vocab)`.
    fn forward(&self, tokens: &Tensor) -> Result<Tensor> {
        let (b, t, _, d, heads, _) = TRANSFORMER;
        let dh = d / heads;
        let x = self.embed.forward(tokens)?.broadcast_add(&self.pos)?;
        // attention
        let h = layer_norm(&x, &self.ln[0])?;
        let qkv = self.qkv.forward(&h)?; // (b, t, 3d)
        let qkv = qkv
            .reshape((b, t, 3, heads, dh))?
            .permute((2, 0, 3, 1, 4))?;
        let (q, k, v) = (
            qkv.get(0)?.contiguous()?,
            qkv.get(1)?.contiguous()?,
            qkv.get(2)?.contiguous()?,
        );
        let scores = (q.matmul(&k.t()?)? * (1.0 / (dh as f64).sqrt()))?;
        let att = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let y = att.matmul(&v)?; // (b, heads, t, dh)
        let y = y.transpose(1, 2)?.reshape((b, t, d))?;
        let x = (x + self.proj.forward(&y)?)?;
        // feed-forward
        let h = layer_norm(&x, &self.ln[1])?;
        let h = self.ff2.forward(&self.ff1.forward(&h)?.gelu()?)?;
        let x = (x + h)?;
        let x = layer_norm(&x, &self.ln[2])?;
        self.head.forward(&x)?.reshape((b * t, ()))
    }
}

/// The batch of one-based `step` for `family`, seeded by `seed ^ step`: inputs and class
/// labels (for the transformer, tokens `(b, t)` and next tokens flattened `(b·t)`).
///
/// # Errors
/// Candle errors building the tensors.
pub fn batch(family: Family, seed: u64, step: u64, device: &Device) -> Result<Batch> {
    let mut rng = StdRng::seed_from_u64(seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut normal = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect() };
    let (inputs, labels, classes) = match family {
        Family::Mlp => {
            let (b, i, _, c) = MLP;
            (Tensor::from_vec(normal(b * i), (b, i), device)?, b, c)
        }
        Family::Cnn => {
            let (b, s, _, _, c) = CNN;
            (
                Tensor::from_vec(normal(b * s * s), (b, 1, s, s), device)?,
                b,
                c,
            )
        }
        Family::Gru => {
            let (b, t, f, _, c) = GRU;
            (
                Tensor::from_vec(normal(b * t * f), (b, t, f), device)?,
                b,
                c,
            )
        }
        Family::Transformer => {
            let (b, t, v, ..) = TRANSFORMER;
            let ids: Vec<u32> = (0..b * t).map(|_| rng.gen_range(0..v as u32)).collect();
            (Tensor::from_vec(ids, (b, t), device)?, b * t, v)
        }
    };
    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(step));
    let targets: Vec<u32> = (0..labels)
        .map(|_| rng.gen_range(0..classes as u32))
        .collect();
    Ok(Batch {
        inputs,
        targets: Tensor::from_vec(targets, labels, device)?,
    })
}

/// The dtype every family trains in.
pub const DTYPE: DType = DType::F32;

#[cfg(test)]
mod tests {
    use super::*;
    use candle_nn::VarMap;

    #[test]
    fn every_family_has_a_finite_loss_and_gradients() -> Result<()> {
        for family in Family::ALL {
            let varmap = VarMap::new();
            let vb = VarBuilder::from_varmap(&varmap, DTYPE, &Device::Cpu);
            let model = Model::new(family, vb)?;
            let loss = model.loss(&batch(family, 1, 1, &Device::Cpu)?)?;
            assert!(loss.to_scalar::<f32>()?.is_finite(), "{family:?}");
            let grads = loss.backward()?;
            let with_grad = varmap
                .all_vars()
                .iter()
                .filter(|v| grads.get(v.as_tensor()).is_some())
                .count();
            assert!(with_grad >= 4, "{family:?}: {with_grad} gradients");
        }
        Ok(())
    }
}
