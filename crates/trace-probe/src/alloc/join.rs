//! Joins raw hook events on addresses: a storage's free (its block free) to its data buffer's
//! logged allocation, which gives exact alloc time and bytes for storages nobody registered.

use std::collections::HashMap;

use super::ring::{RawEvent, RawKind};

/// A fact the join derived, in hook time (ns since the hook epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fact {
    /// A registered storage's block was freed.
    RegisteredFree {
        /// Watch tag (registry id).
        tag: u32,
        /// Free time.
        free_ns: u64,
    },
    /// An unregistered CPU storage died; its whole lifetime is known now.
    Anonymous(AnonymousStorage),
}

/// An unregistered CPU storage recognised at its free by the drop signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AnonymousStorage {
    /// Address of the `Arc` block.
    pub(crate) block: usize,
    /// Data buffer alloc time (exact), or the block alloc time when the data alloc was not
    /// logged; `None` when neither was (allocated before arming or lost to a full ring).
    pub(crate) alloc_ns: Option<u64>,
    /// Bytes of the data buffer (its dealloc size).
    pub(crate) bytes: u64,
    /// Block free time.
    pub(crate) free_ns: u64,
    /// Thread ids of the alloc and the free.
    pub(crate) alloc_thread: Option<u32>,
    /// Thread of the free.
    pub(crate) free_thread: u32,
}

/// The join state; fed drained events in ring order.
#[derive(Debug, Default)]
pub(crate) struct Joiner {
    /// Latest logged allocation at each address: (time, size, thread).
    allocs: HashMap<usize, (u64, usize, u32)>,
    /// Logged allocations of the block size not yet seen freed: address → alloc time.
    live_blocks: HashMap<usize, u64>,
    /// Counters for the match-rate report.
    pub(crate) stats: JoinStats,
}

/// Counts of what the join saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JoinStats {
    /// Block-sized frees seen while armed.
    pub block_frees: u64,
    /// Of those, frees of registered storages (watch-table hits).
    pub registered_frees: u64,
    /// Of those, unregistered frees matching the CPU storage drop signature.
    pub signature_frees: u64,
    /// Signature matches whose data buffer allocation was logged (exact alloc time).
    pub signature_with_data_alloc: u64,
    /// Signature matches whose block allocation was logged in the window.
    pub signature_with_block_alloc: u64,
    /// Registered frees whose block also matched the drop signature (CPU storages).
    pub registered_with_signature: u64,
    /// Raw allocation events drained.
    pub allocs: u64,
}

impl Joiner {
    /// Processes one drained event, returning a fact when a storage died.
    pub(crate) fn feed(&mut self, ev: &RawEvent, block_size: usize) -> Option<Fact> {
        match ev.kind {
            RawKind::Alloc => {
                self.stats.allocs += 1;
                self.allocs.insert(ev.a, (ev.ts_ns, ev.b, ev.thread));
                if ev.b == block_size {
                    self.live_blocks.insert(ev.a, ev.ts_ns);
                }
                None
            }
            RawKind::BlockFree => {
                self.stats.block_frees += 1;
                let block_alloc = self.live_blocks.remove(&ev.a);
                self.allocs.remove(&ev.a);
                let signature = ev.b != 0;
                if ev.tag != 0 {
                    self.stats.registered_frees += 1;
                    if signature {
                        self.stats.registered_with_signature += 1;
                        self.allocs.remove(&ev.b);
                    }
                    return Some(Fact::RegisteredFree {
                        tag: ev.tag,
                        free_ns: ev.ts_ns,
                    });
                }
                if !signature {
                    return None;
                }
                self.stats.signature_frees += 1;
                let data_alloc = self.allocs.remove(&ev.b);
                if data_alloc.is_some() {
                    self.stats.signature_with_data_alloc += 1;
                }
                if block_alloc.is_some() {
                    self.stats.signature_with_block_alloc += 1;
                }
                // A storage whose block was allocated before arming is not anonymous-in-window:
                // its data alloc (if any logged) would be stale. Only in-window blocks count.
                let block_alloc = block_alloc?;
                let (alloc_ns, alloc_thread) = match data_alloc {
                    Some((t, _, th)) if t <= block_alloc => (t, Some(th)),
                    _ => (block_alloc, None),
                };
                Some(Fact::Anonymous(AnonymousStorage {
                    block: ev.a,
                    alloc_ns: Some(alloc_ns),
                    bytes: ev.c as u64,
                    free_ns: ev.ts_ns,
                    alloc_thread,
                    free_thread: ev.thread,
                }))
            }
        }
    }

