//! The preallocated event ring between the hook (many producers) and the drain (one consumer).
//!
//! A producer claims a slot with a CAS on the head index (never waiting: when the ring is full
//! it counts a dropped event and returns), writes the fields, then publishes the slot by storing
//! its sequence number with `Release`. The consumer reads slots in index order and stops at the
//! first one not yet published, so causal order is kept: an alloc's index is claimed before the
//! allocation returns, hence before any free of the same memory. The ring is a `static` array of
//! atomics: zero-initialised `.bss`, no allocation ever.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Physical capacity in events.
pub const RING_CAPACITY: usize = 1 << 17;

/// What a raw event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawKind {
    /// An allocation: `a` = address, `b` = size.
    Alloc,
    /// A free of the storage-block size: `a` = block address, `b` = data pointer when the drop
    /// signature matched (else 0), `c` = data buffer size; `tag` = watch tag (0 = unregistered).
    BlockFree,
}

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawEvent {
    pub(crate) kind: RawKind,
    pub(crate) ts_ns: u64,
    pub(crate) thread: u32,
    pub(crate) tag: u32,
    pub(crate) a: usize,
    pub(crate) b: usize,
    pub(crate) c: usize,
}

struct Slot {
    /// `index + 1` once published.
    seq: AtomicU64,
    ts: AtomicU64,
    /// kind (bit 63) | thread (bits 32..63) | tag (bits 0..32).
    meta: AtomicU64,
    a: AtomicUsize,
    b: AtomicUsize,
    c: AtomicUsize,
}

static SLOTS: [Slot; RING_CAPACITY] = [const {
    Slot {
        seq: AtomicU64::new(0),
        ts: AtomicU64::new(0),
        meta: AtomicU64::new(0),
        a: AtomicUsize::new(0),
        b: AtomicUsize::new(0),
        c: AtomicUsize::new(0),
    }
}; RING_CAPACITY];

/// Next index to claim.
static HEAD: AtomicU64 = AtomicU64::new(0);
/// Next index to read (written by the consumer only).
static TAIL: AtomicU64 = AtomicU64::new(0);
/// Effective capacity (≤ [`RING_CAPACITY`]); lowered by tests.
static CAPACITY: AtomicUsize = AtomicUsize::new(RING_CAPACITY);
/// Events dropped because the ring was full, since process start.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Pushes one event; never blocks, never allocates. Returns false (and counts a drop) when full.
#[inline]
pub(crate) fn push(ev: RawEvent) -> bool {
    let cap = CAPACITY.load(Ordering::Relaxed) as u64;
    let mut head = HEAD.load(Ordering::Relaxed);
    loop {
        let tail = TAIL.load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= cap {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        match HEAD.compare_exchange_weak(head, head + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break,
            Err(h) => head = h,
        }
    }
    let slot = &SLOTS[(head as usize) & (RING_CAPACITY - 1)];
    let kind_bit = match ev.kind {
        RawKind::Alloc => 0u64,
        RawKind::BlockFree => 1u64 << 63,
    };
    let meta = kind_bit | ((ev.thread as u64 & 0x7fff_ffff) << 32) | ev.tag as u64;
    slot.ts.store(ev.ts_ns, Ordering::Relaxed);
    slot.meta.store(meta, Ordering::Relaxed);
    slot.a.store(ev.a, Ordering::Relaxed);
    slot.b.store(ev.b, Ordering::Relaxed);
    slot.c.store(ev.c, Ordering::Relaxed);
    slot.seq.store(head + 1, Ordering::Release);
    true
}

/// Pops every published event in index order into `out`; stops at the first unpublished slot.
/// Single consumer: callers serialise drains (the capture state's mutex does).
pub(crate) fn drain_into(out: &mut Vec<RawEvent>) {
    let mut tail = TAIL.load(Ordering::Relaxed);
    let head = HEAD.load(Ordering::Acquire);
    while tail < head {
        let slot = &SLOTS[(tail as usize) & (RING_CAPACITY - 1)];
        if slot.seq.load(Ordering::Acquire) != tail + 1 {
            break; // claimed but not yet written: read it next time
        }
        let meta = slot.meta.load(Ordering::Relaxed);
        out.push(RawEvent {
            kind: if meta >> 63 == 1 {
                RawKind::BlockFree
            } else {
                RawKind::Alloc
            },
            ts_ns: slot.ts.load(Ordering::Relaxed),
            thread: ((meta >> 32) & 0x7fff_ffff) as u32,
            tag: meta as u32,
            a: slot.a.load(Ordering::Relaxed),
            b: slot.b.load(Ordering::Relaxed),
            c: slot.c.load(Ordering::Relaxed),
        });
        tail += 1;
        TAIL.store(tail, Ordering::Release);
    }
}

/// Events dropped because the ring was full, since process start (a running count).
pub fn dropped_events() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Lowers (or restores) the effective ring capacity, clamped to `1..=RING_CAPACITY`. A test knob:
/// it makes overflow reachable with a handful of events. Takes effect for the next push.
pub fn set_ring_capacity(events: usize) {
    CAPACITY.store(events.clamp(1, RING_CAPACITY), Ordering::Relaxed);
}

/// The effective ring capacity in events.
pub fn ring_capacity() -> usize {
    CAPACITY.load(Ordering::Relaxed)
}

/// Events pushed but not yet drained.
pub fn pending_events() -> u64 {
    HEAD.load(Ordering::Relaxed)
        .saturating_sub(TAIL.load(Ordering::Relaxed))
}
