//! The trace session: run state, the root step guard, span guards and the event path to the
//! writer thread.
//!
//! # Cost outside the captured step
//! [`TraceSession::step`] compares the step number with the configured one; every other entry
//! point (spans, ops, tensor facts, stats, the tracing layer, the wrappers) loads one
//! `AtomicBool` (relaxed) and returns. `benches/overhead.rs` measures both.
//!
//! # Span parents
//! Each thread keeps a stack of the spans it opened; a new span's parent is the innermost open
//! span of the same session on the same thread, or the root (`s1`) when the thread has none, so
//! the trace always has exactly one root.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candle_core::{Device, TensorId};
use trace_schema::{
    CaptureContract, CoverageLevel, ExecutionStep, GradientContract, MetaEvent, RunMeta,
    SpanEndEvent, SpanKind, SpanStartEvent, TerminalEvent, TerminalOutcome, TimingMode, TraceEvent,
    WRITE_VERSION,
};

use crate::capture::{
    builtin_hooks, set_current_span, span_wire_id, thread_key, CaptureContext, CaptureHook,
    SpanInfo, ROOT_SPAN,
};
use crate::clock::SessionClock;
use crate::error::ProbeError;
use crate::meta::{candle_version, host_info, utc_timestamp_now, PROBE_VERSION};
use crate::run::{device_label, ProfileRun};
use crate::writer::{lock, WriterHandle};

static NEXT_SESSION_UID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// `(session uid, span number)` of the spans this thread opened, innermost last.
    static SPAN_STACK: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Session uids with an open span on this thread (used by the panic hook; never blocks).
pub(crate) fn sessions_open_on_this_thread() -> Vec<u64> {
    SPAN_STACK
        .try_with(|stack| match stack.try_borrow() {
            Ok(stack) => {
                let mut uids: Vec<u64> = stack.iter().map(|(uid, _)| *uid).collect();
                uids.dedup();
                uids
            }
            Err(_) => Vec::new(),
        })
        .unwrap_or_default()
}

fn innermost_span(uid: u64) -> Option<u64> {
    SPAN_STACK
        .try_with(|stack| {
            stack
                .try_borrow()
                .ok()
                .and_then(|s| s.iter().rev().find(|(u, _)| *u == uid).map(|(_, id)| *id))
        })
        .ok()
        .flatten()
}

fn push_span(uid: u64, span: u64) {
    let _ = SPAN_STACK.try_with(|stack| {
        if let Ok(mut s) = stack.try_borrow_mut() {
            s.push((uid, span));
        }
    });
    set_current_span(uid, span);
}

fn pop_span(uid: u64, span: u64) {
    let _ = SPAN_STACK.try_with(|stack| {
        if let Ok(mut s) = stack.try_borrow_mut() {
            if let Some(pos) = s.iter().rposition(|e| *e == (uid, span)) {
                s.remove(pos);
            }
            let (u, id) = s.last().copied().unwrap_or((0, 0));
            set_current_span(u, id);
        }
    });
}

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
    capture_end_hooks_ran: bool,
}

#[derive(Debug, Default)]
struct SpanTable {
    /// Index `n - 1` holds span `n`.
    info: Vec<SpanInfo>,
    /// Per thread: `(session ns, innermost open span after the change (0 = none), real time in
    /// ns since the process clock base)`.
    changes: HashMap<u64, Vec<(u64, u64, u64)>>,
}

#[derive(Debug, Default)]
struct IdMaps {
    /// Deterministic mode: tensor id → sequence number.
    tensor_seq: HashMap<TensorId, u64>,
    /// Deterministic mode: module instance key → sequence number.
    instance_seq: HashMap<u64, u64>,
    /// Tensor wire id → caller label (from tensor facts).
    labels: HashMap<String, String>,
}

