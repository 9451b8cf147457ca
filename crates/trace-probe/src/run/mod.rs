//! The run configuration: what is captured and the provenance written into the `meta` event.

#[cfg(feature = "every")]
mod schedule;
mod start;

#[cfg(feature = "every")]
pub use schedule::{BundleOutputs, Schedule, DEFAULT_KEEP_LAST};

use std::collections::BTreeMap;

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use trace_wire::{CaptureContract, ComparisonIdentity, ExecutionPhase, MeasurementScope};

/// The root under which parameters are named in gradient facts by default.
pub const DEFAULT_PARAMETER_ROOT: &str = "model";

/// Where parameter names come from: a `VarMap` and the root they are named under.
#[derive(Clone)]
pub(crate) struct Parameters {
    pub(crate) root: String,
    pub(crate) varmap: VarMap,
}

impl std::fmt::Debug for Parameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parameters")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Configuration of one profiled run (builder); [`ProfileRun::start`] turns it into the
/// [`Profiler`] guard. Nothing else here does I/O.
///
/// ```
/// use trace_probe::ProfileRun;
/// let run = ProfileRun::training("mlp::train_step", 2)
///     .device(&candle_core::Device::Cpu)
///     .tag("batch", "64");
/// assert_eq!(run.capture_step(), 2);
/// assert_eq!(run.warmup_steps(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct ProfileRun {
    pub(crate) entrypoint: String,
    pub(crate) phase: ExecutionPhase,
    pub(crate) capture_step: u64,
    /// The last captured step (`capture_step` on a single-step capture).
    pub(crate) last_capture_step: u64,
    pub(crate) warmup_steps: u64,
    pub(crate) device: Device,
    pub(crate) tags: BTreeMap<String, String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) comparison_identity: Option<ComparisonIdentity>,
    pub(crate) contract: CaptureContract,
    pub(crate) user_gradient_contract: bool,
    pub(crate) deterministic: bool,
    pub(crate) parameters: Option<Parameters>,
    /// Weights given as plain tensors ([`ProfileRun::parameters`]): (name, tensor).
    pub(crate) named_parameters: Vec<(String, Tensor)>,
    pub(crate) tracing: TracingMode,
    pub(crate) track_pre_existing: bool,
    pub(crate) backward_spans: bool,
    pub(crate) sample_hz: u32,
    pub(crate) sample_buffer_bytes: usize,
    pub(crate) alloc_site_threshold_bytes: Option<usize>,
    pub(crate) ranks: RankSource,
    /// Captures on a schedule (`ProfileRun::every`, feature `every`).
    #[cfg(feature = "every")]
    pub(crate) schedule: Option<Schedule>,
    /// A scheduled capture's session, opened one step before its capture: storages older than
    /// it are unseen, so logical memory is declared `partial`.
    pub(crate) late_session: bool,
    /// Outputs added to each scheduled capture's bundle.
    #[cfg(feature = "every")]
    pub(crate) bundle_outputs: Option<BundleOutputs>,
}

/// Environment variable of the process's global rank (torchrun-style launchers set it).
pub const RANK_ENV: &str = "RANK";
/// Environment variable of the process's rank on its node.
pub const LOCAL_RANK_ENV: &str = "LOCAL_RANK";
/// Environment variable of the number of processes of the job.
pub const WORLD_SIZE_ENV: &str = "WORLD_SIZE";

/// Where a process sits in a multi-process (data- or tensor-parallel) job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankInfo {
    /// Global rank, `0..world_size`.
    pub rank: u32,
    /// Rank on this node, when known.
    pub local_rank: Option<u32>,
    /// Number of processes of the job.
    pub world_size: u32,
}

/// The rank of a run: set by [`ProfileRun::rank`], read from the environment, or an
/// environment that could not be read (a problem of the run, see [`ProfileRun::problems`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RankSource {
    /// Not a multi-process run (no `RANK` / `WORLD_SIZE` in the environment).
    None,
    /// Known.
    Known(RankInfo),
    /// `RANK`, `LOCAL_RANK` or `WORLD_SIZE` is set but unusable.
    Invalid(String),
}

