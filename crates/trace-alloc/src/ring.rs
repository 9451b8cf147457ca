//! The preallocated event ring between the hook (many producers) and the drain (one consumer).
//!
//! A producer claims a slot with a CAS on the head index (never waiting: when the ring is full
//! it counts a dropped event and returns), writes the fields, then publishes the slot by storing
//! its sequence number with `Release`. The consumer reads slots in index order and stops at the
//! first one not yet published, so causal order is kept: an alloc's index is claimed before the
//! allocation returns, hence before any free of the same memory. The ring is a `static` array of
//! atomics: zero-initialised `.bss`, no allocation ever.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::line::Line;

pub use crate::sites::SiteTag;

/// Physical capacity in events.
pub const RING_CAPACITY: usize = 1 << 17;

/// One event recorded by the allocator hook, in hook time (ns since the process clock base) on
/// the thread with [`crate::thread_key`] `thread` (its low 22 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawEvent {
    /// An allocation (alloc, alloc_zeroed, or the new block of a realloc).
    Alloc {
        /// Hook time, ns since [`crate::clock::process_base`].
        ts_ns: u64,
        /// [`crate::thread_key`] of the allocating thread.
        thread: u32,
        /// Address returned.
        addr: usize,
        /// Size in bytes.
        size: usize,
        /// The allocation's stack in the site pool ([`crate::sites`]), if captured.
        site: SiteTag,
    },
    /// A free of the calibrated storage-block size.
    BlockFree {
        /// Hook time, ns since [`crate::clock::process_base`].
        ts_ns: u64,
        /// [`crate::thread_key`] of the freeing thread.
        thread: u32,
        /// Watch-table tag of the block (0: not a registered storage).
        tag: u32,
        /// Address of the freed block.
        block: usize,
        /// The CPU storage drop signature: the data buffer freed just before on this thread,
        /// whose pointer the dying block holds. `None` when the signature did not match.
        data: Option<DataBuffer>,
        /// With the signature: 1 + the index of the storage's dtype in the calibrated table
        /// (see [`crate::layout::set_dtype_bytes`]), 0 when unknown.
        dtype: u8,
    },
    /// A free of the calibrated tensor-block size (`ArcInner<Tensor_>`): the word where a
    /// tensor holds its storage's `Arc` pointer. Confirms the drop signature: Candle's storage
    /// `Arc` is a private field of `Tensor_` only, so every storage death is followed, on the
    /// same thread, by the free of the tensor block that pointed at it.
    TensorFree {
        /// Hook time, ns since [`crate::clock::process_base`].
        ts_ns: u64,
        /// [`crate::thread_key`] of the freeing thread.
        thread: u32,
        /// The word at the calibrated storage-pointer offset of the dying block.
        storage_block: usize,
        /// Address of the dying tensor block (the session tracker keeps live tensor blocks by
        /// address).
        block: usize,
    },
}

/// A CPU storage's data buffer as seen by the drop signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataBuffer {
    /// Address of the buffer.
    pub ptr: usize,
    /// Its dealloc size in bytes.
    pub size: usize,
}

impl RawEvent {
    /// Thread of the event.
    pub fn thread(&self) -> u32 {
        match *self {
            RawEvent::Alloc { thread, .. }
            | RawEvent::BlockFree { thread, .. }
            | RawEvent::TensorFree { thread, .. } => thread,
        }
    }
}

