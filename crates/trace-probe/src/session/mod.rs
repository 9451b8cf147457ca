//! The trace session: run state, the event path to the writer thread and the public handle.
//!
//! | module | job |
//! |---|---|
//! | `stack` | the per-thread stack of open spans (parents, panic attribution) |
//! | `spans` | opening and closing spans, [`SpanGuard`] |
//! | `passes` | the captured step and its passes: [`StepGuard`], the forward pass the step opens, backward / optimizer |
//! | `attribution` | the span log that attributes memory to spans by thread and time |
//! | `ids` | tensor ids, instance keys, gradient ids, labels (deterministic sequences) |
//! | `finish` | finish, the terminal, a panic in the captured step |
//!
//! # Cost outside the captured step
//! [`TraceSession::step`] compares the step number with the configured one; every other entry
//! point (spans, ops, tensor facts, stats, the tracing layer, the wrappers) loads one
//! `AtomicBool` (relaxed) and returns. `benches/overhead.rs` measures both.

mod attribution;
mod finish;
mod forward;
mod ids;
mod passes;
mod spans;
pub(crate) mod stack;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use trace_schema::{CaptureContract, CoverageLevel, GradientContract, TerminalOutcome, TraceEvent};

pub(crate) use attribution::{SpanChange, SpanLog};
pub use passes::StepGuard;
pub use spans::SpanGuard;
pub(crate) use spans::{OpenSpan, SpanExtras};

use crate::clock::SessionClock;
use crate::device::DeviceLabel;
use crate::error::ProbeError;
use crate::plugin::{builtin_plugins, CaptureContext, CapturePlugin, ROOT_SPAN};
use crate::run::ProfileRun;
use crate::writer::{lock, WriterHandle};

static NEXT_SESSION_UID: AtomicU64 = AtomicU64::new(1);

/// Where the capture stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the capture step.
    Waiting,
    /// Inside the capture step.
    Capturing,
    /// The capture step ended normally.
    Captured,
    /// The capture step panicked; the failed terminal is written.
    Failed,
    /// `finish()` ran.
    Finished,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    contract: CaptureContract,
    user_gradient_contract: bool,
    meta_written: bool,
    panic_hook_registered: bool,
    capture_end_plugins_ran: bool,
}

/// Shared session state (one per [`TraceSession`] and its clones).
pub(crate) struct Inner {
    pub(crate) uid: u64,
    pub(crate) run: ProfileRun,
    capturing: AtomicBool,
    state: Mutex<State>,
    pub(crate) clock: SessionClock,
    next_span: AtomicU64,
    writer: WriterHandle,
    plugins: Vec<Arc<dyn CapturePlugin>>,
    /// Shared with memory-event attribution on the writer thread.
    pub(crate) spans: Arc<attribution::SpanLog>,
    pub(crate) ids: ids::Ids,
    pub(crate) device: DeviceLabel,
    /// Per-module backward spans (opt-in).
    pub(crate) backward: crate::backward::BackwardSpans,
    /// The forward pass the step guard opened, until backward (or the step's end) closes it.
    auto_forward: Mutex<Option<(OpenSpan, u64)>>,
    /// The span of the step now running in a multi-step capture, with its step number.
    step_span: Mutex<Option<(OpenSpan, u64)>>,
    /// The last step begun in the capture (0 before the capture).
    pub(crate) last_step_begun: AtomicU64,
    /// The root span's start, session ns (its end closes the last step of a capture).
    root_start_ns: AtomicU64,
    /// Forward calls [`TraceSession::forward`] has spanned in the captured step so far.
    pub(crate) forward_calls: std::sync::atomic::AtomicU64,
    /// Module spans opened in the captured step (0: nothing says which module ran).
    pub(crate) module_spans: std::sync::atomic::AtomicU64,
    /// Module instances seen per (open parent span, module name), in call order: tells apart
    /// two layers of one name under one parent (`linear`, `linear#2`).
    pub(crate) module_instances: Mutex<std::collections::HashMap<(u64, String), Vec<u64>>>,
    first_error: Mutex<Option<ProbeError>>,
    /// The trace's symbol table (samples and allocation sites), written at finish.
    pub(crate) stacks: crate::stacks::SessionStacks,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceSession")
            .field("uid", &self.uid)
            .field("entrypoint", &self.run.entrypoint)
            .field("capture_step", &self.run.capture_step)
            .finish_non_exhaustive()
    }
}