impl RankSource {
    /// From `RANK`, `LOCAL_RANK` and `WORLD_SIZE` as read by `var`: both of `RANK` and
    /// `WORLD_SIZE` set (and numbers), or neither.
    pub(crate) fn from_env(var: impl Fn(&str) -> Option<String>) -> Self {
        let parse = |name: &str| -> Result<Option<u32>, String> {
            match var(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<u32>()
                    .map(Some)
                    .map_err(|_| format!("{name}={v:?} is not a non-negative integer")),
            }
        };
        let read = || -> Result<Option<RankInfo>, String> {
            let (rank, local, world) = (
                parse(RANK_ENV)?,
                parse(LOCAL_RANK_ENV)?,
                parse(WORLD_SIZE_ENV)?,
            );
            match (rank, world) {
                (None, None) => Ok(None),
                (Some(rank), Some(world_size)) => Ok(Some(RankInfo {
                    rank,
                    local_rank: local,
                    world_size,
                })),
                (Some(_), None) => Err(format!("{RANK_ENV} is set without {WORLD_SIZE_ENV}")),
                (None, Some(_)) => Err(format!("{WORLD_SIZE_ENV} is set without {RANK_ENV}")),
            }
        };
        match read() {
            Ok(None) => Self::None,
            Ok(Some(info)) => Self::Known(info),
            Err(e) => Self::Invalid(e),
        }
    }

    pub(crate) fn info(&self) -> Option<RankInfo> {
        match self {
            Self::Known(info) => Some(*info),
            _ => None,
        }
    }
}

/// The trace file of `rank` for the requested `path`: `.rank<N>` inserted before the last
/// extension (`out/trace.jsonl` → `out/trace.rank3.jsonl`; `out/t` → `out/t.rank3`), so the
/// ranks of one job write side by side into one directory, which `candle-graph summary DIR`
/// reads as one step of every rank.
pub fn rank_trace_path(path: &Path, rank: u32) -> PathBuf {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return path.join(format!("trace.rank{rank}.jsonl"));
    };
    let renamed = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}.rank{rank}.{ext}"),
        _ => format!("{name}.rank{rank}"),
    };
    path.with_file_name(renamed)
}

/// A step number as the run stores it: 0 (a run problem) when it is negative or does not fit.
/// How the `Profiler` installs its `tracing` layer, which turns the `tracing` spans of model
/// modules (the probed constructors of [`crate::nn`], candle-transformers' `with_tracing`
/// layers) into module spans. The layer must be installed **before the model is built**:
/// a span created while nobody listened stays disabled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TracingMode {
    /// A subscriber holding only the probe's layer becomes this thread's default while the
    /// profiler lives (`tracing::subscriber::set_default`). The default: the model is usually
    /// built and run on the thread that holds the profiler. It replaces a global subscriber on
    /// this thread; to keep yours, use [`TracingMode::Manual`].
    #[default]
    ThreadDefault,
    /// The same subscriber becomes the process's global default (fails when one is set).
    Global,
    /// Nothing is installed: add `Profiler::layer` to your own subscriber.
    Manual,
}

fn step_number<N: TryInto<u64>>(n: N) -> u64 {
    n.try_into().unwrap_or(0)
}

impl ProfileRun {
    /// A training run that captures optimizer update `capture_step` (one-based), counted with
    /// any integer type as [`crate::TraceSession::step`] is; the warm-up is `capture_step - 1`
    /// updates. Device defaults to CPU. A step that is not a positive `u64` (0, negative) is a
    /// run problem ([`ProfileRun::problems`]): `start` refuses it.
    pub fn training<N: TryInto<u64>>(entrypoint: impl Into<String>, capture_step: N) -> Self {
        Self::new(
            entrypoint.into(),
            ExecutionPhase::Train,
            step_number(capture_step),
        )
    }

