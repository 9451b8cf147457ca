//! The storage capture: the process-wide state that turns hook events and registrations into
//! `memory` events.
//!
//! # How storages reach the trace
//! - **Registered before capture start** (parameters, labelled tensors, optimizer state found at
//!   construction): one `alloc` at capture start marked `pre_existing`, `source: registry`.
//! - **Registered during the window** (graph nodes after forward, gradients after backward): one
//!   `alloc` written at registration, with the exact time of the data buffer's logged
//!   allocation (`source: allocator`); when its block predates the window, a `pre_existing`
//!   alloc at capture start instead.
//! - **Unregistered CPU storages** (backward intermediates, optimizer temporaries, forward
//!   temporaries): recognised at their free by the drop signature; the `alloc` (exact data
//!   buffer time and bytes) and the `free` are written together when the free is drained. A
//!   storage still alive when the window ends (or when the step crashes) cannot be identified:
//!   the capture counts the block-sized allocations of the window that are still live and
//!   unidentified and reports them (see [`CaptureSummary::unidentified_live_blocks`]); an upper
//!   bound of what is missing, never silently zero.
//! - **Frees** of registered storages are written when drained (`source: allocator`).
//!
//! # The capture window
//! It opens when the session arms (right after the root span opened) and closes when the root
//! span is about to close (`end`): the hook is disarmed, the ring drained a last time. Frees
//! after that are **not observed**: a storage registered or allocated in the window and still
//! live then has no `free` event, which analyzers read as "live at the end of the trace"
//! (`live_at_end`). Drop the loss and gradients inside the step guard to see their frees.

use std::sync::{Mutex, MutexGuard, OnceLock};

use candle_core::backprop::GradStore;
use candle_core::{Tensor, TensorId};
use candle_nn::VarMap;
use trace_schema::{
    CategorySource, CoverageLevel, ExecutionStep, MemoryAction, MemoryCategory, MemoryEvent,
    MemorySource,
};

use super::calibrate::{calibrate, Calibration, CalibrationError};
use super::join::{Fact, JoinStats, Joiner};
use super::ring::{self, RawEvent, RawKind};
use super::state::IgnoreAllocs;
use super::{hook, state};
use crate::registry::{storage_facts, RegisterAs, Registration, Registry};

/// What the session tells the capture about time and spans.
pub trait Attribution {
    /// Converts a hook timestamp (ns since the process clock base) to session ns.
    fn session_ns(&self, hook_ns: u64) -> u64;
    /// The wire id and step of the innermost span open on `thread` at session time `ts_ns`
    /// (the root span when none is open on that thread).
    fn span_at(&self, thread: u64, ts_ns: u64) -> (Option<String>, Option<ExecutionStep>);
    /// Whether the session is deterministic: drained events are then sorted by hook time, get
    /// logical timestamps from [`Self::locate`] and [`Self::next_in_slot`], and storage ids from
    /// [`Self::storage_wire_id`].
    fn deterministic(&self) -> bool {
        false
    }
    /// Deterministic mode: where a hook event of `thread` at real time `hook_ns` lands.
    fn locate(&self, thread: u64, hook_ns: u64) -> Located {
        let ts = self.session_ns(hook_ns);
        let (span, step) = self.span_at(thread, ts);
        Located {
            slot: (thread, ts),
            base_ns: ts,
            span,
            step,
        }
    }
    /// Deterministic mode: the next offset (1, 2, …) in `slot`.
    fn next_in_slot(&self, _slot: (u64, u64)) -> u64 {
        0
    }
    /// The storage id written for the capture's own id `raw` (deterministic mode: `st<n>`, a
    /// sequence number of first sight).
    fn storage_wire_id(&self, raw: &str) -> String {
        raw.to_string()
    }
}

/// Where a hook event lands on a deterministic session's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The span change (thread, index) that preceded it in real time.
    pub slot: (u64, u64),
    /// Logical session ns of that change.
    pub base_ns: u64,
    /// Wire id of the span it is attributed to.
    pub span: Option<String>,
    /// Step of that span.
    pub step: Option<ExecutionStep>,
}

/// A memory event waiting for attribution (hook time, thread).
#[derive(Debug, Clone)]
struct Draft {
    hook_ns: u64,
    thread: u64,
    /// Session ns already known (capture start events).
    session_ns: Option<u64>,
    event: MemoryEvent,
    infer_category: bool,
}