/// Shared session state (one per [`TraceSession`] and its clones).
pub(crate) struct Inner {
    pub(crate) uid: u64,
    pub(crate) run: ProfileRun,
    capturing: AtomicBool,
    state: Mutex<State>,
    pub(crate) clock: SessionClock,
    next_span: AtomicU64,
    next_gradient: AtomicU64,
    writer: WriterHandle,
    hooks: Vec<Arc<dyn CaptureHook>>,
    spans: Mutex<SpanTable>,
    ids: Mutex<IdMaps>,
    pub(crate) device_label: String,
    first_error: Mutex<Option<ProbeError>>,
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

/// A probe session writing one `candle-graph/trace/11` trace.
///
/// Cheap to clone (an `Arc`), `Send + Sync`. Formatting and writing run on a writer thread fed
/// by an unbounded channel, so the training thread does no I/O. The trace is written only for
/// the captured step (see [`TraceSession::step`]); `meta` is written when that step begins.
///
/// ```
/// use trace_probe::{ExecutionStep, ProfileRun, TraceSession};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let session = TraceSession::new(ProfileRun::training("demo", 2), std::io::sink())?;
/// for step in 1..=3 {
///     let _step = session.step(step); // a no-op guard except on step 2
///     let _fwd = session.step_span("forward", ExecutionStep::Forward);
///     // ... forward, backward, optimizer ...
/// }
/// let summary = session.finish()?;
/// assert!(summary.events_written > 0);
/// # Ok(()) }
/// ```
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
}

impl TraceSession {
    /// Opens a session writing to `path` (created or truncated).
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
        let file = std::fs::File::create(path).map_err(|source| ProbeError::CreateFile {
            path: path.to_path_buf(),
            source,
        })?;
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
        let hooks = builtin_hooks(&run);
        let inner = Inner {
            uid: NEXT_SESSION_UID.fetch_add(1, Ordering::Relaxed),
            device_label: device_label(&run.device),
            clock: SessionClock::new(run.deterministic),
            state: Mutex::new(State {
                phase: Phase::Waiting,
                contract: run.contract.clone(),
                user_gradient_contract: run.user_gradient_contract,
                meta_written: false,
                panic_hook_registered: false,
                capture_end_hooks_ran: false,
            }),
            run,
            capturing: AtomicBool::new(false),
            next_span: AtomicU64::new(ROOT_SPAN + 1),
            next_gradient: AtomicU64::new(1),
            writer,
            hooks,
            spans: Mutex::new(SpanTable::default()),
            ids: Mutex::new(IdMaps::default()),
            first_error: Mutex::new(None),
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Begins step `step` (one-based) of the loop. On the configured capture step this writes
    /// `meta`, opens the root span (named after the entrypoint, the single measured region,
    /// synchronizing CUDA/Metal devices first) and starts recording until the guard drops. On
    /// every other step it costs one integer comparison and returns an inactive guard.
    pub fn step(&self, step: u64) -> StepGuard {
        if step != self.inner.run.capture_step {
            return StepGuard::inactive();
        }
        self.inner.begin_capture(&self.inner)
    }

    /// Whether the captured step is running now (one relaxed atomic load).
    #[inline]
    pub fn is_capturing(&self) -> bool {
        self.inner.capturing.load(Ordering::Relaxed)
    }

    /// Opens a span of `kind` under the innermost open span of this thread.
    pub fn span(&self, name: &str, kind: SpanKind) -> SpanGuard {
        if !self.is_capturing() {
            return SpanGuard::inactive();
        }
        self.inner
            .open_span(&self.inner, name, kind, None, None, None)
    }

    /// Opens a `function` span marking a training step (forward, backward, optimizer).
    pub fn step_span(&self, name: &str, step: ExecutionStep) -> SpanGuard {
        if !self.is_capturing() {
            return SpanGuard::inactive();
        }
        self.inner.open_span(
            &self.inner,
            name,
            SpanKind::Function,
            Some(step),
            None,
            None,
        )
    }

    /// Opens a `module` span; its module path is the enclosing module span's path plus `/name`
    /// (or `name` at the top), and `instance_key` identifies the module instance.
    pub fn module_span(&self, name: &str, instance_key: Option<u64>) -> SpanGuard {
        if !self.is_capturing() {
            return SpanGuard::inactive();
        }
        self.inner.open_module_span(&self.inner, name, instance_key)
    }

    /// Blocks until every event recorded so far is written and flushed to the writer (or 5 s
    /// passed). Span ends already queue a flush; this is for callers that must know it
    /// happened (e.g. before signalling another process).
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
    /// `failed` terminal saying so), stops the writer thread and restores the panic hook.
    /// Dropping every handle of a session without `finish` writes and flushes what was recorded;
    /// the trace then has no terminal and loads as truncated.
    ///
    /// # Errors
    /// The first I/O error of the writer; [`ProbeError::CaptureStepNotReached`];
    /// [`ProbeError::AlreadyFinished`]; a Candle error the probe met (device synchronisation).
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

    pub(crate) fn hooks(&self) -> &[Arc<dyn CaptureHook>] {
        &self.inner.hooks
    }
}

/// Guard of the captured step (the root span); inactive on every other step. Dropping it closes
/// the root span (synchronizing CUDA/Metal first) and stops recording.
#[must_use = "the captured step ends when this guard drops"]
#[derive(Debug)]
pub struct StepGuard {
    inner: Option<Arc<Inner>>,
    start_ns: u64,
    _not_send: PhantomData<*const ()>,
}

impl StepGuard {
    fn inactive() -> Self {
        Self {
            inner: None,
            start_ns: 0,
            _not_send: PhantomData,
        }
    }