    /// An inference run that captures call `capture_step` (one-based, any integer type; see
    /// [`ProfileRun::training`]).
    pub fn inference<N: TryInto<u64>>(entrypoint: impl Into<String>, capture_step: N) -> Self {
        Self::new(
            entrypoint.into(),
            ExecutionPhase::Infer,
            step_number(capture_step),
        )
    }

    fn new(entrypoint: String, phase: ExecutionPhase, capture_step: u64) -> Self {
        Self {
            entrypoint,
            phase,
            capture_step,
            last_capture_step: capture_step,
            warmup_steps: capture_step.saturating_sub(1),
            device: Device::Cpu,
            tags: BTreeMap::new(),
            correlation_id: None,
            comparison_identity: None,
            contract: CaptureContract {
                measurement_scope: MeasurementScope::ProfiledWork,
                ..CaptureContract::default()
            },
            user_gradient_contract: false,
            deterministic: false,
            parameters: None,
            named_parameters: Vec::new(),
            tracing: TracingMode::default(),
            track_pre_existing: true,
            backward_spans: false,
            sample_hz: trace_sampler::DEFAULT_SAMPLE_HZ,
            sample_buffer_bytes: trace_sampler::DEFAULT_SAMPLE_BUFFER_BYTES,
            alloc_site_threshold_bytes: None,
            ranks: RankSource::from_env(|name| std::env::var(name).ok()),
            #[cfg(feature = "every")]
            schedule: None,
            late_session: false,
            #[cfg(feature = "every")]
            bundle_outputs: None,
        }
    }

    /// This process is rank `rank` of a `world_size`-process job (overrides `RANK` /
    /// `WORLD_SIZE` from the environment, which are read by default; `LOCAL_RANK` is kept when
    /// set). The meta event records them, and [`ProfileRun::start`] writes the trace as
    /// [`rank_trace_path`] names it.
    pub fn rank(mut self, rank: u32, world_size: u32) -> Self {
        let local_rank = self.ranks.info().and_then(|i| i.local_rank);
        self.ranks = RankSource::Known(RankInfo {
            rank,
            local_rank,
            world_size,
        });
        self
    }

    /// The rank on this node (`LOCAL_RANK`); applies after [`ProfileRun::rank`] or a rank
    /// from the environment, ignored otherwise.
    pub fn local_rank(mut self, local_rank: u32) -> Self {
        if let RankSource::Known(info) = &mut self.ranks {
            info.local_rank = Some(local_rank);
        }
        self
    }

    /// The rank of this run, when it is one of a multi-process job.
    pub fn rank_info(&self) -> Option<RankInfo> {
        self.ranks.info()
    }

    /// The file [`ProfileRun::start`] writes for the requested `path`: `path` itself, or for a
    /// rank of a multi-process job [`rank_trace_path`] of it.
    pub fn trace_path(&self, path: &Path) -> PathBuf {
        match self.ranks.info() {
            Some(info) => rank_trace_path(path, info.rank),
            None => path.to_path_buf(),
        }
    }

    /// The model's parameters: every variable of the map is a `parameter` storage labelled with
    /// its `VarMap` key, written live at capture start with its heap bytes (with or without an
    /// optimizer: inference too); a [`crate::ProbedOptimizer`] names each variable it is given
    /// after its key (under the root `model`) and declares complete gradient coverage over
    /// them. Variables not in the map are named `unnamed/t<n>`. The map is shared, not copied:
    /// variables added after this call, up to capture start, count.
    pub fn varmap(self, varmap: &VarMap) -> Self {
        self.varmap_under(DEFAULT_PARAMETER_ROOT, varmap)
    }

    /// Like [`ProfileRun::varmap`] with parameters named under `root` in gradient facts.
    pub fn varmap_under(mut self, root: impl Into<String>, varmap: &VarMap) -> Self {
        self.parameters = Some(Parameters {
            root: root.into(),
            varmap: varmap.clone(),
        });
        self
    }

