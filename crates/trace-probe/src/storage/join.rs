//! Joins raw hook events on addresses: a storage's free (its block free) to its data buffer's
//! logged allocation, which gives exact alloc time and bytes for storages nobody registered.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use trace_alloc::ring::{DataBuffer, RawEvent, SiteTag};

/// A storage free the join recognised, in hook time (ns since the process clock base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StorageFreed {
    /// A registered storage's block was freed.
    Registered {
        /// Watch tag (registry id).
        tag: u32,
        /// Free time.
        free_ns: u64,
    },
    /// An unregistered CPU storage died; its whole lifetime is known now (for a storage whose
    /// block predates the window, [`AnonymousStorage::pre_window`] is set and its alloc time is
    /// unknown: it was live at capture start).
    Anonymous(AnonymousStorage),
}

/// An unregistered CPU storage recognised at its free by the drop signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AnonymousStorage {
    /// Address of the `Arc` block.
    pub(crate) block: usize,
    /// Data buffer alloc time (exact), or the block alloc time when the data alloc was not
    /// logged.
    pub(crate) alloc_ns: u64,
    /// Bytes of the data buffer (its dealloc size).
    pub(crate) bytes: u64,
    /// Block free time.
    pub(crate) free_ns: u64,
    /// Thread ids of the alloc and the free.
    pub(crate) alloc_thread: Option<u32>,
    /// Thread of the free.
    pub(crate) free_thread: u32,
    /// The block was allocated before the window (not logged): the storage was live at capture
    /// start; `alloc_ns` is meaningless.
    pub(crate) pre_window: bool,
    /// The data buffer's allocation stack (from its logged allocation), if captured.
    pub(crate) site: SiteTag,
    /// Its dtype, read from the dying block's CPU storage variant (None: unknown).
    pub(crate) dtype: Option<candle_core::DType>,
}

/// The join state; fed drained events in ring order.
#[derive(Debug, Default)]
pub(crate) struct Joiner {
    /// Latest logged allocation at each address.
    allocs: HashMap<usize, LoggedAlloc>,
    /// Logged allocations of the block size not yet seen freed: address → alloc time.
    live_blocks: HashMap<usize, u64>,
    /// Unregistered block frees matching the data-pointer signature, waiting for the free of the
    /// tensor block that held them (the confirmation): block address → storage.
    candidates: HashMap<usize, AnonymousStorage>,
    /// Logged allocations of the tensor-block size not yet seen freed (what confirms a storage
    /// still live at the window's end: a storage made in the window is held by a tensor made
    /// in the window).
    live_tensors: HashSet<usize>,
    /// The calibrated tensor-block size (0: unknown, no tensor block is tracked).
    tensor_block_size: usize,
    /// Counters for the match-rate report.
    pub(crate) stats: JoinStats,
}

/// A logged allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoggedAlloc {
    /// Hook time.
    pub(crate) ts_ns: u64,
    /// Size in bytes.
    pub(crate) size: usize,
    /// Thread.
    pub(crate) thread: u32,
    /// Its stack in the site pool, if captured.
    pub(crate) site: SiteTag,
}

/// Counts of what the join saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JoinStats {
    /// Block-sized frees seen while armed.
    pub block_frees: u64,
    /// Of those, frees of registered storages (watch-table hits).
    pub registered_frees: u64,
    /// Of those, unregistered frees matching the CPU storage drop signature *and* confirmed by
    /// the free of the tensor block that held the storage (Candle storages).
    pub signature_frees: u64,
    /// Unregistered block frees whose data-pointer signature matched but that no tensor block
    /// confirmed: look-alike user objects (e.g. `Arc<RwLock<Vec<u8>>>`), never written as
    /// storages. Counted when a later free of the same block replaces them or the window ends.
    pub unconfirmed_signatures: u64,
    /// Confirmed unregistered storages whose block was allocated before the window (written as
    /// pre-existing at capture start, freed in the window).
    pub pre_window_frees: u64,
    /// Signature matches whose data buffer allocation was logged (exact alloc time).
    pub signature_with_data_alloc: u64,
    /// Signature matches whose block allocation was logged in the window.
    pub signature_with_block_alloc: u64,
    /// Registered frees whose block also matched the drop signature (CPU storages).
    pub registered_with_signature: u64,
    /// Raw allocation events drained.
    pub allocs: u64,
}

/// A storage allocated in the window and still live at its end, found by
/// [`Joiner::live_storages`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LiveAtEnd {
    /// Address of the storage's `Arc` block.
    pub(crate) block: usize,
    /// Its data buffer's logged allocation (exact time, heap bytes, thread, site).
    pub(crate) data: LoggedAlloc,
}

impl Joiner {
    /// A join for a window whose tensor blocks are `tensor_block_size` bytes (calibrated).
    pub(crate) fn new(tensor_block_size: usize) -> Self {
        Self {
            tensor_block_size,
            ..Self::default()
        }
    }

