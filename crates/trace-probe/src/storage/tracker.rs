//! The session tracker: every storage allocated since the session was created (warm-up steps
//! included), so the ones still live when the captured step begins become `pre_existing`
//! storages with their exact heap bytes — the input batch a data loader made before the step,
//! model buffers (rotary tables), tensors kept from the previous step.
//!
//! # How
//! From session creation the allocator hook is armed (the same logging as inside the captured
//! step) and the background drainer feeds the ring's events here: the latest allocation at each
//! address (size, time), the storage-sized blocks allocated and not freed, and the tensor-sized
//! blocks allocated and not freed. At capture start (the `meta`), the hook is disarmed with
//! storage- and tensor-sized frees held, the ring drained a last time, and
//! [`SessionTracker::live_storages`] reads:
//! - the storage-pointer word of every live tensor block (Candle's storage `Arc` is a private
//!   field of `Tensor_` and nothing else holds it: this is the confirmation that tells a storage
//!   from a look-alike user `Arc<RwLock<Vec<_>>>`);
//! - for each live storage-sized block some live tensor points at: its strong count (0: it died
//!   after the disarm, skipped) and its data-pointer word, which must name an allocation logged
//!   before the block; that allocation's size is the storage's heap bytes (the one size rule).
//!
//! A confirmed storage whose data buffer was allocated before tracking began (a `Vec` made
//! before the session and passed to `Tensor::from_vec` after) has no known size: it is counted
//! ([`LiveStorages::unsized_storages`]) and the contract says so.
//!
//! # What is provable about storages older than the session
//! Nothing the hook did not see can be sized. But Candle numbers every tensor it creates from one
//! process-wide counter, and every storage is created together with a tensor (`from_storage`,
//! `copy`, `to_device`: each `Arc::new(RwLock::new(storage))` sits next to a `TensorId::new()`).
//! When tracking begins the probe creates one marker tensor: if its id equals the number of
//! tensors the probe itself created so far (calibration's and the markers, all dropped at once),
//! no other tensor — hence no storage — ever existed before the session: logical memory can be
//! `complete`. Otherwise storages older than the session may be live and unknown: `partial`
//! with the reason ([`PreSessionStorages`]).

use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{DType, Device, Tensor};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::tensor_id::tensor_number;
use trace_alloc::ring::RawEvent;

/// Distinct addresses the tracker keeps at most; beyond, it stops (the contract says why).
pub(crate) const MAX_TRACKED_ADDRESSES: usize = 1 << 22;

/// Tensors the probe created itself (calibration's, tracking markers): every one dropped
/// right away.
static PROBE_TENSORS: AtomicU64 = AtomicU64::new(0);

/// Counts a tensor the probe created for itself (and dropped).
pub(crate) fn note_probe_tensor() {
    PROBE_TENSORS.fetch_add(1, Ordering::SeqCst);
}

/// Candle tensors created in this process so far that were not the probe's own; `None` when
/// the marker tensor could not be made. Creates (and drops) one marker tensor.
pub(crate) fn foreign_tensors_so_far() -> Option<u64> {
    let marker = Tensor::zeros((), DType::U8, &Device::Cpu).ok()?;
    note_probe_tensor();
    let id = tensor_number(marker.id());
    drop(marker);
    // Ids count from 1: the marker's id is the number of tensors created so far, itself included.
    Some(id.saturating_sub(PROBE_TENSORS.load(Ordering::SeqCst)))
}

/// What a session knows about the storages that were live when its captured step began, beyond
/// the parameters and the optimizer state (typed; its sentence goes into
/// `capture_contract.reasons["logical_memory"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreSessionStorages {
    /// Tracked since the session was created, and no Candle tensor other than the probe's
    /// existed before: every live storage is known and sized.
    AllKnown,
    /// Tracked since the session was created, but `tensors` Candle tensors were created before
    /// it: storages older than the session may be live and are unknown.
    OlderUnknown {
        /// Candle tensors created before the session that were not the probe's.
        tensors: u64,
    },
    /// Tracked, but some live storages made since the session hold data buffers allocated
    /// before it (e.g. `Tensor::from_vec` of a `Vec` made earlier): their bytes are unknown.
    Unsized {
        /// Such storages.
        storages: u64,
    },
    /// Not tracked since the session was created (why).
    Untracked(String),
}