    /// Weights held as plain tensors (as inference code loads them from safetensors, e.g.
    /// `candle_core::safetensors::load`): each is a `parameter` storage labelled `name`,
    /// written live at capture start with its heap bytes. Adds to earlier calls; a tensor also
    /// in [`ProfileRun::varmap`]'s map keeps the first name registered. The tensors are held
    /// (cheap `Arc` clones) until the profiler is dropped.
    pub fn parameters(mut self, named: &[(&str, &Tensor)]) -> Self {
        self.named_parameters.extend(
            named
                .iter()
                .map(|(name, t)| ((*name).to_string(), (*t).clone())),
        );
        self
    }

    /// How the profiler installs its `tracing` layer (module spans); default
    /// [`TracingMode::ThreadDefault`].
    pub fn tracing(mut self, mode: TracingMode) -> Self {
        self.tracing = mode;
        self
    }

    /// Captures the consecutive steps (or inference calls) `steps` in one trace: the measured
    /// region runs from the start of the first to the end of the last, and each step is a span
    /// of its own under it (named `step <n>`, or `call <n>` for inference, with its
    /// `step_index`), holding that step's passes. Between two captured steps the allocator and
    /// the sampler stay armed (what the loop does there is in the trace, under the measured
    /// region). The warm-up becomes `steps.start() - 1`. A one-step range is
    /// [`ProfileRun::training`]'s capture of that step, unchanged. Gradient facts are
    /// recorded in the last step only (one fact per parameter); memory and time in every step.
    ///
    /// ```
    /// use trace_probe::ProfileRun;
    /// let run = ProfileRun::training("mlp::train_step", 2).capture_steps(2..=5);
    /// assert_eq!((run.capture_step(), run.last_capture_step()), (2, 5));
    /// assert_eq!(run.warmup_steps(), 1);
    /// ```
    pub fn capture_steps(mut self, steps: std::ops::RangeInclusive<u64>) -> Self {
        let (first, last) = steps.into_inner();
        self.capture_step = first;
        self.last_capture_step = last;
        self.warmup_steps = first.saturating_sub(1);
        self
    }

    /// The last captured step (equal to [`ProfileRun::capture_step`] on a single-step
    /// capture).
    pub fn last_capture_step(&self) -> u64 {
        self.last_capture_step
    }

    /// Whether the capture records several steps ([`ProfileRun::capture_steps`]).
    pub fn is_multi_step(&self) -> bool {
        self.last_capture_step > self.capture_step
    }

    /// How many steps finished before the captured one (default `capture_step - 1`); must be
    /// less than `capture_step`.
    pub fn warmup(mut self, warmup_steps: u64) -> Self {
        self.warmup_steps = warmup_steps;
        self
    }

    /// The device the step runs on. On CUDA and Metal the measured region synchronizes it at
    /// both ends and the meta says so (`measured_region_device_synchronized`).
    pub fn device(mut self, device: &Device) -> Self {
        self.device = device.clone();
        self
    }

    /// Adds a free-form provenance tag (e.g. batch size, source revision).
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// Key shared with external artifacts; default `<entrypoint>/update-<n>` (training) or
    /// `<entrypoint>/inference-<n>`.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// What a comparison may pair this run with.
    pub fn comparison_identity(mut self, identity: ComparisonIdentity) -> Self {
        self.comparison_identity = Some(identity);
        self
    }

    /// The capture contract to declare. A gradient contract in it (e.g. for frozen parameters)
    /// takes precedence over the one a [`crate::ProbedOptimizer`] derives from the `VarMap`.
    /// Default: every coverage `none`, measurement scope `profiled_work`.
    pub fn capture_contract(mut self, contract: CaptureContract) -> Self {
        self.user_gradient_contract = contract.gradient_contract.is_some();
        self.contract = contract;
        self
    }

