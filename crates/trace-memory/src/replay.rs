//! The single pass over memory events: storage identity, lifetimes, batch-per-timestamp live
//! bytes, the change-list timeline and the peak times.
//!
//! Events are ordered by `(timestamp_ns, file order)` (a stable sort, skipped when the file is
//! already in time order) and applied one timestamp batch at a time. Inside a batch, file order
//! decides identity (free X then alloc X is a new lifetime); live bytes, the timeline and the
//! peaks are read after the whole batch. Cost: O(n log n) for the sort (O(n) when sorted), O(1)
//! expected per event, O(changed cells) per batch.

use trace_schema::{MemoryAction, MemoryCategory, Sym, TraceDocument};

use crate::fasthash::FxHashMap;
use crate::timeline::{CellChange, TotalPoint};

/// `end_ns` of a lifetime still live when the trace ended.
pub(crate) const OPEN: u64 = u64::MAX;

/// Number of memory categories (cells per device).
pub(crate) const CATEGORIES: usize = MemoryCategory::ALL.len();

/// Position of a category in [`MemoryCategory::ALL`].
pub(crate) fn category_index(category: MemoryCategory) -> usize {
    match category {
        MemoryCategory::Parameter => 0,
        MemoryCategory::Activation => 1,
        MemoryCategory::Gradient => 2,
        MemoryCategory::Optimizer => 3,
        MemoryCategory::Other => 4,
    }
}

/// A compact storage lifetime; the descriptive fields live on its alloc event
/// (`doc.memory[event]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Life {
    /// Time of the alloc, ns.
    pub start_ns: u64,
    /// Time of the matched free, ns, or [`OPEN`].
    pub end_ns: u64,
    /// Bytes (from the alloc event).
    pub bytes: u64,
    /// Index of the alloc event in `doc.memory`.
    pub event: u32,
    /// Dense device index into [`Replay::devices`].
    pub device: u32,
}

impl Life {
    /// Live after the batch at `t` was applied.
    #[inline]
    pub fn live_after(&self, t: u64) -> bool {
        self.start_ns <= t && self.end_ns > t
    }

    /// Live after every batch strictly before `t` (alive when an instant `t` begins).
    #[inline]
    pub fn live_entering(&self, t: u64) -> bool {
        self.start_ns < t && self.end_ns >= t
    }
}

/// Per-device accumulators.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceAcc {
    pub allocation_count: u64,
    pub matched_free_count: u64,
    pub total_allocated_bytes: u64,
    pub pre_existing_count: u64,
    pub pre_existing_bytes: u64,
    pub unpaired_free_count: u64,
    pub live_bytes: u64,
    pub has_lifetimes: bool,
    /// `(timestamp_ns, live_bytes)` of the device's first-reached peak.
    pub peak: Option<(u64, u64)>,
}

