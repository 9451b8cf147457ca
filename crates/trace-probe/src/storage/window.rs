//! The capture window: the process-wide state that turns allocator-hook events and
//! registrations into `memory` events.
//!
//! # How storages reach the trace
//! - **Registered before capture start** (parameters, labelled tensors, optimizer state found at
//!   construction): one `alloc` at capture start marked `pre_existing`, `source: registry`.
//! - **Live at capture start, allocated since the session was created** (an input batch, model
//!   buffers, tensors kept from an earlier step; see `tracker`): one `alloc` at capture start
//!   marked `pre_existing`, `source: allocator`, heap bytes from the logged data-buffer
//!   allocation, category `other` (inferred) unless a registration in the window names it (a
//!   labelled input: its label, category, shape and dtype). Written when freed or when the
//!   window ends, so that naming is in it.
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use trace_schema::{
    CategorySource, CoverageLevel, MemoryAction, MemoryCategory, MemoryEvent, MemorySource,
};

use super::events::{self, alloc_event, anonymous_alloc, Attribution, PendingEvent};
use super::join::{JoinStats, Joiner, StorageFreed};
use super::registry::{RegisterAs, Registry};
use super::tracker::{self, PreSessionStorages, ScanLayout, SessionTracker};
use crate::alloc::ring::{self, RawEvent};
use crate::alloc::{self, calibrate, hold, hook, Calibration, CalibrationError, IgnoreAllocs};
use crate::device::DeviceLabel;

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
    /// Unregistered storages allocated in the window and still live at its end (a cache that
    /// outlives the call, a tensor kept across steps): written as an `alloc` at their data
    /// buffer's allocation with their heap bytes and no `free` (live at the end of the trace).
    pub live_at_end_storages: u64,
    /// Their heap bytes.
    pub live_at_end_bytes: u64,
    /// Unregistered storages allocated before the window and freed in it: recognised at their
    /// free (drop signature confirmed by their tensor block) and written as `pre_existing` at
    /// capture start with their heap bytes, plus their free.
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
    /// Storages registered while the watch table was full (not watched): on CPU their frees are
    /// still found by the confirmed drop signature; on other devices they are lost.
    pub unwatched_registrations: u64,
    /// Storages the session tracker found live at capture start (allocated since the session
    /// was created, neither parameters nor optimizer state): written as `pre_existing`.
    pub adopted_storages: u64,
    /// Their heap bytes.
    pub adopted_bytes: u64,
    /// The allocation-site capture of the window (`None`: sites off).
    pub sites: Option<super::sites::SiteCapture>,
    /// CUDA storages written from the device-allocation ledger (feature `cuda-ledger`; zero
    /// elsewhere).
    pub device_storages: super::device_window::DeviceStorages,
}

impl CaptureSummary {
    /// What this window lost of the logical-memory coverage declared at its start, on `device`
    /// (one sentence per limit met); empty when nothing was lost. Written into the terminal's
    /// `coverage_lost["logical_memory"]`.
    pub fn logical_memory_lost(&self, device: DeviceLabel) -> Vec<String> {
        let mut lost = Vec::new();
        if self.unidentified_live_blocks > 0 {
            lost.push(format!(
                "{} storage-sized allocations of the window were still live and unidentified at \
                 its end (possible unregistered storages, missing from live bytes after their \
                 allocation)",
                self.unidentified_live_blocks
            ));
        }
        if self.data_size_mismatches > 0 {
            lost.push(format!(
                "{} registered storages freed a data buffer of another size than their recorded \
                 heap bytes",
                self.data_size_mismatches
            ));
        }
        if self.unwatched_registrations > 0 && !device.is_cpu() {
            lost.push(format!(
                "{} registered storages were not watched (watch table full): their frees are \
                 unknown",
                self.unwatched_registrations
            ));
        }
        lost
    }
}