    /// Deterministic mode for golden fixtures: a logical clock advancing
    /// [`trace_alloc::clock::LOGICAL_TICK_NS`] per reading, tensor ids as sequence numbers in order of
    /// first sight, storage ids `st<n>` in order of first sight (memory events placed on the
    /// logical clock after the span change that preceded them in real time), run id
    /// `run-deterministic`, timestamp `1970-01-01T00:00:00.000Z`, no host fields and no device
    /// samples. Two single-threaded runs of a seeded program write identical bytes.
    pub fn deterministic(mut self, on: bool) -> Self {
        self.deterministic = on;
        self
    }

    /// Whether the session tracks every storage allocated from its creation (warm-up steps
    /// included) so that the ones still live when the captured step begins — an input batch
    /// made before the step, model buffers — are written as `pre_existing` with their exact
    /// heap bytes (default on; CPU with the tracking allocator). It keeps the allocator hook
    /// armed until the captured step (see the crate README's cost figures). Off, such storages
    /// are missing unless labelled (`session.tensor(..)`), and logical memory is `partial`.
    pub fn track_pre_existing(mut self, on: bool) -> Self {
        self.track_pre_existing = on;
        self
    }

    /// Per-module backward spans (off by default): during the captured step the probed
    /// modules of [`crate::nn`] mark their input and output with an identity custom op, so the
    /// backward pass opens a `module` span per module (named as its forward span, with
    /// `forward_span_id`) while Candle's backprop runs that module's backward, and memory
    /// allocated in between is attributed to it. Spans whose extent Candle's order made
    /// uncertain (interleaved branches) are written as `inferred` with the reason.
    ///
    /// Off by default because it costs more than the probe's 3% target on small models: each
    /// marker copies its tensor in the forward pass (probe memory, absent from the trace and
    /// reported in [`crate::TraceSummary::backward_marker_copy_bytes`]) and adds a gradient
    /// addition in the backward pass (in the trace). The crate README gives the measured figures
    /// and the command that reproduces them. Only the captured step pays; the other steps run
    /// the plain modules.
    pub fn backward_spans(mut self, on: bool) -> Self {
        self.backward_spans = on;
        self
    }

    /// Wall-clock stack sampling of the captured step: `hz` samples per second of the
    /// capturing thread's stack (and of threads that call
    /// [`crate::TraceSession::sample_this_thread`]); default 1000, `0` turns it off, at most
    /// 100,000. The trace then declares `operations: sampled` and carries the samples, their
    /// symbolised stacks and the sampler's account (ticks, lost samples); the symbols are
    /// resolved after the step, outside the measured region. Linux on x86_64 and aarch64 only:
    /// elsewhere `operations` stays unavailable with the reason. Deterministic mode samples
    /// nothing (samples are not reproducible) and declares nothing, so fixtures keep their
    /// bytes. Names, files and lines need line tables: `[profile.release] debug =
    /// "line-tables-only"` (see the crate README, *Sampled operations*). The cost at 1 kHz is
    /// in the README too.
    pub fn sample_hz(mut self, hz: u32) -> Self {
        self.sample_hz = hz;
        self
    }

    /// The size in bytes of each sampled thread's sample buffer (default
    /// [`trace_sampler::DEFAULT_SAMPLE_BUFFER_BYTES`]); a sample that does not fit is lost and
    /// counted (`lost_buffer`). For tests of that accounting.
    #[doc(hidden)]
    pub fn sample_buffer_bytes(mut self, bytes: usize) -> Self {
        self.sample_buffer_bytes = bytes;
        self
    }

