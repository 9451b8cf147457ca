//! The storage plug-in: joins the storage capture and device samples to a
//! [`crate::TraceSession`] through the plug-in interface ([`crate::plugin`]).
//!
//! In host-clock mode the training thread builds no memory event and attributes none: the
//! drainer thread joins the ring and hands what waits (`PendingEvent`s: hook times, threads,
//! storage facts) to the writer thread, which attributes each to the span open on its thread at
//! its hook time (the session's span log, shared) and writes it; span ends only take a device
//! sample. What the capture start, a registration or the capture end queue goes the same way.
//!
//! In deterministic mode the capture runs as in host-clock mode, but its events are queued
//! until the capture ends and then written in hook-time order with storage ids `st<n>`
//! (sequence numbers of first sight, shared with tensor facts' `storage_id`) and logical
//! timestamps: the `k`-th memory event after a span change of its thread (found by real time in
//! the session's span-change log) sits `k` ns after that change's logical reading, so it stays
//! inside the span it is attributed to. Device samples are off (not reproducible).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor, TensorId, Var};
use trace_wire::{
    AllocSitesEvent, CategorySource, CoverageLevel, DroppedEventsEvent, ExecutionStep as Pass,
    MemoryCategory, RunMeta, SiteEvent, TraceEvent,
};

use super::construction::Constructed;
pub(crate) use super::declared::DeclaredParameters;
use super::events::{Attribution, Located, PendingEvent};
use super::registry::RegisterAs;
use super::tracker::PreSessionStorages;
use super::window::{self as capture, CaptureSummary, Sink};
use crate::device::DeviceLabel;
use crate::optim_state::StateSlot;
use crate::session::attribution::SpanInfo;
use crate::session::attribution::SpanLog;
use crate::session::plugin::{span_wire_id, CaptureContext, CapturePlugin};
use crate::writer::Deferred;
use trace_wire::labels::OPTIMIZER_STATE;

/// Reason written for physical memory in deterministic mode.
const DETERMINISTIC_PHYSICAL_REASON: &str =
    "deterministic mode: RSS and heap samples are not reproducible, so none are taken";

/// Deterministic mode: storage ids and per-slot offsets of the logical timeline.
#[derive(Debug, Default)]
struct Sequences {
    /// Capture storage id → sequence number (`st<n>`), in order of first sight.
    storages: HashMap<String, u64>,
    /// Span change (thread, index) → memory events placed after it so far.
    slots: HashMap<(u64, u64), u64>,
}

/// Numbers the storage plug-ins of the process (a session tracker's owner).
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The allocator and device-sample plug-in of one session.
pub(crate) struct StoragePlugin {
    /// This plug-in's number (owner of the session tracker it started).
    owner: u64,
    /// Whether the session tracker started at creation (`Err`: why not).
    tracking: Mutex<Result<(), String>>,
    device: Device,
    device_label: DeviceLabel,
    deterministic: bool,
    /// The window was opened by this session.
    active: AtomicBool,
    /// Ring drops before the window opened.
    dropped_at_start: AtomicU64,
    /// Parameter names and tensor ids (from a `ProbedOptimizer`), for gradient labels.
    params: Mutex<Vec<(String, TensorId)>>,
    /// The last window's figures.
    summary: Mutex<Option<CaptureSummary>>,
    /// Deterministic mode's sequence numbers.
    sequences: Mutex<Sequences>,
    /// Registry tags this session created before its window (parameters, optimizer state):
    /// forgotten when the session finishes or is dropped, so they never reach another session
    /// of the process as stale `pre_existing` storages or as aliases of a reused address.
    own_tags: Mutex<Vec<u32>>,
    /// Allocation sites: the threshold in bytes (`Some(0)`: off; `None`: the walker's default,
    /// [`trace_alloc::sites::default_threshold_bytes`]).
    site_threshold: Option<usize>,
    /// The last window's sites: their raw stacks (by site id) and account, taken at capture
    /// end; then their `site` events (stack ids from the session's table), written after it.
    sites: Mutex<SitesToWrite>,
    /// The run's declared weights, registered as parameters at capture start.
    declared: DeclaredParameters,
    /// Weights declared on the session after it started, registered with them.
    late_named: Mutex<Vec<(String, candle_core::Tensor)>>,
    /// The loss's graph being registered beside backward.
    graph: super::graph_beside::GraphBeside,
}

