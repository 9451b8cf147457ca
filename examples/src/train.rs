//! The instrumented training loop shared by the runnable examples, `cargo xtask fixtures` and
//! `candle-graph demo`.
//!
//! [`train_loop`] is a training loop as a user writes it, generic over the optimizer
//! (`fn train_loop<O: Optimizer>`); [`train`] runs it with trace-probe's optimizer wrapper
//! (`ProbedOptimizer<AdamW>`) under a profiler. What a user adds to their own loop is what these
//! two do (the allocator static lives in the binary, see the examples):
//! ```ignore
//! #[global_allocator]
//! static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();
//!
//! let profiler = ProfileRun::training("llama::train_step", 2)   // capture step 2
//!     .varmap(&varmap)                                          // parameter names
//!     .start("out/trace.jsonl")?;                               // before the model is built
//! let model = /* build the model (trace_probe::nn constructors for module spans) */;
//! let mut opt = ProbedOptimizer::<AdamW>::new(varmap.all_vars(), ParamsAdamW::default())?;
//! for step in 1..=steps {
//!     let _step = profiler.step(step);                          // records only on step 2
//!     let loss = model.loss(&batch)?;
//!     opt.backward_step(&loss)?;                                // backward, optimizer, gradients
//! }
//! ```
//! [`UpdateStyle::DropLossBeforeStep`] applies the advice of the demo's
//! `activations_retained_into_optimizer` finding instead of `backward_step`:
//! `let grads = profiler.backward(&loss)?; drop(loss); opt.step(&grads)?`.

use std::path::{Path, PathBuf};

use candle_core::backprop::GradStore;
use candle_core::DType;
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarMap};
use trace_probe::{MemoryCategory, ProbeError, ProbedOptimizer, ProfileRun, Profiler};

use crate::data::Batch;
use crate::device::DeviceSpec;
use crate::model::{ModelKind, ModelSizes, Workload};

/// How each training step turns its loss into a parameter update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpdateStyle {
    /// `opt.backward_step(&loss)`, as candle-nn's examples write it: the loss — and through it
    /// the autograd graph, every forward activation — stays alive through the optimizer step.
    #[default]
    BackwardStep,
    /// Run backward, drop the loss, then step: `let grads = profiler.backward(&loss)?;
    /// drop(loss); opt.step(&grads)?` — the activations are freed before the optimizer runs
    /// (the advice of the `activations_retained_into_optimizer` finding).
    DropLossBeforeStep,
    /// Run backward, drop the loss, move only the parameters' gradients, detached, into a new
    /// `GradStore`, drop the original store, then step: what the original store alone held
    /// (the gradients of non-parameter leaves such as the input batch, and the forward
    /// activations the gradients' own computations still reference) is freed before the
    /// optimizer runs (the advice of the finding when the gradient store holds activations).
    DetachedParameterGradients,
}

/// File name of the trace written into the output directory.
pub const TRACE_FILE: &str = "trace.jsonl";