/// Everything the pass produces (compact, handles unresolved).
#[derive(Debug, Default)]
pub(crate) struct Replay {
    pub devices: Vec<Sym>,
    pub device_acc: Vec<DeviceAcc>,
    pub lives: Vec<Life>,
    /// Extra tensor ids seen on a lifetime (aliases and frees): `(lifetime, tensor)`.
    pub extra_tensors: Vec<(u32, Sym)>,
    pub totals: Vec<TotalPoint>,
    pub changes: Vec<CellChange>,
    /// `(timestamp_ns, live_bytes)` of the first-reached global peak.
    pub peak: Option<(u64, u64)>,
    /// Event indices of frees whose alloc was never seen.
    pub unmatched_frees: Vec<u32>,
    /// `(lifetime, free event)` where the free states another size than the alloc.
    pub size_mismatches: Vec<(u32, u32)>,
    pub alias_event_count: u64,
    /// Allocs with neither a storage id nor a tensor id: never freeable, live to the end.
    pub unidentified_alloc_count: u64,
    /// Allocs without `bytes` (counted as 0 bytes).
    pub alloc_without_bytes_count: u64,
    /// False as soon as one event lacks a storage id (trace/6 identity is `(device, tensor)`).
    pub aliases_detectable: bool,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// Identity of a storage inside a device: a storage id, or (trace/6) a tensor id.
#[inline]
fn identity(storage: Option<Sym>, tensor: Option<Sym>) -> Option<u64> {
    match (storage, tensor) {
        (Some(s), _) => Some((s.index() as u64) << 1),
        (None, Some(t)) => Some(((t.index() as u64) << 1) | 1),
        (None, None) => None,
    }
}

#[derive(Clone, Copy)]
struct LiveEntry {
    life: u32,
    cell: u32,
    tensor: Option<Sym>,
    bytes: u64,
}

struct State {
    r: Replay,
    device_of_sym: FxHashMap<Sym, u32>,
    /// Live storages: lifetime index plus what a free needs (no cold access to the alloc).
    live: FxHashMap<u64, LiveEntry>,
    cells: Vec<u64>,
    cell_start: Vec<u64>,
    touched_flag: Vec<bool>,
    touched: Vec<u32>,
    device_flag: Vec<bool>,
    total: u64,
}

impl State {
    fn device(&mut self, sym: Sym) -> u32 {
        if let Some(&d) = self.device_of_sym.get(&sym) {
            return d;
        }
        let d = self.r.devices.len() as u32;
        self.r.devices.push(sym);
        self.r.device_acc.push(DeviceAcc::default());
        self.device_of_sym.insert(sym, d);
        self.cells.resize(self.cells.len() + CATEGORIES, 0);
        self.cell_start.resize(self.cells.len(), 0);
        self.touched_flag.resize(self.cells.len(), false);
        self.device_flag.push(false);
        d
    }

    #[inline]
    fn touch(&mut self, cell: usize) {
        if !self.touched_flag[cell] {
            self.touched_flag[cell] = true;
            self.cell_start[cell] = self.cells[cell];
            self.touched.push(cell as u32);
        }
    }