    /// Whether this guard is the captured step.
    pub fn is_active(&self) -> bool {
        self.inner.is_some()
    }
}

impl Drop for StepGuard {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.end_capture(self.start_ns);
        }
    }
}

/// Guard of one span; inactive outside the captured step. The span ends when it drops.
/// `!Send`: a span ends on the thread that opened it.
#[must_use = "the span ends when this guard drops"]
#[derive(Debug)]
pub struct SpanGuard {
    inner: Option<Arc<Inner>>,
    id: u64,
    start_ns: u64,
    _not_send: PhantomData<*const ()>,
}

impl SpanGuard {
    pub(crate) fn inactive() -> Self {
        Self {
            inner: None,
            id: 0,
            start_ns: 0,
            _not_send: PhantomData,
        }
    }

    /// The wire id (`s<n>`) of an active span.
    pub fn id(&self) -> Option<String> {
        self.inner.as_ref().map(|_| span_wire_id(self.id))
    }
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.end_span(self.id, self.start_ns);
        }
    }
}

/// One entry of a thread's span-change log (see [`Inner::span_change_at_real`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanChange {
    /// Index in the thread's log.
    pub(crate) index: usize,
    /// Session ns of the change.
    pub(crate) session_ns: u64,
    /// Innermost open span after the change (0 = none).
    pub(crate) span: u64,
}

/// An open span recorded outside of a guard (the tracing layer keeps these in span extensions).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenSpan {
    pub(crate) id: u64,
    pub(crate) start_ns: u64,
}

impl Inner {
    pub(crate) fn is_capturing(&self) -> bool {
        self.capturing.load(Ordering::Relaxed)
    }

    pub(crate) fn emit(&self, event: TraceEvent) {
        self.writer.send(event);
    }

