//! The loss's graph registered on the helper thread ([`crate::beside`]) while backward runs.
//!
//! Registering the graph (walking `loss.sorted_nodes()` and registering every node's storage
//! as a parameter or an activation) reads tensors the loss keeps alive until backward returns,
//! so it can run beside backward; it is joined when backward ends, before the gradients are
//! registered (whose registration must follow the graph's) and before the caller could drop
//! the loss. The job holds a clone of the loss and drops it before it reports: no storage is
//! freed on the helper. Deterministic mode registers on the training thread (its storage ids
//! follow the order of registration).

use std::sync::Mutex;

use candle_core::Tensor;

use super::window as capture;
use crate::beside::Pending;

/// At most one graph registration in flight per session.
#[derive(Default)]
pub(crate) struct GraphBeside(Mutex<Option<Pending<()>>>);

impl GraphBeside {
    /// Registers `loss`'s graph beside (host-clock mode), else here.
    pub(crate) fn register(&self, loss: &Tensor, deterministic: bool) {
        self.join();
        if !deterministic {
            let loss = loss.clone();
            let training_thread = trace_alloc::thread_key();
            let job = crate::beside::run(move || {
                capture::lock().register_graph_for(&loss, Some(training_thread));
                drop(loss);
            });
            if let Some(job) = job {
                *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
                return;
            }
        }
        capture::lock().register_graph(loss);
    }

    /// Waits for a registration in flight (none: returns at once).
    pub(crate) fn join(&self) {
        let job = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(job) = job {
            // A panicked registration leaves the graph's storages unregistered: their memory
            // events stay `other`, as for any storage the probe cannot name.
            let _ = job.join();
        }
    }
}