/// Figures of one capture window, for the summary and the README.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureSummary {
    /// What the join saw (signature matches, registered frees, …).
    pub join: JoinStats,
    /// Raw hook events drained in the window.
    pub raw_events: u64,
    /// Allocation calls seen by the armed hook in the window.
    pub armed_alloc_calls: u64,
    /// Events dropped because the ring was full (running count since process start).
    pub dropped_events: u64,
    /// Block-sized allocations of the window still live and unidentified at its end: an upper
    /// bound on unregistered storages missing from the trace.
    pub unidentified_live_blocks: u64,
    /// Unregistered storages allocated before the window and freed in it (invisible: the
    /// capture-start figure missed them).
    pub unregistered_pre_window_frees: u64,
    /// Registered storages written as `pre_existing`.
    pub pre_existing_storages: u64,
    /// Storages registered in the window.
    pub registered_in_window: u64,
    /// Unregistered storages written (alloc + free pairs).
    pub anonymous_storages: u64,
    /// Registered CPU storages whose freed data buffer size (what an unregistered storage's
    /// bytes are taken from) differed from their `len × element size`; 0 means the allocator's
    /// size is the storage's own size for every storage checked.
    pub data_size_mismatches: u64,
    /// Registered CPU storages whose free showed the drop signature (the sample of that check).
    pub data_size_checked: u64,
}

/// The process-wide capture state (behind [`lock`]).
#[derive(Debug, Default)]
pub struct CaptureState {
    registry: Registry,
    joiner: Joiner,
    raw: Vec<RawEvent>,
    drafts: Vec<Draft>,
    /// Hook ns of capture start while a window is open.
    window_start: Option<u64>,
    device: String,
    /// Reasons logical memory is not complete, found before the meta was written.
    unknown_pre_existing: Vec<String>,
    summary: CaptureSummary,
    warned: bool,
}

static STATE: OnceLock<Mutex<CaptureState>> = OnceLock::new();

/// Locks the process-wide capture state (poisoning is ignored: the state stays usable).
pub fn lock() -> MutexGuard<'static, CaptureState> {
    let m = STATE.get_or_init(|| Mutex::new(CaptureState::default()));
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the logical memory plane can be captured here, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// The allocator is installed.
    pub installed: bool,
    /// Calibration result.
    pub calibration: Result<Calibration, CalibrationError>,
}

/// Checks installation and calibrates (once per process). Prints one warning per process when
/// the allocator is not installed or calibration failed.
pub fn availability() -> Availability {
    let calibration = calibrate();
    let installed = state::is_installed();
    let mut st = lock();
    if let Err(e) = &calibration {
        if !st.warned {
            st.warned = true;
            match e {
                CalibrationError::NotInstalled => eprintln!(
                    "warning: trace-probe: the tracking allocator is not installed \
                     (#[global_allocator] static ALLOC: trace_probe::alloc::Tracking = \
                     trace_probe::alloc::Tracking::system();): storage frees are unknown, \
                     logical memory is registration-only and declared partial"
                ),
                e => eprintln!(
                    "warning: trace-probe: automatic storage capture is off: {e}; logical \
                     memory is declared unavailable"
                ),
            }
        }
    }
    if let Ok(c) = &calibration {
        if !st.registry.watching() {
            st.registry.enable_watch(c.key_offset);
        }
    }
    Availability {
        installed,
        calibration,
    }
}

/// The logical-memory coverage to declare for a capture on `device_label`, with the reason when
/// not complete (`capture_contract.reasons["logical_memory"]`).
pub fn logical_memory_contract(device_label: &str) -> (CoverageLevel, Option<String>) {
    let a = availability();
    let st = lock();
    match (&a.calibration, a.installed) {
        (Err(CalibrationError::NotInstalled), _) | (_, false) => (
            CoverageLevel::Partial,
            Some("tracking allocator not installed: frees are unknown, only registered storages at registration time".into()),
        ),
        (Err(e), _) => (
            CoverageLevel::None,
            Some(format!("automatic storage capture unavailable: {e}")),
        ),
        (Ok(_), true) if device_label != "cpu" => (
            CoverageLevel::Partial,
            Some(format!(
                "{device_label}: storages are captured through registration only (the CPU drop signature does not apply); host-side frees mark the last handle's release into the device pool"
            )),
        ),
        (Ok(_), true) if !st.unknown_pre_existing.is_empty() => (
            CoverageLevel::Partial,
            Some(format!(
                "pre-existing storage of unknown size: {}",
                st.unknown_pre_existing.join("; ")
            )),
        ),
        (Ok(_), true) => (CoverageLevel::Complete, None),
    }
}