/// Why training failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// The configuration cannot be run.
    #[error("invalid training configuration: {0}")]
    InvalidConfig(String),
    /// The device cannot be used (backend not compiled in, no GPU, driver error).
    #[error("{0}")]
    Device(String),
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
    /// Consecutive updates captured in one trace from `capture_step` on (1: that one only;
    /// [`trace_probe::ProfileRun::capture_steps`]); `capture_step + capture_steps - 1` must be
    /// within `steps`.
    pub capture_steps: u64,
    /// Seed of weights and data.
    pub seed: u64,
    /// The device to train on (default CPU). The same seed gives the same initial weights and
    /// data on every device (they are drawn on the host).
    pub device: DeviceSpec,
    /// AdamW learning rate; `None`: 1e-2 for the llama model, 1e-3 for the MLP.
    pub learning_rate: Option<f64>,
    /// Directory the trace is written into (as [`TRACE_FILE`]); created if missing.
    pub out_dir: PathBuf,
    /// The probe's deterministic mode (logical clock, sequential ids; golden fixtures).
    pub deterministic: bool,
    /// How each step updates the parameters.
    pub update: UpdateStyle,
    /// Per-module backward spans ([`trace_probe::ProfileRun::backward_spans`]); off by
    /// default (their cost exceeds the probe's 3% target), `--backward-spans` turns them on.
    pub backward_spans: bool,
    /// Wall-clock stack samples per second of the captured step
    /// ([`trace_probe::ProfileRun::sample_hz`]; default [`trace_probe::DEFAULT_SAMPLE_HZ`], 0
    /// off). Deterministic mode samples nothing.
    pub sample_hz: u32,
    /// `(rank, world_size)` of a multi-process job ([`trace_probe::ProfileRun::rank`]; `None`:
    /// the probe reads `RANK` / `WORLD_SIZE` from the environment). A rank writes
    /// `trace.rank<N>.jsonl` into `out_dir`.
    pub rank: Option<(u32, u32)>,
    /// Capture one step in `n` for the whole run ([`trace_probe::ProfileRun::every`]): `out_dir`
    /// becomes a run directory of bundles; `capture_step` is ignored.
    pub every: Option<u64>,
    /// Most recent bundles a scheduled run keeps ([`trace_probe::ProfileRun::keep_last`]).
    pub keep_last: Option<usize>,
    /// The first captured step of a scheduled run ([`trace_probe::ProfileRun::first_step`];
    /// `None`: the schedule's `n`). Beyond `steps`, the run never captures: the idle probe
    /// (the `every_cost` example's control).
    pub first_step: Option<u64>,
    /// Seeds, for showing and testing the run view: what the loop does wrong on purpose.
    pub seeds: Seeds,
    /// Outputs added to each scheduled capture's bundle
    /// ([`trace_probe::ProfileRun::bundle_outputs`]).
    pub bundle_outputs: Option<trace_probe::BundleOutputs>,
}

/// Faults seeded into the loop on purpose (hidden flags of `candle-graph demo`), so that a
/// run's series has something to find: a slow leak no single step shows, an op that slows
/// down after a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seeds {
    /// Every this many steps the loop keeps one more 2 MiB tensor (`(512, 1024)` f32) for the
    /// rest of the run, outside the step guard: a leak of 2 MiB per that many steps.
    pub leak_every: Option<u64>,
    /// After this step the llama model's loss runs [`SLOWDOWN_ROUNDS`] rounds of `exp` then
    /// `log` on its logits ([`crate::Workload::loss_slowed`]).
    pub slowdown_after: Option<u64>,
}

/// Rounds of extra `exp`/`log` per step after [`Seeds::slowdown_after`].
pub const SLOWDOWN_ROUNDS: usize = 48;

/// Bytes of one tensor the seeded leak keeps.
pub const LEAK_TENSOR_BYTES: u64 = 512 * 1024 * 4;

impl Seeds {
    /// The extra rounds of step `step`.
    pub fn slowdown_rounds(&self, step: u64) -> usize {
        match self.slowdown_after {
            Some(k) if step > k => SLOWDOWN_ROUNDS,
            _ => 0,
        }
    }
}

impl TrainConfig {
    /// Defaults for `model`: 3 steps capturing step 2, seed 42, writing into `out_dir`.
    pub fn new(model: ModelKind, out_dir: impl Into<PathBuf>) -> Self {
        Self {
            model,
            sizes: ModelSizes::default(),
            steps: 3,
            capture_step: 2,
            capture_steps: 1,
            seed: 42,
            device: DeviceSpec::Cpu,
            learning_rate: None,
            out_dir: out_dir.into(),
            deterministic: false,
            update: UpdateStyle::default(),
            backward_spans: false,
            sample_hz: trace_probe::DEFAULT_SAMPLE_HZ,
            rank: None,
            every: None,
            keep_last: None,
            first_step: None,
            seeds: Seeds::default(),
            bundle_outputs: None,
        }
    }

