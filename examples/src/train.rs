//! The instrumented training loop shared by the runnable examples, `cargo xtask fixtures` and
//! `candle-graph demo`.
//!
//! What a user adds to their own loop is exactly what [`train`] does (the allocator line lives
//! in the binary, see the examples):
//! ```ignore
//! #[global_allocator]
//! static ALLOC: trace_probe::alloc::Tracking = trace_probe::alloc::Tracking::system();
//!
//! let run = ProfileRun::training("llama::train_step", 2).device(&device);   // capture step 2
//! let session = TraceSession::create(run, "out/trace.jsonl")?;
//! let _tracing = tracing::subscriber::set_default(                          // module spans:
//!     Registry::default().with(session.layer().with_filter(LevelFilter::TRACE))); // before the model
//! let model = /* build the model */;
//! let mut opt = ProbedOptimizer::<AdamW>::new(&session, &varmap, ParamsAdamW::default())?;
//! for step in 1..=steps {
//!     let _step = session.step(step);                     // records only on step 2
//!     let loss = {
//!         let _fwd = session.step_span("forward", ExecutionStep::Forward);
//!         model.loss(&batch)?
//!     };
//!     opt.backward_step(&loss)?;                          // backward + optimizer spans, gradients
//! }
//! session.finish()?;
//! ```

use std::path::{Path, PathBuf};

use candle_core::Device;
use candle_nn::{AdamW, ParamsAdamW};
use trace_probe::{ExecutionStep, ProbeError, ProbedOptimizer, ProfileRun, TraceSession};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

use crate::model::{ModelKind, ModelSizes, Workload};

/// File name of the trace written into the output directory.
pub const TRACE_FILE: &str = "trace.jsonl";

/// Why training failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// The configuration cannot be run.
    #[error("invalid training configuration: {0}")]
    InvalidConfig(String),
    /// The output directory could not be created.
    #[error("cannot create output directory {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A Candle operation failed.
    #[error("candle error in {context}")]
    Candle {
        /// What was running (e.g. `step 2 forward`).
        context: String,
        /// The error.
        #[source]
        source: candle_core::Error,
    },
    /// The probe failed (opening the trace, writing it, or finishing).
    #[error("profiling failed")]
    Probe(#[from] ProbeError),
}

/// What to train and capture.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// Which model.
    pub model: ModelKind,
    /// Model and batch sizes.
    pub sizes: ModelSizes,
    /// Optimizer updates to run (≥ `capture_step`).
    pub steps: u64,
    /// The one-based update captured; the ones before it are warm-up.
    pub capture_step: u64,
    /// Seed of weights and data.
    pub seed: u64,
    /// AdamW learning rate; `None`: 1e-2 for the llama model, 1e-3 for the MLP.
    pub learning_rate: Option<f64>,
    /// Directory the trace is written into (as [`TRACE_FILE`]); created if missing.
    pub out_dir: PathBuf,
    /// The probe's deterministic mode (logical clock, sequential ids; golden fixtures).
    pub deterministic: bool,
}

impl TrainConfig {
    /// Defaults for `model`: 3 steps capturing step 2, seed 42, writing into `out_dir`.
    pub fn new(model: ModelKind, out_dir: impl Into<PathBuf>) -> Self {
        Self {
            model,
            sizes: ModelSizes::default(),
            steps: 3,
            capture_step: 2,
            seed: 42,
            learning_rate: None,
            out_dir: out_dir.into(),
            deterministic: false,
        }
    }

    /// The entrypoint recorded in the trace (`llama::train_step`, `mlp::train_step`).
    pub fn entrypoint(&self) -> String {
        format!("{}::train_step", self.model)
    }

    fn learning_rate(&self) -> f64 {
        self.learning_rate.unwrap_or(match self.model {
            ModelKind::Llama => 1e-2,
            ModelKind::Mlp => 1e-3,
        })
    }
}

/// What a training run produced.
#[derive(Debug, Clone)]
pub struct TrainReport {
    /// Path of the written trace.
    pub trace_path: PathBuf,
    /// Loss of every step, in order.
    pub losses: Vec<f32>,
    /// Number of parameter elements.
    pub parameter_count: usize,
    /// Number of parameter tensors.
    pub parameter_tensors: usize,
    /// Events written to the trace (meta and terminal included).
    pub events_written: u64,
}

