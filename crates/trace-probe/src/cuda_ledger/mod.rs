//! Every CUDA device allocation Candle makes, seen at the driver call.
//!
//! Candle allocates all device memory through cudarc (`CudaStream::alloc` →
//! `cuMemAllocAsync`, or `cuMemAlloc_v2` on a context without stream-ordered allocation) and
//! frees it in `CudaSlice::drop` (`cuMemFreeAsync` / `cuMemFree_v2`). cudarc's
//! `dynamic-linking` build (Candle's) calls these as `extern "C"` symbols resolved at link time,
//! so `interpose` (feature `cuda-ledger`, off by default until it has run on a GPU) defines them in the binary — the interposition memory
//! profilers use for `malloc` — records each call here and forwards it to the driver's own
//! function (`dlsym(RTLD_NEXT, …)`). The driver's result is returned unchanged; a call the
//! driver refuses is not recorded.
//!
//! The ledger keeps every live allocation from the first call of the process (so storages
//! older than the session are known too), which ones the registry named (parameters, graph
//! nodes, gradients, labels: written through the registry, never twice), which were made while
//! an optimizer was constructed (its state), and while a capture window is open, every
//! allocation freed. Whether the interposition is in effect in a binary is checked, not
//! assumed (`interpose::observing`).
//!
//! The bookkeeping here is plain Rust (tested without a GPU); only `interpose` touches CUDA.
//! Cost: one uncontended mutex and a hash-map insert or remove per device allocation or free
//! (device allocations are per op, not per byte: a few hundred a step).

#![cfg_attr(not(feature = "cuda-ledger"), allow(dead_code))]

#[cfg(feature = "cuda-ledger")]
pub mod interpose;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use rustc_hash::{FxHashMap, FxHashSet};
use trace_wire::MemoryCategory;

use trace_alloc::IgnoreAllocs;

/// Who writes a device allocation into the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Nobody named it: written from the ledger, category inferred from its pass.
    Anonymous,
    /// The registry named it (parameter, graph node, gradient, label): written by the registry.
    Registered,
    /// Allocated while an optimizer was constructed and live after it: its state.
    Construction {
        /// The label written (`optimizer state`).
        label: String,
        /// Its category.
        category: MemoryCategory,
    },
}

/// One device allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// Sequence number of the allocation in the process (1, 2, …).
    pub(crate) seq: u64,
    /// Device pointer.
    pub(crate) ptr: u64,
    /// Bytes asked of the driver.
    pub(crate) bytes: u64,
    /// Device ordinal of the context current at the call (`None`: the driver did not say).
    pub(crate) ordinal: Option<i32>,
    /// Hook ns ([`trace_alloc::clock::process_ns`]) of the allocation.
    pub(crate) alloc_ns: u64,
    /// Allocating thread (as the allocator hook writes it).
    pub(crate) alloc_thread: u64,
    /// Hook ns and thread of the free (`None` while live).
    pub(crate) freed: Option<(u64, u64)>,
    /// Who writes it.
    pub(crate) owner: Owner,
}

/// What a closed window leaves to write: the device allocations of one ordinal the registry
/// did not name, each with its free if it was freed in the window, in allocation order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct WindowStorages {
    /// Live at the window's start (allocated before it).
    pub(crate) pre_existing: Vec<Record>,
    /// Allocated in the window.
    pub(crate) allocated: Vec<Record>,
    /// Hook ns of the window's start.
    pub(crate) start_ns: u64,
}

/// The ledger's state (one per process behind [`LEDGER`]; tests make their own).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    live: FxHashMap<u64, Record>,
    /// Records freed while a window was open (and allocated any time).
    freed_in_window: Vec<Record>,
    /// Hook ns of the open window's start.
    window_start: Option<u64>,
    next_seq: u64,
}

impl Ledger {
    /// A successful allocation of `bytes` at `ptr` (0 bytes: cudarc's empty slices, no memory).
    pub(crate) fn alloc(&mut self, ptr: u64, bytes: u64, ordinal: Option<i32>, at: (u64, u64)) {
        if bytes == 0 {
            return;
        }
        self.next_seq += 1;
        let rec = Record {
            seq: self.next_seq,
            ptr,
            bytes,
            ordinal,
            alloc_ns: at.0,
            alloc_thread: at.1,
            freed: None,
            owner: Owner::Anonymous,
        };
        // Every free passes through `free`, so no live record is at this address; were one
        // there, the new allocation would replace it.
        self.live.insert(ptr, rec);
    }

