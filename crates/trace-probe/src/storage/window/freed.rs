//! What a drained free means: a registered storage's free, or an unregistered CPU storage
//! recognised by its drop signature (written as an alloc and free pair, or `pre_existing`).

use trace_alloc::ring::RawEvent;
use trace_wire::{MemoryAction, MemorySource};

use super::state::CaptureState;
use crate::storage::calibrate::key_offset;
use crate::storage::events::{alloc_event, anonymous_alloc, PendingEvent};
use crate::storage::join::StorageFreed;
use crate::storage::registry::storage_id;

impl CaptureState {
    pub(in crate::storage) fn on_freed(&mut self, freed: StorageFreed, ev: &RawEvent) {
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
                let storage_id = storage_id(key, generation);
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
}