impl CaptureState {
    /// Declares pre-existing storage the capture cannot size (e.g. an optimizer built outside
    /// the probe's wrapper); logical memory is then `partial` with this reason.
    pub fn declare_unknown_pre_existing(&mut self, reason: impl Into<String>) {
        self.unknown_pre_existing.push(reason.into());
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Whether a window is open (armed by this state).
    pub fn in_window(&self) -> bool {
        self.window_start.is_some()
    }

    /// Opens the window: arms the hook and queues every registered storage as a
    /// `pre_existing` alloc at `start_session_ns`. Returns false (nothing armed) when the
    /// allocator is unavailable or another window is open.
    pub fn begin(&mut self, device: &str, start_session_ns: u64) -> bool {
        let _quiet = IgnoreAllocs::new();
        self.device = device.to_string();
        self.summary = CaptureSummary::default();
        self.joiner = Joiner::default();
        if self.window_start.is_some() || state::is_armed() || super::block_size() == 0 {
            self.queue_pre_existing(start_session_ns);
            return false;
        }
        // Discard events left from a previous window or calibration.
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        self.raw.clear();
        let start = crate::clock::process_ns();
        self.window_start = Some(start);
        self.queue_pre_existing(start_session_ns);
        hook::arm();
        true
    }

    fn queue_pre_existing(&mut self, at: u64) {
        for e in self.registry.entries() {
            self.summary.pre_existing_storages += 1;
            self.drafts.push(Draft {
                hook_ns: 0,
                thread: 0,
                session_ns: Some(at),
                event: alloc_event(e, at, true, MemorySource::Registry),
                infer_category: false,
            });
        }
    }

    /// Registers `t` (see [`Registry::register`]) and, for a new storage in an open window,
    /// queues its alloc. Safe to call with the allocator missing (registration-only mode).
    pub fn register(&mut self, t: &Tensor, what: RegisterAs) -> Registration {
        let _quiet = IgnoreAllocs::new();
        self.pump();
        let facts = storage_facts(t);
        let reg = self.registry.register(t, what);
        if let (Registration::New(tag), Some(_)) = (reg, self.window_start) {
            let block = super::calibrate()
                .ok()
                .map(|c| facts.key - c.key_offset)
                .unwrap_or(0);
            let block_ns = self.joiner.block_alloc_at(block);
            let data = facts.data_ptr.and_then(|p| self.joiner.alloc_at(p));
            let entry = self.registry.get(tag).expect("just registered").clone();
            match block_ns {
                Some(b) => {
                    let (ns, thread) = match data {
                        Some((d, _, th)) if d <= b => (d, th as u64),
                        _ => (b, crate::capture::thread_key()),
                    };
                    self.summary.registered_in_window += 1;
                    self.drafts.push(Draft {
                        hook_ns: ns,
                        thread,
                        session_ns: None,
                        event: alloc_event(&entry, 0, false, MemorySource::Allocator),
                        infer_category: false,
                    });
                }
                None => {
                    self.summary.pre_existing_storages += 1;
                    let start = self.window_start.unwrap_or(0);
                    self.drafts.push(Draft {
                        hook_ns: start,
                        thread: 0,
                        session_ns: None,
                        event: alloc_event(&entry, 0, true, MemorySource::Registry),
                        infer_category: false,
                    });
                }
            }
        }
        reg
    }

    /// Registers every variable of `varmap` as a parameter labelled with its name.
    pub fn register_varmap(&mut self, varmap: &VarMap) {
        let data = varmap.data().lock().unwrap_or_else(|e| e.into_inner());
        let mut named: Vec<(&String, &candle_core::Var)> = data.iter().collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        for (name, var) in named {
            self.register(
                var.as_tensor(),
                RegisterAs::category(MemoryCategory::Parameter).label(name.clone()),
            );
        }
    }

    /// Registers the graph nodes of `loss` (`loss.sorted_nodes()`): variables as parameters
    /// (aliases of the registered ones), everything else as activations.
    pub fn register_graph(&mut self, loss: &Tensor) {
        for node in loss.sorted_nodes() {
            let category = if node.is_variable() {
                MemoryCategory::Parameter
            } else {
                MemoryCategory::Activation
            };
            self.register(node, RegisterAs::category(category));
        }
    }

    /// Registers the gradients in `grads`: those of the named parameters `params` (name,
    /// tensor id) labelled `<name>.grad`, the others (non-parameter leaves such as the input
    /// batch) labelled `tensor-grad`.
    pub fn register_grads(&mut self, grads: &GradStore, params: &[(String, TensorId)]) {
        let mut param_ids = std::collections::HashSet::new();
        for (name, id) in params {
            param_ids.insert(*id);
            if let Some(g) = grads.get_id(*id) {
                self.register(
                    g,
                    RegisterAs::category(MemoryCategory::Gradient).label(format!("{name}.grad")),
                );
            }
        }
        let mut ids: Vec<_> = grads
            .get_ids()
            .copied()
            .filter(|id| !param_ids.contains(id))
            .collect();
        // The store iterates in random order; Candle's ids count up in creation order.
        ids.sort_by_cached_key(|id| {
            let s = format!("{id:?}");
            (s.len(), s)
        });
        for id in ids {
            if let Some(g) = grads.get_id(id) {
                self.register(
                    g,
                    RegisterAs::category(MemoryCategory::Gradient).label("tensor-grad"),
                );
            }
        }
    }

    /// Runs `f` with the hook armed and registers every storage it created that is still live
    /// after it as `category` (persistent: kept across sessions). Used around the inner
    /// optimizer's construction: AdamW allocates its moments in `new` and keeps them private.
    /// Returns `f`'s result and the bytes found; `None` bytes when the allocator is unavailable
    /// (the caller then declares unknown pre-existing storage).
    pub fn capture_construction<R>(
        &mut self,
        label: &str,
        category: MemoryCategory,
        f: impl FnOnce() -> R,
    ) -> (R, Option<u64>) {
        let calib = match calibrate() {
            Ok(c) if self.window_start.is_none() && !state::is_armed() => c,
            _ => return (f(), None),
        };
        if !self.registry.watching() {
            self.registry.enable_watch(calib.key_offset);
        }
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        self.raw.clear();
        let dropped_before = ring::dropped_events();
        hook::arm();
        let out = f();
        hook::disarm();
        let _quiet = IgnoreAllocs::new();
        ring::drain_into(&mut self.raw);
        if ring::dropped_events() != dropped_before {
            return (out, None);
        }
        let mut joiner = Joiner::default();
        for ev in &self.raw {
            joiner.feed(ev, calib.block_size);
        }
        let off = calib.data_ptr_offset;
        let mut found = 0u64;
        let mut blocks: Vec<(usize, u64)> = joiner.live_block_list();
        blocks.sort_by_key(|b| b.1);
        for (block, block_ns) in blocks {
            // The block is live (no free was logged) and was allocated on this thread just now:
            // read its data-pointer word and accept it only when it names a buffer allocated in
            // this window before the block (the storage's data buffer).
            let Some(off) = off else { continue };
            // SAFETY: a live allocation of `block_size` bytes (allocated in this window, no
            // free logged); one aligned word inside it is read.
            let word = unsafe { ((block + off) as *const usize).read_volatile() };
            if let Some((data_ns, size, _)) = joiner.alloc_at(word) {
                if data_ns <= block_ns && size > 0 {
                    self.registry.register_raw(
                        block + calib.key_offset,
                        size as u64,
                        word,
                        RegisterAs::category(category).label(label),
                    );
                    found += size as u64;
                }
            }
        }
        self.raw.clear();
        (out, Some(found))
    }

    /// Drains the ring into the join and keeps the resulting events queued (deterministic mode
    /// writes them all at [`Self::end`], sorted by hook time, so no later registration can land
    /// before an event already written).
    pub fn pump_queued(&mut self) {
        let _quiet = IgnoreAllocs::new();
        self.pump();
    }

    /// Drains the ring into the join (no attribution yet).
    fn pump(&mut self) {
        if self.window_start.is_none() {
            return;
        }
        let block_size = super::block_size();
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        self.summary.raw_events += self.raw.len() as u64;
        let raw = std::mem::take(&mut self.raw);
        for ev in &raw {
            if let Some(fact) = self.joiner.feed(ev, block_size) {
                self.on_fact(fact, ev);
            } else if ev.kind == RawKind::BlockFree && ev.tag == 0 && ev.b != 0 {
                // Signature match on a block allocated before the window.
                if !self.registry.has_block(ev.a) {
                    self.summary.unregistered_pre_window_frees += 1;
                }
            }
        }
        self.raw = raw;
    }

    fn on_fact(&mut self, fact: Fact, ev: &RawEvent) {
        match fact {
            Fact::RegisteredFree { tag, free_ns } => self.registered_free(tag, free_ns, ev),
            Fact::Anonymous(a) => {
                if let Some(tag) = self
                    .registry
                    .by_key(a.block + self.key_offset())
                    .map(|e| e.tag)
                {
                    // Registered but not watched (table full): a registered free.
                    self.registered_free(tag, a.free_ns, ev);
                    return;
                }
                let key = a.block + self.key_offset();
                let generation = self.registry.next_generation(key);
                let storage_id = crate::registry::storage_id(key, generation);
                let alloc_ns = a.alloc_ns.unwrap_or(a.free_ns);
                let mut alloc = MemoryEvent {
                    timestamp_ns: 0,
                    action: MemoryAction::Alloc,
                    device: self.device.clone(),
                    storage_id: Some(storage_id.clone()),
                    bytes: Some(a.bytes),
                    tensor_id: None,
                    span_id: None,
                    op_name: None,
                    shape: None,
                    dtype: None,
                    category: MemoryCategory::Other,
                    category_source: Some(CategorySource::Inferred),
                    source: Some(MemorySource::Allocator),
                    pre_existing: false,
                    label: None,
                };
                self.summary.anonymous_storages += 1;
                self.drafts.push(Draft {
                    hook_ns: alloc_ns,
                    thread: a.alloc_thread.unwrap_or(a.free_thread) as u64,
                    session_ns: None,
                    event: alloc.clone(),
                    infer_category: true,
                });
                alloc.action = MemoryAction::Free;
                self.drafts.push(Draft {
                    hook_ns: a.free_ns,
                    thread: a.free_thread as u64,
                    session_ns: None,
                    event: alloc,
                    infer_category: true,
                });
            }
        }
    }

    fn key_offset(&self) -> usize {
        calibrate().map(|c| c.key_offset).unwrap_or(0)
    }

    fn registered_free(&mut self, tag: u32, free_ns: u64, ev: &RawEvent) {
        if let Some(entry) = self.registry.forget(tag) {
            if ev.b != 0 && entry.data_ptr == Some(ev.b) {
                self.summary.data_size_checked += 1;
                if entry.bytes != Some(ev.c as u64) {
                    self.summary.data_size_mismatches += 1;
                }
            }
            let mut e = alloc_event(&entry, 0, false, MemorySource::Allocator);
            e.action = MemoryAction::Free;
            e.pre_existing = false;
            self.drafts.push(Draft {
                hook_ns: free_ns,
                thread: ev.thread as u64,
                session_ns: None,
                event: e,
                infer_category: false,
            });
        }
    }

    /// Drains the ring and returns every memory event ready to be written, attributed to spans.
    pub fn drain(&mut self, attr: &dyn Attribution) -> Vec<MemoryEvent> {
        let _quiet = IgnoreAllocs::new();
        self.pump();
        let drafts = std::mem::take(&mut self.drafts);
        if attr.deterministic() {
            return deterministic_events(drafts, attr);
        }
        drafts
            .into_iter()
            .map(|d| {
                let ts = d.session_ns.unwrap_or_else(|| attr.session_ns(d.hook_ns));
                let (span, step) = attr.span_at(d.thread, ts);
                let mut e = d.event;
                e.timestamp_ns = ts;
                e.span_id = span;
                if d.infer_category {
                    e.category = inferred_category(step);
                }
                e
            })
            .collect()
    }

    /// Closes the window: disarms, drains a last time and summarises. Returns the final events
    /// and the summary; non-persistent registry entries are forgotten.
    pub fn end(&mut self, attr: &dyn Attribution) -> (Vec<MemoryEvent>, CaptureSummary) {
        let armed_calls = state::armed_alloc_calls();
        let events = self.drain(attr);
        if self.window_start.take().is_some() {
            hook::disarm();
        }
        let _quiet = IgnoreAllocs::new();
        // Frees that raced with disarming are still in the ring: drain them too.
        self.window_start = Some(0);
        let mut events = events;
        events.extend(self.drain(attr));
        self.window_start = None;
        let registry = &self.registry;
        self.summary.unidentified_live_blocks = self
            .joiner
            .unidentified_live_blocks(|b| registry.has_block(b));
        self.summary.join = self.joiner.stats;
        self.summary.armed_alloc_calls = armed_calls;
        self.summary.dropped_events = ring::dropped_events();
        self.registry.clear_session_entries();
        (events, self.summary.clone())
    }

    /// The summary so far (of the last window once it ended).
    pub fn summary(&self) -> &CaptureSummary {
        &self.summary
    }
}

/// The figures of the last capture window in this process (match rate, allocation calls,
/// drops, unidentified live blocks).
pub fn last_summary() -> CaptureSummary {
    lock().summary.clone()
}

/// Declares pre-existing storage the capture cannot size (e.g. an optimizer built outside
/// [`crate::ProbedOptimizer`], whose state the probe never saw): sessions started afterwards
/// declare logical memory `partial` with `reason`.
pub fn declare_unknown_pre_existing(reason: impl Into<String>) {
    lock().declare_unknown_pre_existing(reason);
}

impl CaptureState {}

/// Deterministic mode: events in hook-time order (program order when single-threaded), storage
/// ids as sequence numbers, each run of consecutive frees (e.g. a `HashMap` of gradients
/// dropped in its random order) ordered by storage id, and logical timestamps: the `k`-th event
/// after a span change sits `k` ns after that change's logical reading.
fn deterministic_events(mut drafts: Vec<Draft>, attr: &dyn Attribution) -> Vec<MemoryEvent> {
    // Capture-start events (session time known) first, then hook time; stable for ties.
    drafts.sort_by_key(|d| (d.session_ns.is_none(), d.hook_ns));
    struct Placed {
        draft: Draft,
        located: Option<Located>,
        seq: (usize, String),
    }
    let mut placed: Vec<Placed> = drafts
        .into_iter()
        .map(|mut d| {
            if let Some(raw) = d.event.storage_id.take() {
                d.event.storage_id = Some(attr.storage_wire_id(&raw));
            }
            let located = d
                .session_ns
                .is_none()
                .then(|| attr.locate(d.thread, d.hook_ns));
            let id = d.event.storage_id.clone().unwrap_or_default();
            Placed {
                draft: d,
                located,
                seq: (id.len(), id),
            }
        })
        .collect();
    let is_free = |p: &Placed| p.draft.event.action == MemoryAction::Free && p.located.is_some();
    let mut i = 0;
    while i < placed.len() {
        if !is_free(&placed[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < placed.len() && is_free(&placed[j]) {
            j += 1;
        }
        placed[i..j].sort_by(|a, b| {
            let slot = |p: &Placed| p.located.as_ref().map(|l| l.slot);
            slot(a).cmp(&slot(b)).then_with(|| a.seq.cmp(&b.seq))
        });
        i = j;
    }
    placed
        .into_iter()
        .map(|p| {
            let d = p.draft;
            let (ts, span, step) = match (d.session_ns, p.located) {
                (Some(_), _) | (None, None) => {
                    let ts = d.session_ns.unwrap_or(0);
                    let (span, step) = attr.span_at(d.thread, ts);
                    (ts, span, step)
                }
                (None, Some(l)) => (l.base_ns + attr.next_in_slot(l.slot), l.span, l.step),
            };
            let mut e = d.event;
            e.timestamp_ns = ts;
            e.span_id = span;
            if d.infer_category {
                e.category = inferred_category(step);
            }
            e
        })
        .collect()
}

/// The inferred category of an unregistered storage created in `step`: forward temporaries
/// are activations; backward and optimizer temporaries are `other` (a backward temporary is
/// not a gradient, an optimizer temporary is not optimizer state).
pub fn inferred_category(step: Option<ExecutionStep>) -> MemoryCategory {
    match step {
        Some(ExecutionStep::Forward) => MemoryCategory::Activation,
        _ => MemoryCategory::Other,
    }
}

fn alloc_event(
    e: &crate::registry::StorageEntry,
    ts: u64,
    pre_existing: bool,
    source: MemorySource,
) -> MemoryEvent {
    MemoryEvent {
        timestamp_ns: ts,
        action: MemoryAction::Alloc,
        device: e.device.clone(),
        storage_id: Some(e.storage_id.clone()),
        bytes: e.bytes,
        tensor_id: None,
        span_id: None,
        op_name: None,
        shape: (!e.shape.is_empty() || !e.dtype.is_empty()).then(|| e.shape.clone()),
        dtype: (!e.dtype.is_empty()).then(|| e.dtype.clone()),
        category: e.category,
        category_source: Some(e.category_source),
        source: Some(source),
        pre_existing,
        label: e.label.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// Deterministic attribution over a fixed span-change log: changes at real times 100 and
    /// 200 (logical 1000 and 2000), spans s2 then s1.
    #[derive(Default)]
    struct Logical {
        ids: RefCell<HashMap<String, u64>>,
        slots: RefCell<HashMap<(u64, u64), u64>>,
    }

    impl Attribution for Logical {
        fn session_ns(&self, _hook_ns: u64) -> u64 {
            unreachable!("deterministic drains place events with locate")
        }
        fn span_at(&self, _thread: u64, _ts_ns: u64) -> (Option<String>, Option<ExecutionStep>) {
            (Some("s1".into()), None)
        }
        fn deterministic(&self) -> bool {
            true
        }
        fn locate(&self, thread: u64, hook_ns: u64) -> Located {
            let (index, base_ns, span, step) = if hook_ns < 200 {
                (0, 1000, "s2", Some(ExecutionStep::Forward))
            } else {
                (1, 2000, "s1", None)
            };
            Located {
                slot: (thread, index),
                base_ns,
                span: Some(span.into()),
                step,
            }
        }
        fn next_in_slot(&self, slot: (u64, u64)) -> u64 {
            let mut slots = self.slots.borrow_mut();
            let k = slots.entry(slot).or_insert(0);
            *k += 1;
            *k
        }
        fn storage_wire_id(&self, raw: &str) -> String {
            let mut ids = self.ids.borrow_mut();
            let next = ids.len() as u64 + 1;
            format!("st{}", ids.entry(raw.to_string()).or_insert(next))
        }
    }

    fn draft(hook_ns: u64, storage: &str, action: MemoryAction) -> Draft {
        Draft {
            hook_ns,
            thread: 1,
            session_ns: None,
            event: MemoryEvent {
                timestamp_ns: 0,
                action,
                device: "cpu".into(),
                storage_id: Some(storage.into()),
                bytes: Some(8),
                tensor_id: None,
                span_id: None,
                op_name: None,
                shape: None,
                dtype: None,
                category: MemoryCategory::Other,
                category_source: Some(CategorySource::Inferred),
                source: Some(MemorySource::Allocator),
                pre_existing: false,
                label: None,
            },
            infer_category: true,
        }
    }

    fn run(drafts: Vec<Draft>) -> Vec<(u64, String, MemoryAction, String)> {
        deterministic_events(drafts, &Logical::default())
            .into_iter()
            .map(|e| {
                (
                    e.timestamp_ns,
                    e.storage_id.unwrap_or_default(),
                    e.action,
                    e.span_id.unwrap_or_default(),
                )
            })
            .collect()
    }

    #[test]
    fn deterministic_drain_orders_by_hook_time_and_numbers_storages() {
        use MemoryAction::{Alloc, Free};
        // Queued out of order (a late registration), frees of one drop in "random" order.
        let a = vec![
            draft(150, "0xb.0", Alloc),
            draft(110, "0xa.0", Alloc),
            draft(210, "0xb.0", Free),
            draft(211, "0xa.0", Free),
        ];
        let b = vec![
            draft(110, "0xa.0", Alloc),
            draft(150, "0xb.0", Alloc),
            draft(210, "0xa.0", Free),
            draft(211, "0xb.0", Free),
        ];
        let expected = vec![
            (1001, "st1".to_string(), Alloc, "s2".to_string()),
            (1002, "st2".to_string(), Alloc, "s2".to_string()),
            (2001, "st1".to_string(), Free, "s1".to_string()),
            (2002, "st2".to_string(), Free, "s1".to_string()),
        ];
        assert_eq!(run(a), expected);
        assert_eq!(run(b), expected);
    }

    #[test]
    fn deterministic_drain_infers_categories_from_the_located_step() {
        let events = deterministic_events(
            vec![draft(120, "0xc.0", MemoryAction::Alloc)],
            &Logical::default(),
        );
        assert_eq!(events[0].category, MemoryCategory::Activation);
    }
}
