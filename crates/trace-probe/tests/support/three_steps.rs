//! The training loop the MLP tests share: a model over the run's `VarMap`, trained three steps
//! by `ProbedOptimizer<AdamW>` on one batch, the run's step captured, the trace written to a
//! temporary file. The caller finishes the profiler and reads the trace its own way.

use std::path::PathBuf;

use candle_core::Tensor;
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarMap};
use trace_probe::{ProbedOptimizer, ProfileRun, Profiler};

/// A model the loop can train: its loss on a batch.
pub trait Loss {
    /// The loss of `x` against the targets `y`.
    fn loss(&self, x: &Tensor, y: &Tensor) -> candle_core::Result<Tensor>;
}

/// Three steps done, the trace not yet finished.
pub struct Stepped {
    /// The run's profiler (finish it to complete the trace).
    pub profiler: Profiler,
    /// Where the trace is written.
    pub path: PathBuf,
    /// Keeps the temporary directory until the test is done with the trace.
    _dir: tempfile::TempDir,
}

/// Starts `run` over a fresh `VarMap`, builds the model with `build` and the optimizer, then the
/// batch with `data` (after both: its storages are the session's), and trains three steps.
///
/// # Errors
/// The first error of the profiler, the model, the data or a step.
pub fn three_steps<M: Loss>(
    run: ProfileRun,
    build: impl FnOnce(&VarMap) -> candle_core::Result<M>,
    data: impl FnOnce() -> candle_core::Result<(Tensor, Tensor)>,
) -> Result<Stepped, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let profiler = run.varmap(&varmap).start(&path)?;
    let model = build(&varmap)?;
    let mut opt = ProbedOptimizer::<AdamW>::new(varmap.all_vars(), ParamsAdamW::default())?;
    let (x, y) = data()?;
    for step in 1..=3u64 {
        let _step = profiler.step(step);
        opt.backward_step(&model.loss(&x, &y)?)?;
    }
    Ok(Stepped {
        profiler,
        path,
        _dir: dir,
    })
}