/// The process-wide capture state (behind [`lock`]).
#[derive(Debug, Default)]
pub struct CaptureState {
    pub(super) registry: Registry,
    pub(super) joiner: Joiner,
    pub(super) raw: Vec<RawEvent>,
    /// Events the background drainer moved out of the ring, not yet joined (in ring order,
    /// before anything still in the ring).
    backlog: Vec<RawEvent>,
    pub(super) pending: Vec<PendingEvent>,
    /// Hook ns of capture start while a window is open.
    pub(super) window_start: Option<u64>,
    /// Session ns of capture start (where pre-existing storages are written).
    start_session_ns: u64,
    device: Option<DeviceLabel>,
    /// Reasons logical memory is not complete, found before the meta was written.
    unknown_pre_existing: Vec<String>,
    pub(super) summary: CaptureSummary,
    warned: bool,
    /// The session tracker (one at a time; see `tracker`).
    pub(super) tracker: Option<SessionTracker>,
    /// Why a session's tracking was stopped by another session (owner → reason).
    lost_tracking: Vec<(u64, String)>,
    /// Storages adopted at the last capture start, not yet written: their `pre_existing`
    /// alloc is written when they are freed or when the window ends, so a label or category a
    /// later registration gives them (a labelled input) is in it.
    adopted: Vec<u32>,
    /// Figures of the last adoption: (storages, bytes).
    adopted_figures: (u64, u64),
    /// Host-clock windows: where the drainer hands the events it joined (the session's writer
    /// thread attributes them), so span ends need not drain.
    sink: Option<Sink>,
    /// Allocation sites for the next window: (threshold bytes, walker); `None`: off.
    site_settings: Option<(usize, crate::alloc::sites::Unwinder)>,
    /// The sites of the open (or last) window.
    pub(super) sites: super::sites::SiteTable,
}

/// Takes memory events waiting for attribution (see [`CaptureState::set_sink`]).
pub(crate) struct Sink(pub(crate) Box<dyn FnMut(Vec<PendingEvent>) + Send>);

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

/// A backlog waits (the drainer only spilled): the next span end joins it.
static BACKLOG_WAITING: AtomicBool = AtomicBool::new(false);
/// Events wait in `pending` that no ring activity may bring to the drainer's attention (a
/// registration): the drainer delivers them at its next poll.
static UNDELIVERED: AtomicBool = AtomicBool::new(false);

/// Whether the background drainer delivers the window's events to its sink by itself: its
/// thread runs, the ring has its full capacity (see `drainer`) and no backlog waits for the
/// session to join.
pub(crate) fn drainer_delivers() -> bool {
    super::drainer::running()
        && ring::ring_capacity() == ring::RING_CAPACITY
        && !BACKLOG_WAITING.load(Ordering::Relaxed)
}

/// Whether events wait for the drainer's delivery without ring activity.
pub(crate) fn undelivered() -> bool {
    UNDELIVERED.load(Ordering::Relaxed)
}

