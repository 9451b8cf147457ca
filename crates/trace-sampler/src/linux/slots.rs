//! The fixed, process-wide table of per-thread sample buffers the signal handler writes into.
//!
//! A slot is reserved by the sampler plug-in for one sampled thread ([`SlotHandle::reserve`]):
//! it gets an anonymous `mmap`'d buffer (never the global allocator, so the tracking allocator
//! never sees it and the handler never allocates; `MAP_NORESERVE`, so only the pages written
//! cost memory) and a new generation number. The thread's timer carries the slot's token
//! (index and generation) in its signal's `si_value`, so the handler finds its buffer without a
//! lookup, a lock or a thread-local.
//!
//! # States and who moves them
//! `FREE` → (`reserve`, the plug-in) `SETUP` → (`open`) `ARMED` ⇄ (the handler, for the time of
//! one sample) `WRITING`; (`close`, the plug-in, spinning while a handler on another thread is
//! `WRITING`) `ARMED` → `CLOSED`; (dropping the handle) → `FREE`. The handler writes only after
//! its compare-and-swap `ARMED` → `WRITING` succeeded and the generation matches its token, so a
//! late signal of a deleted timer (Linux may still deliver one that was queued) finds the slot
//! closed, or reused under another generation, and does nothing.
//!
//! # Records
//! Variable-length, in `u64` words: the timestamp (ns since `trace_alloc::clock::process_base`),
//! then `frames | flags << 32`, then the frame addresses, innermost first (the first is the
//! interrupted program counter, the others return addresses). A record that does not fit in
//! what is left of the buffer is lost and counted (`lost_buffer`).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::record::{Records, SlotCounts, TRUNCATED};

/// Header words of a record: timestamp, then frame count and flags.
const HEADER_WORDS: usize = 2;

/// Slots in the table: the most threads sampled at once in the process.
pub const SLOTS: usize = 64;

const FREE: u32 = 0;
const SETUP: u32 = 1;
const ARMED: u32 = 2;
const WRITING: u32 = 3;
const CLOSED: u32 = 4;

/// Bits of a token holding the slot index (the rest is the generation).
const INDEX_BITS: u32 = 8;

/// One slot of the table.
struct Slot {
    state: AtomicU32,
    generation: AtomicU32,
    /// Address of the mapping (0: none).
    base: AtomicUsize,
    /// Its size in words.
    capacity_words: AtomicUsize,
    /// Words written so far (only the handler writes it, while `WRITING`).
    used_words: AtomicUsize,
    counters: Counters,
}

/// The accounting of one slot (see `trace_wire::SampledThread`).
#[derive(Debug)]
struct Counters {
    ticks: AtomicU64,
    samples: AtomicU64,
    lost_overrun: AtomicU64,
    lost_buffer: AtomicU64,
    handler_ns: AtomicU64,
    frame_pointer_samples: AtomicU64,
}

impl Slot {
    const fn new() -> Self {
        Self {
            state: AtomicU32::new(FREE),
            generation: AtomicU32::new(0),
            base: AtomicUsize::new(0),
            capacity_words: AtomicUsize::new(0),
            used_words: AtomicUsize::new(0),
            counters: Counters {
                ticks: AtomicU64::new(0),
                samples: AtomicU64::new(0),
                lost_overrun: AtomicU64::new(0),
                lost_buffer: AtomicU64::new(0),
                handler_ns: AtomicU64::new(0),
                frame_pointer_samples: AtomicU64::new(0),
            },
        }
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    addr: *mut libc::c_void,
    bytes: usize,
}

// SAFETY: the mapping is plain memory owned by this value; only the handle that owns it hands
// out references, and the handler writes it only under the slot protocol above.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(bytes: usize) -> Result<Self, String> {
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(format!(
                "mmap of a {bytes}-byte sample buffer failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Self { addr, bytes })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `addr`/`bytes` are exactly what mmap returned; nothing refers to it any more
        // (the owning handle made sure its slot is no longer ARMED or WRITING).
        unsafe {
            libc::munmap(self.addr, self.bytes);
        }
    }
}

/// A reserved slot: its buffer, its token, and the protocol's plug-in side. Dropping it closes
/// the slot (if open), frees it and unmaps the buffer.
pub(super) struct SlotHandle {
    index: usize,
    generation: u32,
    mapping: Mapping,
}

impl std::fmt::Debug for SlotHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotHandle")
            .field("index", &self.index)
            .field("generation", &self.generation)
            .field("bytes", &self.mapping.bytes)
            .finish()
    }
}