/// A probe session writing one `candle-graph/trace/13` trace: the handle behind a
/// [`crate::Profiler`] (which derefs to it), for recording from other threads or without the
/// guard.
///
/// Cheap to clone (an `Arc`), `Send + Sync`. Formatting and writing run on a writer thread fed
/// by an unbounded channel, so the training thread does no I/O. The trace is written only for
/// the captured step (see [`TraceSession::step`]); `meta` is written when that step begins.
#[derive(Debug, Clone)]
pub struct TraceSession {
    pub(crate) inner: Arc<Inner>,
}

/// What `finish()` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceSummary {
    /// How the capture ended.
    pub outcome: TerminalOutcome,
    /// Events written, meta and terminal included.
    pub events_written: u64,
    /// Events lost to a full buffer (allocator ring), when counted.
    pub dropped_events: Option<u64>,
    /// Backward-span markers applied in the captured step (0 unless
    /// [`crate::ProfileRun::backward_spans`] is on).
    pub backward_markers: u64,
    /// Bytes the backward-span markers copied: probe overhead, absent from the trace's logical
    /// memory (see the crate README).
    pub backward_marker_copy_bytes: u64,
}

impl TraceSession {
    /// Opens a session writing to `path` (created or truncated; missing parent directories
    /// are created).
    ///
    /// # Errors
    /// [`ProbeError::InvalidRun`] when the run breaks a rule, [`ProbeError::CreateFile`] naming
    /// the path, [`ProbeError::WriterSpawn`].
    pub fn create(run: ProfileRun, path: impl AsRef<Path>) -> Result<Self, ProbeError> {
        let problems = run.problems();
        if !problems.is_empty() {
            return Err(ProbeError::InvalidRun { problems });
        }
        let path = path.as_ref();
        let create_err = |source| ProbeError::CreateFile {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(create_err)?;
        }
        let file = std::fs::File::create(path).map_err(create_err)?;
        Self::new(run, file)
    }