    /// The entrypoint recorded in the trace (`llama::train_step`, `mlp::train_step`).
    pub fn entrypoint(&self) -> String {
        format!("{}::train_step", self.model)
    }

    /// Sequences (llama) or examples (MLP) per batch.
    pub fn batch_size(&self) -> usize {
        batch_size(self)
    }

    pub(crate) fn learning_rate(&self) -> f64 {
        self.learning_rate.unwrap_or(match self.model {
            ModelKind::Llama => 1e-2,
            ModelKind::Mlp => 1e-3,
        })
    }
}

fn batch_size(config: &TrainConfig) -> usize {
    match config.model {
        ModelKind::Llama => config.sizes.llama.batch_size,
        ModelKind::Mlp => config.sizes.mlp.batch_size,
    }
}

/// Name, shape and dtype of one parameter the run trained (read from the live `Var`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterShape {
    /// VarMap name (`model.layers.0.mlp.up_proj.weight`, …).
    pub name: String,
    /// Dimensions.
    pub dims: Vec<usize>,
    /// Element type.
    pub dtype: DType,
}

impl ParameterShape {
    /// Storage bytes of the parameter: `numel × dtype size`.
    pub fn bytes(&self) -> u64 {
        (self.dims.iter().product::<usize>() * self.dtype.size_in_bytes()) as u64
    }
}

/// What a training run produced.
#[derive(Debug, Clone)]
pub struct TrainReport {
    /// Path of the written trace.
    pub trace_path: PathBuf,
    /// The device label the run trained on (`cpu`, `cuda:0`, …).
    pub device: String,
    /// Loss of every step, in order.
    pub losses: Vec<f32>,
    /// Number of parameter elements.
    pub parameter_count: usize,
    /// Number of parameter tensors.
    pub parameter_tensors: usize,
    /// Every parameter, sorted by name.
    pub parameters: Vec<ParameterShape>,
    /// Events written to the trace (meta and terminal included).
    pub events_written: u64,
    /// Backward-span markers the probe applied in the captured step (0 with backward spans
    /// off).
    pub backward_markers: u64,
    /// Bytes those markers copied: probe overhead, absent from the trace's memory.
    pub backward_marker_copy_bytes: u64,
}

fn candle(context: impl FnOnce() -> String) -> impl FnOnce(candle_core::Error) -> TrainError {
    move |source| TrainError::Candle {
        context: context(),
        source,
    }
}

/// Trains `config.steps` AdamW updates on `config.device` and captures update
/// `config.capture_step`.
/// See [`train_with_progress`].
///
/// # Errors
/// See [`train_with_progress`].
pub fn train(config: &TrainConfig) -> Result<TrainReport, TrainError> {
    train_with_progress(config, |_, _| {})
}

