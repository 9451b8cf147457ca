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
//! | `plugin` | the capture plug-in trait and [`plugin::CaptureContext`], the handles a plug-in gets |
//! | `host` | [`host::SessionHost`]: what the session offers the parts built on it (backward spans, the sampling guard) without their seeing its state |
//! | `sampling_guard` | [`SamplingGuard`], what `sample_this_thread` returns |
//!
//! The plug-ins are listed here, where the session is built (`builtin_plugins`): the storage
//! capture, then the stack sampler.
//!
//! # Cost outside the captured step
//! [`TraceSession::step`] compares the step number with the configured one; every other entry
//! point (spans, ops, tensor facts, stats, the tracing layer, the wrappers) loads one
//! `AtomicBool` (relaxed) and returns. `benches/overhead.rs` measures both.

pub(crate) mod attribution;
mod finish;
mod forward;
pub(crate) mod host;
mod ids;
pub(crate) mod open_span;
mod passes;
pub(crate) mod plugin;
mod route;
mod sampling_guard;
pub(crate) mod spans;
pub(crate) mod stack;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use trace_wire::{CaptureContract, CoverageLevel, GradientContract, TerminalOutcome, TraceEvent};

pub use passes::StepGuard;
pub(crate) use route::{InnerRef, Plugins, Router};
pub use sampling_guard::SamplingGuard;
pub use spans::SpanGuard;

use crate::backward::{BackwardPlugin, BackwardSpans};
use crate::device::DeviceLabel;
use crate::error::ProbeError;
use crate::run::ProfileRun;
use crate::sampler::session_plugin::SamplerPlugin;
use crate::sampler::SamplerSettings;
use crate::storage::session_plugin::{DeclaredParameters, StoragePlugin};
use crate::writer::{lock, WriterHandle};
use host::SessionHost;
use open_span::{OpenSpan, SpanExtras};
use plugin::{CaptureContext, CapturePlugin, ROOT_SPAN};
use trace_alloc::clock::SessionClock;

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
    /// Whether the captured step is running; shared by a scheduled profiler's base session and
    /// its capture sessions.
    capturing: Arc<AtomicBool>,
    /// A scheduled profiler's route to its capture sessions (`None`: a session of one capture).
    pub(crate) route: Option<Arc<dyn Router>>,
    state: Mutex<State>,
    pub(crate) clock: SessionClock,
    next_span: AtomicU64,
    writer: WriterHandle,
    pub(crate) plugins: Vec<Arc<dyn CapturePlugin>>,
    /// Shared with memory-event attribution on the writer thread.
    pub(crate) spans: Arc<attribution::SpanLog>,
    pub(crate) ids: ids::Ids,
    pub(crate) device: DeviceLabel,
    /// Per-module backward spans (opt-in).
    pub(crate) backward: Arc<BackwardSpans>,
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
    pub(crate) stacks: trace_sampler::SessionStacks,
    /// This session, for the work handed to the helper thread at the capture's end.
    me: std::sync::Weak<Inner>,
    /// The plug-ins' finish (symbolisation, samples, sites) running on the helper thread
    /// since the capture ended; `finish()` joins it.
    finishing: Mutex<Option<crate::beside::Pending<Finished>>>,
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
        #[cfg(feature = "every")]
        if run.schedule.is_some() {
            return Err(ProbeError::InvalidRun {
                problems: vec![
                    "a scheduled run (every) writes a run directory: start it with ProfileRun::start"
                        .into(),
                ],
            });
        }
        Self::new_with(run, out, Arc::new(AtomicBool::new(false)), None)
    }

    /// A capture session of a scheduled profiler: its trace at `path`, its capturing flag the
    /// base's.
    #[cfg(feature = "every")]
    pub(crate) fn create_routed(
        run: ProfileRun,
        path: &Path,
        capturing: Arc<AtomicBool>,
    ) -> Result<Self, ProbeError> {
        let create_err = |source| ProbeError::CreateFile {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(create_err)?;
        }
        let file = std::fs::File::create(path).map_err(create_err)?;
        Self::new_with(run, file, capturing, None)
    }

    pub(crate) fn new_with<W: Write + Send + 'static>(
        run: ProfileRun,
        out: W,
        capturing: Arc<AtomicBool>,
        route: Option<Arc<dyn Router>>,
    ) -> Result<Self, ProbeError> {
        let problems = run.problems();
        if !problems.is_empty() {
            return Err(ProbeError::InvalidRun { problems });
        }
        let writer = WriterHandle::spawn(out)?;
        // The helper thread of the captured step's off-thread work (`crate::beside`), started
        // here, outside any captured step.
        if !run.deterministic {
            crate::beside::start();
        }
        let inner = Arc::new_cyclic(|me: &std::sync::Weak<Inner>| {
            let backward = Arc::new(BackwardSpans::new(run.backward_spans, me.clone()));
            let plugins = builtin_plugins(&run, &backward);
            Inner {
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
                backward,
                run,
                capturing,
                route,
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
                me: me.clone(),
                finishing: Mutex::new(None),
            }
        });
        Ok(Self { inner })
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
        match &self.inner.route {
            Some(route) => {
                let result = route.finish();
                let _ = self.inner.finish();
                result
            }
            None => self.inner.finish(),
        }
    }

    /// The state the capture path works on: this session's, or for a scheduled profiler the
    /// open capture session's (its own between captures).
    #[inline]
    pub(crate) fn cur(&self) -> InnerRef<'_> {
        match &self.inner.route {
            None => InnerRef::Fixed(&self.inner),
            Some(route) => match route.current() {
                Some(inner) => InnerRef::Routed(inner),
                None => InnerRef::Fixed(&self.inner),
            },
        }
    }

    /// This session, or the open capture session of a scheduled profiler, as a handle.
    pub(crate) fn current_session(&self) -> TraceSession {
        TraceSession {
            inner: Arc::clone(&self.cur()),
        }
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
        if let Some(route) = &self.inner.route {
            route.remember_contract(&contract);
            if let Some(inner) = route.current() {
                let _ = (TraceSession { inner }).declare_gradient_contract(contract.clone());
            }
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
        if let Some(route) = &self.inner.route {
            let owned: Vec<(String, candle_core::Tensor)> = named
                .iter()
                .map(|(n, t)| ((*n).to_string(), (*t).clone()))
                .collect();
            route.remember_declared(&owned);
            return match route.current() {
                Some(inner) => (TraceSession { inner }).declare_parameters(named),
                None => true,
            };
        }
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

    pub(crate) fn plugins(&self) -> Plugins<'_> {
        Plugins(self.cur())
    }

    /// Tells the plug-ins (and, for a scheduled profiler, every later capture) about the
    /// parameters a `ProbedOptimizer` is built over.
    pub(crate) fn announce_parameters(&self, params: &[(String, candle_core::Var)]) {
        if let Some(route) = &self.inner.route {
            route.remember_parameters(params);
        }
        for plugin in self.plugins().iter() {
            plugin.on_parameters(params);
        }
    }

    /// Samples the calling thread's stack during the captured step too (a data loader, a
    /// worker thread the user owns), at the run's [`ProfileRun::sample_hz`], while the returned
    /// guard lives: call it at the thread's start, keep the guard until the thread's end. Its
    /// samples carry its thread key and the span open on it then (none, for a thread that opens
    /// no span). The capturing thread is always sampled; asking for it again does nothing.
    /// Inactive when sampling is off (`sample_hz(0)`, deterministic mode, a platform without the
    /// sampler).
    pub fn sample_this_thread(&self) -> SamplingGuard {
        let inner = self.cur();
        let ctx = inner.plugin_context();
        let tokens = inner
            .plugins
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.on_thread_join(&ctx).map(|t| (i, t)))
            .collect();
        SamplingGuard::new(Arc::clone(&inner) as Arc<dyn SessionHost>, tokens)
    }
}

