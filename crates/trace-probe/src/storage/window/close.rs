//! Draining and closing the window: the events ready to be written, the last drain after
//! disarming (frees held), the unregistered storages still live at the end, the summary.

use trace_alloc::ring;
use trace_alloc::{hold, IgnoreAllocs};
use trace_wire::MemoryEvent;

use super::drainer;
use super::state::CaptureState;
use super::summary::CaptureSummary;
use crate::storage::calibrate::{calibrate, dtype_of_code};
use crate::storage::events::{self, anonymous_alloc, Attribution, PendingEvent};
use crate::storage::registry::storage_id;
use crate::storage::sites::SiteCapture;

impl CaptureState {
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
        let armed_calls = trace_alloc::armed_alloc_calls();
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
            trace_alloc::disarm_and_hold();
            trace_alloc::sites::stop();
            drainer::window_closed();
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
        self.summary.sites = self.site_settings.map(|(threshold, unwinder)| SiteCapture {
            threshold_bytes: threshold as u64,
            unwinder,
            counts: trace_alloc::sites::counts(),
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
            let storage_id = storage_id(key, generation);
            let bytes = l.data.size as u64;
            let mut event = anonymous_alloc(self.device().to_string(), storage_id, bytes);
            // SAFETY: the block is live (strong count checked) and held readable.
            let code =
                unsafe { trace_alloc::layout::dtype_code(l.block as *const u8, calib.block_size) };
            event.dtype = dtype_of_code(code).map(|d| d.as_str().to_string());
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
}
