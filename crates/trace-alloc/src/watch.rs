//! The exact-address watch table: which storage blocks are registered and still alive.
//!
//! Lock-free, insert-only open addressing with linear probing over a static array. A slot's key is
//! written once (CAS 0 → address) and never moved or cleared, so there are no tombstones and a
//! concurrent reader can never miss an entry that is being moved. A slot's tag is the registry's
//! id of the storage living at that address: set on registration, swapped to 0 by the hook when
//! the block is freed. Address reuse is immediate in practice, which keeps the number of distinct
//! keys (occupied slots) small: 110–270 after three MLP steps in the prototype.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Number of slots (a power of two).
pub const WATCH_SLOTS: usize = 1 << 17;

struct Slot {
    key: AtomicUsize,
    tag: AtomicU32,
}

static SLOTS: [Slot; WATCH_SLOTS] = [const {
    Slot {
        key: AtomicUsize::new(0),
        tag: AtomicU32::new(0),
    }
}; WATCH_SLOTS];

/// Occupied slots (distinct addresses ever inserted).
static OCCUPIED: AtomicUsize = AtomicUsize::new(0);

/// Stop inserting new addresses beyond this fill level, so probes stay short.
const MAX_OCCUPIED: usize = WATCH_SLOTS / 4 * 3;

#[inline]
fn home(addr: usize) -> usize {
    // Fibonacci hashing of the address (its low bits are alignment zeros).
    (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - 17)) & (WATCH_SLOTS - 1)
}

/// Marks `addr` as live with `tag` (non-zero). Returns false when the table is full (the caller
/// then cannot observe this storage's free) or for a zero address or tag.
pub fn insert(addr: usize, tag: u32) -> bool {
    if addr == 0 || tag == 0 {
        return false;
    }
    let mut i = home(addr);
    loop {
        let slot = &SLOTS[i];
        let key = slot.key.load(Ordering::Acquire);
        if key == addr {
            slot.tag.store(tag, Ordering::Release);
            return true;
        }
        if key == 0 {
            if OCCUPIED.load(Ordering::Relaxed) >= MAX_OCCUPIED {
                return false;
            }
            match slot
                .key
                .compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    OCCUPIED.fetch_add(1, Ordering::Relaxed);
                    slot.tag.store(tag, Ordering::Release);
                    return true;
                }
                Err(other) if other == addr => {
                    slot.tag.store(tag, Ordering::Release);
                    return true;
                }
                Err(_) => {}
            }
        }
        i = (i + 1) & (WATCH_SLOTS - 1);
    }
}

/// The live tag at `addr` (0 when not watched or already freed). Hook-safe.
#[inline]
pub fn get(addr: usize) -> u32 {
    match find(addr) {
        Some(slot) => slot.tag.load(Ordering::Acquire),
        None => 0,
    }
}

/// Called by the hook on a block free: atomically clears and returns the tag at `addr`
/// (0 when not watched). Never allocates, never locks.
#[inline]
pub(crate) fn take(addr: usize) -> u32 {
    match find(addr) {
        Some(slot) => slot.tag.swap(0, Ordering::AcqRel),
        None => 0,
    }
}

/// Clears the tag at `addr` only if it is still `tag` (used when the registry forgets an entry).
pub fn clear_if(addr: usize, tag: u32) {
    if let Some(slot) = find(addr) {
        let _ = slot
            .tag
            .compare_exchange(tag, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

#[inline]
fn find(addr: usize) -> Option<&'static Slot> {
    let mut i = home(addr);
    // Bounded: the table is never more than 3/4 full, so an empty slot ends every probe.
    loop {
        let slot = &SLOTS[i];
        let key = slot.key.load(Ordering::Acquire);
        if key == addr {
            return Some(slot);
        }
        if key == 0 {
            return None;
        }
        i = (i + 1) & (WATCH_SLOTS - 1);
    }
}

/// Slots holding an address (distinct addresses inserted since the last [`reset`]).
pub fn occupied() -> usize {
    OCCUPIED.load(Ordering::Acquire)
}

/// Empties the table. Only while no armed hook can read it (the capture disarmed, under the
/// capture lock): a concurrent probe could otherwise miss a live entry.
pub fn reset() {
    for slot in SLOTS.iter() {
        slot.tag.store(0, Ordering::Relaxed);
        slot.key.store(0, Ordering::Relaxed);
    }
    OCCUPIED.store(0, Ordering::Release);
}

/// Number of distinct addresses the table holds.
pub fn occupied_slots() -> usize {
    OCCUPIED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_take_and_reuse() {
        // Addresses no allocator hands out in this test process (odd values).
        let a = 0x7000_0001usize;
        assert_eq!(get(a), 0);
        assert!(insert(a, 7));
        assert_eq!(get(a), 7);
        assert_eq!(take(a), 7);
        assert_eq!(
            take(a),
            0,
            "a second free of the same lifetime finds nothing"
        );
        assert!(insert(a, 8), "reinserting a reused address reuses the slot");
        assert_eq!(get(a), 8);
        clear_if(a, 9);
        assert_eq!(get(a), 8, "clear_if with another tag leaves the entry");
        clear_if(a, 8);
        assert_eq!(get(a), 0);
    }

    #[test]
    fn colliding_addresses_are_all_found() {
        let base = 0x5100_0003usize;
        let addrs: Vec<usize> = (0..500).map(|i| base + i * 4096).collect();
        for (i, &a) in addrs.iter().enumerate() {
            assert!(insert(a, i as u32 + 1));
        }
        for (i, &a) in addrs.iter().enumerate() {
            assert_eq!(get(a), i as u32 + 1);
        }
        for (i, &a) in addrs.iter().enumerate() {
            assert_eq!(take(a), i as u32 + 1);
        }
    }
}
