//! Issue 43's conformance suite, the Candle side: four model families ([`Family`]: an MLP, a
//! CNN with batch norm and pooling, a GRU, a transformer encoder block) captured with the probe
//! ([`capture`]), and each op of their training step timed alone with a clock ([`clock`]).
//! The PyTorch twins and the driver are in `scripts/conformance/` (`run.sh` records both
//! sides interleaved and writes `crates/trace-diff/tests/data/conformance/`).

pub mod clock;
mod clock_ops;
pub mod models;

use std::path::{Path, PathBuf};

use candle_core::Device;
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::{ProbedOptimizer, ProfileRun};

pub use models::{batch, Family, Model};

use crate::train::{TrainError, TRACE_FILE};

/// The entrypoint recorded in every conformance trace.
pub const ENTRYPOINT: &str = "conformance::train_step";

/// Steps run: one warm-up, then the captured ones.
pub const STEPS: u64 = 6;
/// The first captured (one-based) step.
pub const CAPTURE_STEP: u64 = 2;
/// The last captured step: five steps in one capture (one step of these models gives a
/// sampler too few samples per op; the PyTorch side records the same five).
pub const LAST_CAPTURE_STEP: u64 = STEPS;
/// The AdamW learning rate of both sides (weight decay 0.01 on both: each framework's default).
pub const LEARNING_RATE: f64 = 1e-3;

fn candle(what: String) -> impl FnOnce(candle_core::Error) -> TrainError {
    move |source| TrainError::Candle {
        context: what,
        source,
    }
}

/// Trains `family` for [`STEPS`] steps on the CPU and captures steps [`CAPTURE_STEP`] to
/// [`LAST_CAPTURE_STEP`] into
/// `out_dir/trace.jsonl` with wall-clock stack samples at `sample_hz`; the batch of each step
/// is made before the step begins. Returns the trace's path.
///
/// # Errors
/// Candle errors naming the step and phase; probe errors.
pub fn capture(family: Family, out_dir: &Path, sample_hz: u32) -> Result<PathBuf, TrainError> {
    let device = Device::Cpu;
    let trace_path = out_dir.join(TRACE_FILE);
    let varmap = VarMap::new();
    let profiler = ProfileRun::training(ENTRYPOINT, CAPTURE_STEP)
        .capture_steps(CAPTURE_STEP..=LAST_CAPTURE_STEP)
        .device(&device)
        .varmap(&varmap)
        .tag("model", family.name())
        .tag("suite", "conformance")
        .sample_hz(sample_hz)
        .start(&trace_path)?;
    let result = (|| -> Result<(), TrainError> {
        let vb = VarBuilder::from_varmap(&varmap, models::DTYPE, &device);
        let model = Model::new(family, vb).map_err(candle("building the model".into()))?;
        let mut opt = ProbedOptimizer::<AdamW>::new(
            varmap.all_vars(),
            ParamsAdamW {
                lr: LEARNING_RATE,
                ..ParamsAdamW::default()
            },
        )
        .map_err(candle("building the optimizer".into()))?;
        for step in 1..=STEPS {
            let b = batch(family, 42, step, &device)
                .map_err(candle(format!("step {step}: the batch")))?;
            let loss = {
                let _step = profiler.step(step);
                let loss = model
                    .loss(&b)
                    .map_err(candle(format!("step {step}: forward")))?;
                let grads = profiler
                    .backward(&loss)
                    .map_err(candle(format!("step {step}: backward")))?;
                opt.step(&grads)
                    .map_err(candle(format!("step {step}: optimizer")))?;
                loss
            };
            let loss = loss
                .to_scalar::<f32>()
                .map_err(candle(format!("step {step}: reading the loss")))?;
            if !loss.is_finite() {
                return Err(TrainError::InvalidConfig(format!(
                    "step {step}: loss {loss}"
                )));
            }
        }
        Ok(())
    })();
    let finished = profiler.finish();
    result?;
    finished?;
    Ok(trace_path)
}
