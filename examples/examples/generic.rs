//! A training loop generic over the optimizer (`fn train<O: Optimizer>`), profiled by passing
//! trace-probe's wrapper as the optimizer type: the loop itself only gains the step guard.
//! Trains a small MLP with AdamW and with SGD and writes one trace for each.
//!
//! ```text
//! cargo run -p candle-graph-examples --example generic
//! candle-graph summary out/generic/adamw
//! ```

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap, SGD};
use trace_probe::{nn, ProbedOptimizer, ProfileRun, Profiler, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

/// Any optimizer, any loop: nothing here knows the probe except the step guard.
fn train<O: Optimizer>(
    profiler: &Profiler,
    varmap: &VarMap,
    config: O::Config,
) -> candle_core::Result<Vec<f32>> {
    let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
    let fc1 = nn::linear(32, 64, vb.pp("fc1"))?;
    let fc2 = nn::linear(64, 4, vb.pp("fc2"))?;
    let mut opt = O::new(varmap.all_vars(), config)?;
    let x = Tensor::arange(0f32, 16.0 * 32.0, &Device::Cpu)?
        .reshape((16, 32))?
        .affine(1.0 / 512.0, -0.5)?;
    let y = Tensor::from_vec((0..16u32).map(|i| i / 4).collect(), 16, &Device::Cpu)?;
    let mut losses = Vec::new();
    for step in 1..=3 {
        let _step = profiler.step(step);
        let logits = fc2.forward(&fc1.forward(&x)?.relu()?)?;
        let loss = loss::cross_entropy(&logits, &y)?;
        losses.push(loss.to_scalar::<f32>()?);
        opt.backward_step(&loss)?;
    }
    Ok(losses)
}

fn main() -> candle_core::Result<()> {
    for name in ["adamw", "sgd"] {
        let varmap = VarMap::new();
        let path = format!("out/generic/{name}/trace.jsonl");
        let profiler = ProfileRun::training(format!("generic::{name}"), 2)
            .varmap(&varmap)
            .start(&path)?;
        let losses = match name {
            "adamw" => train::<ProbedOptimizer<AdamW>>(&profiler, &varmap, ParamsAdamW::default())?,
            _ => train::<ProbedOptimizer<SGD>>(&profiler, &varmap, 0.05)?,
        };
        let summary = profiler.finish()?;
        eprintln!(
            "{name}: losses {losses:?}, {} events written to {path}",
            summary.events_written
        );
    }
    Ok(())
}