impl PreSessionStorages {
    /// The reason sentence for a coverage below `complete`; `None` for [`Self::AllKnown`].
    pub fn reason(&self) -> Option<String> {
        match self {
            PreSessionStorages::AllKnown => None,
            PreSessionStorages::OlderUnknown { tensors } => Some(format!(
                "storages older than the session are unknown: {tensors} Candle tensors were \
                 created before the profiler started, so storages allocated then may be live \
                 at capture start and are not in the trace (start the profiler before creating \
                 tensors)"
            )),
            PreSessionStorages::Unsized { storages } => Some(format!(
                "{storages} storages live at capture start hold data buffers allocated before \
                 the session (e.g. Tensor::from_vec of a Vec made earlier): their bytes are \
                 unknown and they are not in the trace"
            )),
            PreSessionStorages::Untracked(why) => Some(format!(
                "storages live at capture start other than parameters and optimizer state are \
                 unknown: {why}"
            )),
        }
    }
}

/// A storage the tracker found live at capture start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LiveStorage {
    /// Address of the storage's `Arc` block.
    pub(crate) block: usize,
    /// Data pointer.
    pub(crate) data: usize,
    /// Heap bytes (the data buffer's logged allocation size).
    pub(crate) bytes: u64,
}

/// The storages live at capture start, as read by [`SessionTracker::live_storages`].
#[derive(Debug, Default)]
pub(crate) struct LiveStorages {
    /// Sized, confirmed storages, in block allocation order.
    pub(crate) storages: Vec<LiveStorage>,
    /// Confirmed storages whose data buffer allocation was not logged.
    pub(crate) unsized_storages: u64,
}

/// Calibrated layout the scan needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScanLayout {
    pub(crate) block_size: usize,
    pub(crate) data_ptr_offset: usize,
    pub(crate) tensor_block_size: usize,
    pub(crate) tensor_storage_offset: usize,
}

/// The tracker of one session (process-wide: one at a time, see `window`).
#[derive(Debug)]
pub(crate) struct SessionTracker {
    /// The owning session's storage plug-in.
    pub(crate) owner: u64,
    /// Ring drops (running count) when tracking began.
    pub(crate) dropped_at_start: u64,
    /// Candle tensors created before the session that were not the probe's (0: none older).
    pub(crate) foreign_tensors: u64,
    /// Why tracking stopped before capture start (another session armed the allocator, …).
    pub(crate) interrupted: Option<String>,
    /// Events fed.
    pub(crate) events: u64,
    block_size: usize,
    tensor_block_size: usize,
    /// Latest logged allocation at each address: (hook ns, size).
    allocs: FxHashMap<usize, (u64, usize)>,
    /// Storage-sized allocations not freed: address → hook ns.
    live_blocks: FxHashMap<usize, u64>,
    /// Tensor-sized allocations not freed.
    live_tensors: FxHashSet<usize>,
}

impl SessionTracker {
    pub(crate) fn new(
        owner: u64,
        dropped_at_start: u64,
        foreign_tensors: u64,
        block_size: usize,
        tensor_block_size: usize,
    ) -> Self {
        Self {
            owner,
            dropped_at_start,
            foreign_tensors,
            interrupted: None,
            events: 0,
            block_size,
            tensor_block_size,
            allocs: FxHashMap::default(),
            live_blocks: FxHashMap::default(),
            live_tensors: FxHashSet::default(),
        }
    }

    /// Stops tracking for `why` (the maps are released; the owner's contract says why).
    pub(crate) fn interrupt(&mut self, why: impl Into<String>) {
        if self.interrupted.is_none() {
            self.interrupted = Some(why.into());
        }
        self.allocs = FxHashMap::default();
        self.live_blocks = FxHashMap::default();
        self.live_tensors = FxHashSet::default();
    }

    /// Feeds drained events, in ring order.
    pub(crate) fn feed(&mut self, events: &[RawEvent]) {
        if self.interrupted.is_some() {
            return;
        }
        self.events += events.len() as u64;
        for ev in events {
            match *ev {
                RawEvent::Alloc {
                    ts_ns, addr, size, ..
                } => {
                    // A new allocation at an address ends whatever lived there before.
                    self.allocs.insert(addr, (ts_ns, size));
                    if size == self.block_size {
                        self.live_blocks.insert(addr, ts_ns);
                    } else {
                        self.live_blocks.remove(&addr);
                    }
                    if size == self.tensor_block_size {
                        self.live_tensors.insert(addr);
                    } else {
                        self.live_tensors.remove(&addr);
                    }
                }
                RawEvent::BlockFree { block, data, .. } => {
                    self.live_blocks.remove(&block);
                    self.allocs.remove(&block);
                    if let Some(d) = data {
                        self.allocs.remove(&d.ptr);
                    }
                }
                RawEvent::TensorFree { block, .. } => {
                    self.live_tensors.remove(&block);
                    self.allocs.remove(&block);
                }
            }
        }
        if self.allocs.len() > MAX_TRACKED_ADDRESSES {
            self.interrupt(format!(
                "the session tracker outgrew {MAX_TRACKED_ADDRESSES} distinct allocation \
                 addresses before capture start"
            ));
        }
    }

