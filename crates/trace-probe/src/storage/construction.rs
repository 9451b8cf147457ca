//! Optimizer state found at construction: AdamW allocates its moments in `new` and keeps them
//! private, so the probe arms the allocator around the inner optimizer's construction and
//! registers every storage created then and still live after it (persistent: kept across
//! sessions, written as `pre_existing` at each capture start). When the optimizer's state
//! layout is known ([`crate::optim_state`]) and the storages found match it exactly, in
//! allocation order, each is labelled with its parameter and slot and given the parameter's
//! shape and dtype; otherwise every one keeps the plain label.

use trace_wire::MemoryCategory;

use super::join::Joiner;
use super::registry::RegisterAs;
use super::window::CaptureState;
use rustc_hash::FxHashMap as HashMap;
use trace_alloc::ring::RawEvent;
use trace_alloc::{hold, ring, IgnoreAllocs};

use super::calibrate::{calibrate, Calibration};
use crate::optim_state::StateSlot;

/// What the storages a construction makes are registered as: a plain label and category, and
/// the layout that ties each to its own label when they match it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Constructed<'a> {
    /// The label of every storage when the layout does not match (or there is none).
    pub(crate) label: &'a str,
    /// Their category.
    pub(crate) category: MemoryCategory,
    /// The storages expected, in allocation order.
    pub(crate) layout: Option<&'a [StateSlot]>,
}

impl CaptureState {
    /// Runs `f` with the hook armed and registers every storage it created that is still live
    /// after it as `what` says. Returns `f`'s result and the bytes found; `None`
    /// bytes when the allocator is unavailable, busy, or the ring dropped events (the caller
    /// then declares unknown pre-existing storage).
    ///
    /// A storage is a block-sized allocation of the window with no logged free whose
    /// data-pointer word (at the calibrated offset) names a buffer allocated in the window
    /// before it; the buffer's logged size is the storage's bytes.
    ///
    /// `owner` is the session whose storage plug-in asks: when
    /// that session's tracker is running, the hook stays armed (construction is part of what
    /// the tracker sees) and the construction's events are read with frees held while armed;
    /// another session's running tracker is stopped first (its contract says why).
    pub(crate) fn capture_construction_for<R>(
        &mut self,
        owner: u64,
        what: Constructed<'_>,
        f: impl FnOnce() -> R,
    ) -> (R, Option<u64>) {
        if self.tracking(owner) {
            return self.capture_construction_tracked(what, f);
        }
        if self.window_start.is_none() {
            self.interrupt_tracking("another session's optimizer construction armed the allocator");
        }
        let calib = match calibrate() {
            Ok(c) if self.window_start.is_none() && !trace_alloc::is_armed() => c,
            _ => return (f(), None),
        };
        if !self.registry.watching() {
            self.registry.enable_watch(calib.key_offset);
        }
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        self.raw.clear();
        let dropped_before = ring::dropped_events();
        trace_alloc::arm();
        let out = f();
        // From here until `hold::release`, no storage-sized block is returned to the inner
        // allocator, whichever thread frees it: a block with no free logged while armed stays
        // readable until the hold ends.
        trace_alloc::disarm_and_hold();
        let _quiet = IgnoreAllocs::new();
        ring::drain_into(&mut self.raw);
        let found = self.register_drained(&calib, dropped_before, what);
        (out, found)
    }

    /// The construction capture while this session's tracker runs (the hook already armed).
    fn capture_construction_tracked<R>(
        &mut self,
        what: Constructed<'_>,
        f: impl FnOnce() -> R,
    ) -> (R, Option<u64>) {
        let Ok(calib) = calibrate() else {
            return (f(), None);
        };
        {
            let _quiet = IgnoreAllocs::new();
            self.pump_tracker();
        }
        let dropped_before = ring::dropped_events();
        let out = f();
        // Frees stay logged; their blocks are parked until `hold::release`, so a block the
        // drain below has not seen freed stays readable.
        trace_alloc::hold_armed();
        let _quiet = IgnoreAllocs::new();
        self.raw.clear();
        ring::drain_into(&mut self.raw);
        if let Some(t) = self.tracker.as_mut() {
            t.feed(&self.raw);
        }
        let found = self.register_drained(&calib, dropped_before, what);
        (out, found)
    }

    /// The end of both construction captures (frees held, the window drained into `raw`):
    /// registers the constructed storages unless the ring dropped events since
    /// `dropped_before` (then `None`: unknown), releases the held frees, clears `raw`.
    fn register_drained(
        &mut self,
        calib: &Calibration,
        dropped_before: u64,
        what: Constructed<'_>,
    ) -> Option<u64> {
        let found = if ring::dropped_events() != dropped_before {
            None
        } else {
            calib
                .data_ptr_offset
                .map(|off| self.register_constructed(calib.block_size, calib.key_offset, off, what))
        };
        hold::release();
        self.raw.clear();
        found
    }

    /// Registers the storages among the live blocks of the drained window, in allocation order
    /// (the order of their blocks' allocations in the ring); returns their bytes.
    fn register_constructed(
        &mut self,
        block_size: usize,
        key_offset: usize,
        data_ptr_offset: usize,
        what: Constructed<'_>,
    ) -> u64 {
        let mut joiner = Joiner::default();
        let mut order: HashMap<usize, usize> = HashMap::default();
        for (i, ev) in self.raw.iter().enumerate() {
            if let RawEvent::Alloc { addr, size, .. } = *ev {
                if size == block_size {
                    order.insert(addr, i);
                }
            }
            joiner.feed(ev, block_size);
        }
        let mut blocks: Vec<(usize, u64)> = joiner.live_block_list();
        blocks.sort_by_key(|b| (order.get(&b.0).copied(), b.1));
        // (block, data pointer, bytes) of each storage, in allocation order
        let mut found: Vec<(usize, usize, u64)> = Vec::new();
        for (block, block_ns) in blocks {
            // SAFETY: `block` is a `block_size`-byte allocation logged while armed with no free
            // logged while armed (the ring dropped nothing), so it was live when the hook was
            // disarmed; since then storage-sized frees are held (`disarm_and_hold`), so its
            // memory has not been returned to the allocator even if another thread dropped it
            // meanwhile. The read is of one aligned word inside it (`data_ptr_offset +
            // size_of::<usize>() <= block_size`, checked by calibration).
            let word = unsafe { ((block + data_ptr_offset) as *const usize).read_volatile() };
            if let Some(data) = joiner.alloc_at(word) {
                if data.ts_ns <= block_ns && data.size > 0 {
                    found.push((block, word, data.size as u64));
                }
            }
        }
        let tied = what.layout.filter(|slots| {
            slots.len() == found.len() && slots.iter().zip(&found).all(|(s, f)| s.bytes == f.2)
        });
        let mut total = 0u64;
        for (i, (block, word, bytes)) in found.into_iter().enumerate() {
            let register_as = match tied.and_then(|slots| slots.get(i)) {
                Some(slot) => RegisterAs::category(what.category)
                    .label(slot.label.clone())
                    .view(slot.shape.clone(), slot.dtype.clone()),
                None => RegisterAs::category(what.category).label(what.label),
            };
            self.registry
                .register_raw(block + key_offset, bytes, word, register_as);
            total += bytes;
        }
        total
    }
}
