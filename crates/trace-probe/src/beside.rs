//! One helper thread per process, beside the training thread: work of the captured step that
//! reads the user's tensors but need not run on the training thread (the gradient facts while
//! the optimizer steps, the graph's registration while backward runs) is handed to it and
//! joined before the tensors could be freed.
//!
//! Why a join and not the writer thread: a job holds clones of the user's tensors (an `Arc`
//! each). Were a clone dropped after the user dropped the original, the storage would be freed
//! later and on another thread, and the trace would show a lifetime the user's program did not
//! have. So the training thread waits for the job at a point where it still holds the tensors
//! itself (after the optimizer step, at the end of backward); the job drops its clones before
//! it reports, so no free ever happens on this thread.
//!
//! The thread is started outside the captured step ([`start`], called when a session opens and
//! when a `ProbedOptimizer` is built): starting a thread inside the step would cost the
//! training thread more than the work moved. Where it is not running, or a job cannot be
//! handed over, the caller does the work itself, as before. A job that panics is caught: its
//! [`Pending::join`] then returns `None` and the caller does the work itself.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// The helper's queue; `None` when the thread could not be started.
static HELPER: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();

/// Starts the helper thread if it is not running (once per process; later calls are one
/// atomic load). Call outside the captured step.
pub(crate) fn start() {
    HELPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("trace-probe-beside".into())
            .spawn(move || serve(rx))
            .ok()
            .map(|_| Mutex::new(tx))
    });
}

fn serve(rx: Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        // A panicking job drops its result sender: the caller's join sees `None` and does the
        // work itself; this thread goes on serving.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

/// The result of a job handed to the helper, to be joined.
#[must_use = "join the job before the tensors it holds may be freed"]
pub(crate) struct Pending<T> {
    rx: Receiver<T>,
}

impl<T> Pending<T> {
    /// Waits for the job: `Some(result)`, or `None` when it panicked or the helper is gone.
    pub(crate) fn join(self) -> Option<T> {
        self.rx.recv().ok()
    }
}

/// Hands `job` to the helper thread; `None` (nothing runs) when the helper is not running or
/// refused it: the caller then does the work itself. The job's allocations on the helper are
/// not the user's: it runs with the tracking allocator's logging off.
pub(crate) fn run<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Option<Pending<T>> {
    let helper = HELPER.get()?.as_ref()?;
    // The hand-over's own allocations (the box, the result channel) are the probe's.
    let _quiet = trace_alloc::IgnoreAllocs::new();
    let (tx, rx) = mpsc::sync_channel(1);
    let boxed: Job = Box::new(move || {
        let _quiet = trace_alloc::IgnoreAllocs::new();
        let result = job();
        let _ = tx.send(result);
    });
    let sender = helper.lock().unwrap_or_else(|e| e.into_inner());
    sender.send(boxed).ok()?;
    Some(Pending { rx })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_beside_and_a_panicking_job_reads_none() {
        start();
        let here = std::thread::current().id();
        let there = run(move || std::thread::current().id() != here)
            .and_then(Pending::join)
            .unwrap_or(false);
        assert!(there, "the job ran on another thread");
        let panicked = run(|| -> u32 { panic!("a job's panic") }).and_then(Pending::join);
        assert_eq!(panicked, None);
        // The helper survived the panic.
        assert_eq!(run(|| 7u32).and_then(Pending::join), Some(7));
    }
}