/// The sites of a session on their way to the trace.
#[derive(Debug, Default)]
enum SitesToWrite {
    /// Nothing captured (yet).
    #[default]
    None,
    /// Taken at capture end.
    Raw(super::sites::SiteTable, super::sites::SiteCapture),
    /// Stacks added to the session's table at finish.
    Built(Vec<SiteEvent>, super::sites::SiteCapture),
}

impl StoragePlugin {
    /// The plug-in of a session being created; with `track` on a CPU device it starts the
    /// session tracker (every storage allocated from now on is known at capture start).
    pub(crate) fn new(
        device: &Device,
        deterministic: bool,
        track: bool,
        site_threshold: Option<usize>,
    ) -> Self {
        let owner = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
        // Whether the device's allocations pass through the ledger (once per process; the
        // logical-memory contract reads the result).
        #[cfg(feature = "cuda-ledger")]
        if let Device::Cuda(dev) = device {
            let _ = crate::cuda_ledger::interpose::observing(dev);
        }
        let tracking = match device {
            Device::Cpu if track => capture::lock().start_tracking(owner),
            Device::Cpu => Err(
                "tracking before the captured step is off (ProfileRun::track_pre_existing(false))"
                    .to_string(),
            ),
            _ => Err("registration only on this device".to_string()),
        };
        Self {
            owner,
            tracking: Mutex::new(tracking),
            device: device.clone(),
            device_label: DeviceLabel::of(device),
            deterministic,
            active: AtomicBool::new(false),
            dropped_at_start: AtomicU64::new(0),
            params: Mutex::new(Vec::new()),
            summary: Mutex::new(None),
            sequences: Mutex::new(Sequences::default()),
            own_tags: Mutex::new(Vec::new()),
            site_threshold: if matches!(device, Device::Cpu) {
                site_threshold
            } else {
                Some(0)
            },
            sites: Mutex::new(SitesToWrite::None),
            declared: DeclaredParameters::default(),
            late_named: Mutex::new(Vec::new()),
            graph: Default::default(),
        }
    }

    /// The run's declared weights, registered as parameters at capture start.
    pub(crate) fn with_parameters(mut self, declared: DeclaredParameters) -> Self {
        self.declared = declared;
        self
    }

    /// At capture start, before the tracker's storages are adopted: registers every declared
    /// weight not yet known (a `ProbedOptimizer` registers its own) as a `parameter` storage
    /// labelled with its name.
    fn register_declared_parameters(&self) {
        let mut list = self.declared.list();
        list.extend(
            self.late_named
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        if list.is_empty() {
            return;
        }
        let mut st = capture::lock();
        let mut created = Vec::new();
        for (name, t) in &list {
            let reg = st.register(
                t,
                RegisterAs::category(MemoryCategory::Parameter).label(name.clone()),
            );
            if let super::registry::Registration::New(tag) = reg {
                created.push(tag);
            }
        }
        drop(st);
        self.remember_tags(created);
    }

    /// At capture start (the meta, before the measured region): the walker calibration (once per
    /// process), this thread's stack bounds, and the settings of the window.
    fn configure_sites(&self) {
        let settings = (self.site_threshold != Some(0)
            && trace_alloc::sites::SUPPORTED
            && trace_alloc::is_installed()
            && crate::storage::calibrate::calibrate().is_ok())
        .then(|| {
            trace_alloc::sites::note_thread_bounds();
            let unwinder = super::sites::walker().unwinder;
            let threshold = self
                .site_threshold
                .unwrap_or_else(|| trace_alloc::sites::default_threshold_bytes(unwinder));
            (threshold, unwinder)
        });
        capture::lock().configure_sites(settings);
    }

    fn remember_tags(&self, tags: impl IntoIterator<Item = u32>) {
        self.own_tags
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(tags);
    }

    /// Forgets the registry entries this session created (see `own_tags`).
    fn forget_own_tags(&self) {
        let tags = std::mem::take(&mut *self.own_tags.lock().unwrap_or_else(|e| e.into_inner()));
        if tags.is_empty() {
            return;
        }
        let mut st = capture::lock();
        for tag in tags {
            st.forget_entry(tag);
        }
    }

    /// At capture start (the meta): the storages the session tracker saw allocated and still
    /// live become `pre_existing` session entries; returns what is known about the storages
    /// live now (`None` off CPU: registration only).
    fn adopt_live_storages(&self) -> Option<PreSessionStorages> {
        if !matches!(self.device, Device::Cpu) {
            return None;
        }
        let started = self
            .tracking
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Some(match started {
            Ok(()) => {
                let (outcome, tags) = capture::lock().adopt_live_storages(self.owner);
                self.remember_tags(tags);
                outcome
            }
            Err(why) => PreSessionStorages::Untracked(why),
        })
    }

    fn sample(&self, ctx: &CaptureContext<'_>) {
        // Deterministic mode writes identical bytes for identical runs: RSS and heap figures
        // are not reproducible, so no samples (the contract's physical_memory says none).
        if self.deterministic {
            return;
        }
        let ev = crate::device_mem::sample(&self.device, self.device_label, ctx.clock().now_ns());
        if !ev.is_empty() {
            ctx.emit(TraceEvent::DeviceMemory(ev));
        }
    }

    fn attribution<'a, 'b>(&'a self, ctx: &'a CaptureContext<'b>) -> SessionAttribution<'a, 'b> {
        SessionAttribution {
            ctx,
            sequences: self.deterministic.then_some(&self.sequences),
        }
    }

    fn drain(&self, ctx: &CaptureContext<'_>) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        if self.deterministic {
            // Written at the capture's end, in hook-time order (see `pump_queued`).
            capture::lock().pump_queued();
            return;
        }
        let pending = capture::lock().drain_pending();
        emit_attributed_later(ctx, pending);
    }
}

