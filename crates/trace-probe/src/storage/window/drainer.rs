//! The background drainer: while a capture window is open, a thread takes the ring's events
//! every [`POLL`] and joins them (the address join of `storage::join`: storage frees matched to
//! their allocations, registered frees to their registry entries), so that work runs beside the
//! training thread instead of on it, and a single long span (a large model's backward is one
//! span) does not fill the ring between span ends. In host-clock mode it then hands the memory
//! events waiting for attribution to the session's writer thread (the window's sink), which
//! attributes them to spans and builds them: span ends do not drain at all (deterministic mode
//! drains at span ends and writes at the capture's end, as before). When the ring passes a high-water mark (a quarter of
//! its capacity: code allocating faster than the join keeps up with) the thread only moves the
//! events out into a backlog (a copy), joined by the session's next pump; it joins again once no
//! backlog waits. Only code that allocates faster than the drainer empties the ring drops events; drops stay counted and written into the trace.
//!
//! At each poll of an open window it also faults in the allocation-site pool's next pages
//! ([`trace_alloc::sites::populate_ahead`]), so the captured thread does not take those page
//! faults inside its allocations.
//!
//! The thread is started once per process (at the first window), parks while no window is
//! open, and ignores its own allocations ([`IgnoreAllocs`]). It takes the capture lock only when
//! the ring holds events, so an idle window costs one atomic load per poll. While
//! `trace_alloc::set_ring_capacity` has lowered the capacity (a test knob that makes overflow
//! reachable), it stands aside.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Duration;

use trace_alloc::ring;
use trace_alloc::IgnoreAllocs;

use super::state::lock;

/// How often the drainer looks at the ring while a window is open.
pub(crate) const POLL: Duration = Duration::from_millis(1);

/// How often it looks while a session tracker runs (warm-up steps).
const POLL_TRACKING: Duration = Duration::from_millis(1);

/// Events past which the drainer feeds the session tracker again at once, without sleeping.
/// Below it, it feeds whatever a poll interval brought: what is left in the ring at capture
/// start is fed on the training thread (the adoption's last feed, ≈ 0.45% of a captured MLP
/// step when the drainer waited for 1,024 events before feeding).
const TRACKING_BATCH: u64 = 1024;

/// A window is open.
static OPEN: AtomicBool = AtomicBool::new(false);
/// A session tracker runs (see `tracker`): the drainer feeds it.
static TRACKING: AtomicBool = AtomicBool::new(false);
/// The drainer thread, once started.
static THREAD: OnceLock<Option<Thread>> = OnceLock::new();

/// A backlog waits (the drainer only spilled): the next span end joins it.
pub(super) static BACKLOG_WAITING: AtomicBool = AtomicBool::new(false);
/// Events wait in `pending` that no ring activity may bring to the drainer's attention (a
/// registration): the drainer delivers them at its next poll.
pub(super) static UNDELIVERED: AtomicBool = AtomicBool::new(false);

/// Whether the background drainer delivers the window's events to its sink by itself: its
/// thread runs, the ring has its full capacity (see the module docs) and no backlog waits for the
/// session to join.
pub(crate) fn drainer_delivers() -> bool {
    running()
        && ring::ring_capacity() == ring::RING_CAPACITY
        && !BACKLOG_WAITING.load(Ordering::Relaxed)
}

/// Whether events wait for the drainer's delivery without ring activity.
pub(crate) fn undelivered() -> bool {
    UNDELIVERED.load(Ordering::Relaxed)
}

/// Called by the window before it arms: starts (once) and wakes the drainer.
pub(crate) fn window_opened() {
    OPEN.store(true, Ordering::SeqCst);
    wake();
}

/// Called when a session tracker starts: starts (once) and wakes the drainer.
pub(crate) fn tracking_started() {
    TRACKING.store(true, Ordering::SeqCst);
    wake();
}

/// Called when the session tracker stops.
pub(crate) fn tracking_stopped() {
    TRACKING.store(false, Ordering::SeqCst);
}

fn wake() {
    let thread = THREAD.get_or_init(|| {
        let _quiet = IgnoreAllocs::new();
        std::thread::Builder::new()
            .name("trace-probe-drainer".into())
            .spawn(run)
            .ok()
            .map(|h| h.thread().clone())
    });
    if let Some(t) = thread {
        t.unpark();
    }
}

/// Whether the drainer thread runs (it was started and its spawn did not fail).
pub(crate) fn running() -> bool {
    THREAD.get().is_some_and(Option::is_some)
}

/// Called by the window after it disarmed.
pub(crate) fn window_closed() {
    OPEN.store(false, Ordering::SeqCst);
}

fn run() {
    let _quiet = IgnoreAllocs::new();
    loop {
        if crate::storage::calibrate::in_progress() {
            // the calibration's own events wait in the ring
            std::thread::sleep(POLL);
            continue;
        }
        if !OPEN.load(Ordering::SeqCst) {
            if !TRACKING.load(Ordering::SeqCst) {
                std::thread::park();
                continue;
            }
            let capacity = ring::ring_capacity();
            let pending = ring::pending_events();
            if capacity == ring::RING_CAPACITY && pending > 0 {
                lock().pump_tracker();
            }
            if pending < TRACKING_BATCH {
                std::thread::sleep(POLL_TRACKING);
            }
            continue;
        }
        // the site pool's next pages, faulted in here rather than in the captured thread's hook
        trace_alloc::sites::populate_ahead();
        let capacity = ring::ring_capacity();
        let pending = ring::pending_events();
        if capacity == ring::RING_CAPACITY && pending >= (capacity / 4) as u64 {
            // Allocation faster than the join: only move the events out (a copy), join later.
            lock().spill();
            continue;
        }
        if capacity == ring::RING_CAPACITY && (pending > 0 || undelivered()) {
            lock().pump_unless_backlog();
        }
        std::thread::sleep(POLL);
    }
}