    /// Opens a session writing to any writer (a file, a pipe, `std::io::sink()`); the writer
    /// is buffered and owned by the writer thread.
    ///
    /// # Errors
    /// [`ProbeError::InvalidRun`] when the run breaks a rule; [`ProbeError::WriterSpawn`].
    pub fn new<W: Write + Send + 'static>(run: ProfileRun, out: W) -> Result<Self, ProbeError> {
        let problems = run.problems();
        if !problems.is_empty() {
            return Err(ProbeError::InvalidRun { problems });
        }
        let writer = WriterHandle::spawn(out)?;
        let plugins = builtin_plugins(&run);
        let inner = Inner {
            uid: NEXT_SESSION_UID.fetch_add(1, Ordering::Relaxed),
            device: DeviceLabel::of(&run.device),
            clock: SessionClock::new(run.deterministic),
            state: Mutex::new(State {
                phase: Phase::Waiting,
                contract: run.contract.clone(),
                user_gradient_contract: run.user_gradient_contract,
                meta_written: false,
                panic_hook_registered: false,
                capture_end_plugins_ran: false,
            }),
            ids: ids::Ids::new(run.deterministic),
            backward: crate::backward::BackwardSpans::new(run.backward_spans),
            run,
            capturing: AtomicBool::new(false),
            next_span: AtomicU64::new(ROOT_SPAN + 1),
            writer,
            plugins,
            spans: Arc::default(),
            auto_forward: Mutex::new(None),
            step_span: Mutex::new(None),
            last_step_begun: AtomicU64::new(0),
            root_start_ns: AtomicU64::new(0),
            forward_calls: std::sync::atomic::AtomicU64::new(0),
            module_spans: std::sync::atomic::AtomicU64::new(0),
            module_instances: Mutex::default(),
            first_error: Mutex::new(None),
            stacks: Default::default(),
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Whether the captured step is running now (one relaxed atomic load).
    #[inline]
    pub fn is_capturing(&self) -> bool {
        self.inner.capturing.load(Ordering::Relaxed)
    }

    /// Blocks until every event recorded so far is written and flushed to the writer (or 5 s
    /// passed). Span ends already ask for a flush within 10 ms; this is for callers that must
    /// know it happened (e.g. before signalling another process).
    ///
    /// # Errors
    /// The sticky I/O error, if one happened.
    pub fn flush(&self) -> Result<(), ProbeError> {
        self.inner.writer.flush_sync(Duration::from_secs(5));
        if self.inner.writer.has_error() {
            return Err(ProbeError::Io(std::io::Error::other(
                "the trace writer failed (the error is returned by finish())",
            )));
        }
        Ok(())
    }

    /// Ends the session: writes the `complete` terminal (or, when the capture step never ran, a
    /// `failed` terminal saying so), stops the writer thread and restores the panic hook. A
    /// [`crate::Profiler`] calls it when dropped; call it yourself to see its errors.
    ///
    /// # Errors
    /// The first I/O error of the writer; [`ProbeError::CaptureStepNotReached`];
    /// [`ProbeError::AlreadyFinished`]; a Candle error the probe met (device synchronisation,
    /// gradient facts).
    pub fn finish(&self) -> Result<TraceSummary, ProbeError> {
        self.inner.finish()
    }

    /// The session clock (ns since the session opened, or logical in deterministic mode).
    pub fn now_ns(&self) -> u64 {
        self.inner.clock.now_ns()
    }

    /// The run configuration.
    pub fn run(&self) -> &ProfileRun {
        &self.inner.run
    }

    /// Declares complete gradient coverage with `contract`, unless the run's contract already
    /// carries a user gradient contract (which wins). Takes effect in the `meta` written when
    /// the captured step begins.
    ///
    /// # Errors
    /// [`ProbeError::InvalidGradientContract`] when the contract fails validation.
    pub fn declare_gradient_contract(&self, contract: GradientContract) -> Result<(), ProbeError> {
        let problems = contract.validate();
        if !problems.is_empty() {
            return Err(ProbeError::InvalidGradientContract { problems });
        }
        let mut state = lock(&self.inner.state);
        if !state.user_gradient_contract {
            state.contract.gradients = CoverageLevel::Complete;
            state.contract.gradient_contract = Some(contract);
        }
        Ok(())
    }

    /// Declares weights held as plain tensors after the session started, as
    /// [`ProfileRun::parameters`] does before it: each is a `parameter` storage labelled `name`,
    /// written live at capture start with its heap bytes. For weights loaded after
    /// [`ProfileRun::start`]: the session tracker then saw their allocation, so no tensor
    /// older than the session leaves logical memory `partial` (weights given to
    /// `ProfileRun::parameters` necessarily exist before the session). Returns `false`, and
    /// declares nothing, once the capture has begun. The tensors are held (cheap `Arc`
    /// clones) until the session ends.
    pub fn declare_parameters(&self, named: &[(&str, &candle_core::Tensor)]) -> bool {
        let state = lock(&self.inner.state);
        if state.phase != Phase::Waiting || state.meta_written {
            return false;
        }
        let named: Vec<(String, candle_core::Tensor)> = named
            .iter()
            .map(|(n, t)| ((*n).to_string(), (*t).clone()))
            .collect();
        for plugin in &self.inner.plugins {
            plugin.on_declared_parameters(&named);
        }
        true
    }

    pub(crate) fn plugins(&self) -> &[Arc<dyn CapturePlugin>] {
        &self.inner.plugins
    }

    /// Samples the calling thread's stack during the captured step too (a data loader, a
    /// worker thread the user owns), at the run's [`ProfileRun::sample_hz`], while the returned
    /// guard lives: call it at the thread's start, keep the guard until the thread's end. Its
    /// samples carry its thread key and the span open on it then (none, for a thread that opens
    /// no span). The capturing thread is always sampled; asking for it again does nothing.
    /// Inactive when sampling is off (`sample_hz(0)`, deterministic mode, a platform without the
    /// sampler).
    pub fn sample_this_thread(&self) -> crate::sampler::SamplingGuard {
        let ctx = self.inner.plugin_context();
        let tokens = self
            .inner
            .plugins
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.on_thread_join(&ctx).map(|t| (i, t)))
            .collect();
        crate::sampler::SamplingGuard::new(self, tokens)
    }
}

impl Inner {
    pub(crate) fn is_capturing(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    pub(crate) fn emit(&self, event: TraceEvent) {
        self.writer.send(event);
    }

    /// Queues events built on the writer thread, in queue order (see
    /// [`WriterHandle::send_deferred`]).
    pub(crate) fn emit_deferred(&self, build: crate::writer::Deferred) {
        self.writer.send_deferred(build);
    }

    /// A handle queueing deferred events into this session's writer from another thread.
    pub(crate) fn deferred_sender(&self) -> crate::writer::DeferredSender {
        self.writer.sender()
    }

    /// The view of this session a capture plug-in gets.
    pub(crate) fn plugin_context(&self) -> CaptureContext<'_> {
        CaptureContext { inner: self }
    }

    /// Keeps the first error the probe met inside the user's loop (returned by `finish`).
    pub(crate) fn record_error(&self, err: ProbeError) {
        let mut slot = lock(&self.first_error);
        if slot.is_none() {
            *slot = Some(err);
        }
    }
}