/// Host-clock mode: hands `pending` to the writer thread, which attributes each event to its
/// span and builds the `memory` events there, at this place in the event order. The training
/// thread only pays one queue push. The answers are the same as on the training thread now: an
/// event's span is found by its (past) hook time in its thread's span-change log, and a log
/// only grows with later changes.
fn emit_attributed_later(ctx: &CaptureContext<'_>, pending: Vec<PendingEvent>) {
    if pending.is_empty() {
        return;
    }
    ctx.emit_deferred(attributed_later(HostAttribution::of(ctx), pending));
}

/// The writer-thread work that attributes `pending` and builds their `memory` events.
fn attributed_later(attr: HostAttribution, pending: Vec<PendingEvent>) -> Deferred {
    Box::new(move || {
        let _quiet = trace_alloc::IgnoreAllocs::new();
        super::events::attribute(pending, &attr)
            .into_iter()
            .map(TraceEvent::Memory)
            .collect()
    })
}

/// Host-clock [`Attribution`] that owns what it needs (the session's span log and clock base),
/// so it runs on the writer thread: the same answers as [`SessionAttribution`] in host mode.
#[derive(Clone)]
struct HostAttribution {
    spans: Arc<SpanLog>,
    start_process_ns: u64,
    root: u64,
}

impl HostAttribution {
    fn of(ctx: &CaptureContext<'_>) -> Self {
        Self {
            spans: ctx.span_log(),
            start_process_ns: ctx.clock().start_process_ns(),
            root: ctx.root_span(),
        }
    }
}

impl Attribution for HostAttribution {
    fn session_ns(&self, hook_ns: u64) -> u64 {
        hook_ns.saturating_sub(self.start_process_ns)
    }

    fn span_at(&self, thread: u64, ts_ns: u64) -> (Option<String>, Option<Pass>) {
        let span = self.spans.span_at(thread, ts_ns).unwrap_or(self.root);
        (Some(span_wire_id(span)), self.spans.span_pass(span))
    }
}

/// [`Attribution`] through a session's capture context (with the sequences in deterministic
/// mode).
struct SessionAttribution<'a, 'b> {
    ctx: &'a CaptureContext<'b>,
    sequences: Option<&'a Mutex<Sequences>>,
}

impl SessionAttribution<'_, '_> {
    fn span_and_pass(&self, span: u64) -> (Option<String>, Option<Pass>) {
        let pass = self.ctx.span_info(span).and_then(|i| i.pass);
        (Some(self.ctx.span_id(span)), pass)
    }
}

/// `st<n>` for capture id `raw`, numbering ids in order of first sight.
fn sequence_id(sequences: &Mutex<Sequences>, raw: &str) -> String {
    let mut seq = sequences.lock().unwrap_or_else(|e| e.into_inner());
    let next = seq.storages.len() as u64 + 1;
    let n = *seq.storages.entry(raw.to_string()).or_insert(next);
    format!("st{n}")
}

impl Attribution for SessionAttribution<'_, '_> {
    fn session_ns(&self, hook_ns: u64) -> u64 {
        self.ctx.clock().process_ns_to_session_ns(hook_ns)
    }

