//! Opening the window: arming the hook at capture start, queueing the registered storages as
//! `pre_existing` allocs, the allocation-site settings.

use trace_alloc::ring;
use trace_alloc::IgnoreAllocs;
use trace_wire::{MemoryEvent, MemorySource};

use super::drainer;
use super::state::CaptureState;
use super::summary::CaptureSummary;
use crate::device::DeviceLabel;
use crate::storage::calibrate::calibrate;
use crate::storage::events::{alloc_event, PendingEvent};
use crate::storage::join::Joiner;
use crate::storage::sites::SiteTable;

/// What [`CaptureState::begin_session`] did.
#[derive(Debug)]
pub(crate) enum Begun {
    /// The window is open and the hook armed: events reach the shared queue.
    Window,
    /// No window (registration-only mode): the session's `pre_existing` allocs, its own to write.
    RegistrationOnly(Vec<PendingEvent>),
}

impl CaptureState {
    /// Opens the window for one session: arms the hook and queues every registered storage as
    /// a `pre_existing` alloc at `start_session_ns`. Without a window (no allocator, or another session's
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
        if other_window || trace_alloc::is_armed() || trace_alloc::layout::block_size() == 0 {
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
        let start = trace_alloc::clock::process_ns();
        self.window_start = Some(start);
        self.start_session_ns = start_session_ns;
        let counts = self.queue_pre_existing(start_session_ns, None);
        self.count_pre_existing(counts);
        self.sites = SiteTable::default();
        match self.site_settings {
            Some((threshold, unwinder)) => trace_alloc::sites::reset(threshold, unwinder),
            None => trace_alloc::sites::reset(0, trace_alloc::sites::Unwinder::Libgcc),
        }
        #[cfg(feature = "cuda-ledger")]
        self.open_device_window(device, start);
        drainer::window_opened();
        trace_alloc::arm();
        Begun::Window
    }

    /// Allocation sites for the next window: allocations of at least `threshold_bytes` get
    /// their stack walked by `unwinder` (`None` or a threshold of 0: off).
    pub(crate) fn configure_sites(
        &mut self,
        settings: Option<(usize, trace_alloc::sites::Unwinder)>,
    ) {
        self.site_settings = settings.filter(|(t, _)| *t > 0 && trace_alloc::sites::SUPPORTED);
    }

    /// The sites of the last window (moved out).
    pub(crate) fn take_sites(&mut self) -> SiteTable {
        std::mem::take(&mut self.sites)
    }

    /// Names the site and the allocating thread of a storage allocated in the window, when
    /// sites are on.
    pub(in crate::storage) fn set_site(
        &mut self,
        event: &mut MemoryEvent,
        site: trace_alloc::ring::SiteTag,
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
}
