//! The capture window's state: one process-wide [`CaptureState`] behind [`lock`], its small
//! accessors and the figures it keeps. The window's work is in the sibling files (`open`,
//! `delivery`, `freed`, `close`, `adoption`), each an `impl CaptureState` over these fields.

use std::sync::{Mutex, MutexGuard, OnceLock};

use trace_alloc::ring::RawEvent;
use trace_alloc::IgnoreAllocs;

use super::summary::CaptureSummary;
use crate::device::DeviceLabel;
use crate::storage::events::PendingEvent;
use crate::storage::join::Joiner;
use crate::storage::registry::Registry;
use crate::storage::tracker::SessionTracker;

/// The process-wide capture state (behind [`lock`]).
#[derive(Debug, Default)]
pub struct CaptureState {
    pub(in crate::storage) registry: Registry,
    pub(in crate::storage) joiner: Joiner,
    pub(in crate::storage) raw: Vec<RawEvent>,
    /// Events the background drainer moved out of the ring, not yet joined (in ring order,
    /// before anything still in the ring).
    pub(in crate::storage) backlog: Vec<RawEvent>,
    pub(in crate::storage) pending: Vec<PendingEvent>,
    /// Hook ns of capture start while a window is open.
    pub(in crate::storage) window_start: Option<u64>,
    /// Session ns of capture start (where pre-existing storages are written).
    pub(in crate::storage) start_session_ns: u64,
    pub(in crate::storage) device: Option<DeviceLabel>,
    /// Reasons logical memory is not complete, found before the meta was written.
    pub(in crate::storage) unknown_pre_existing: Vec<String>,
    pub(in crate::storage) summary: CaptureSummary,
    pub(in crate::storage) warned: bool,
    /// The session tracker (one at a time; see `tracker`).
    pub(in crate::storage) tracker: Option<SessionTracker>,
    /// Why a session's tracking was stopped by another session (owner → reason).
    pub(in crate::storage) lost_tracking: Vec<(u64, String)>,
    /// Storages adopted at the last capture start, not yet written: their `pre_existing`
    /// alloc is written when they are freed or when the window ends, so a label or category a
    /// later registration gives them (a labelled input) is in it.
    pub(in crate::storage) adopted: Vec<u32>,
    /// Figures of the last adoption: (storages, bytes).
    pub(in crate::storage) adopted_figures: (u64, u64),
    /// Host-clock windows: where the drainer hands the events it joined (the session's writer
    /// thread attributes them), so span ends need not drain.
    pub(in crate::storage) sink: Option<Sink>,
    /// Allocation sites for the next window: (threshold bytes, walker); `None`: off.
    pub(in crate::storage) site_settings: Option<(usize, trace_alloc::sites::Unwinder)>,
    /// The sites of the open (or last) window.
    pub(in crate::storage) sites: crate::storage::sites::SiteTable,
    /// The thread a registration speaks for when it is not the caller's (the loss's graph
    /// registered on the helper thread for the training thread): the allocating thread of a
    /// storage whose buffer the hook did not time.
    pub(in crate::storage) registering_for: Option<u64>,
}

/// Takes memory events waiting for attribution (see [`CaptureState::set_sink`]).
pub(crate) struct Sink(pub(crate) Box<dyn FnMut(Vec<PendingEvent>) + Send>);

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

static STATE: OnceLock<Mutex<CaptureState>> = OnceLock::new();

/// Locks the process-wide capture state (poisoning is ignored: the state stays usable).
pub fn lock() -> MutexGuard<'static, CaptureState> {
    let m = STATE.get_or_init(|| Mutex::new(CaptureState::default()));
    m.lock().unwrap_or_else(|e| e.into_inner())
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

    /// The device of the open window (the run's).
    pub(in crate::storage) fn device(&self) -> DeviceLabel {
        self.device.unwrap_or(DeviceLabel::Cpu)
    }
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