    fn span_at(&self, thread: u64, ts_ns: u64) -> (Option<String>, Option<Pass>) {
        let span = self
            .ctx
            .span_at(thread, ts_ns)
            .unwrap_or(self.ctx.root_span());
        self.span_and_pass(span)
    }

    fn deterministic(&self) -> bool {
        self.sequences.is_some()
    }

    fn locate(&self, thread: u64, hook_ns: u64) -> Located {
        let root = self.ctx.root_span();
        // A thread with no span change logged by then (a worker thread, or a time before the
        // thread's first span) is attributed to the root span, as in host-clock mode, and
        // placed on the timeline of the thread that opened the root span.
        let (slot_thread, change, span) = match self.ctx.span_change_at_real(thread, hook_ns) {
            Some(c) => (thread, Some(c), if c.span == 0 { root } else { c.span }),
            None => {
                let root_thread = self.ctx.span_info(root).map(|i| i.thread).unwrap_or(0);
                (
                    root_thread,
                    self.ctx.span_change_at_real(root_thread, hook_ns),
                    root,
                )
            }
        };
        let (span, pass) = self.span_and_pass(span);
        let (index, base_ns) = match change {
            Some(c) => (c.index as u64, c.session_ns),
            // Before the root span opened: at its start (the first change of its thread).
            None => (
                u64::MAX,
                self.ctx.span_info(root).map(|i| i.start_ns).unwrap_or(0),
            ),
        };
        Located {
            slot: (slot_thread, index),
            base_ns,
            span,
            pass,
        }
    }

    fn next_in_slot(&self, slot: (u64, u64)) -> u64 {
        let Some(sequences) = self.sequences else {
            return 0;
        };
        let mut seq = sequences.lock().unwrap_or_else(|e| e.into_inner());
        let k = seq.slots.entry(slot).or_insert(0);
        *k += 1;
        // A tick holds LOGICAL_TICK_NS - 1 events; beyond that they share the last ns.
        (*k).min(trace_alloc::clock::LOGICAL_TICK_NS - 1)
    }

    fn storage_wire_id(&self, raw: &str) -> String {
        match self.sequences {
            Some(s) => sequence_id(s, raw),
            None => raw.to_string(),
        }
    }
}

impl CapturePlugin for StoragePlugin {
    fn on_meta(&self, meta: &mut RunMeta) {
        meta.tracking_allocator_installed = Some(trace_alloc::is_installed());
        let contract = meta.capture_contract.get_or_insert_with(Default::default);
        self.register_declared_parameters();
        let pre_session = self.adopt_live_storages();
        self.configure_sites();
        let (level, reason) =
            capture::logical_memory_contract_with(self.device_label, pre_session.as_ref());
        contract.logical_memory = level;
        match reason {
            Some(r) => {
                contract.reasons.insert("logical_memory".into(), r);
            }
            None => {
                contract.reasons.remove("logical_memory");
            }
        }
        if self.deterministic && contract.physical_memory == CoverageLevel::None {
            contract.reasons.insert(
                "physical_memory".into(),
                DETERMINISTIC_PHYSICAL_REASON.into(),
            );
        }
        if contract.physical_memory == CoverageLevel::None && !self.deterministic {
            let observable = match &self.device {
                Device::Cpu => crate::device_mem::resident_bytes().is_some(),
                Device::Cuda(_) => cfg!(feature = "cuda"),
                Device::Metal(_) => cfg!(feature = "metal"),
            };
            if observable {
                contract.physical_memory = CoverageLevel::Partial;
                contract.reasons.insert(
                    "physical_memory".into(),
                    "device samples at capture start and span ends only".into(),
                );
            }
        }
    }

    fn around_optimizer_construction(
        &self,
        layout: Option<&[StateSlot]>,
        construct: &mut dyn FnMut(),
    ) {
        #[cfg(feature = "cuda-ledger")]
        if matches!(self.device, Device::Cuda(_)) {
            // The moments are device allocations: the ledger marks those made now.
            let ((), _bytes) = crate::cuda_ledger::construction(
                "optimizer state",
                MemoryCategory::Optimizer,
                construct,
            );
            return;
        }
        if !matches!(self.device, Device::Cpu) {
            return construct();
        }
        let mut st = capture::lock();
        let before: std::collections::HashSet<u32> =
            st.registry().entries().iter().map(|e| e.tag).collect();
        let ((), found) = st.capture_construction_for(
            self.owner,
            Constructed {
                label: OPTIMIZER_STATE,
                category: MemoryCategory::Optimizer,
                layout,
            },
            construct,
        );
        self.remember_tags(
            st.registry()
                .entries()
                .iter()
                .map(|e| e.tag)
                .filter(|t| !before.contains(t)),
        );
        if found.is_none()
            && trace_alloc::is_installed()
            && crate::storage::calibrate::calibrate().is_ok()
        {
            st.declare_unknown_pre_existing(
                "the optimizer state allocated during construction could not be observed",
            );
        }
    }