    /// Allocation sites: with the tracking allocator, every allocation of at least `bytes` made
    /// inside the captured step has its call stack recorded, and the storage it becomes names
    /// that stack (`memory.site`, a `site` table sharing the samples' frames and stacks, one
    /// `alloc_sites` account); smaller allocations are counted in aggregate. `0` turns sites
    /// off. Without this call the threshold follows the walker the probe calibrated
    /// ([`trace_alloc::sites::default_threshold_bytes`]): 1 KiB where the binary keeps frame
    /// pointers (a walk costs ≈ 0.15 µs), 4 KiB with the DWARF unwinder (≈ 10 µs).
    /// Deterministic mode captures none (stacks are not reproducible). Linux on x86_64 and
    /// aarch64 only. The cost and the unwinder are in the crate README (*Allocation sites*).
    pub fn alloc_site_threshold_bytes(mut self, bytes: usize) -> Self {
        self.alloc_site_threshold_bytes = Some(bytes);
        self
    }

    /// The allocation-site threshold in bytes set with [`Self::alloc_site_threshold_bytes`]
    /// (`Some(0)`: off; `None`: the walker's default; deterministic mode captures none).
    pub fn site_threshold_bytes(&self) -> Option<usize> {
        self.alloc_site_threshold_bytes
    }

    /// The requested sample rate, samples per second per thread (0: off).
    pub fn sample_rate_hz(&self) -> u32 {
        self.sample_hz
    }

    /// The one-based captured step.
    pub fn capture_step(&self) -> u64 {
        self.capture_step
    }

    /// Steps finished before the captured one.
    pub fn warmup_steps(&self) -> u64 {
        self.warmup_steps
    }

    /// Whether deterministic mode is on.
    pub fn is_deterministic(&self) -> bool {
        self.deterministic
    }

    /// The device.
    pub fn device_ref(&self) -> &Device {
        &self.device
    }

    /// The declared capture contract so far.
    pub fn contract(&self) -> &CaptureContract {
        &self.contract
    }

