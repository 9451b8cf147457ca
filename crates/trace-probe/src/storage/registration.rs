//! Registering storages the probe can name (graph nodes, gradients, labelled tensors,
//! parameters) into the capture window: a new storage in an open window gets its `alloc` at the
//! exact time its data buffer (or block) was logged.

use candle_core::backprop::GradStore;
use candle_core::{Tensor, TensorId};
use trace_wire::{MemoryCategory, MemorySource};

use super::bytes::storage_facts;
use super::calibrate::key_offset;
use super::events::{alloc_event, PendingEvent};
use super::registry::{RegisterAs, Registration};
use super::window::CaptureState;
use crate::tensor_id::tensor_number;
use trace_alloc::IgnoreAllocs;

impl CaptureState {
    /// Registers `t` (see [`super::Registry::register`]) and, for a new storage in an open
    /// window, queues its alloc. Safe to call with the allocator missing (registration-only
    /// mode).
    pub fn register(&mut self, t: &Tensor, what: RegisterAs) -> Registration {
        let _quiet = IgnoreAllocs::new();
        self.pump();
        let facts = storage_facts(t);
        let reg = self.registry.register(t, what);
        let (Registration::New(tag), Some(start)) = (reg, self.window_start) else {
            return reg;
        };
        let block = facts.key.wrapping_sub(key_offset());
        let block_ns = self.joiner.block_alloc_at(block);
        let data = facts.data_ptr.and_then(|p| self.joiner.alloc_at(p));
        let Some(entry) = self.registry.get(tag) else {
            return reg;
        };
        if self.registry.watching() && !entry.watched {
            self.summary.unwatched_registrations += 1;
        }
        let pending = match block_ns {
            Some(b) => {
                let (ns, thread, site) = match data {
                    Some(d) if d.ts_ns <= b => (d.ts_ns, d.thread as u64, d.site),
                    _ => (
                        b,
                        self.registering_for.unwrap_or_else(trace_alloc::thread_key),
                        trace_alloc::ring::SiteTag(0),
                    ),
                };
                let mut event = alloc_event(entry, false, MemorySource::Allocator);
                self.summary.registered_in_window += 1;
                self.set_site(&mut event, site, thread);
                PendingEvent {
                    hook_ns: ns,
                    thread,
                    session_ns: None,
                    event,
                    infer_category: false,
                }
            }
            None => {
                self.summary.pre_existing_storages += 1;
                PendingEvent {
                    hook_ns: start,
                    thread: 0,
                    session_ns: None,
                    event: alloc_event(entry, true, MemorySource::Registry),
                    infer_category: false,
                }
            }
        };
        self.pending.push(pending);
        self.mark_undelivered();
        reg
    }

    /// Registers the graph nodes of `loss` (`loss.sorted_nodes()`): variables as parameters
    /// (aliases of the registered ones), everything else as activations. The outputs of
    /// backward-span markers are the probe's copies, not the user's: left out.
    pub fn register_graph(&mut self, loss: &Tensor) {
        self.register_graph_for(loss, None);
    }

    /// [`Self::register_graph`] on behalf of the thread `thread` (its key, for storages whose
    /// allocating thread the hook's log does not give), e.g. from the helper thread.
    pub(crate) fn register_graph_for(&mut self, loss: &Tensor, thread: Option<u64>) {
        let _quiet = IgnoreAllocs::new();
        self.registering_for = thread;
        self.register_graph_nodes(loss);
        self.registering_for = None;
    }

    fn register_graph_nodes(&mut self, loss: &Tensor) {
        for node in loss.sorted_nodes() {
            if crate::backward::is_marker_storage(storage_facts(node).key) {
                continue;
            }
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
    /// batch) labelled `tensor-grad`, in Candle's creation order.
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
        let mut ids: Vec<TensorId> = grads
            .get_ids()
            .copied()
            .filter(|id| !param_ids.contains(id))
            .collect();
        // The store iterates in random order; Candle's ids count up in creation order.
        ids.sort_by_key(|id| tensor_number(*id));
        for id in ids {
            if let Some(g) = grads.get_id(id) {
                self.register(
                    g,
                    RegisterAs::category(MemoryCategory::Gradient).label("tensor-grad"),
                );
            }
        }
    }
}