    fn on_declared_parameters(&self, named: &[(String, candle_core::Tensor)]) {
        self.late_named
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(named.iter().cloned());
    }

    fn on_parameters(&self, params: &[(String, Var)]) {
        let mut st = capture::lock();
        let mut names = self.params.lock().unwrap_or_else(|e| e.into_inner());
        names.clear();
        let mut created = Vec::new();
        for (name, var) in params {
            names.push((name.clone(), var.as_tensor().id()));
            let reg = st.register(
                var.as_tensor(),
                RegisterAs::category(MemoryCategory::Parameter).label(name.clone()),
            );
            if let super::registry::Registration::New(tag) = reg {
                created.push(tag);
            }
        }
        drop(st);
        drop(names);
        self.remember_tags(created);
    }

    fn on_capture_start(&self, ctx: &CaptureContext<'_>) {
        self.sample(ctx);
        self.dropped_at_start
            .store(trace_alloc::dropped_events(), Ordering::Relaxed);
        let own = self
            .own_tags
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let begun =
            capture::lock().begin_session(self.device_label, ctx.clock().now_ns(), Some(&own));
        let opened = match begun {
            capture::Begun::Window => true,
            capture::Begun::RegistrationOnly(pending) => {
                // Without a window the session's own pre-existing storages are still written.
                if self.deterministic {
                    for e in super::events::attribute(pending, &self.attribution(ctx)) {
                        ctx.emit(TraceEvent::Memory(e));
                    }
                } else {
                    emit_attributed_later(ctx, pending);
                }
                false
            }
        };
        self.active.store(opened, Ordering::Relaxed);
        if opened && !self.deterministic {
            // From now on the drainer thread joins the ring's events and hands them to the
            // writer thread, which attributes them: span ends need not drain.
            let sender = ctx.deferred_sender();
            let attr = HostAttribution::of(ctx);
            capture::lock().set_sink(Sink(Box::new(move |pending| {
                sender.send_deferred(attributed_later(attr.clone(), pending));
            })));
        }
    }

    fn on_loss(&self, _ctx: &CaptureContext<'_>, loss: &Tensor) {
        if self.active.load(Ordering::Relaxed) {
            self.graph.register(loss, self.deterministic);
        }
    }

    fn on_backward_end(&self, _exact: bool) {
        self.graph.join();
    }

    fn on_gradients(&self, _ctx: &CaptureContext<'_>, grads: &GradStore) {
        self.graph.join();
        if self.active.load(Ordering::Relaxed) {
            let names = self.params.lock().unwrap_or_else(|e| e.into_inner());
            capture::lock().register_grads(grads, &names);
        }
    }

    fn on_span_end(&self, ctx: &CaptureContext<'_>, _span: &SpanInfo) {
        self.sample(ctx);
        if self.deterministic || !capture::drainer_delivers() {
            // Deterministic mode joins here (written at the end); a backlog the drainer left,
            // or a drainer standing aside (a lowered ring capacity), is joined here too.
            self.drain(ctx);
        }
    }

    fn on_capture_end(&self, ctx: &CaptureContext<'_>) {
        self.graph.join();
        self.sample(ctx);
        if !self.active.swap(false, Ordering::Relaxed) {
            return;
        }
        let (summary, sites) = {
            let mut st = capture::lock();
            let summary = if self.deterministic {
                let (events, summary) = st.end(&self.attribution(ctx));
                for e in events {
                    ctx.emit(TraceEvent::Memory(e));
                }
                summary
            } else {
                let (pending, summary) = st.end_pending();
                emit_attributed_later(ctx, pending);
                summary
            };
            (summary, st.take_sites())
        };
        if let Some(capture) = summary.sites.clone() {
            *self.sites.lock().unwrap_or_else(|e| e.into_inner()) =
                SitesToWrite::Raw(sites, capture);
        }
        let dropped = summary
            .dropped_events
            .saturating_sub(self.dropped_at_start.load(Ordering::Relaxed));
        if dropped > 0 {
            ctx.emit(TraceEvent::DroppedEvents(DroppedEventsEvent {
                timestamp_ns: ctx.clock().now_ns(),
                dropped_events: dropped,
            }));
        }
        *self.summary.lock().unwrap_or_else(|e| e.into_inner()) = Some(summary);
    }