impl Inner {
    /// Whether the capture has not begun.
    #[cfg(feature = "every")]
    pub(crate) fn is_waiting(&self) -> bool {
        lock(&self.state).phase == Phase::Waiting
    }

    pub(crate) fn is_capturing(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    pub(crate) fn emit(&self, event: TraceEvent) {
        self.writer.send(event);
    }

    /// The view of this session a capture plug-in gets.
    pub(crate) fn plugin_context(&self) -> CaptureContext<'_> {
        CaptureContext::new(&self.writer, &self.clock, &self.spans, &self.stacks)
    }

    /// Keeps the first error the probe met inside the user's loop (returned by `finish`).
    pub(crate) fn record_error(&self, err: ProbeError) {
        let mut slot = lock(&self.first_error);
        if slot.is_none() {
            *slot = Some(err);
        }
    }
}

impl SessionHost for Inner {
    fn uid(&self) -> u64 {
        self.uid
    }
    fn is_capturing(&self) -> bool {
        Inner::is_capturing(self)
    }
    fn span_info(&self, span: u64) -> Option<attribution::SpanInfo> {
        self.spans.span_info(span)
    }
    fn open_span_with(
        &self,
        name: &str,
        kind: trace_wire::SpanKind,
        pass: Option<trace_wire::ExecutionStep>,
        extras: SpanExtras,
    ) -> Option<OpenSpan> {
        Inner::open_span_with(self, name, kind, pass, extras)
    }
    fn end_span_inferred(&self, id: u64, start_ns: u64, inferred_reason: Option<String>) {
        Inner::end_span_inferred(self, id, start_ns, inferred_reason);
    }
    fn record_error(&self, err: ProbeError) {
        Inner::record_error(self, err);
    }
    fn with_plugins(&self, f: &mut host::WithPlugins<'_>) {
        f(&self.plugin_context(), &self.plugins);
    }
}

/// The plug-ins every session gets, in this order: the storage capture (allocator, registry,
/// device samples), then the stack sampler (its events come last, after the step's), then the
/// per-module backward spans (`backward`, the session's).
fn builtin_plugins(run: &ProfileRun, backward: &Arc<BackwardSpans>) -> Vec<Arc<dyn CapturePlugin>> {
    vec![
        Arc::new(
            StoragePlugin::new(
                &run.device,
                run.deterministic,
                run.track_pre_existing,
                if run.deterministic {
                    Some(0)
                } else {
                    run.alloc_site_threshold_bytes
                },
            )
            .with_parameters(run_parameters(run)),
        ),
        Arc::new(SamplerPlugin::new(SamplerSettings {
            hz: run.sample_hz,
            deterministic: run.deterministic,
            buffer_bytes: run.sample_buffer_bytes,
        })),
        Arc::new(BackwardPlugin(Arc::clone(backward))),
    ]
}

/// The run's declared weights as (name, tensor): the `VarMap`'s variables by key (sorted), then
/// [`ProfileRun::parameters`]' tensors. Read at capture start, so variables added to the map
/// after `varmap` count.
fn run_parameters(run: &ProfileRun) -> DeclaredParameters {
    DeclaredParameters {
        varmap: run.parameters.as_ref().map(|p| p.varmap.clone()),
        named: run.named_parameters.clone(),
    }
}

/// What the plug-ins report before the terminal (built by `finish`): dropped events and
/// coverage lost.
pub(super) struct Finished {
    dropped: Option<u64>,
    lost: std::collections::BTreeMap<trace_wire::ReasonKey, String>,
}