impl SlotHandle {
    /// Reserves a free slot with a buffer of `bytes` (rounded down to whole words; at least one
    /// record header).
    ///
    /// # Errors
    /// Every slot is in use ([`SLOTS`] threads sampled at once), or `mmap` failed.
    pub(super) fn reserve(bytes: usize) -> Result<Self, String> {
        let bytes = (bytes / 8).max(HEADER_WORDS + 1) * 8;
        let index = TABLE
            .iter()
            .position(|s| {
                s.state
                    .compare_exchange(FREE, SETUP, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or_else(|| {
                format!("all {SLOTS} sampler slots are in use (threads sampled at once)")
            })?;
        let slot = &TABLE[index];
        let mapping = match Mapping::new(bytes) {
            Ok(m) => m,
            Err(e) => {
                slot.state.store(FREE, Ordering::Release);
                return Err(e);
            }
        };
        // Never 0, so a zeroed `si_value` names no live slot.
        let generation = slot
            .generation
            .load(Ordering::Relaxed)
            .checked_add(1)
            .unwrap_or(1);
        slot.generation.store(generation, Ordering::Relaxed);
        slot.base.store(mapping.addr as usize, Ordering::Relaxed);
        slot.capacity_words.store(bytes / 8, Ordering::Relaxed);
        slot.used_words.store(0, Ordering::Relaxed);
        for c in [
            &slot.counters.ticks,
            &slot.counters.samples,
            &slot.counters.lost_overrun,
            &slot.counters.lost_buffer,
            &slot.counters.handler_ns,
            &slot.counters.frame_pointer_samples,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        Ok(Self {
            index,
            generation,
            mapping,
        })
    }

    /// The value the timer's signal carries (`si_value`).
    pub(super) fn token(&self) -> usize {
        ((self.generation as usize) << INDEX_BITS) | self.index
    }

    /// Lets the handler write (`SETUP` → `ARMED`).
    pub(super) fn open(&self) {
        let _ = TABLE[self.index].state.compare_exchange(
            SETUP,
            ARMED,
            Ordering::Release,
            Ordering::Relaxed,
        );
    }

    /// Stops the handler from writing (`ARMED` → `CLOSED`), waiting for a handler in progress on
    /// another thread to finish its record (microseconds). Idempotent.
    pub(super) fn close(&self) {
        let slot = &TABLE[self.index];
        loop {
            match slot
                .state
                .compare_exchange(ARMED, CLOSED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(WRITING) => std::hint::spin_loop(),
                Err(_) => return, // SETUP (never opened) or CLOSED
            }
        }
    }

    /// What the slot counted so far (exact once closed).
    pub(super) fn counts(&self) -> SlotCounts {
        let c = &TABLE[self.index].counters;
        SlotCounts {
            ticks: c.ticks.load(Ordering::Acquire),
            samples: c.samples.load(Ordering::Acquire),
            lost_overrun: c.lost_overrun.load(Ordering::Acquire),
            lost_buffer: c.lost_buffer.load(Ordering::Acquire),
            handler_ns: c.handler_ns.load(Ordering::Acquire),
            frame_pointer_samples: c.frame_pointer_samples.load(Ordering::Acquire),
        }
    }

    /// The records written, in order. Closes the slot first, so the words read are final.
    pub(super) fn records(&self) -> Records<'_> {
        self.close();
        let slot = &TABLE[self.index];
        let used = slot
            .used_words
            .load(Ordering::Acquire)
            .min(self.mapping.bytes / 8);
        // SAFETY: the mapping holds `bytes / 8` initialised (zero-filled or written) words and
        // the slot is closed: no handler writes them any more.
        let words = unsafe { std::slice::from_raw_parts(self.mapping.addr as *const u64, used) };
        Records::new(words)
    }
}

impl Drop for SlotHandle {
    fn drop(&mut self) {
        self.close();
        let slot = &TABLE[self.index];
        slot.base.store(0, Ordering::Relaxed);
        slot.capacity_words.store(0, Ordering::Relaxed);
        slot.state.store(FREE, Ordering::Release);
        // `self.mapping` unmaps after this.
    }
}

/// The handler's hold on a slot for one sample (`ARMED` → `WRITING`; back to `ARMED` on drop).
pub(super) struct Writing {
    slot: &'static Slot,
}

/// Takes the slot `token` names for one sample, if it is armed under that generation.
/// Async-signal-safe: atomics only.
#[inline]
pub(super) fn begin(token: usize) -> Option<Writing> {
    let slot = TABLE.get(token & ((1 << INDEX_BITS) - 1))?;
    slot.state
        .compare_exchange(ARMED, WRITING, Ordering::Acquire, Ordering::Relaxed)
        .ok()?;
    let writing = Writing { slot };
    // The generation changes only while the slot is SETUP, so it is stable now.
    if slot.generation.load(Ordering::Relaxed) as usize != token >> INDEX_BITS {
        return None; // `writing` drops: back to ARMED
    }
    Some(writing)
}

impl Writing {
    /// Writes one record: `overrun` expirations were merged into this signal (counted as
    /// lost), then the stack `frames` (innermost first). Async-signal-safe: no allocation, no
    /// lock, no formatting.
    #[inline]
    pub(super) fn push(&self, process_ns: u64, overrun: u64, frames: &[usize], truncated: bool) {
        let c = &self.slot.counters;
        c.ticks.fetch_add(1 + overrun, Ordering::Relaxed);
        c.lost_overrun.fetch_add(overrun, Ordering::Relaxed);
        let used = self.slot.used_words.load(Ordering::Relaxed);
        let capacity = self.slot.capacity_words.load(Ordering::Relaxed);
        let base = self.slot.base.load(Ordering::Relaxed) as *mut u64;
        let need = HEADER_WORDS + frames.len();
        let fits = used
            .checked_add(need)
            .is_some_and(|end| end <= capacity && !base.is_null());
        if !fits {
            c.lost_buffer.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // SAFETY: `used + need <= capacity` words lie inside the slot's live mapping (it is
        // unmapped only after the slot left ARMED/WRITING), and only this handler writes there.
        unsafe {
            let at = base.add(used);
            at.write(process_ns);
            at.add(1)
                .write(frames.len() as u64 | if truncated { TRUNCATED } else { 0 });
            for (i, &f) in frames.iter().enumerate() {
                at.add(HEADER_WORDS + i).write(f as u64);
            }
        }
        self.slot.used_words.store(used + need, Ordering::Release);
        c.samples.fetch_add(1, Ordering::Release);
    }

    /// Adds the time this sample took in the handler, and whether its stack was walked by
    /// frame pointers.
    #[inline]
    pub(super) fn add_handler_ns(&self, ns: u64, by_frame_pointers: bool) {
        let c = &self.slot.counters;
        c.handler_ns.fetch_add(ns, Ordering::Relaxed);
        if by_frame_pointers {
            c.frame_pointer_samples.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Writing {
    #[inline]
    fn drop(&mut self) {
        self.slot.state.store(ARMED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_full_buffer_counts_losses() {
        // Room for exactly two records of 3 frames (5 words each).
        let h = SlotHandle::reserve(10 * 8).expect("slot");
        assert!(begin(h.token()).is_none(), "not open yet");
        h.open();
        for i in 0..3u64 {
            let w = begin(h.token()).expect("armed");
            w.push(100 + i, i, &[1, 2, 3 + i as usize], i == 1);
        }
        let wrong_generation = h.token() ^ (1 << INDEX_BITS);
        assert!(begin(wrong_generation).is_none());
        let got: Vec<_> = h.records().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].process_ns, 100);
        assert_eq!(got[0].frames, &[1, 2, 3]);
        assert!(!got[0].truncated);
        assert_eq!(got[1].frames, &[1, 2, 4]);
        assert!(got[1].truncated);
        let c = h.counts();
        assert_eq!(c.samples, 2);
        assert_eq!(c.lost_buffer, 1);
        assert_eq!(c.lost_overrun, 1 + 2);
        assert_eq!(c.ticks, 3 + 3);
        assert_eq!(c.ticks, c.samples + c.lost_buffer + c.lost_overrun);
        assert!(begin(h.token()).is_none(), "closed by records()");
    }

    #[test]
    fn a_released_slot_ignores_its_old_token() {
        let h = SlotHandle::reserve(4096).expect("slot");
        h.open();
        let token = h.token();
        drop(h);
        assert!(begin(token).is_none());
    }
}