/// Like [`train`], calling `on_step(step, loss)` after every update.
///
/// The profiler (and so its `tracing` layer) is started before the model is built, so the
/// model's module spans appear in the trace. Install the probe's `Tracking` allocator in the
/// binary to get the memory plane.
///
/// # Errors
/// [`TrainError::InvalidConfig`] (capture step 0 or beyond `steps`), [`TrainError::Device`]
/// (backend not compiled in, device cannot be opened), Candle errors naming the step and
/// phase, probe errors (creating the trace, writing it).
pub fn train_with_progress(
    config: &TrainConfig,
    mut on_step: impl FnMut(u64, f32),
) -> Result<TrainReport, TrainError> {
    let last_capture_step = config
        .capture_step
        .saturating_add(config.capture_steps.max(1) - 1);
    if config.every.is_none() && (config.capture_step == 0 || last_capture_step > config.steps) {
        return Err(TrainError::InvalidConfig(format!(
            "captured steps {}..={last_capture_step} must be within 1..={} steps",
            config.capture_step, config.steps
        )));
    }
    let requested_path = config.out_dir.join(TRACE_FILE);
    let device = config.device.open().map_err(TrainError::Device)?;
    let varmap = VarMap::new();
    let mut run = ProfileRun::training(config.entrypoint(), config.capture_step);
    if last_capture_step > config.capture_step {
        run = run.capture_steps(config.capture_step..=last_capture_step);
    }
    if let Some((rank, world_size)) = config.rank {
        run = run.rank(rank, world_size);
    }
    let requested_path = match config.every {
        Some(n) => {
            run = run.every(n);
            if let Some(k) = config.keep_last {
                run = run.keep_last(k);
            }
            if let Some(first) = config.first_step {
                run = run.first_step(first);
            }
            if let Some(outputs) = config.bundle_outputs.clone() {
                run = run.bundle_outputs(move |doc, analysis| (outputs.0)(doc, analysis));
            }
            // a scheduled run writes a run directory of bundles
            config.out_dir.clone()
        }
        None => requested_path,
    };
    // a rank of a multi-process job writes `trace.rank<N>.jsonl`
    let trace_path = run.trace_path(&requested_path);
    let profiler = run
        .device(&device)
        .varmap(&varmap)
        .tag("model", config.model.as_str())
        .tag("seed", config.seed.to_string())
        .tag("steps", config.steps.to_string())
        .tag("batch_size", batch_size(config).to_string())
        .deterministic(config.deterministic)
        .backward_spans(config.backward_spans)
        .sample_hz(config.sample_hz)
        .start(&requested_path)?; // `start` applies the rank naming itself
    let result = Workload::with_varmap(
        config.model,
        config.sizes.clone(),
        config.seed,
        &device,
        varmap,
    )
    .map_err(candle(|| "building the model".to_string()))
    .and_then(|work| {
        let losses = train_loop::<ProbedOptimizer<AdamW>>(
            &profiler,
            &work,
            adamw(config),
            config.steps,
            config.update,
            config.seeds,
            &mut on_step,
        )?;
        Ok((losses, parameter_shapes(&work)))
    });
    // finish even when a step failed, so the trace ends with a terminal event
    let finished = profiler.finish();
    let (losses, parameters) = result?;
    let summary = finished?;
    Ok(TrainReport {
        trace_path,
        device: trace_probe::DeviceLabel::of(&device).to_string(),
        losses,
        parameter_count: parameters
            .iter()
            .map(|p| p.dims.iter().product::<usize>())
            .sum(),
        parameter_tensors: parameters.len(),
        parameters,
        events_written: summary.events_written,
        backward_markers: summary.backward_markers,
        backward_marker_copy_bytes: summary.backward_marker_copy_bytes,
    })
}

/// `steps` training steps of `work` with any optimizer `O` (built here from the work's
/// parameters and `config`), as a user's loop is written: the only probe line is the step
/// guard (plus optional labelled facts; with [`UpdateStyle::DropLossBeforeStep`], the
/// profiler's `backward`). Returns the loss of every step.
///
/// # Errors
/// Candle errors naming the step and phase; probe errors of the statistics.
pub fn train_loop<O: Optimizer>(
    profiler: &Profiler,
    work: &Workload,
    config: O::Config,
    steps: u64,
    update: UpdateStyle,
    seeds: Seeds,
    on_step: &mut dyn FnMut(u64, f32),
) -> Result<Vec<f32>, TrainError> {
    let mut opt = O::new(work.varmap().all_vars(), config)
        .map_err(candle(|| "building the optimizer".to_string()))?;
    let mut losses = Vec::with_capacity(steps as usize);
    let mut leaked = Vec::new();
    for step in 1..=steps {
        let batch = work
            .batch(step)
            .map_err(candle(|| format!("step {step}: building the batch")))?;
        let rounds = seeds.slowdown_rounds(step);
        let value = train_step(profiler, work, &mut opt, &batch, (step, rounds), update)?;
        losses.push(value);
        if seeds.leak_every.is_some_and(|n| n > 0 && step % n == 0) {
            // the seeded leak: kept for the rest of the run, outside any step guard
            let t = candle_core::Tensor::ones((512, 1024), DType::F32, work.device())
                .map_err(candle(|| format!("step {step}: the seeded leak")))?;
            leaked.push(t);
        }
        on_step(step, value);
    }
    drop(leaked);
    Ok(losses)
}