    /// The free of `ptr` (kept with its time while a window is open).
    pub(crate) fn free(&mut self, ptr: u64, at: (u64, u64)) {
        if let Some(mut rec) = self.live.remove(&ptr) {
            if self.window_start.is_some() {
                rec.freed = Some(at);
                self.freed_in_window.push(rec);
            }
        }
    }

    /// The live allocation at `ptr`, if any.
    pub(crate) fn live_at(&self, ptr: u64) -> Option<&Record> {
        self.live.get(&ptr)
    }

    /// The registry named the live allocation at `ptr`.
    pub(crate) fn claim(&mut self, ptr: u64) {
        if let Some(r) = self.live.get_mut(&ptr) {
            r.owner = Owner::Registered;
        }
    }

    /// The sequence number the next allocation will get.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq + 1
    }

    /// Marks every live anonymous allocation numbered `first` or later as `category` with
    /// `label`; returns their bytes.
    pub(crate) fn mark_since(&mut self, first: u64, label: &str, category: MemoryCategory) -> u64 {
        let mut bytes = 0u64;
        for r in self.live.values_mut() {
            if r.seq >= first && r.owner == Owner::Anonymous {
                r.owner = Owner::Construction {
                    label: label.to_string(),
                    category,
                };
                bytes = bytes.saturating_add(r.bytes);
            }
        }
        bytes
    }

    /// Opens a window at hook ns `start`. `named` are the device pointers the registry holds
    /// now: an allocation it named before and no longer holds (a session entry of an earlier
    /// capture) is the ledger's to write again.
    pub(crate) fn open_window(&mut self, start: u64, named: &FxHashSet<u64>) {
        self.window_start = Some(start);
        self.freed_in_window.clear();
        for r in self.live.values_mut() {
            if r.owner == Owner::Registered && !named.contains(&r.ptr) {
                r.owner = Owner::Anonymous;
            }
        }
    }

    /// Closes the window and hands back what it saw on device `ordinal` that the registry did
    /// not name (an allocation whose ordinal the driver did not say counts as `ordinal`'s).
    pub(crate) fn close_window(&mut self, ordinal: i32) -> WindowStorages {
        let Some(start) = self.window_start.take() else {
            return WindowStorages::default();
        };
        let freed = std::mem::take(&mut self.freed_in_window);
        let mut out = WindowStorages {
            start_ns: start,
            ..WindowStorages::default()
        };
        for r in freed.into_iter().chain(self.live.values().cloned()) {
            if r.owner == Owner::Registered || r.ordinal.is_some_and(|o| o != ordinal) {
                continue;
            }
            if r.alloc_ns < start {
                out.pre_existing.push(r);
            } else {
                out.allocated.push(r);
            }
        }
        out.pre_existing.sort_by_key(|r| r.seq);
        out.allocated.sort_by_key(|r| r.seq);
        out
    }
}

static LEDGER: Mutex<Option<Ledger>> = Mutex::new(None);
/// Device allocations observed in the process (0: the interposition is not in effect, or no
/// device memory was allocated yet).
static OBSERVED: AtomicU64 = AtomicU64::new(0);

fn lock() -> MutexGuard<'static, Option<Ledger>> {
    LEDGER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the process's ledger, the probe's own allocations kept out of the allocator log.
pub(crate) fn with_ledger<R>(f: impl FnOnce(&mut Ledger) -> R) -> R {
    let _quiet = IgnoreAllocs::new();
    let mut guard = lock();
    f(guard.get_or_insert_with(Ledger::default))
}

/// Hook ns and thread key of now, on the allocator hook's clock and thread numbering.
pub(crate) fn now() -> (u64, u64) {
    (
        trace_alloc::clock::process_ns(),
        u64::from(trace_alloc::thread_key() as u32),
    )
}

/// Records an allocation (the interposer's success path).
pub(crate) fn record_alloc(ptr: u64, bytes: u64, ordinal: Option<i32>) {
    let at = now();
    OBSERVED.fetch_add(1, Ordering::Relaxed);
    with_ledger(|l| l.alloc(ptr, bytes, ordinal, at));
}

/// Records a free (before the driver gets the address back).
pub(crate) fn record_free(ptr: u64) {
    let at = now();
    with_ledger(|l| l.free(ptr, at));
}

/// Device allocations observed so far in this process.
pub fn observed_allocations() -> u64 {
    OBSERVED.load(Ordering::Relaxed)
}

/// The registry named the storage at device pointer `ptr`: the ledger will not write it.
pub(crate) fn claim(ptr: u64) {
    with_ledger(|l| l.claim(ptr));
}