    /// Processes one drained event, returning a storage free when one was recognised.
    pub(crate) fn feed(&mut self, ev: &RawEvent, block_size: usize) -> Option<StorageFreed> {
        match *ev {
            RawEvent::Alloc {
                ts_ns,
                thread,
                addr,
                size,
                site,
            } => {
                self.stats.allocs += 1;
                self.allocs.insert(
                    addr,
                    LoggedAlloc {
                        ts_ns,
                        size,
                        thread,
                        site,
                    },
                );
                // A new allocation at an address ends whatever lived there before.
                if size == block_size {
                    self.live_blocks.insert(addr, ts_ns);
                } else {
                    self.live_blocks.remove(&addr);
                }
                if self.tensor_block_size != 0 && size == self.tensor_block_size {
                    self.live_tensors.insert(addr);
                } else {
                    self.live_tensors.remove(&addr);
                }
                None
            }
            RawEvent::BlockFree {
                ts_ns,
                thread,
                tag,
                block,
                data,
                dtype,
            } => {
                self.stats.block_frees += 1;
                let block_alloc = self.live_blocks.remove(&block);
                self.allocs.remove(&block);
                if tag != 0 {
                    self.stats.registered_frees += 1;
                    if let Some(d) = data {
                        self.stats.registered_with_signature += 1;
                        self.allocs.remove(&d.ptr);
                    }
                    return Some(StorageFreed::Registered {
                        tag,
                        free_ns: ts_ns,
                    });
                }
                let DataBuffer { ptr, size } = data?;
                let data_alloc = self.allocs.remove(&ptr);
                // A storage whose block was allocated before arming has no logged alloc: it
                // was live at capture start (its data alloc, if any logged, would be stale).
                let (alloc_ns, alloc_thread, site) = match (block_alloc, data_alloc) {
                    (Some(b), Some(d)) if d.ts_ns <= b => (d.ts_ns, Some(d.thread), d.site),
                    (Some(b), _) => (b, None, SiteTag(0)),
                    (None, _) => (0, None, SiteTag(0)),
                };
                let candidate = AnonymousStorage {
                    block,
                    alloc_ns,
                    bytes: size as u64,
                    free_ns: ts_ns,
                    alloc_thread,
                    free_thread: thread,
                    pre_window: block_alloc.is_none(),
                    site,
                    dtype: crate::storage::calibrate::dtype_of_code(dtype),
                };
                if self.candidates.insert(block, candidate).is_some() {
                    // The block died twice without a tensor confirming the first: a look-alike.
                    self.stats.unconfirmed_signatures += 1;
                }
                None
            }
            RawEvent::TensorFree {
                thread,
                storage_block,
                block,
                ..
            } => {
                if self.live_tensors.remove(&block) {
                    self.allocs.remove(&block);
                }
                let c = self.candidates.get(&storage_block)?;
                if c.free_thread != thread {
                    return None;
                }
                let c = self.candidates.remove(&storage_block)?;
                self.stats.signature_frees += 1;
                if c.pre_window {
                    self.stats.pre_window_frees += 1;
                } else {
                    self.stats.signature_with_block_alloc += 1;
                    if c.alloc_thread.is_some() {
                        self.stats.signature_with_data_alloc += 1;
                    }
                }
                Some(StorageFreed::Anonymous(c))
            }
        }
    }

    /// Ends the window: every signature still unconfirmed is a look-alike (or a storage whose
    /// tensor block died after the window closed); counted in
    /// [`JoinStats::unconfirmed_signatures`], never written.
    pub(crate) fn close(&mut self) {
        self.stats.unconfirmed_signatures += self.candidates.len() as u64;
        self.candidates.clear();
    }

    /// The storages allocated in the window and still live now that are not `skip`ped
    /// (registered ones), in allocation order: every logged storage-sized block not seen freed
    /// that a live tensor block logged in the window points at (the confirmation that tells a
    /// storage from a look-alike), whose strong count is not 0 and whose data-pointer word
    /// names an allocation logged before the block (its size is the storage's heap bytes).
    ///
    /// # Safety
    /// Every block this join believes live (allocated and no free fed) must still be readable:
    /// the hook must be disarmed with storage- and tensor-sized frees held since before the
    /// last events were fed, and stay so until this returns.
    pub(crate) unsafe fn live_storages(
        &self,
        tensor_storage_offset: usize,
        block_size: usize,
        data_ptr_offset: usize,
        skip: impl Fn(usize) -> bool,
    ) -> Vec<LiveAtEnd> {
        let word = std::mem::size_of::<usize>();
        if self.tensor_block_size == 0
            || tensor_storage_offset + word > self.tensor_block_size
            || data_ptr_offset + word > block_size
        {
            return Vec::new();
        }
        let pointed: HashSet<usize> = self
            .live_tensors
            .iter()
            // SAFETY: a live tensor block (readable by the caller's contract) holds
            // `tensor_storage_offset + word <= tensor_block_size` bytes (checked above).
            .map(|&t| unsafe { ((t + tensor_storage_offset) as *const usize).read_volatile() })
            .collect();
        let mut out = Vec::new();
        for (&block, &block_ns) in &self.live_blocks {
            if !pointed.contains(&block) || skip(block) {
                continue;
            }
            // `ArcInner` is `repr(C)`: the strong count is the block's first word.
            // SAFETY: a live storage block, readable by the caller's contract.
            if unsafe { (block as *const usize).read_volatile() } == 0 {
                continue; // died after the disarm (its free is held, not logged)
            }
            // SAFETY: as above; `data_ptr_offset + word <= block_size` (checked above).
            let data = unsafe { ((block + data_ptr_offset) as *const usize).read_volatile() };
            match self.allocs.get(&data) {
                Some(&d) if d.ts_ns <= block_ns && d.size > 0 => {
                    out.push(LiveAtEnd { block, data: d });
                }
                _ => {}
            }
        }
        out.sort_by_key(|l| (l.data.ts_ns, l.block));
        out
    }

