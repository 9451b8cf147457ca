//! Shared helpers for the probe's integration tests: a seeded 2-layer MLP built with candle-nn
//! (weights and data from a seeded Rust RNG, since Candle 0.11.1 cannot seed its CPU RNG).

#![allow(dead_code)]

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Input features, hidden units, classes, batch.
pub const IN: usize = 32;
pub const HIDDEN: usize = 64;
pub const CLASSES: usize = 8;
pub const BATCH: usize = 16;

/// A 2-layer MLP: `Linear(IN, HIDDEN)` → relu → `Linear(HIDDEN, CLASSES)`.
pub struct Mlp {
    pub varmap: VarMap,
    pub fc1: Linear,
    pub fc2: Linear,
}

impl Mlp {
    /// Builds the MLP and overwrites every parameter (sorted by name) from `seed`.
    pub fn seeded(seed: u64) -> candle_core::Result<Self> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let fc1 = candle_nn::linear(IN, HIDDEN, vb.pp("fc1"))?;
        let fc2 = candle_nn::linear(HIDDEN, CLASSES, vb.pp("fc2"))?;
        reseed(&varmap, seed)?;
        Ok(Self { varmap, fc1, fc2 })
    }

    /// Logits for `x`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.relu()?)
    }
}

/// Overwrites every VarMap parameter, in sorted name order, with uniform values in ±0.2.
pub fn reseed(varmap: &VarMap, seed: u64) -> candle_core::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let data = varmap.data().lock().expect("varmap lock");
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    for name in names {
        let var = &data[name];
        let n = var.elem_count();
        let values: Vec<f32> = (0..n).map(|_| rng.gen_range(-0.2f32..0.2)).collect();
        var.set(&Tensor::from_vec(values, var.shape(), &Device::Cpu)?)?;
    }
    Ok(())
}

/// A seeded batch: inputs `[BATCH, IN]` and class targets `[BATCH]` (u32).
pub fn batch(seed: u64) -> candle_core::Result<(Tensor, Tensor)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<f32> = (0..BATCH * IN)
        .map(|_| rng.gen_range(-1.0f32..1.0))
        .collect();
    let y: Vec<u32> = (0..BATCH)
        .map(|_| rng.gen_range(0..CLASSES as u32))
        .collect();
    Ok((
        Tensor::from_vec(x, (BATCH, IN), &Device::Cpu)?,
        Tensor::from_vec(y, BATCH, &Device::Cpu)?,
    ))
}

/// The batch of step `step` of the multi-step MLP tests (64-256-10): uniform inputs
/// `[32, 64]` and the targets `(i + step) % 10`, so each step's data differs.
pub fn step_batch(step: u32) -> candle_core::Result<(Tensor, Tensor)> {
    let x = Tensor::rand(0f32, 1f32, (32, 64), &Device::Cpu)?;
    let y = Tensor::from_vec(
        (0..32u32).map(|i| (i + step) % 10).collect(),
        32,
        &Device::Cpu,
    )?;
    Ok((x, y))
}

/// candle-transformers' `llama2_c` at the size the KV-cache tests run: 2 layers of dim 32,
/// 4 heads over 2 KV heads, a 64-token vocabulary, 32 positions.
pub fn llama2_c_config() -> candle_transformers::models::llama2_c::Config {
    candle_transformers::models::llama2_c::Config {
        dim: 32,
        hidden_dim: 64,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        vocab_size: 64,
        seq_len: 32,
        norm_eps: 1e-5,
    }
}

/// Reads a trace file as text (for byte comparisons and debugging).
pub fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).expect("trace file")
}

pub mod sampling;
pub mod sites;
