//! The session tracker's side of the window: tracking every storage from session creation,
//! interrupting another session's tracker, and adopting the storages live at capture start.

use trace_alloc::ring;
use trace_alloc::{hold, IgnoreAllocs};
use trace_wire::{CategorySource, MemoryCategory, MemorySource};

use super::drainer;
use super::state::CaptureState;
use crate::storage::calibrate::calibrate;
use crate::storage::events::{alloc_event, PendingEvent};
use crate::storage::registry::{RegisterAs, StorageEntry};
use crate::storage::tracker::{self, PreSessionStorages, ScanLayout, SessionTracker};

impl CaptureState {
    /// Queues the `pre_existing` alloc of an adopted storage at capture start.
    pub(in crate::storage) fn queue_adopted(&mut self, entry: &StorageEntry) {
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
        if self.window_start.is_some() || trace_alloc::is_armed() {
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
        trace_alloc::arm();
        drainer::tracking_started();
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
            trace_alloc::disarm();
            drainer::tracking_stopped();
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
    pub(in crate::storage) fn disarm_tracking(&mut self) {
        trace_alloc::disarm();
        drainer::tracking_stopped();
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
        trace_alloc::disarm_and_hold();
        drainer::tracking_stopped();
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
                    if !e.watched || trace_alloc::watch::get(s.block) == e.tag {
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
                        view: None,
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
