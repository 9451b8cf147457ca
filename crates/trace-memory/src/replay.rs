//! The single pass over memory events: storage identity, lifetimes, live bytes after every
//! event, the change-list timeline and the peaks.
//!
//! Events are ordered by `(timestamp_ns, file order)` (a stable sort, skipped when the file is
//! already in time order) and applied one at a time; every live figure is read after each
//! event, so a storage allocated and freed within one tick still counts. The position of an
//! event in that order is its *sequence number*. Cost: O(n log n) for the sort (O(n) when
//! sorted), O(1) expected per event.
//!
//! Byte sums are checked: [`alloc_bytes_overflow`] refuses a trace whose allocation sizes add up
//! past `u64::MAX` before anything is summed, and every addition below is checked again, so no
//! figure can wrap or saturate.

use rustc_hash::FxHashMap;
use trace_schema::{MemoryAction, MemoryCategory, Sym, TraceDocument};

use crate::timeline::{CellChange, TotalPoint};

/// `end_ns` of a lifetime still live when the trace ended.
pub(crate) const OPEN: u64 = u64::MAX;
/// `end_seq` of a lifetime still live when the trace ended.
pub(crate) const OPEN_SEQ: u32 = u32::MAX;

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
    /// Sequence number of the alloc.
    pub start_seq: u32,
    /// Sequence number of the matched free, or [`OPEN_SEQ`].
    pub end_seq: u32,
    /// Bytes (from the alloc event).
    pub bytes: u64,
    /// Index of the alloc event in `doc.memory`.
    pub event: u32,
    /// Dense device index into [`Replay::devices`].
    pub device: u32,
}

impl Life {
    /// Live after the event with sequence number `seq` was applied.
    #[inline]
    pub fn live_after(&self, seq: u32) -> bool {
        self.start_seq <= seq && self.end_seq > seq
    }

    /// Live after every event strictly before time `t` (alive when an instant `t` begins).
    #[inline]
    pub fn live_entering(&self, t: u64) -> bool {
        self.start_ns < t && self.end_ns >= t
    }
}

/// A point of a running maximum: after which event, when, how many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeakPoint {
    pub seq: u32,
    pub timestamp_ns: u64,
    pub live_bytes: u64,
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
    /// The device's first-reached peak.
    pub peak: Option<PeakPoint>,
}

/// Everything the pass produces (compact, handles unresolved).
#[derive(Debug, Default)]
pub(crate) struct Replay {
    pub devices: Vec<Sym>,
    pub device_acc: Vec<DeviceAcc>,
    pub lives: Vec<Life>,
    /// Event index (into `doc.memory`) of each sequence number.
    pub order: Vec<u32>,
    /// Extra tensor ids seen on a lifetime (aliases and frees): `(lifetime, tensor)`.
    pub extra_tensors: Vec<(u32, Sym)>,
    pub totals: Vec<TotalPoint>,
    pub changes: Vec<CellChange>,
    /// The first-reached global peak.
    pub peak: Option<PeakPoint>,
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
    /// A checked sum overflowed (cannot happen after [`alloc_bytes_overflow`] passed; kept so
    /// no figure is ever produced from a wrapped sum).
    pub overflowed: bool,
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

/// The first alloc event (index into `doc.memory`) at which the sizes of all allocs, in file
/// order, add up past `u64::MAX`; `None` when every sum of the trace's byte counts fits.
///
/// Every live, category, device, total and timeline figure is a sum of distinct allocs' bytes,
/// so when this is `None` none of them can overflow.
pub fn alloc_bytes_overflow(doc: &TraceDocument) -> Option<usize> {
    let mut total = 0u64;
    for (i, m) in doc.memory.iter().enumerate() {
        if m.action == MemoryAction::Alloc {
            total = match total.checked_add(m.bytes.unwrap_or(0)) {
                Some(t) => t,
                None => return Some(i),
            };
        }
    }
    None
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
        d
    }

    /// Checked `a + b`; on overflow marks the replay and keeps `a`.
    fn add(overflowed: &mut bool, a: &mut u64, b: u64) {
        match a.checked_add(b) {
            Some(x) => *a = x,
            None => *overflowed = true,
        }
    }

    /// Checked `a - b` (never expected to fail: `b` was added before).
    fn sub(overflowed: &mut bool, a: &mut u64, b: u64) {
        match a.checked_sub(b) {
            Some(x) => *a = x,
            None => *overflowed = true,
        }
    }

    /// Records the change of `cell` by the event `seq` at `ts`, and any new peak.
    fn changed(&mut self, seq: u32, event: u32, ts: u64, cell: usize, alloc: bool) {
        let device = cell / CATEGORIES;
        self.r.changes.push(CellChange {
            timestamp_ns: ts,
            event_index: event,
            device: device as u32,
            category: MemoryCategory::ALL[cell % CATEGORIES],
            live_bytes: self.cells[cell],
        });
        self.r.totals.push(TotalPoint {
            timestamp_ns: ts,
            event_index: event,
            live_bytes: self.total,
        });
        if !alloc {
            return;
        }
        let point = |live_bytes| PeakPoint {
            seq,
            timestamp_ns: ts,
            live_bytes,
        };
        if self.r.peak.is_none_or(|p| self.total > p.live_bytes) {
            self.r.peak = Some(point(self.total));
        }
        let acc = &mut self.r.device_acc[device];
        if acc.peak.is_none_or(|p| acc.live_bytes > p.live_bytes) {
            acc.peak = Some(point(acc.live_bytes));
        }
    }
}

/// Runs the pass over `doc.memory`. Call it only when [`alloc_bytes_overflow`] is `None`.
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
        total: 0,
    };
    if let Some(&first) = order.first() {
        st.r.first_ns = memory[first as usize].timestamp_ns;
    }
    if let Some(&last) = order.last() {
        st.r.last_ns = memory[last as usize].timestamp_ns;
    }
    for (seq, &ei) in order.iter().enumerate() {
        let seq = seq as u32;
        let e = &memory[ei as usize];
        let ts = e.timestamp_ns;
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
                    start_seq: seq,
                    end_seq: OPEN_SEQ,
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
                let of = &mut st.r.overflowed;
                let acc = &mut st.r.device_acc[device as usize];
                if e.pre_existing {
                    acc.pre_existing_count += 1;
                    State::add(of, &mut acc.pre_existing_bytes, bytes);
                } else {
                    acc.allocation_count += 1;
                    State::add(of, &mut acc.total_allocated_bytes, bytes);
                }
                State::add(of, &mut acc.live_bytes, bytes);
                State::add(of, &mut st.cells[cell], bytes);
                State::add(of, &mut st.total, bytes);
                st.changed(seq, ei, ts, cell, true);
            }
            MemoryAction::Free => {
                let Some(entry) = key.and_then(|k| st.live.remove(&k)) else {
                    st.r.unmatched_frees.push(ei);
                    st.r.device_acc[device as usize].unpaired_free_count += 1;
                    continue;
                };
                let li = entry.life;
                let life = &mut st.r.lives[li as usize];
                life.end_ns = ts;
                life.end_seq = seq;
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
                let of = &mut st.r.overflowed;
                let acc = &mut st.r.device_acc[device as usize];
                acc.matched_free_count += 1;
                State::sub(of, &mut acc.live_bytes, bytes);
                State::sub(of, &mut st.cells[cell], bytes);
                State::sub(of, &mut st.total, bytes);
                st.changed(seq, ei, ts, cell, false);
            }
        }
    }
    st.r.order = order;
    st.r
}