/// One update of [`train_loop`] (its loop body): the step guard (records only on the captured
/// step; on CUDA/Metal the measured region synchronises the device at both ends), labelled
/// batch facts, the loss statistics, then the update as `update` says (`backward_step`;
/// backward, drop the loss, step; or that with only the parameters' detached gradients kept).
/// Returns the loss.
///
/// # Errors
/// Candle errors naming the step and phase; probe errors of the statistics.
pub(crate) fn train_step<O: Optimizer>(
    profiler: &Profiler,
    work: &Workload,
    opt: &mut O,
    batch: &Batch,
    (step, slowdown_rounds): (u64, usize),
    update: UpdateStyle,
) -> Result<f32, TrainError> {
    let _step = profiler.step(step);
    // optional: labelled facts (inputs are neither activations nor parameters)
    profiler.tensor_as("batch.inputs", &batch.inputs, MemoryCategory::Other);
    profiler.tensor_as("batch.targets", &batch.targets, MemoryCategory::Other);
    let loss = work
        .loss_slowed(batch, slowdown_rounds)
        .map_err(candle(|| format!("step {step}: forward")))?;
    profiler.tensor_stats("loss", &loss)?;
    let value = loss
        .to_scalar::<f32>()
        .map_err(candle(|| format!("step {step}: reading the loss")))?;
    match update {
        UpdateStyle::BackwardStep => {
            opt.backward_step(&loss)
                .map_err(candle(|| format!("step {step}: backward and optimizer")))?;
            drop(loss);
        }
        UpdateStyle::DropLossBeforeStep => {
            let grads = profiler
                .backward(&loss)
                .map_err(candle(|| format!("step {step}: backward")))?;
            drop(loss); // frees the autograd graph: the activations go before the step
            opt.step(&grads)
                .map_err(candle(|| format!("step {step}: optimizer")))?;
        }
        UpdateStyle::DetachedParameterGradients => {
            let grads = profiler
                .backward(&loss)
                .map_err(candle(|| format!("step {step}: backward")))?;
            drop(loss);
            // what only the original store held goes before the step
            let kept = parameter_gradients(grads, &work.varmap().all_vars());
            opt.step(&kept)
                .map_err(candle(|| format!("step {step}: optimizer")))?;
        }
    }
    Ok(value)
}

/// The gradients of `vars` only, detached, in a new store; `grads` is dropped, and with it what
/// only it held: the gradients of non-parameter leaves (the input batch, …) and the forward
/// activations that the gradients' own computations still reference (Candle keeps those until
/// the store is dropped). The step of [`UpdateStyle::DetachedParameterGradients`].
pub fn parameter_gradients(mut grads: GradStore, vars: &[candle_core::Var]) -> GradStore {
    let mut kept = GradStore::default();
    for var in vars {
        if let Some(g) = grads.remove(var.as_tensor()) {
            kept.insert(var.as_tensor(), g.detach());
        }
    }
    kept
}

/// AdamW with the config's learning rate.
pub(crate) fn adamw(config: &TrainConfig) -> ParamsAdamW {
    ParamsAdamW {
        lr: config.learning_rate(),
        ..ParamsAdamW::default()
    }
}

fn parameter_shapes(work: &Workload) -> Vec<ParameterShape> {
    let data = work
        .varmap()
        .data()
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut shapes: Vec<ParameterShape> = data
        .iter()
        .map(|(name, var)| ParameterShape {
            name: name.clone(),
            dims: var.dims().to_vec(),
            dtype: var.dtype(),
        })
        .collect();
    shapes.sort_by(|a, b| a.name.cmp(&b.name));
    shapes
}

/// The trace path inside `dir`.
pub fn trace_path(dir: &Path) -> PathBuf {
    dir.join(TRACE_FILE)
}