    /// Every violation of the run rules (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.entrypoint.trim().is_empty() {
            problems.push("entrypoint is empty".to_string());
        }
        if self.last_capture_step < self.capture_step {
            problems.push(format!(
                "capture_steps {}..={} is empty (the last step is before the first)",
                self.capture_step, self.last_capture_step
            ));
        }
        if self.capture_step == 0 {
            problems
                .push("capture_step is 0 or not a u64 (steps are one-based, positive)".to_string());
        } else if self.warmup_steps >= self.capture_step {
            problems.push(format!(
                "warmup_steps {} must be less than capture_step {}",
                self.warmup_steps, self.capture_step
            ));
        }
        if self
            .correlation_id
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            problems.push("correlation_id is empty".to_string());
        }
        if self.sample_hz > trace_sampler::MAX_SAMPLE_HZ {
            problems.push(format!(
                "sample_hz {} is above {} (the step would be spent in the signal handler)",
                self.sample_hz,
                trace_sampler::MAX_SAMPLE_HZ
            ));
        }
        match &self.ranks {
            RankSource::Invalid(e) => problems.push(format!("rank environment: {e}")),
            RankSource::Known(i) if i.rank >= i.world_size => problems.push(format!(
                "rank {} must be less than world_size {}",
                i.rank, i.world_size
            )),
            RankSource::Known(i) if i.local_rank.is_some_and(|l| l >= i.world_size) => problems
                .push(format!(
                    "local_rank {:?} must be less than world_size {}",
                    i.local_rank, i.world_size
                )),
            _ => {}
        }
        #[cfg(feature = "every")]
        problems.extend(self.schedule_problems());
        problems.extend(self.contract.validate());
        if let Some(identity) = &self.comparison_identity {
            problems.extend(identity.validate());
        }
        problems
    }

    pub(crate) fn default_correlation_id(&self) -> String {
        let steps = if self.is_multi_step() {
            format!("{}-{}", self.capture_step, self.last_capture_step)
        } else {
            self.capture_step.to_string()
        };
        match self.phase {
            ExecutionPhase::Train => format!("{}/update-{steps}", self.entrypoint),
            ExecutionPhase::Infer => format!("{}/inference-{steps}", self.entrypoint),
        }
    }

    /// The name of the span of step `n` in a multi-step capture: `step <n>` (training) or
    /// `call <n>` (inference).
    pub(crate) fn step_span_name(&self, n: u64) -> String {
        match self.phase {
            ExecutionPhase::Train => format!("step {n}"),
            ExecutionPhase::Infer => format!("call {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capture_step_takes_any_integer_type_and_refuses_what_is_not_a_step() {
        let step: usize = 2;
        assert_eq!(ProfileRun::training("e", step).capture_step(), 2);
        assert_eq!(ProfileRun::inference("e", 3i32).capture_step(), 3);
        assert!(ProfileRun::training("e", 2u8).problems().is_empty());
        for run in [
            ProfileRun::training("e", -1i64),
            ProfileRun::training("e", 0),
            ProfileRun::inference("e", i128::MAX),
        ] {
            let problems = run.problems();
            assert!(
                problems
                    .iter()
                    .any(|p| p.contains("capture_step is 0 or not a u64")),
                "{problems:?}"
            );
        }
    }

    #[test]
    fn rules_are_checked() {
        assert!(ProfileRun::training("e", 2).problems().is_empty());
        assert_eq!(ProfileRun::training("e", 0).problems().len(), 1);
        assert_eq!(ProfileRun::training("e", 2).warmup(2).problems().len(), 1);
        assert_eq!(
            ProfileRun::inference("e", 3).default_correlation_id(),
            "e/inference-3"
        );
        let multi = ProfileRun::training("e", 2).capture_steps(2..=5);
        assert!(multi.problems().is_empty());
        assert!(multi.is_multi_step());
        assert_eq!(multi.default_correlation_id(), "e/update-2-5");
        assert_eq!(multi.step_span_name(3), "step 3");
        let one = ProfileRun::training("e", 2).capture_steps(3..=3);
        assert!(!one.is_multi_step());
        assert_eq!((one.capture_step(), one.warmup_steps()), (3, 2));
        #[allow(clippy::reversed_empty_ranges)]
        let empty = ProfileRun::training("e", 2).capture_steps(5..=2);
        assert_eq!(empty.problems().len(), 1, "{:?}", empty.problems());
    }

    #[test]
    fn ranks_come_from_the_environment_or_the_builder() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(RankSource::from_env(env(&[])), RankSource::None);
        assert_eq!(
            RankSource::from_env(env(&[
                ("RANK", "3"),
                ("LOCAL_RANK", "1"),
                ("WORLD_SIZE", "4")
            ])),
            RankSource::Known(RankInfo {
                rank: 3,
                local_rank: Some(1),
                world_size: 4
            })
        );
        let bad = RankSource::from_env(env(&[("RANK", "x"), ("WORLD_SIZE", "4")]));
        assert!(
            matches!(&bad, RankSource::Invalid(e) if e.contains("RANK=\"x\"")),
            "{bad:?}"
        );
        assert!(matches!(
            RankSource::from_env(env(&[("RANK", "1")])),
            RankSource::Invalid(_)
        ));
        let mut run = ProfileRun::training("e", 2);
        run.ranks = bad;
        assert_eq!(run.problems().len(), 1, "{:?}", run.problems());
        let run = run.rank(2, 4).local_rank(0);
        assert!(run.problems().is_empty());
        assert_eq!(
            run.trace_path(Path::new("out/trace.jsonl")),
            Path::new("out/trace.rank2.jsonl")
        );
        assert_eq!(ProfileRun::training("e", 2).rank(4, 4).problems().len(), 1);
    }

    #[test]
    fn rank_paths_insert_the_rank_before_the_extension() {
        assert_eq!(
            rank_trace_path(Path::new("a/trace.jsonl"), 0),
            Path::new("a/trace.rank0.jsonl")
        );
        assert_eq!(rank_trace_path(Path::new("a/t"), 7), Path::new("a/t.rank7"));
        assert_eq!(
            rank_trace_path(Path::new(".hidden"), 1),
            Path::new(".hidden.rank1")
        );
    }
}