fn candle(context: impl FnOnce() -> String) -> impl FnOnce(candle_core::Error) -> TrainError {
    move |source| TrainError::Candle {
        context: context(),
        source,
    }
}

/// Trains `config.steps` AdamW updates on CPU and captures update `config.capture_step`.
/// See [`train_with_progress`].
///
/// # Errors
/// See [`train_with_progress`].
pub fn train(config: &TrainConfig) -> Result<TrainReport, TrainError> {
    train_with_progress(config, |_, _| {})
}

/// Like [`train`], calling `on_step(step, loss)` after every update.
///
/// The `tracing` layer is installed on this thread (`set_default`) before the model is built,
/// so the model's module spans appear in the trace. Install the probe's `Tracking` allocator in
/// the binary to get the memory plane.
///
/// # Errors
/// [`TrainError::InvalidConfig`] (capture step 0 or beyond `steps`), I/O errors creating the
/// directory, Candle errors naming the step and phase, probe errors.
pub fn train_with_progress(
    config: &TrainConfig,
    mut on_step: impl FnMut(u64, f32),
) -> Result<TrainReport, TrainError> {
    if config.capture_step == 0 || config.capture_step > config.steps {
        return Err(TrainError::InvalidConfig(format!(
            "capture step {} must be within 1..={} steps",
            config.capture_step, config.steps
        )));
    }
    std::fs::create_dir_all(&config.out_dir).map_err(|source| TrainError::CreateDir {
        path: config.out_dir.clone(),
        source,
    })?;
    let trace_path = config.out_dir.join(TRACE_FILE);
    let device = Device::Cpu;
    let run = ProfileRun::training(config.entrypoint(), config.capture_step)
        .device(&device)
        .tag("model", config.model.as_str())
        .tag("seed", config.seed.to_string())
        .tag("steps", config.steps.to_string())
        .deterministic(config.deterministic);
    let session = TraceSession::create(run, &trace_path)?;
    let result = run_steps(config, &session, &device, &mut on_step);
    // finish even when a step failed, so the trace ends with a terminal event
    let finished = session.finish();
    let (losses, parameter_count, parameter_tensors) = result?;
    let summary = finished?;
    Ok(TrainReport {
        trace_path,
        losses,
        parameter_count,
        parameter_tensors,
        events_written: summary.events_written,
    })
}

fn run_steps(
    config: &TrainConfig,
    session: &TraceSession,
    device: &Device,
    on_step: &mut dyn FnMut(u64, f32),
) -> Result<(Vec<f32>, usize, usize), TrainError> {
    // module spans: the layer must see the spans created when the model is built
    let subscriber = Registry::default().with(session.layer().with_filter(LevelFilter::TRACE));
    let _tracing = tracing::subscriber::set_default(subscriber);
    let work = Workload::new(config.model, config.sizes.clone(), config.seed, device)
        .map_err(candle(|| "building the model".to_string()))?;
    let mut opt = ProbedOptimizer::<AdamW>::new(
        session,
        work.varmap(),
        ParamsAdamW {
            lr: config.learning_rate(),
            ..ParamsAdamW::default()
        },
    )?;
    let mut losses = Vec::with_capacity(config.steps as usize);
    for step in 1..=config.steps {
        let batch = work
            .batch(step)
            .map_err(candle(|| format!("step {step}: building the batch")))?;
        let _step = session.step(step);
        session.tensor("batch.inputs", &batch.inputs);
        session.tensor("batch.targets", &batch.targets);
        let loss = {
            let _forward = session.step_span("forward", ExecutionStep::Forward);
            work.loss(&batch)
                .map_err(candle(|| format!("step {step}: forward")))?
        };
        session.tensor_stats("loss", &loss)?;
        let value = loss
            .to_scalar::<f32>()
            .map_err(candle(|| format!("step {step}: reading the loss")))?;
        opt.backward_step(&loss)
            .map_err(candle(|| format!("step {step}: backward and optimizer")))?;
        drop(loss);
        losses.push(value);
        on_step(step, value);
    }
    Ok((losses, work.parameter_count(), work.parameter_names().len()))
}

/// The trace path inside `dir`.
pub fn trace_path(dir: &Path) -> PathBuf {
    dir.join(TRACE_FILE)
}