    fn finish_batch(&mut self, ts: u64) {
        let mut any = false;
        for i in 0..self.touched.len() {
            let cell = self.touched[i] as usize;
            self.touched_flag[cell] = false;
            let device = cell / CATEGORIES;
            self.device_flag[device] = true;
            if self.cells[cell] != self.cell_start[cell] {
                any = true;
                self.r.changes.push(CellChange {
                    timestamp_ns: ts,
                    device: device as u32,
                    category: MemoryCategory::ALL[cell % CATEGORIES],
                    live_bytes: self.cells[cell],
                });
            }
        }
        let new_peak = !self.r.lives.is_empty() && self.r.peak.is_none_or(|(_, p)| self.total > p);
        if new_peak {
            self.r.peak = Some((ts, self.total));
        }
        // A peak batch always has a point, so the display series can keep it.
        if any || new_peak {
            self.r.totals.push(TotalPoint {
                timestamp_ns: ts,
                live_bytes: self.total,
            });
        }
        for i in 0..self.touched.len() {
            let device = self.touched[i] as usize / CATEGORIES;
            if !self.device_flag[device] {
                continue;
            }
            self.device_flag[device] = false;
            let acc = &mut self.r.device_acc[device];
            if acc.has_lifetimes && acc.peak.is_none_or(|(_, p)| acc.live_bytes > p) {
                acc.peak = Some((ts, acc.live_bytes));
            }
        }
        self.touched.clear();
    }
}

/// Runs the pass over `doc.memory`.
pub(crate) fn replay(doc: &TraceDocument) -> Replay {
    let memory = &doc.memory;
    let mut order: Vec<u32> = (0..memory.len() as u32).collect();
    if !memory
        .windows(2)
        .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns)
    {
        order.sort_by_key(|&i| memory[i as usize].timestamp_ns);
    }
    let mut st = State {
        r: Replay {
            aliases_detectable: true,
            ..Replay::default()
        },
        device_of_sym: FxHashMap::default(),
        live: FxHashMap::default(),
        cells: Vec::new(),
        cell_start: Vec::new(),
        touched_flag: Vec::new(),
        touched: Vec::new(),
        device_flag: Vec::new(),
        total: 0,
    };
    let mut batch_ts: Option<u64> = None;
    for &ei in &order {
        let e = &memory[ei as usize];
        let ts = e.timestamp_ns;
        match batch_ts {
            Some(b) if b == ts => {}
            Some(b) => {
                st.finish_batch(b);
                batch_ts = Some(ts);
            }
            None => {
                st.r.first_ns = ts;
                batch_ts = Some(ts);
            }
        }
        let device = st.device(e.device);
        if e.storage.is_none() {
            st.r.aliases_detectable = false;
        }
        // (device, identity) packed in one word: identity < 2^33, device in the bits above.
        let key = identity(e.storage, e.tensor).map(|k| ((device as u64) << 33) | k);
        match e.action {
            MemoryAction::Alloc => {
                if let Some(entry) = key.as_ref().and_then(|k| st.live.get(k)) {
                    st.r.alias_event_count += 1;
                    if let Some(t) = e.tensor {
                        if entry.tensor != Some(t) {
                            st.r.extra_tensors.push((entry.life, t));
                        }
                    }
                    continue;
                }
                let bytes = match e.bytes {
                    Some(b) => b,
                    None => {
                        st.r.alloc_without_bytes_count += 1;
                        0
                    }
                };
                let li = st.r.lives.len() as u32;
                st.r.lives.push(Life {
                    start_ns: ts,
                    end_ns: OPEN,
                    bytes,
                    event: ei,
                    device,
                });
                let cell = device as usize * CATEGORIES + category_index(e.category);
                match key {
                    Some(k) => {
                        let entry = LiveEntry {
                            life: li,
                            cell: cell as u32,
                            tensor: e.tensor,
                            bytes,
                        };
                        st.live.insert(k, entry);
                    }
                    None => st.r.unidentified_alloc_count += 1,
                }
                let acc = &mut st.r.device_acc[device as usize];
                acc.has_lifetimes = true;
                if e.pre_existing {
                    acc.pre_existing_count += 1;
                    acc.pre_existing_bytes = acc.pre_existing_bytes.saturating_add(bytes);
                } else {
                    acc.allocation_count += 1;
                    acc.total_allocated_bytes = acc.total_allocated_bytes.saturating_add(bytes);
                }
                acc.live_bytes = acc.live_bytes.saturating_add(bytes);
                st.touch(cell);
                st.cells[cell] = st.cells[cell].saturating_add(bytes);
                st.total = st.total.saturating_add(bytes);
            }
            MemoryAction::Free => {
                let Some(entry) = key.and_then(|k| st.live.remove(&k)) else {
                    st.r.unmatched_frees.push(ei);
                    st.r.device_acc[device as usize].unpaired_free_count += 1;
                    continue;
                };
                let li = entry.life;
                st.r.lives[li as usize].end_ns = ts;
                let bytes = entry.bytes;
                if e.bytes.is_some_and(|b| b != bytes) {
                    st.r.size_mismatches.push((li, ei));
                }
                if let Some(t) = e.tensor {
                    if entry.tensor != Some(t) {
                        st.r.extra_tensors.push((li, t));
                    }
                }
                let cell = entry.cell as usize;
                let acc = &mut st.r.device_acc[device as usize];
                acc.matched_free_count += 1;
                acc.live_bytes = acc.live_bytes.saturating_sub(bytes);
                st.touch(cell);
                st.cells[cell] = st.cells[cell].saturating_sub(bytes);
                st.total = st.total.saturating_sub(bytes);
            }
        }
    }
    if let Some(b) = batch_ts {
        st.finish_batch(b);
        st.r.last_ns = b;
    }
    st.r
}