    /// The latest logged allocation at `addr`: (time, size, thread).
    pub(crate) fn alloc_at(&self, addr: usize) -> Option<(u64, usize, u32)> {
        self.allocs.get(&addr).copied()
    }

    /// Logged block-sized allocations not yet freed: (address, alloc time).
    pub(crate) fn live_block_list(&self) -> Vec<(usize, u64)> {
        self.live_blocks.iter().map(|(&a, &t)| (a, t)).collect()
    }

    /// Whether a block allocation at `addr` was logged and not yet freed.
    pub(crate) fn block_alloc_at(&self, addr: usize) -> Option<u64> {
        self.live_blocks.get(&addr).copied()
    }

    /// Block-sized allocations logged in the window and not freed, excluding `registered`
    /// blocks: candidates for unregistered storages still alive.
    pub(crate) fn unidentified_live_blocks(&self, registered: impl Fn(usize) -> bool) -> u64 {
        self.live_blocks.keys().filter(|b| !registered(**b)).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(ts: u64, a: usize, size: usize) -> RawEvent {
        RawEvent {
            kind: RawKind::Alloc,
            ts_ns: ts,
            thread: 1,
            tag: 0,
            a,
            b: size,
            c: 0,
        }
    }

    fn free(ts: u64, block: usize, tag: u32, data: usize, size: usize) -> RawEvent {
        RawEvent {
            kind: RawKind::BlockFree,
            ts_ns: ts,
            thread: 2,
            tag,
            a: block,
            b: data,
            c: size,
        }
    }

    #[test]
    fn anonymous_storage_joins_data_alloc_and_survives_reuse() {
        let mut j = Joiner::default();
        for round in 0..3u64 {
            let t = round * 100;
            assert_eq!(j.feed(&alloc(t + 1, 0x1000, 4096), 56), None);
            assert_eq!(j.feed(&alloc(t + 2, 0x2000, 56), 56), None);
            let fact = j.feed(&free(t + 50, 0x2000, 0, 0x1000, 4096), 56);
            assert_eq!(
                fact,
                Some(Fact::Anonymous(AnonymousStorage {
                    block: 0x2000,
                    alloc_ns: Some(t + 1),
                    bytes: 4096,
                    free_ns: t + 50,
                    alloc_thread: Some(1),
                    free_thread: 2,
                }))
            );
        }
        assert_eq!(j.stats.signature_frees, 3);
        assert_eq!(j.unidentified_live_blocks(|_| false), 0);
    }

    #[test]
    fn registered_free_wins_and_pre_window_blocks_are_not_anonymous() {
        let mut j = Joiner::default();
        assert_eq!(
            j.feed(&free(5, 0x3000, 9, 0x4000, 64), 56),
            Some(Fact::RegisteredFree { tag: 9, free_ns: 5 })
        );
        // Unregistered, signature matches, but the block predates the window.
        assert_eq!(j.feed(&free(6, 0x5000, 0, 0x6000, 64), 56), None);
        assert_eq!(j.stats.signature_frees, 1);
        // A block-sized non-storage object freed without signature.
        j.feed(&alloc(7, 0x7000, 56), 56);
        assert_eq!(j.unidentified_live_blocks(|_| false), 1);
        assert_eq!(j.feed(&free(8, 0x7000, 0, 0, 0), 56), None);
        assert_eq!(j.unidentified_live_blocks(|_| false), 0);
    }
}