    fn ctx(&self) -> CaptureContext<'_> {
        CaptureContext { inner: self }
    }

    /// The view of this session a capture plug-in gets.
    pub(crate) fn hook_context(&self) -> CaptureContext<'_> {
        self.ctx()
    }

    pub(crate) fn record_error(&self, err: ProbeError) {
        let mut slot = lock(&self.first_error);
        if slot.is_none() {
            *slot = Some(err);
        }
    }

    fn synchronizes(&self) -> bool {
        !matches!(self.run.device, Device::Cpu)
    }

    fn sync_device(&self) {
        if self.synchronizes() {
            if let Err(err) = self.run.device.synchronize() {
                self.record_error(ProbeError::Candle {
                    context: "synchronizing the device at the measured region's boundary",
                    source: err,
                });
            }
        }
    }

    fn build_meta(&self, contract: CaptureContract) -> RunMeta {
        let run = &self.run;
        let deterministic = run.deterministic;
        let mut meta = RunMeta {
            run_id: if deterministic {
                "run-deterministic".to_string()
            } else {
                format!(
                    "run-{}-{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos())
                        .unwrap_or_default()
                )
            },
            correlation_id: Some(
                run.correlation_id
                    .clone()
                    .unwrap_or_else(|| run.default_correlation_id()),
            ),
            entrypoint: run.entrypoint.clone(),
            phase: Some(run.phase),
            timestamp: if deterministic {
                "1970-01-01T00:00:00.000Z".to_string()
            } else {
                utc_timestamp_now()
            },
            capture_step: Some(run.capture_step),
            warmup_steps: Some(run.warmup_steps),
            device: Some(self.device_label.clone()),
            measured_region_device_synchronized: self.synchronizes(),
            timing_mode: Some(TimingMode::Host),
            capture_contract: Some(contract),
            comparison_identity: run.comparison_identity.clone(),
            tags: run.tags.clone(),
            candle_version: candle_version().map(str::to_string),
            probe_version: Some(PROBE_VERSION.to_string()),
            tracking_allocator_installed: None,
            host: (!deterministic).then(host_info),
        };
        for hook in &self.hooks {
            hook.on_meta(&mut meta);
        }
        meta
    }

    fn write_meta(&self, state: &mut State) {
        if state.meta_written {
            return;
        }
        let meta = self.build_meta(state.contract.clone());
        self.emit(TraceEvent::Meta(MetaEvent {
            schema: WRITE_VERSION.as_str().to_string(),
            run: meta,
        }));
        state.meta_written = true;
    }

    fn begin_capture(&self, this: &Arc<Inner>) -> StepGuard {
        let mut state = lock(&self.state);
        if state.phase != Phase::Waiting {
            return StepGuard::inactive();
        }
        self.write_meta(&mut state);
        self.sync_device();
        let (start_ns, start_real) = self.clock.now_with_process_ns();
        let thread = thread_key();
        self.emit(TraceEvent::SpanStart(SpanStartEvent {
            id: span_wire_id(ROOT_SPAN),
            parent_id: None,
            name: self.run.entrypoint.clone(),
            start_ns,
            span_kind: SpanKind::Function,
            measured: true,
            step: None,
            module_path: None,
            instance_key: None,
        }));
        self.log_span_open(
            SpanInfo {
                id: ROOT_SPAN,
                parent: None,
                name: self.run.entrypoint.clone(),
                kind: SpanKind::Function,
                step: None,
                module_path: None,
                start_ns,
                thread,
            },
            start_real,
        );
        push_span(self.uid, ROOT_SPAN);
        state.phase = Phase::Capturing;
        crate::panic_hook::register(self.uid, Arc::downgrade(this));
        state.panic_hook_registered = true;
        self.capturing.store(true, Ordering::Release);
        drop(state);
        for hook in &self.hooks {
            hook.on_capture_start(&self.ctx());
        }
        StepGuard {
            inner: Some(Arc::clone(this)),
            start_ns,
            _not_send: PhantomData,
        }
    }

    fn run_capture_end_hooks(&self) {
        {
            let mut state = lock(&self.state);
            if state.capture_end_hooks_ran {
                return;
            }
            state.capture_end_hooks_ran = true;
        }
        for hook in &self.hooks {
            hook.on_capture_end(&self.ctx());
        }
    }

    fn end_capture(&self, start_ns: u64) {
        if lock(&self.state).phase != Phase::Capturing {
            pop_span(self.uid, ROOT_SPAN);
            return;
        }
        self.run_capture_end_hooks();
        self.sync_device();
        let (end_ns, end_real) = self.clock.now_with_process_ns();
        let mut state = lock(&self.state);
        if state.phase != Phase::Capturing {
            drop(state);
            pop_span(self.uid, ROOT_SPAN);
            return;
        }
        self.capturing.store(false, Ordering::Release);
        state.phase = Phase::Captured;
        self.emit(TraceEvent::SpanEnd(SpanEndEvent {
            id: span_wire_id(ROOT_SPAN),
            duration_ns: end_ns.saturating_sub(start_ns),
        }));
        self.writer.flush_async();
        drop(state);
        self.log_span_close(ROOT_SPAN, end_ns, end_real);
        pop_span(self.uid, ROOT_SPAN);
    }

    fn log_span_open(&self, info: SpanInfo, real_ns: u64) {
        let mut table = lock(&self.spans);
        let id = info.id as usize;
        table
            .changes
            .entry(info.thread)
            .or_default()
            .push((info.start_ns, info.id, real_ns));
        if table.info.len() < id {
            table.info.resize(
                id,
                SpanInfo {
                    id: 0,
                    parent: None,
                    name: String::new(),
                    kind: SpanKind::Function,
                    step: None,
                    module_path: None,
                    start_ns: 0,
                    thread: 0,
                },
            );
        }
        table.info[id - 1] = info;
    }

    fn log_span_close(&self, span: u64, end_ns: u64, real_ns: u64) {
        let innermost_after = innermost_span_after_pop(self.uid, span);
        let mut table = lock(&self.spans);
        let thread = thread_key();
        table
            .changes
            .entry(thread)
            .or_default()
            .push((end_ns, innermost_after, real_ns));
    }

    pub(crate) fn span_info(&self, span: u64) -> Option<SpanInfo> {
        let table = lock(&self.spans);
        let idx = usize::try_from(span).ok()?.checked_sub(1)?;
        table.info.get(idx).filter(|i| i.id == span).cloned()
    }

    pub(crate) fn span_at(&self, thread: u64, ts_ns: u64) -> Option<u64> {
        let table = lock(&self.spans);
        let changes = table.changes.get(&thread)?;
        let idx = changes.partition_point(|(ts, _, _)| *ts <= ts_ns);
        let (_, span, _) = *changes.get(idx.checked_sub(1)?)?;
        (span != 0).then_some(span)
    }

    /// The last span change of `thread` at or before real time `real_ns` (ns since the process
    /// clock base): its index in the thread's log, session ns and innermost span after it (0 =
    /// none). `None` when the thread logged no change by then.
    pub(crate) fn span_change_at_real(&self, thread: u64, real_ns: u64) -> Option<SpanChange> {
        let table = lock(&self.spans);
        let changes = table.changes.get(&thread)?;
        let idx = changes
            .partition_point(|(_, _, real)| *real <= real_ns)
            .checked_sub(1)?;
        let (session_ns, span, _) = changes[idx];
        Some(SpanChange {
            index: idx,
            session_ns,
            span,
        })
    }

    fn parent_and_step(
        &self,
        explicit: Option<ExecutionStep>,
    ) -> (u64, Option<ExecutionStep>, Option<String>, SpanKind) {
        let parent = innermost_span(self.uid).unwrap_or(ROOT_SPAN);
        let table = lock(&self.spans);
        let info = usize::try_from(parent)
            .ok()
            .and_then(|p| table.info.get(p.wrapping_sub(1)));
        let step = explicit.or_else(|| info.and_then(|i| i.step));
        let path = info.and_then(|i| i.module_path.clone());
        let kind = info.map(|i| i.kind).unwrap_or(SpanKind::Function);
        (parent, step, path, kind)
    }

    pub(crate) fn open_span(
        &self,
        this: &Arc<Inner>,
        name: &str,
        kind: SpanKind,
        step: Option<ExecutionStep>,
        module_path: Option<String>,
        instance_key: Option<String>,
    ) -> SpanGuard {
        match self.open_span_raw(name, kind, step, module_path, instance_key) {
            Some(open) => SpanGuard {
                inner: Some(Arc::clone(this)),
                id: open.id,
                start_ns: open.start_ns,
                _not_send: PhantomData,
            },
            None => SpanGuard::inactive(),
        }
    }

    pub(crate) fn open_module_span(
        &self,
        this: &Arc<Inner>,
        name: &str,
        instance_key: Option<u64>,
    ) -> SpanGuard {
        match self.open_module_span_raw(name, instance_key) {
            Some(open) => SpanGuard {
                inner: Some(Arc::clone(this)),
                id: open.id,
                start_ns: open.start_ns,
                _not_send: PhantomData,
            },
            None => SpanGuard::inactive(),
        }
    }

    /// Opens a module span; the path extends the enclosing module span's path.
    pub(crate) fn open_module_span_raw(
        &self,
        name: &str,
        instance_key: Option<u64>,
    ) -> Option<OpenSpan> {
        let key = instance_key.map(|k| self.instance_wire_key(k));
        self.open_span_raw(name, SpanKind::Module, None, None, key)
    }

    /// Opens a span without a guard (the caller must call [`Inner::end_span`]).
    pub(crate) fn open_span_raw(
        &self,
        name: &str,
        kind: SpanKind,
        step: Option<ExecutionStep>,
        module_path: Option<String>,
        instance_key: Option<String>,
    ) -> Option<OpenSpan> {
        if !self.is_capturing() {
            return None;
        }
        let id = self.next_span.fetch_add(1, Ordering::Relaxed);
        let (parent, effective_step, parent_path, parent_kind) = self.parent_and_step(step);
        let module_path = match (kind, module_path) {
            (_, Some(p)) => Some(p),
            (SpanKind::Module, None) => Some(match (parent_kind, parent_path) {
                (SpanKind::Module, Some(p)) => format!("{p}/{name}"),
                _ => name.to_string(),
            }),
            _ => None,
        };
        let (start_ns, start_real) = self.clock.now_with_process_ns();
        self.emit(TraceEvent::SpanStart(SpanStartEvent {
            id: span_wire_id(id),
            parent_id: Some(span_wire_id(parent)),
            name: name.to_string(),
            start_ns,
            span_kind: kind,
            measured: false,
            step,
            module_path: module_path.clone(),
            instance_key,
        }));
        self.log_span_open(
            SpanInfo {
                id,
                parent: Some(parent),
                name: name.to_string(),
                kind,
                step: effective_step,
                module_path,
                start_ns,
                thread: thread_key(),
            },
            start_real,
        );
        push_span(self.uid, id);
        Some(OpenSpan { id, start_ns })
    }

    /// Closes a span opened by [`Inner::open_span_raw`]; outside the capture it only forgets it.
    pub(crate) fn end_span(&self, id: u64, start_ns: u64) {
        if !self.is_capturing() {
            pop_span(self.uid, id);
            return;
        }
        if !self.hooks.is_empty() {
            if let Some(info) = self.span_info(id) {
                for hook in &self.hooks {
                    hook.on_span_end(&self.ctx(), &info);
                }
            }
        }
        let (end_ns, end_real) = self.clock.now_with_process_ns();
        self.emit(TraceEvent::SpanEnd(SpanEndEvent {
            id: span_wire_id(id),
            duration_ns: end_ns.saturating_sub(start_ns),
        }));
        self.writer.flush_async();
        self.log_span_close(id, end_ns, end_real);
        pop_span(self.uid, id);
    }

    /// The innermost open span of this thread for recording a fact (root when none).
    pub(crate) fn current_span(&self) -> u64 {
        innermost_span(self.uid).unwrap_or(ROOT_SPAN)
    }

    /// The effective step of the innermost open span of this thread.
    pub(crate) fn current_step(&self) -> Option<ExecutionStep> {
        let span = self.current_span();
        let table = lock(&self.spans);
        usize::try_from(span)
            .ok()
            .and_then(|s| table.info.get(s.wrapping_sub(1)))
            .and_then(|i| i.step)
    }

    /// The session's wire id of a tensor: `t<id>` (Candle's id), or `t<seq>` in deterministic
    /// mode.
    pub(crate) fn tensor_wire_id(&self, id: TensorId) -> String {
        if self.run.deterministic {
            let mut ids = lock(&self.ids);
            let next = ids.tensor_seq.len() as u64 + 1;
            let seq = *ids.tensor_seq.entry(id).or_insert(next);
            return format!("t{seq}");
        }
        crate::facts::tensor_id_string(id)
    }

    /// A module instance key (sequence number of first sight in deterministic mode).
    pub(crate) fn instance_wire_key(&self, key: u64) -> String {
        if self.run.deterministic {
            let mut ids = lock(&self.ids);
            let next = ids.instance_seq.len() as u64 + 1;
            let seq = *ids.instance_seq.entry(key).or_insert(next);
            return format!("i{seq}");
        }
        key.to_string()
    }

    pub(crate) fn remember_label(&self, tensor_wire_id: &str, label: &str) {
        lock(&self.ids)
            .labels
            .insert(tensor_wire_id.to_string(), label.to_string());
    }

    pub(crate) fn label_of(&self, tensor_wire_id: &str) -> Option<String> {
        lock(&self.ids).labels.get(tensor_wire_id).cloned()
    }

    pub(crate) fn next_gradient_event_id(&self) -> String {
        format!(
            "gradient-{}",
            self.next_gradient.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Called by the panic hook on a thread with one of this session's spans open.
    pub(crate) fn fail_from_panic(&self, reason: &str) {
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        if state.phase != Phase::Capturing {
            return;
        }
        state.phase = Phase::Failed;
        self.capturing.store(false, Ordering::Release);
        drop(state);
        self.run_capture_end_hooks();
        let dropped = self.finish_hooks();
        self.emit(TraceEvent::Terminal(TerminalEvent {
            outcome: TerminalOutcome::Failed,
            timestamp_ns: self.clock.now_ns(),
            reason: Some(reason.to_string()),
            dropped_events: dropped,
        }));
        // The process may abort right after the hook (`panic = "abort"`): wait for the writer.
        self.writer.flush_sync(Duration::from_secs(1));
    }

    fn finish_hooks(&self) -> Option<u64> {
        let mut dropped: Option<u64> = None;
        for hook in &self.hooks {
            if let Some(n) = hook.on_finish(&self.ctx()) {
                dropped = Some(dropped.unwrap_or(0) + n);
            }
        }
        dropped
    }

    fn finish(&self) -> Result<TraceSummary, ProbeError> {
        let mut state = lock(&self.state);
        let phase = state.phase;
        let mut result_err = None;
        let (outcome, dropped) = match phase {
            Phase::Finished => return Err(ProbeError::AlreadyFinished),
            Phase::Failed => (TerminalOutcome::Failed, None),
            Phase::Waiting => {
                self.write_meta(&mut state);
                let reason = format!(
                    "capture step {} was never reached before finish()",
                    self.run.capture_step
                );
                self.emit(TraceEvent::Terminal(TerminalEvent {
                    outcome: TerminalOutcome::Failed,
                    timestamp_ns: self.clock.now_ns(),
                    reason: Some(reason),
                    dropped_events: None,
                }));
                result_err = Some(ProbeError::CaptureStepNotReached {
                    step: self.run.capture_step,
                });
                (TerminalOutcome::Failed, None)
            }
            Phase::Capturing => {
                // Finished now, so a concurrent `finish` or the step guard's drop writes nothing.
                state.phase = Phase::Finished;
                self.capturing.store(false, Ordering::Release);
                drop(state);
                self.run_capture_end_hooks();
                let dropped = self.finish_hooks();
                self.emit(TraceEvent::Terminal(TerminalEvent {
                    outcome: TerminalOutcome::Failed,
                    timestamp_ns: self.clock.now_ns(),
                    reason: Some("finish() was called inside the captured step".to_string()),
                    dropped_events: dropped,
                }));
                state = lock(&self.state);
                (TerminalOutcome::Failed, dropped)
            }
            Phase::Captured => {
                state.phase = Phase::Finished;
                drop(state);
                let dropped = self.finish_hooks();
                self.emit(TraceEvent::Terminal(TerminalEvent {
                    outcome: TerminalOutcome::Complete,
                    timestamp_ns: self.clock.now_ns(),
                    reason: None,
                    dropped_events: dropped,
                }));
                state = lock(&self.state);
                (TerminalOutcome::Complete, dropped)
            }
        };
        state.phase = Phase::Finished;
        let registered = std::mem::replace(&mut state.panic_hook_registered, false);
        drop(state);
        if registered {
            crate::panic_hook::release(self.uid);
        }
        let written = self.writer.finish()?;
        if let Some(err) = result_err {
            return Err(err);
        }
        if let Some(err) = lock(&self.first_error).take() {
            return Err(err);
        }
        Ok(TraceSummary {
            outcome,
            events_written: written,
            dropped_events: dropped,
        })
    }
}

/// The innermost span of `uid` on this thread once `span` is popped (0 = none).
fn innermost_span_after_pop(uid: u64, span: u64) -> u64 {
    SPAN_STACK
        .try_with(|stack| {
            stack.try_borrow().ok().and_then(|s| {
                s.iter()
                    .rev()
                    .filter(|e| e.0 == uid && e.1 != span)
                    .map(|e| e.1)
                    .next()
            })
        })
        .ok()
        .flatten()
        .unwrap_or(0)
}

impl Drop for Inner {
    fn drop(&mut self) {
        let registered = lock(&self.state).panic_hook_registered;
        if registered {
            crate::panic_hook::release(self.uid);
        }
    }
}