/// Runs `f` (an optimizer's construction) and marks every device allocation it made that is
/// still live after it as `category` with `label`. Returns `f`'s result and their bytes.
pub(crate) fn construction<R>(
    label: &str,
    category: MemoryCategory,
    f: impl FnOnce() -> R,
) -> (R, u64) {
    let first = with_ledger(|l| l.next_seq());
    let out = f();
    let bytes = with_ledger(|l| l.mark_since(first, label, category));
    (out, bytes)
}

/// Opens the process ledger's window (see [`Ledger::open_window`]).
pub(crate) fn open_window(start: u64, named: &[u64]) {
    let named: FxHashSet<u64> = named.iter().copied().collect();
    with_ledger(|l| l.open_window(start, &named));
}

/// Closes the process ledger's window (see [`Ledger::close_window`]).
pub(crate) fn close_window(ordinal: i32) -> WindowStorages {
    with_ledger(|l| l.close_window(ordinal))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (pointer, bytes, allocation ns, free) of a record.
    type Seen = (u64, u64, u64, Option<(u64, u64)>);

    fn seen(r: &Record) -> Seen {
        (r.ptr, r.bytes, r.alloc_ns, r.freed)
    }

    fn named(p: &[u64]) -> FxHashSet<u64> {
        p.iter().copied().collect()
    }

    #[test]
    fn a_window_hands_back_what_nobody_named_split_at_its_start() {
        let mut l = Ledger::default();
        l.alloc(0x100, 4096, Some(0), (10, 1)); // a parameter, named below
        l.alloc(0x200, 512, Some(0), (11, 1)); // an input batch made before the step
        l.alloc(0x300, 0, Some(0), (12, 1)); // an empty slice: no memory
        l.alloc(0x400, 64, Some(1), (13, 1)); // another device
        l.claim(0x100);
        l.open_window(100, &named(&[0x100]));
        l.alloc(0x500, 1024, Some(0), (110, 2)); // a temporary, freed in the step
        l.alloc(0x600, 2048, None, (120, 2)); // kept past the step; ordinal unknown
        l.free(0x500, (130, 3));
        l.free(0x200, (140, 3));
        l.alloc(0x500, 256, Some(0), (150, 2)); // the address reused at once
        let w = l.close_window(0);
        assert_eq!(w.start_ns, 100);
        let pre: Vec<Seen> = w.pre_existing.iter().map(seen).collect();
        assert_eq!(pre, vec![(0x200, 512, 11, Some((140, 3)))]);
        let got: Vec<Seen> = w.allocated.iter().map(seen).collect();
        assert_eq!(
            got,
            vec![
                (0x500, 1024, 110, Some((130, 3))),
                (0x600, 2048, 120, None),
                (0x500, 256, 150, None),
            ]
        );
        // Closed: frees are no longer kept, and a second close hands back nothing.
        l.free(0x600, (200, 2));
        assert_eq!(l.close_window(0), WindowStorages::default());
    }

    #[test]
    fn a_name_the_registry_dropped_goes_back_to_the_ledger() {
        let mut l = Ledger::default();
        l.alloc(0x10, 128, Some(0), (1, 1));
        l.claim(0x10); // a graph node of an earlier capture, still alive
        l.open_window(5, &named(&[]));
        let w = l.close_window(0);
        assert_eq!(w.pre_existing.len(), 1);
        assert_eq!(w.pre_existing[0].owner, Owner::Anonymous);
        // Named again in this window: not handed back.
        l.open_window(6, &named(&[0x10]));
        l.claim(0x10);
        assert!(l.close_window(0).pre_existing.is_empty());
    }

    #[test]
    fn optimizer_state_is_what_construction_made_and_kept() {
        let mut l = Ledger::default();
        l.alloc(0x1, 100, Some(0), (1, 1)); // before construction
        let first = l.next_seq();
        l.alloc(0x2, 400, Some(0), (2, 1)); // a moment
        l.alloc(0x3, 400, Some(0), (3, 1)); // another
        l.alloc(0x4, 8, Some(0), (4, 1)); // a temporary of construction
        l.free(0x4, (5, 1));
        let bytes = l.mark_since(first, "optimizer state", MemoryCategory::Optimizer);
        assert_eq!(bytes, 800);
        l.open_window(10, &named(&[]));
        let w = l.close_window(0);
        let owners: Vec<(u64, bool)> = w
            .pre_existing
            .iter()
            .map(|r| (r.ptr, matches!(r.owner, Owner::Construction { .. })))
            .collect();
        assert_eq!(owners, vec![(0x1, false), (0x2, true), (0x3, true)]);
    }
}