    /// The latest logged allocation at `addr`.
    pub(crate) fn alloc_at(&self, addr: usize) -> Option<LoggedAlloc> {
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

    fn alloc(ts: u64, addr: usize, size: usize) -> RawEvent {
        RawEvent::Alloc {
            ts_ns: ts,
            thread: 1,
            addr,
            size,
            site: SiteTag(0),
        }
    }

    fn free(ts: u64, block: usize, tag: u32, data: Option<(usize, usize)>) -> RawEvent {
        RawEvent::BlockFree {
            ts_ns: ts,
            thread: 2,
            tag,
            block,
            data: data.map(|(ptr, size)| DataBuffer { ptr, size }),
            dtype: 0,
        }
    }

    fn tensor_free(ts: u64, storage_block: usize, thread: u32) -> RawEvent {
        RawEvent::TensorFree {
            ts_ns: ts,
            thread,
            storage_block,
            block: 0,
        }
    }

    #[test]
    fn anonymous_storage_joins_data_alloc_and_survives_reuse() {
        let mut j = Joiner::default();
        for round in 0..3u64 {
            let t = round * 100;
            assert_eq!(j.feed(&alloc(t + 1, 0x1000, 4096), 56), None);
            assert_eq!(j.feed(&alloc(t + 2, 0x2000, 56), 56), None);
            assert_eq!(
                j.feed(&free(t + 50, 0x2000, 0, Some((0x1000, 4096))), 56),
                None,
                "a signature alone is only a candidate"
            );
            assert_eq!(
                j.feed(&tensor_free(t + 51, 0x2000, 1), 56),
                None,
                "a tensor free on another thread does not confirm"
            );
            let freed = j.feed(&tensor_free(t + 52, 0x2000, 2), 56);
            assert_eq!(
                freed,
                Some(StorageFreed::Anonymous(AnonymousStorage {
                    block: 0x2000,
                    alloc_ns: t + 1,
                    bytes: 4096,
                    free_ns: t + 50,
                    alloc_thread: Some(1),
                    free_thread: 2,
                    pre_window: false,
                    site: SiteTag(0),
                    dtype: None,
                }))
            );
        }
        assert_eq!(j.stats.signature_frees, 3);
        assert_eq!(j.stats.unconfirmed_signatures, 0);
        assert_eq!(j.unidentified_live_blocks(|_| false), 0);
    }

    #[test]
    fn registered_free_wins_and_pre_window_blocks_are_not_anonymous() {
        let mut j = Joiner::default();
        assert_eq!(
            j.feed(&free(5, 0x3000, 9, Some((0x4000, 64))), 56),
            Some(StorageFreed::Registered { tag: 9, free_ns: 5 })
        );
        // Unregistered, signature matches, the block predates the window: live at start.
        assert_eq!(j.feed(&free(6, 0x5000, 0, Some((0x6000, 64))), 56), None);
        match j.feed(&tensor_free(6, 0x5000, 2), 56) {
            Some(StorageFreed::Anonymous(a)) => {
                assert!(a.pre_window);
                assert_eq!(a.bytes, 64);
            }
            other => panic!("expected a pre-window storage, got {other:?}"),
        }
        assert_eq!(j.stats.signature_frees, 1);
        assert_eq!(j.stats.pre_window_frees, 1);
        // A look-alike: signature, no tensor block; reused and dying again, then the window ends.
        assert_eq!(j.feed(&free(7, 0x9000, 0, Some((0xa000, 64))), 56), None);
        assert_eq!(j.feed(&free(8, 0x9000, 0, Some((0xb000, 64))), 56), None);
        j.close();
        assert_eq!(j.stats.unconfirmed_signatures, 2);
        assert_eq!(j.stats.signature_frees, 1);
        // A block-sized non-storage object freed without signature.
        j.feed(&alloc(7, 0x7000, 56), 56);
        assert_eq!(j.unidentified_live_blocks(|_| false), 1);
        assert_eq!(j.feed(&free(8, 0x7000, 0, None), 56), None);
        assert_eq!(j.unidentified_live_blocks(|_| false), 0);
    }
}
