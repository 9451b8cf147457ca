//! The background drainer: while a capture window is open, a thread moves the ring's events
//! out of it (into a backlog the join reads at its next pump) whenever it passes a high-water mark (a quarter of its capacity), so a
//! single long span (a large model's backward is one span) does not fill the ring between the
//! session's drains at span ends. Only code that allocates faster than the drainer empties the
//! ring drops events; drops stay counted and written into the trace.
//!
//! The thread is started once per process (at the first window), parks while no window is
//! open, polls [`crate::alloc::pending_events`] every [`POLL`] while one is, and ignores its own
//! allocations ([`IgnoreAllocs`]). While [`crate::alloc::set_ring_capacity`] has lowered the
//! capacity (a test knob that makes overflow reachable), it stands aside.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Duration;

use crate::alloc::ring;
use crate::alloc::IgnoreAllocs;

/// How often the drainer looks at the ring while a window is open.
pub(crate) const POLL: Duration = Duration::from_millis(1);

/// A window is open.
static OPEN: AtomicBool = AtomicBool::new(false);
/// The drainer thread, once started.
static THREAD: OnceLock<Option<Thread>> = OnceLock::new();

/// Called by the window before it arms: starts (once) and wakes the drainer.
pub(crate) fn window_opened() {
    OPEN.store(true, Ordering::SeqCst);
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

/// Called by the window after it disarmed.
pub(crate) fn window_closed() {
    OPEN.store(false, Ordering::SeqCst);
}

fn run() {
    let _quiet = IgnoreAllocs::new();
    loop {
        if !OPEN.load(Ordering::SeqCst) {
            std::thread::park();
            continue;
        }
        let capacity = ring::ring_capacity();
        if capacity == ring::RING_CAPACITY && ring::pending_events() >= (capacity / 4) as u64 {
            super::window::lock().spill();
        } else {
            std::thread::sleep(POLL);
        }
    }
}