/// What [`CaptureState::begin_session`] did.
#[derive(Debug)]
pub(crate) enum Begun {
    /// The window is open and the hook armed: events reach the shared queue.
    Window,
    /// No window (registration-only mode): the session's `pre_existing` allocs, its own to write.
    RegistrationOnly(Vec<PendingEvent>),
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
    let installed = alloc::is_installed();
    let mut st = lock();
    if let Err(e) = &calibration {
        if !st.warned {
            st.warned = true;
            match e {
                CalibrationError::NotInstalled => eprintln!(
                    "warning: trace-probe: the tracking allocator is not installed \
                     (#[global_allocator] static ALLOC: trace_probe::Tracking = \
                     trace_probe::Tracking::system();): storage frees are unknown, \
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

/// The logical-memory coverage to declare for a capture on `device`, with the reason when not
/// complete (`capture_contract.reasons["logical_memory"]`), not counting storages that lived
/// before the captured step (see [`logical_memory_contract_with`]).
pub fn logical_memory_contract(device: DeviceLabel) -> (CoverageLevel, Option<String>) {
    logical_memory_contract_with(device, None)
}

/// [`logical_memory_contract`] for a session whose storages live at capture start are
/// described by `pre_session` (on CPU, `complete` needs [`PreSessionStorages::AllKnown`];
/// otherwise `partial` with its reason). `None`: not considered.
pub fn logical_memory_contract_with(
    device: DeviceLabel,
    pre_session: Option<&PreSessionStorages>,
) -> (CoverageLevel, Option<String>) {
    let (level, reason) = base_contract(device);
    let Some(extra) = pre_session.and_then(|p| p.reason()) else {
        return (level, reason);
    };
    // Only where the capture could otherwise know them (CPU, allocator installed and
    // calibrated); elsewhere the base reason already says why storages are missing.
    if level == CoverageLevel::None
        || !device.is_cpu()
        || !alloc::is_installed()
        || calibrate().is_err()
    {
        return (level, reason);
    }
    let reason = match reason {
        Some(r) => format!("{r}; {extra}"),
        None => extra,
    };
    (CoverageLevel::Partial, Some(reason))
}

fn base_contract(device: DeviceLabel) -> (CoverageLevel, Option<String>) {
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
        (Ok(_), true) if !device.is_cpu() && device_ledger_failure(device).is_some() => (
            CoverageLevel::Partial,
            Some(format!(
                "{device}: storages are captured through registration only ({}); host-side frees mark the last handle's release into the device pool",
                device_ledger_failure(device).unwrap_or_default()
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

/// Why `device`'s storages are not all seen at the driver (`None`: they are — a CUDA device
/// whose allocations were checked to pass through [`crate::cuda_ledger`]).
fn device_ledger_failure(device: DeviceLabel) -> Option<String> {
    match device {
        DeviceLabel::Cpu => None,
        #[cfg(feature = "cuda-ledger")]
        DeviceLabel::Cuda(_) => match crate::cuda_ledger::interpose::checked() {
            Some(Ok(())) => None,
            Some(Err(why)) => Some(why),
            None => Some("the device-allocation check did not run".into()),
        },
        _ => Some("the CPU drop signature does not apply".into()),
    }
}

impl CaptureState {
    /// Declares pre-existing storage the capture cannot size (e.g. an optimizer built outside
    /// the probe's wrapper); logical memory is then `partial` with this reason.
    pub fn declare_unknown_pre_existing(&mut self, reason: impl Into<String>) {
        self.unknown_pre_existing.push(reason.into());
    }

    /// Forgets the registry entry `tag` (no-op when already gone).
    pub(crate) fn forget_entry(&mut self, tag: u32) {
        let _quiet = IgnoreAllocs::new();
        self.registry.forget(tag);
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Whether a window is open (armed by this state).
    pub fn in_window(&self) -> bool {
        self.window_start.is_some()
    }

    /// The device of the open window (the run's).
    pub(super) fn device(&self) -> DeviceLabel {
        self.device.unwrap_or(DeviceLabel::Cpu)
    }

    /// Opens the window: arms the hook and queues every registered storage as a
    /// `pre_existing` alloc at `start_session_ns`. Returns false (nothing armed) when the
    /// allocator is unavailable or another window is open.
    pub fn begin(&mut self, device: DeviceLabel, start_session_ns: u64) -> bool {
        match self.begin_session(device, start_session_ns, None) {
            Begun::Window => true,
            Begun::RegistrationOnly(events) => {
                self.pending.extend(events);
                false
            }
        }
    }

    /// [`Self::begin`] for one session. Without a window (no allocator, or another session's
    /// window open) the `pre_existing` allocs are handed back to the caller instead of the
    /// shared queue, and limited to `own` (the registry tags the session created) when given:
    /// the registry is the process's, and a second session's capture start must neither write
    /// another session's storages nor have its events taken by that session's drain.
    pub(crate) fn begin_session(
        &mut self,
        device: DeviceLabel,
        start_session_ns: u64,
        own: Option<&[u32]>,
    ) -> Begun {
        let _quiet = IgnoreAllocs::new();
        // Another session's window is open: its state (summary, joiner, sink, adopted
        // storages, start) is left alone.
        let other_window = self.window_start.is_some();
        if !other_window {
            self.device = Some(device);
            self.summary = CaptureSummary::default();
            (self.summary.adopted_storages, self.summary.adopted_bytes) = self.adopted_figures;
            self.adopted_figures = (0, 0);
            self.joiner = Joiner::new(calibrate().map(|c| c.tensor_block_size).unwrap_or(0));
            self.sink = None;
            self.interrupt_tracking("another session's captured step armed the allocator");
        }
        if other_window || alloc::is_armed() || alloc::block_size() == 0 {
            // No window: adopted storages are written now (no window end will).
            let queued = std::mem::take(&mut self.pending);
            if !other_window {
                self.start_session_ns = start_session_ns;
                for tag in std::mem::take(&mut self.adopted) {
                    if let Some(entry) = self.registry.get(tag).cloned() {
                        self.queue_adopted(&entry);
                    }
                }
            }
            let counts = self.queue_pre_existing(start_session_ns, own);
            if !other_window {
                self.count_pre_existing(counts);
            }
            let events = std::mem::replace(&mut self.pending, queued);
            return Begun::RegistrationOnly(events);
        }
        // Nothing reads the watch table while disarmed: rebuild it from the live registry so
        // it holds only storages that can still die (insert-only in between).
        self.registry.compact_watch();
        // Discard events left from a previous window or calibration.
        self.backlog.clear();
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        self.raw.clear();
        let start = crate::clock::process_ns();
        self.window_start = Some(start);
        self.start_session_ns = start_session_ns;
        let counts = self.queue_pre_existing(start_session_ns, None);
        self.count_pre_existing(counts);
        self.sites = super::sites::SiteTable::default();
        match self.site_settings {
            Some((threshold, unwinder)) => alloc::sites::reset(threshold, unwinder),
            None => alloc::sites::reset(0, alloc::sites::Unwinder::Libgcc),
        }
        #[cfg(feature = "cuda-ledger")]
        self.open_device_window(device, start);
        super::drainer::window_opened();
        hook::arm();
        Begun::Window
    }

    /// Allocation sites for the next window: allocations of at least `threshold_bytes` get
    /// their stack walked by `unwinder` (`None` or a threshold of 0: off).
    pub(crate) fn configure_sites(&mut self, settings: Option<(usize, alloc::sites::Unwinder)>) {
        self.site_settings = settings.filter(|(t, _)| *t > 0 && alloc::sites::SUPPORTED);
    }

    /// The sites of the last window (moved out).
    pub(crate) fn take_sites(&mut self) -> super::sites::SiteTable {
        std::mem::take(&mut self.sites)
    }

    /// Names the site and the allocating thread of a storage allocated in the window, when
    /// sites are on.
    pub(super) fn set_site(
        &mut self,
        event: &mut MemoryEvent,
        site: alloc::ring::SiteTag,
        thread: u64,
    ) {
        if self.site_settings.is_none() {
            return;
        }
        event.site = self.sites.site_of(site);
        event.thread = Some(thread);
    }

    /// Queues a `pre_existing` alloc at `at` for every registered storage (of `own` only, when
    /// given) not adopted. Returns how many, and how many of them the watch table does not hold.
    fn queue_pre_existing(&mut self, at: u64, own: Option<&[u32]>) -> (u64, u64) {
        let watching = self.registry.watching();
        let own: Option<rustc_hash::FxHashSet<u32>> = own.map(|o| o.iter().copied().collect());
        let adopted: rustc_hash::FxHashSet<u32> = self.adopted.iter().copied().collect();
        let (mut queued, mut unwatched) = (0, 0);
        for e in self.registry.entries() {
            if adopted.contains(&e.tag) {
                continue; // written when freed or at the window's end
            }
            if own.as_ref().is_some_and(|own| !own.contains(&e.tag)) {
                continue; // another session's
            }
            if watching && !e.watched {
                unwatched += 1;
            }
            queued += 1;
            self.pending.push(PendingEvent {
                hook_ns: 0,
                thread: 0,
                session_ns: Some(at),
                event: alloc_event(e, true, MemorySource::Registry),
                infer_category: false,
            });
        }
        (queued, unwatched)
    }

    /// Adds [`Self::queue_pre_existing`]'s counts to the window's summary.
    fn count_pre_existing(&mut self, (queued, unwatched): (u64, u64)) {
        self.summary.pre_existing_storages += queued;
        self.summary.unwatched_registrations += unwatched;
    }

    /// Drains the ring and keeps the resulting events queued (deterministic mode writes them
    /// all at [`Self::end`], sorted by hook time, so no later registration can land before an
    /// event already written).
    pub fn pump_queued(&mut self) {
        let _quiet = IgnoreAllocs::new();
        self.pump();
    }

    /// Moves the ring's events into the backlog without joining them (the background
    /// drainer's fast path: it keeps up with the hook; the join runs at the next pump).
    pub(crate) fn spill(&mut self) {
        if self.window_start.is_some() {
            ring::drain_into(&mut self.backlog);
            if !self.backlog.is_empty() {
                BACKLOG_WAITING.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Host-clock windows: from now on the drainer hands what it joined to `sink` (cleared when
    /// the window ends).
    pub(crate) fn set_sink(&mut self, sink: Sink) {
        self.sink = Some(sink);
    }

    /// Hands the pending events to the sink, if one is set (the drainer's path).
    pub(crate) fn deliver(&mut self) {
        UNDELIVERED.store(false, Ordering::Relaxed);
        if self.pending.is_empty() {
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            (sink.0)(std::mem::take(&mut self.pending));
        }
    }

    /// Marks events queued outside a pump (a registration) for the drainer's next delivery.
    pub(crate) fn mark_undelivered(&self) {
        if self.sink.is_some() && !self.pending.is_empty() {
            UNDELIVERED.store(true, Ordering::Relaxed);
        }
    }

    /// The background drainer's join: drains the ring into the join unless a backlog waits (a
    /// backlog means allocation outran the join; the session's next pump joins it, in order,
    /// so the drainer only keeps spilling meanwhile and the ring does not overflow).
    pub(crate) fn pump_unless_backlog(&mut self) {
        if self.backlog.is_empty() {
            self.pump();
            self.deliver();
        }
    }

    /// Drains the ring into the join (no attribution yet).
    pub(crate) fn pump(&mut self) {
        if self.window_start.is_none() {
            return;
        }
        let block_size = alloc::block_size();
        self.raw.clear();
        std::mem::swap(&mut self.raw, &mut self.backlog);
        BACKLOG_WAITING.store(false, Ordering::Relaxed);
        ring::drain_into(&mut self.raw);
        self.summary.raw_events += self.raw.len() as u64;
        let raw = std::mem::take(&mut self.raw);
        for ev in &raw {
            if let Some(freed) = self.joiner.feed(ev, block_size) {
                self.on_freed(freed, ev);
            }
        }
        self.raw = raw;
    }

    fn on_freed(&mut self, freed: StorageFreed, ev: &RawEvent) {
        match freed {
            StorageFreed::Registered { tag, free_ns } => self.registered_free(tag, free_ns, ev),
            StorageFreed::Anonymous(a) => {
                let key = a.block + key_offset();
                if crate::backward::forget_marker_storage(key) {
                    return; // a backward-span marker's copy: the probe's memory
                }
                if let Some(tag) = self.registry.by_key(key).map(|e| e.tag) {
                    // Registered but not watched (table full): a registered free.
                    self.registered_free(tag, a.free_ns, ev);
                    return;
                }
                let generation = self.registry.next_generation(key);
                let storage_id = super::registry::storage_id(key, generation);
                let mut event = anonymous_alloc(self.device().to_string(), storage_id, a.bytes);
                // The dtype read from the dying storage's CPU variant (calibrated); the shape is
                // the tensor's, which the storage does not hold: absent.
                event.dtype = a.dtype.map(|d| d.as_str().to_string());
                if a.pre_window {
                    // Live at capture start, size known from its freed data buffer.
                    self.summary.unregistered_pre_window_frees += 1;
                    event.pre_existing = true;
                    self.pending.push(PendingEvent {
                        hook_ns: self.window_start.unwrap_or(0),
                        thread: 0,
                        session_ns: Some(self.start_session_ns),
                        event: event.clone(),
                        infer_category: true,
                    });
                } else {
                    self.summary.anonymous_storages += 1;
                    let thread = a.alloc_thread.unwrap_or(a.free_thread) as u64;
                    let mut alloc = event.clone();
                    self.set_site(&mut alloc, a.site, thread);
                    self.pending.push(PendingEvent {
                        hook_ns: a.alloc_ns,
                        thread,
                        session_ns: None,
                        event: alloc,
                        infer_category: true,
                    });
                }
                event.action = MemoryAction::Free;
                event.pre_existing = false;
                self.pending.push(PendingEvent {
                    hook_ns: a.free_ns,
                    thread: a.free_thread as u64,
                    session_ns: None,
                    event,
                    infer_category: true,
                });
            }
        }
    }

    fn registered_free(&mut self, tag: u32, free_ns: u64, ev: &RawEvent) {
        let Some(entry) = self.registry.forget(tag) else {
            return;
        };
        if let Some(i) = self.adopted.iter().position(|t| *t == tag) {
            self.adopted.swap_remove(i);
            self.queue_adopted(&entry);
        }
        if let RawEvent::BlockFree { data: Some(d), .. } = *ev {
            if entry.data_ptr == Some(d.ptr) {
                self.summary.data_size_checked += 1;
                if entry.bytes != Some(d.size as u64) {
                    self.summary.data_size_mismatches += 1;
                }
            }
        }
        let mut e = alloc_event(&entry, false, MemorySource::Allocator);
        e.action = MemoryAction::Free;
        e.logical_bytes = None; // said once, on the alloc
        self.pending.push(PendingEvent {
            hook_ns: free_ns,
            thread: ev.thread() as u64,
            session_ns: None,
            event: e,
            infer_category: false,
        });
    }

    /// Drains the ring and returns every memory event ready to be written, attributed to spans.
    pub fn drain(&mut self, attr: &dyn Attribution) -> Vec<MemoryEvent> {
        let pending = self.drain_pending();
        let _quiet = IgnoreAllocs::new();
        events::attribute(pending, attr)
    }

    /// Drains the ring and returns every memory event ready to be written, not yet attributed
    /// (time and span are filled in by [`events::attribute`], e.g. on the writer thread).
    pub(crate) fn drain_pending(&mut self) -> Vec<PendingEvent> {
        let _quiet = IgnoreAllocs::new();
        self.pump();
        std::mem::take(&mut self.pending)
    }

    /// Closes the window: disarms, drains a last time and summarises. Returns the final events
    /// and the summary; non-persistent registry entries are forgotten.
    pub fn end(&mut self, attr: &dyn Attribution) -> (Vec<MemoryEvent>, CaptureSummary) {
        let (pending, summary) = self.end_pending();
        let _quiet = IgnoreAllocs::new();
        (events::attribute(pending, attr), summary)
    }

    /// [`Self::end`] without the attribution: the final events as they wait for their time and
    /// span (attributed by [`events::attribute`], e.g. on the writer thread).
    pub(crate) fn end_pending(&mut self) -> (Vec<PendingEvent>, CaptureSummary) {
        // What the drainer has not delivered yet is in `pending`: returned with the rest.
        self.sink = None;
        let armed_calls = alloc::armed_alloc_calls();
        // Adopted storages not freed so far: their `pre_existing` alloc, with what the
        // registry knows of them now (a free still in the ring follows it).
        let quiet = IgnoreAllocs::new();
        for tag in std::mem::take(&mut self.adopted) {
            if let Some(entry) = self.registry.get(tag).cloned() {
                self.queue_adopted(&entry);
            }
        }
        drop(quiet);
        let mut events = self.drain_pending();
        let was_open = self.window_start.take().is_some();
        if was_open {
            // Disarmed with storage- and tensor-sized frees held: every block the join still
            // believes live stays readable until the scan below has read it.
            hook::disarm_and_hold();
            alloc::sites::stop();
            super::drainer::window_closed();
        }
        let _quiet = IgnoreAllocs::new();
        // Frees that raced with disarming are still in the ring: drain them too.
        self.window_start = Some(0);
        events.extend(self.drain_pending());
        let identified = if was_open {
            let found = self.queue_live_at_end();
            hold::release();
            #[cfg(feature = "cuda-ledger")]
            {
                self.summary.device_storages =
                    self.queue_device_storages(self.device(), self.start_session_ns);
            }
            events.append(&mut self.pending);
            found
        } else {
            rustc_hash::FxHashSet::default()
        };
        self.window_start = None;
        self.joiner.close();
        let registry = &self.registry;
        self.summary.unidentified_live_blocks = self
            .joiner
            .unidentified_live_blocks(|b| registry.has_block(b) || identified.contains(&b));
        self.summary.join = self.joiner.stats;
        self.summary.armed_alloc_calls = armed_calls;
        self.summary.dropped_events = ring::dropped_events();
        self.summary.sites =
            self.site_settings
                .map(|(threshold, unwinder)| super::sites::SiteCapture {
                    threshold_bytes: threshold as u64,
                    unwinder,
                    counts: alloc::sites::counts(),
                    sites: self.sites.stacks().len() as u64,
                    storages_with_site: self.sites.storages_with_site,
                    storages_without_site: self.sites.storages_without_site,
                });
        self.registry.clear_session_entries();
        (events, self.summary.clone())
    }

    /// Queues an `alloc` (no `free`) for every unregistered storage allocated in the window and
    /// still live at its end (a KV cache that outlives the call, a tensor kept in a `Vec`
    /// across steps): its data buffer's exact allocation time, heap bytes, thread and site, its
    /// dtype read from the live block. Returns the blocks found.
    ///
    /// Call only after `disarm_and_hold` and the last drain, before `hold::release`.
    fn queue_live_at_end(&mut self) -> rustc_hash::FxHashSet<usize> {
        let mut found = rustc_hash::FxHashSet::default();
        let Ok(calib) = calibrate() else {
            return found;
        };
        let Some(data_ptr_offset) = calib.data_ptr_offset else {
            return found;
        };
        if !self.device().is_cpu() {
            return found;
        }
        let registry = &self.registry;
        let key_offset = calib.key_offset;
        let skip = |b: usize| {
            registry.by_key(b + key_offset).is_some()
                || crate::backward::is_marker_storage(b + key_offset)
        };
        // SAFETY: the caller disarmed the hook holding storage- and tensor-sized frees before
        // the last drain fed the join, and releases the hold only after this returns.
        let live = unsafe {
            self.joiner.live_storages(
                calib.tensor_storage_offset,
                calib.block_size,
                data_ptr_offset,
                skip,
            )
        };
        for l in live {
            let key = l.block + key_offset;
            let generation = self.registry.next_generation(key);
            let storage_id = super::registry::storage_id(key, generation);
            let bytes = l.data.size as u64;
            let mut event = anonymous_alloc(self.device().to_string(), storage_id, bytes);
            // SAFETY: the block is live (strong count checked) and held readable.
            let code = unsafe { hook::dtype_code(l.block as *const u8, calib.block_size) };
            event.dtype = alloc::dtype_of_code(code).map(|d| d.as_str().to_string());
            let thread = u64::from(l.data.thread);
            self.set_site(&mut event, l.data.site, thread);
            self.pending.push(PendingEvent {
                hook_ns: l.data.ts_ns,
                thread,
                session_ns: None,
                event,
                infer_category: true,
            });
            self.summary.live_at_end_storages += 1;
            self.summary.live_at_end_bytes = self.summary.live_at_end_bytes.saturating_add(bytes);
            found.insert(l.block);
        }
        found
    }

    /// The summary so far (of the last window once it ended).
    pub fn summary(&self) -> &CaptureSummary {
        &self.summary
    }

    /// Queues the `pre_existing` alloc of an adopted storage at capture start.
    fn queue_adopted(&mut self, entry: &super::registry::StorageEntry) {
        self.pending.push(PendingEvent {
            hook_ns: 0,
            thread: 0,
            session_ns: Some(self.start_session_ns),
            event: alloc_event(entry, true, MemorySource::Allocator),
            infer_category: false,
        });
    }

    /// Starts the session tracker for `owner` (a session's storage plug-in) at session
    /// creation: arms the hook, from now on every storage is known. `Err` says why not (the
    /// session's contract then says so).
    pub(crate) fn start_tracking(&mut self, owner: u64) -> Result<(), String> {
        // Calibration (first call) must see its own allocations: before `IgnoreAllocs`.
        let calib = calibrate().map_err(|e| format!("automatic storage capture is off: {e}"))?;
        let _quiet = IgnoreAllocs::new();
        if calib.data_ptr_offset.is_none() {
            return Err("calibration could not pin down the data pointer's offset".into());
        }
        if let Some(t) = &self.tracker {
            return Err(format!(
                "another session (plug-in {}) was tracking storages when this one was created",
                t.owner
            ));
        }
        if self.window_start.is_some() || alloc::is_armed() {
            return Err("another capture was running when this session was created".into());
        }
        if !self.registry.watching() {
            self.registry.enable_watch(calib.key_offset);
        }
        let foreign = tracker::foreign_tensors_so_far()
            .ok_or_else(|| "the marker tensor could not be created".to_string())?;
        self.backlog.clear();
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        self.raw.clear();
        self.tracker = Some(SessionTracker::new(
            owner,
            ring::dropped_events(),
            foreign,
            calib.block_size,
            calib.tensor_block_size,
        ));
        hook::arm();
        super::drainer::tracking_started();
        Ok(())
    }

    /// Whether `owner`'s tracker is running.
    pub(crate) fn tracking(&self, owner: u64) -> bool {
        self.tracker
            .as_ref()
            .is_some_and(|t| t.owner == owner && t.interrupted.is_none())
    }

    /// Drains the ring into the running tracker (the drainer's path while a session waits for
    /// its captured step).
    pub(crate) fn pump_tracker(&mut self) {
        if self.window_start.is_some() {
            return;
        }
        let Some(t) = self.tracker.as_mut() else {
            return;
        };
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        let running = t.interrupted.is_none();
        t.feed(&self.raw);
        self.raw.clear();
        if running && t.interrupted.is_some() {
            // It gave up (too many addresses): stop logging; its owner's contract says why.
            hook::disarm();
            super::drainer::tracking_stopped();
        }
    }

    /// Stops the running tracker of another session (a capture or an optimizer construction
    /// needs the hook to itself): its owner's contract will say `why`.
    pub(crate) fn interrupt_tracking(&mut self, why: &str) {
        if let Some(mut t) = self.tracker.take() {
            self.disarm_tracking();
            t.interrupt(why);
            if let Some(reason) = t.interrupted {
                self.lost_tracking.push((t.owner, reason));
            }
        }
    }

    /// Ends `owner`'s tracking without a capture (its session finished or was dropped).
    pub(crate) fn stop_tracking(&mut self, owner: u64) {
        self.lost_tracking.retain(|(o, _)| *o != owner);
        if self.window_start.is_none() {
            // A meta written without a capture (the step never reached) adopted storages that
            // no window will write: the plug-in forgets their entries.
            self.adopted.clear();
            self.adopted_figures = (0, 0);
        }
        if self.tracker.as_ref().is_some_and(|t| t.owner == owner) {
            self.tracker = None;
            if self.window_start.is_none() {
                self.disarm_tracking();
            }
        }
    }

    /// Disarms the hook a tracker had armed and discards what the ring still holds (events of
    /// a tracking nobody will read).
    fn disarm_tracking(&mut self) {
        hook::disarm();
        super::drainer::tracking_stopped();
        let _quiet = IgnoreAllocs::new();
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        self.raw.clear();
    }

    /// At capture start (before `meta`): stops `owner`'s tracker and registers every storage
    /// it saw allocated and still live — not already registered (parameters, optimizer state) —
    /// as a session entry of category `other` (inferred) with its heap bytes, written
    /// `pre_existing` at capture start. Returns what is known about the storages live now, and
    /// the tags registered.
    pub(crate) fn adopt_live_storages(&mut self, owner: u64) -> (PreSessionStorages, Vec<u32>) {
        let _quiet = IgnoreAllocs::new();
        self.adopted.clear();
        self.adopted_figures = (0, 0);
        if let Some(i) = self.lost_tracking.iter().position(|(o, _)| *o == owner) {
            let (_, why) = self.lost_tracking.swap_remove(i);
            return (PreSessionStorages::Untracked(why), Vec::new());
        }
        let Some(mut t) = self.tracker.take_if(|t| t.owner == owner) else {
            return (
                PreSessionStorages::Untracked("the session was not tracking storages".into()),
                Vec::new(),
            );
        };
        let calib = match calibrate() {
            Ok(c) => c,
            Err(e) => return (PreSessionStorages::Untracked(e.to_string()), Vec::new()),
        };
        // From here until `hold::release`, no storage- or tensor-sized block is returned to the
        // inner allocator: every block the tracker believes live stays readable.
        hook::disarm_and_hold();
        super::drainer::tracking_stopped();
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        t.feed(&self.raw);
        self.raw.clear();
        let dropped = ring::dropped_events().saturating_sub(t.dropped_at_start);
        let result = if let Some(why) = t.interrupted.clone() {
            (PreSessionStorages::Untracked(why), Vec::new())
        } else if dropped > 0 {
            (
                PreSessionStorages::Untracked(format!(
                    "the allocator ring dropped {dropped} events before capture start"
                )),
                Vec::new(),
            )
        } else {
            let layout = ScanLayout {
                block_size: calib.block_size,
                data_ptr_offset: calib.data_ptr_offset.unwrap_or(usize::MAX),
                tensor_block_size: calib.tensor_block_size,
                tensor_storage_offset: calib.tensor_storage_offset,
            };
            // SAFETY: the hook was disarmed with storage- and tensor-sized frees held before the
            // last drain fed the tracker, and the hold lasts until after this call.
            let live = unsafe { t.live_storages(layout) };
            let mut tags = Vec::new();
            for s in &live.storages {
                let key = s.block + calib.key_offset;
                if let Some(e) = self.registry.by_key(key) {
                    if !e.watched || alloc::watch::get(s.block) == e.tag {
                        continue; // a parameter, optimizer state, a labelled tensor
                    }
                    let stale = e.tag;
                    self.registry.forget(stale);
                }
                let tag = self.registry.register_session_raw(
                    key,
                    s.bytes,
                    s.data,
                    RegisterAs {
                        label: None,
                        category: MemoryCategory::Other,
                        category_source: CategorySource::Inferred,
                    },
                );
                self.adopted_figures.0 += 1;
                self.adopted_figures.1 += s.bytes;
                tags.push(tag);
            }
            self.adopted = tags.clone();
            let outcome = if t.foreign_tensors > 0 {
                PreSessionStorages::OlderUnknown {
                    tensors: t.foreign_tensors,
                }
            } else if live.unsized_storages > 0 {
                PreSessionStorages::Unsized {
                    storages: live.unsized_storages,
                }
            } else {
                PreSessionStorages::AllKnown
            };
            (outcome, tags)
        };
        hold::release();
        result
    }
}

/// The calibrated offset of a storage key inside its block (0 before calibration).
pub(super) fn key_offset() -> usize {
    calibrate().map(|c| c.key_offset).unwrap_or(0)
}

/// The figures of the last capture window in this process (match rate, allocation calls,
/// drops, unidentified live blocks).
pub fn last_summary() -> CaptureSummary {
    lock().summary.clone()
}

/// Declares pre-existing storage the capture cannot size (e.g. an optimizer built outside a
/// [`crate::ProbedOptimizer`], whose state the probe never saw): sessions started afterwards
/// declare logical memory `partial` with `reason`.
pub fn declare_unknown_pre_existing(reason: impl Into<String>) {
    lock().declare_unknown_pre_existing(reason);
}