struct Slot {
    /// `index + 1` once published.
    seq: AtomicU64,
    ts: AtomicU64,
    /// kind (bits 62..64: 0 alloc, 1 tensor free, 2 block free) | aux (bits 54..62: a block
    /// free's dtype code) | thread (bits 32..54) | tag (bits 0..32: the watch tag of a block
    /// free, the site tag of an alloc).
    meta: AtomicU64,
    /// Alloc: address; block free: block address; tensor free: storage block word.
    a: AtomicUsize,
    /// Alloc: size; block free: data pointer of the signature (0: no match); tensor free:
    /// tensor block address.
    b: AtomicUsize,
    /// Block free: data buffer size of the signature.
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

const KIND_ALLOC: u64 = 0;
const KIND_TENSOR_FREE: u64 = 1;
const KIND_BLOCK_FREE: u64 = 2;
/// Thread ids keep 22 bits in a slot (thread keys count up from 1).
const THREAD_MASK: u64 = 0x3f_ffff;

/// Next index to claim (alone on its line: the producers' compare-and-swap does not then meet
/// the consumer's writes of [`TAIL`]).
static HEAD: Line<AtomicU64> = Line(AtomicU64::new(0));
/// Next index to read (written by the consumer only; alone on its line).
static TAIL: Line<AtomicU64> = Line(AtomicU64::new(0));
/// Effective capacity (≤ [`RING_CAPACITY`]); lowered by tests.
static CAPACITY: AtomicUsize = AtomicUsize::new(RING_CAPACITY);
/// Events dropped because the ring was full, since process start.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Pushes one event; never blocks, never allocates. Returns false (and counts a drop) when full.
/// The hook's producer; a caller outside the hook may push a synthetic event too (the probe
/// logs a registration this way) and it is drained in order with the hook's.
#[inline]
pub fn push(ev: RawEvent) -> bool {
    let cap = CAPACITY.load(Ordering::Relaxed) as u64;
    let mut head = HEAD.load(Ordering::Relaxed);
    loop {
        let tail = TAIL.load(Ordering::Acquire);
        if tail > head {
            // `head` is stale: other threads pushed and the consumer read past it since it was
            // loaded (both counters only grow). Not a full ring: look again.
            head = HEAD.load(Ordering::Relaxed);
            continue;
        }
        if head - tail >= cap {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        match HEAD.compare_exchange_weak(head, head + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break,
            Err(h) => head = h,
        }
    }
    let slot = &SLOTS[(head as usize) & (RING_CAPACITY - 1)];
    let mut aux = 0u64;
    let (kind, ts, thread, tag, a, b, c) = match ev {
        RawEvent::Alloc {
            ts_ns,
            thread,
            addr,
            size,
            site,
        } => (KIND_ALLOC, ts_ns, thread, site.0, addr, size, 0),
        RawEvent::TensorFree {
            ts_ns,
            thread,
            storage_block,
            block,
        } => (KIND_TENSOR_FREE, ts_ns, thread, 0, storage_block, block, 0),
        RawEvent::BlockFree {
            ts_ns,
            thread,
            tag,
            block,
            data,
            dtype,
        } => {
            aux = u64::from(dtype);
            let (ptr, size) = data.map_or((0, 0), |d| (d.ptr, d.size));
            (KIND_BLOCK_FREE, ts_ns, thread, tag, block, ptr, size)
        }
    };
    let meta = (kind << 62) | (aux << 54) | ((thread as u64 & THREAD_MASK) << 32) | tag as u64;
    slot.ts.store(ts, Ordering::Relaxed);
    slot.meta.store(meta, Ordering::Relaxed);
    slot.a.store(a, Ordering::Relaxed);
    slot.b.store(b, Ordering::Relaxed);
    slot.c.store(c, Ordering::Relaxed);
    slot.seq.store(head + 1, Ordering::Release);
    true
}

/// Pops every published event in index order into `out`; stops at the first unpublished slot.
/// Single consumer: callers serialise drains (the probe's capture state's mutex does).
pub fn drain_into(out: &mut Vec<RawEvent>) {
    let mut tail = TAIL.load(Ordering::Relaxed);
    let head = HEAD.load(Ordering::Acquire);
    while tail < head {
        let slot = &SLOTS[(tail as usize) & (RING_CAPACITY - 1)];
        if slot.seq.load(Ordering::Acquire) != tail + 1 {
            break; // claimed but not yet written: read it next time
        }
        let meta = slot.meta.load(Ordering::Relaxed);
        let ts_ns = slot.ts.load(Ordering::Relaxed);
        let thread = ((meta >> 32) & THREAD_MASK) as u32;
        let (a, b, c) = (
            slot.a.load(Ordering::Relaxed),
            slot.b.load(Ordering::Relaxed),
            slot.c.load(Ordering::Relaxed),
        );
        out.push(match meta >> 62 {
            KIND_BLOCK_FREE => RawEvent::BlockFree {
                ts_ns,
                thread,
                tag: meta as u32,
                block: a,
                data: (b != 0).then_some(DataBuffer { ptr: b, size: c }),
                dtype: ((meta >> 54) & 0xff) as u8,
            },
            KIND_TENSOR_FREE => RawEvent::TensorFree {
                ts_ns,
                thread,
                storage_block: a,
                block: b,
            },
            _ => RawEvent::Alloc {
                ts_ns,
                thread,
                addr: a,
                size: b,
                site: SiteTag(meta as u32),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Producers that keep the ring nearly empty while a consumer drains it must never see a
    /// full ring: a producer whose loaded head went stale (others pushed, the consumer read
    /// past it) used to compute a wrapped-around fill level and count a drop.
    #[test]
    fn a_stale_head_is_not_a_full_ring() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let consumer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    drain_into(&mut out);
                    out.clear();
                }
            })
        };
        let dropped_before = dropped_events();
        let producers: Vec<_> = (0..6)
            .map(|t| {
                std::thread::spawn(move || {
                    for burst in 0..20_000u64 {
                        for i in 0..64u64 {
                            push(RawEvent::Alloc {
                                ts_ns: burst * 64 + i,
                                thread: t,
                                addr: 0x1000,
                                size: 8,
                                site: SiteTag(0),
                            });
                        }
                        // at most 6 × (4,096 + 64) events in the ring at once, far below its
                        // capacity; producers preempted between their two loads meanwhile
                        while pending_events() > 4_096 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().expect("producer");
        }
        stop.store(true, Ordering::Relaxed);
        consumer.join().expect("consumer");
        assert_eq!(dropped_events(), dropped_before, "no event dropped");
    }
}
