//! The hook's counters, kept per thread and written with plain stores.
//!
//! Every allocation and free the hook sees bumps a few counters (the heap's live bytes in
//! counting mode, the armed bytes and calls, the small allocations and their bytes). A shared
//! atomic counter costs a locked read-modify-write at each bump: a full barrier on x86 that waits
//! for the store buffer to drain, right after Candle's kernels wrote their outputs (the llama
//! demo's captured step ran about ten of them per allocation and free; `docs/cost.md`,
//! "2026-12-07 (later)"). Here each of the first [`OWNED_SLOTS`] threads (by [`thread_key`])
//! owns a slot that only it writes: a bump is a relaxed load and a relaxed store of its own
//! cache line (two plain `mov`s on x86, no barrier, no line bouncing between cores). A later
//! thread shares one of [`SHARED_SLOTS`] shards and pays the locked add, as before.
//!
//! Counters are cumulative and never reset (a reset from another thread would race with the
//! owner's plain store and be lost): a window's figure is the total now less the total at its
//! start, both read outside the hook ([`Base`]). A reader sums every slot with relaxed loads, a
//! figure as exact as the sharded counters it replaces: each slot's value is some value its
//! owner stored, and the sum is exact once the threads it counts are quiet.
//!
//! [`thread_key`]: crate::thread_key

use std::sync::atomic::{AtomicU64, Ordering};

use crate::line::Line;
use crate::thread::thread_key;

/// Threads with keys `1..=OWNED_SLOTS` count in a slot of their own (plain stores).
pub(crate) const OWNED_SLOTS: usize = 256;
/// Shards for the threads beyond them (a locked add), by key modulo this (a power of two).
pub(crate) const SHARED_SLOTS: usize = 32;

/// What a slot counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    /// Bytes allocated less bytes freed through a counting-mode allocator, any time (i64 as
    /// two's complement).
    HeapNet,
    /// Bytes allocated less bytes freed through the armed hook (i64 as two's complement).
    ArmedNetBytes,
    /// Allocation calls seen by the armed hook.
    ArmedAllocCalls,
    /// Armed allocations below the site threshold.
    SmallAllocs,
    /// Their requested bytes.
    SmallBytes,
    /// Stacks captured.
    Captured,
    /// Captured stacks cut at the pool's frame limit.
    Truncated,
    /// ns spent walking stacks (the hook's clock).
    CaptureNs,
}

/// Counters per slot.
const COUNTERS: usize = 8;

/// One thread's (or one shard's) counters, alone on their cache line.
pub(crate) struct Slot([AtomicU64; COUNTERS]);

impl Slot {
    const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; COUNTERS])
    }
}

static OWNED: [Line<Slot>; OWNED_SLOTS] = [const { Line(Slot::new()) }; OWNED_SLOTS];
static SHARED: [Line<Slot>; SHARED_SLOTS] = [const { Line(Slot::new()) }; SHARED_SLOTS];

/// Adds `delta` (wrapping: a negative `i64` passed as `delta as u64`) to the calling thread's
/// counter `c`. Never allocates, never locks; on an owned slot, no atomic read-modify-write.
#[inline]
pub(crate) fn add(c: Counter, delta: u64) {
    let key = thread_key() as usize;
    match key.checked_sub(1) {
        Some(i) if i < OWNED_SLOTS => {
            // Only this thread writes its owned slot, so a load and a store lose no update.
            let cell = &OWNED[i].0 .0[c as usize];
            cell.store(
                cell.load(Ordering::Relaxed).wrapping_add(delta),
                Ordering::Relaxed,
            );
        }
        _ => {
            SHARED[key & (SHARED_SLOTS - 1)].0 .0[c as usize].fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// [`add`] of a signed amount.
#[inline]
pub(crate) fn add_signed(c: Counter, delta: i64) {
    add(c, delta as u64);
}

/// The sum of counter `c` over every thread (wrapping; read as `i64` for the signed counters).
pub(crate) fn total(c: Counter) -> u64 {
    OWNED
        .iter()
        .chain(SHARED.iter())
        .map(|s| s.0 .0[c as usize].load(Ordering::Relaxed))
        .fold(0u64, u64::wrapping_add)
}

/// The totals of some counters at the start of a window, so that the window's figure is the
/// total now less this.
pub(crate) struct Base<const N: usize> {
    counters: [Counter; N],
    at_start: [AtomicU64; N],
}

impl<const N: usize> Base<N> {
    /// A base for `counters`, all at 0 (the process's start).
    pub(crate) const fn new(counters: [Counter; N]) -> Self {
        Self {
            counters,
            at_start: [const { AtomicU64::new(0) }; N],
        }
    }

    /// Starts a window: records every counter's total now. Call outside the hook, while the
    /// counters are quiet (disarmed).
    pub(crate) fn start(&self) {
        for (c, at) in self.counters.iter().zip(&self.at_start) {
            at.store(total(*c), Ordering::Relaxed);
        }
    }

    /// Counter `c`'s total since the window's start (wrapping). `c` must be one of this base's.
    pub(crate) fn since_start(&self, c: Counter) -> u64 {
        let i = self
            .counters
            .iter()
            .position(|k| *k == c)
            .expect("a counter of this base");
        total(c).wrapping_sub(self.at_start[i].load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_bumps_sum_across_slots_and_a_window_starts_from_its_base() {
        // HeapNet is not moved by this test binary (its allocator is the system one).
        let base = Base::new([Counter::HeapNet]);
        base.start();
        add_signed(Counter::HeapNet, 100);
        let other = std::thread::spawn(|| {
            add_signed(Counter::HeapNet, -30);
            crate::thread_key()
        })
        .join()
        .unwrap();
        assert_ne!(other, crate::thread_key());
        assert_eq!(base.since_start(Counter::HeapNet) as i64, 70);
        base.start();
        assert_eq!(base.since_start(Counter::HeapNet), 0);
    }

    #[test]
    fn threads_past_the_owned_slots_share_a_shard_and_still_sum() {
        let before = total(Counter::Truncated);
        let keys: Vec<u64> = (0..OWNED_SLOTS + 8)
            .map(|_| {
                std::thread::spawn(|| {
                    add(Counter::Truncated, 1);
                    crate::thread_key()
                })
                .join()
                .unwrap()
            })
            .collect();
        assert!(keys.iter().any(|k| *k as usize > OWNED_SLOTS));
        assert_eq!(total(Counter::Truncated) - before, (OWNED_SLOTS + 8) as u64);
    }
}