    fn on_finish(&self, ctx: &CaptureContext<'_>) -> Option<u64> {
        capture::lock().stop_tracking(self.owner);
        {
            let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
            if let SitesToWrite::Raw(table, capture) = std::mem::take(&mut *sites) {
                // Outside the measured region: the stacks are symbolised into the session's
                // table (shared with the samples), without the hook's own leading frames.
                let mut hook_frame = HashMap::new();
                let events = table
                    .stacks()
                    .iter()
                    .enumerate()
                    .map(|(id, raw)| {
                        let addresses: Vec<u64> = raw
                            .iter()
                            .map(|&a| a as u64)
                            .skip_while(|&a| {
                                *hook_frame
                                    .entry(a)
                                    .or_insert_with(|| trace_sampler::stacks::is_hook_frame(a))
                            })
                            .collect();
                        SiteEvent {
                            id: id as u32,
                            stack_id: ctx.stacks().add(&addresses, false),
                        }
                    })
                    .collect();
                *sites = SitesToWrite::Built(events, capture);
            }
        }
        self.forget_own_tags();
        let summary = self.summary.lock().unwrap_or_else(|e| e.into_inner());
        summary.as_ref().map(|s| {
            s.dropped_events
                .saturating_sub(self.dropped_at_start.load(Ordering::Relaxed))
        })
    }

    fn after_stacks(&self, ctx: &CaptureContext<'_>) {
        let SitesToWrite::Built(events, capture) =
            std::mem::take(&mut *self.sites.lock().unwrap_or_else(|e| e.into_inner()))
        else {
            return;
        };
        let symbols = ctx
            .stacks()
            .figures()
            .and_then(|f| f.symbols)
            .unwrap_or_else(trace_sampler::stacks::build_quality);
        let sites = events.len() as u64;
        for e in events {
            ctx.emit(TraceEvent::Site(e));
        }
        let c = capture.counts;
        ctx.emit(TraceEvent::AllocSites(AllocSitesEvent {
            threshold_bytes: capture.threshold_bytes,
            unwinder: capture.unwinder.wire_name().to_string(),
            symbols,
            captured: c.captured,
            lost: c
                .lost_pool_full
                .saturating_add(c.lost_reentry)
                .saturating_add(c.lost_budget),
            lost_budget: Some(c.lost_budget),
            truncated: c.truncated,
            small_allocs: c.small_allocs,
            small_bytes: c.small_bytes,
            sites,
            capture_ns: Some(c.capture_ns),
        }));
    }

    fn on_thread_join(&self, _ctx: &CaptureContext<'_>) -> Option<u64> {
        // Outside the hook: this thread's stack bounds, for the frame-pointer walk.
        if self.site_threshold != Some(0) {
            trace_alloc::sites::note_thread_bounds();
        }
        None
    }

    fn coverage_lost(&self) -> Vec<(trace_wire::ContractField, String)> {
        let summary = self.summary.lock().unwrap_or_else(|e| e.into_inner());
        let lost = summary
            .as_ref()
            .map(|s| s.logical_memory_lost(self.device_label))
            .unwrap_or_default();
        if lost.is_empty() {
            return Vec::new();
        }
        vec![(trace_wire::ContractField::LogicalMemory, lost.join("; "))]
    }

    fn storage_id(
        &self,
        tensor: &Tensor,
        label: &str,
        category: MemoryCategory,
        inferred: bool,
    ) -> Option<String> {
        let mut st = capture::lock();
        let what = RegisterAs {
            label: (!label.trim().is_empty()).then(|| label.to_string()),
            category,
            category_source: if inferred {
                CategorySource::Inferred
            } else {
                CategorySource::Declared
            },
            view: None,
        };
        let reg = st.register(tensor, what);
        let tag = reg.tag();
        let raw = st.registry().get(tag).map(|e| e.storage_id.clone())?;
        drop(st);
        if let super::registry::Registration::New(tag) = reg {
            self.remember_tags([tag]);
        }
        Some(if self.deterministic {
            sequence_id(&self.sequences, &raw)
        } else {
            raw
        })
    }
}

impl Drop for StoragePlugin {
    /// A session dropped without `finish()` forgets its entries too.
    fn drop(&mut self) {
        capture::lock().stop_tracking(self.owner);
        self.forget_own_tags();
    }
}