    /// The confirmed live storages (see the module docs).
    ///
    /// # Safety
    /// Every block the tracker believes live (allocated and no free fed) must still be readable:
    /// the hook must be disarmed with storage- and tensor-sized frees held since before the
    /// last events were drained and fed, and stay so until this returns.
    pub(crate) unsafe fn live_storages(&self, layout: ScanLayout) -> LiveStorages {
        let word = std::mem::size_of::<usize>();
        let mut out = LiveStorages::default();
        if layout.tensor_storage_offset + word > layout.tensor_block_size
            || layout.data_ptr_offset + word > layout.block_size
        {
            return out;
        }
        // Storage blocks some live tensor points at.
        let pointed: FxHashSet<usize> = self
            .live_tensors
            .iter()
            // SAFETY: a live tensor block (the caller's contract keeps it readable) holds
            // `tensor_storage_offset + word <= tensor_block_size` bytes (checked above).
            .map(|&t| unsafe {
                ((t + layout.tensor_storage_offset) as *const usize).read_volatile()
            })
            .collect();
        let mut blocks: Vec<(usize, u64)> = self
            .live_blocks
            .iter()
            .filter(|(b, _)| pointed.contains(b))
            .map(|(&b, &t)| (b, t))
            .collect();
        blocks.sort_by_key(|&(b, t)| (t, b));
        for (block, block_ns) in blocks {
            // `ArcInner` is `repr(C)`: the strong count is the block's first word.
            // SAFETY: a live storage block, readable by the caller's contract.
            let strong = unsafe { (block as *const usize).read_volatile() };
            if strong == 0 {
                continue; // died after the disarm (its free is held, not logged)
            }
            // SAFETY: as above; `data_ptr_offset + word <= block_size` (checked above).
            let data =
                unsafe { ((block + layout.data_ptr_offset) as *const usize).read_volatile() };
            match self.allocs.get(&data) {
                Some(&(ts, size)) if ts <= block_ns && size > 0 => out.storages.push(LiveStorage {
                    block,
                    data,
                    bytes: size as u64,
                }),
                _ => out.unsized_storages += 1,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_the_cause() {
        assert_eq!(PreSessionStorages::AllKnown.reason(), None);
        let older = PreSessionStorages::OlderUnknown { tensors: 3 }
            .reason()
            .unwrap();
        assert!(
            older.contains("3 Candle tensors were created before"),
            "{older}"
        );
        let unsized_ = PreSessionStorages::Unsized { storages: 2 }
            .reason()
            .unwrap();
        assert!(
            unsized_.starts_with("2 storages live at capture start"),
            "{unsized_}"
        );
        let untracked = PreSessionStorages::Untracked("x".into()).reason().unwrap();
        assert!(untracked.ends_with("unknown: x"), "{untracked}");
    }

    #[test]
    fn feed_keeps_live_blocks_and_tensors_only() {
        let mut t = SessionTracker::new(1, 0, 0, 56, 120);
        let alloc = |ts, addr, size| RawEvent::Alloc {
            ts_ns: ts,
            thread: 1,
            addr,
            size,
            site: trace_alloc::ring::SiteTag(0),
        };
        t.feed(&[
            alloc(1, 0x100, 4096),
            alloc(2, 0x200, 56),
            alloc(3, 0x300, 120),
            alloc(4, 0x400, 56),
            RawEvent::BlockFree {
                ts_ns: 5,
                thread: 1,
                tag: 0,
                block: 0x400,
                data: None,
                dtype: 0,
            },
            alloc(6, 0x500, 120),
            RawEvent::TensorFree {
                ts_ns: 7,
                thread: 1,
                storage_block: 0x400,
                block: 0x500,
            },
            // Reuse of a block address by an object of another size (or a realloc's marker).
            alloc(8, 0x600, 56),
            alloc(9, 0x600, 0),
        ]);
        assert_eq!(
            t.live_blocks.keys().copied().collect::<Vec<_>>(),
            vec![0x200]
        );
        assert_eq!(
            t.live_tensors.iter().copied().collect::<Vec<_>>(),
            vec![0x300]
        );
        assert_eq!(t.allocs.get(&0x100), Some(&(1, 4096)));
        t.interrupt("stop");
        assert_eq!(t.interrupted.as_deref(), Some("stop"));
        t.feed(&[alloc(10, 0x700, 56)]);
        assert!(
            t.live_blocks.is_empty(),
            "an interrupted tracker keeps nothing"
        );
    }
}
