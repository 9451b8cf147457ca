//! The single pass over memory events: storage identity, lifetimes, live bytes after every
//! event, the peaks (global, per device, per pass) with the storages live at each, the
//! activations live when the first backward and optimizer spans begin, the timeline.
//!
//! Events come in replay order — `(timestamp_ns, file order)`, from
//! [`TraceDocument::for_each_memory`] — and apply one at a time; every live figure is read after
//! each event, so a storage allocated and freed within one tick still counts. The position of
//! an event in that order is its *sequence number*.
//!
//! # What is held
//! The live set (one entry per live storage), and for each peak the storages that were live at
//! it and were freed since: when a peak is passed, its record is cleared; a storage enters a
//! peak's record only when it is freed while it was live at that peak, so a record never holds
//! more than the live set at its peak. [`Detail::Full`] also keeps one record per lifetime and
//! per changing event (the lifetimes list and the timeline); [`Detail::Summary`] keeps neither:
//! the timeline goes to a [`TimelineLog`] (a buffer, then a temporary file) and only the
//! lifetimes the answer names are built, so what is resident does not grow with the events.
//!
//! Byte sums are checked: allocation sizes that add up past `u64::MAX` refuse the logical plane
//! (the caller reports where, see [`crate::alloc_bytes_overflow`]), so no figure can wrap.

use std::rc::Rc;
use std::sync::Arc;

use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use std::hash::BuildHasher;
use trace_schema::{
    CategorySource, MemoryAction, MemoryCategory, MemoryItem, MemorySource, ShapeId, Sym,
    TraceDocument,
};

use crate::timeline::{CellChange, TimelineLog, TotalPoint};

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

/// How much of the per-event evidence an analysis keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// Every lifetime and every timeline change in memory (resident size grows with the
    /// events): [`crate::LogicalMemoryProfile::lifetimes`] lists every storage and every query
    /// answers for any time.
    #[default]
    Full,
    /// Only what the figures name: the lifetimes live at a reported peak (global, per device)
    /// or at the end, the timeline in a temporary log read back on demand. Every figure equals
    /// the full analysis'; what is resident is the live set, the span tree and the answer.
    Summary,
}

/// How many storages a summary-detail profile lists at each peak (the largest, ranked); the
/// counts and byte breakdowns always cover every storage.
pub const SUMMARY_TOP: usize = 256;

/// A compact storage lifetime (full detail: one per lifetime).
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
    /// Index of the alloc event among the document's memory events.
    pub event: u32,
    /// Dense device index.
    pub device: u32,
    /// Span of the alloc event.
    pub span: Option<Sym>,
    /// Op name of the alloc event.
    pub op_name: Option<Sym>,
    /// Category of the alloc event.
    pub category: MemoryCategory,
    /// The alloc event was `pre_existing`.
    pub pre_existing: bool,
}

impl Life {
    /// Live after the event with sequence number `seq` was applied.
    #[inline]
    pub fn live_after(&self, seq: u32) -> bool {
        self.start_seq <= seq && self.end_seq > seq
    }
}

/// What the alloc event says about a storage (shared strings as document symbols).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Desc {
    pub span: Option<Sym>,
    pub op_name: Option<Sym>,
    pub label: Option<Sym>,
    pub shape: Option<ShapeId>,
    pub dtype: Option<Sym>,
    pub category: MemoryCategory,
    pub category_source: Option<CategorySource>,
    pub source: Option<MemorySource>,
    pub pre_existing: bool,
}

/// A lifetime as the answer reports it (freed, or live at the end).
#[derive(Debug, Clone)]
pub(crate) struct Done {
    pub life: u32,
    pub start_seq: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub device: u32,
    pub event: u32,
    pub storage: Option<Arc<str>>,
    /// Every tensor id seen on the storage, sorted, deduplicated.
    pub tensors: Arc<[Arc<str>]>,
    pub desc: Desc,
}

/// The order storages are listed in: bytes descending, then alloc time, device, storage id, and
/// finally file order of the alloc event — a total order (`Less`: listed first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankKey<'a> {
    pub bytes: u64,
    pub start_ns: u64,
    pub device: &'a str,
    pub storage: Option<&'a str>,
    pub event: u32,
}

impl RankKey<'_> {
    pub fn cmp(&self, other: &RankKey<'_>) -> std::cmp::Ordering {
        other
            .bytes
            .cmp(&self.bytes)
            .then(self.start_ns.cmp(&other.start_ns))
            .then_with(|| self.device.cmp(other.device))
            .then_with(|| self.storage.cmp(&other.storage))
            .then(self.event.cmp(&other.event))
    }
}

/// What is rarely there: tensor ids seen on a storage besides its alloc's, and the tensors of
/// its aliases (a repeat is a duplicate allocation).
#[derive(Debug, Default)]
struct Extra {
    tensors: Vec<Box<str>>,
    /// Tensor ids of the aliases' allocs: a set, so a storage aliased by 10^6 views does not
    /// scan a list at every alias (quadratic in the aliases of one storage).
    allocs_by: FxHashSet<Box<str>>,
    /// An alias alloc without a tensor id was seen.
    alloc_by_untensored: bool,
}

/// A live storage, compact: its ids in one allocation.
#[derive(Debug)]
struct Entry {
    /// The storage id followed by the alloc's tensor id.
    ids: Box<str>,
    /// Length of the storage id part.
    split: u32,
    /// Bit 0: has a storage id; bit 1: has a tensor id; bit 2: identified by its tensor id.
    flags: u8,
    /// Bit k: counted among the activations live when finding span k began.
    marks: u8,
    life: u32,
    start_seq: u32,
    event: u32,
    /// Device × category cell.
    cell: u32,
    start_ns: u64,
    bytes: u64,
    desc: Desc,
    extra: Option<Box<Extra>>,
}

const HAS_STORAGE: u8 = 1;
const HAS_TENSOR: u8 = 2;
const BY_TENSOR: u8 = 4;

impl Entry {
    fn storage(&self) -> Option<&str> {
        (self.flags & HAS_STORAGE != 0).then(|| &self.ids[..self.split as usize])
    }

    fn tensor(&self) -> Option<&str> {
        (self.flags & HAS_TENSOR != 0).then(|| &self.ids[self.split as usize..])
    }

    fn device(&self) -> u32 {
        self.cell / CATEGORIES as u32
    }

    fn by_tensor(&self) -> bool {
        self.flags & BY_TENSOR != 0
    }

    /// The identity: storage id, or (trace/6) tensor id.
    fn id(&self) -> &str {
        if self.by_tensor() {
            self.tensor().unwrap_or("")
        } else {
            self.storage().unwrap_or("")
        }
    }

    fn key<'a>(&'a self, names: &'a [Arc<str>]) -> RankKey<'a> {
        RankKey {
            bytes: self.bytes,
            start_ns: self.start_ns,
            device: &names[self.device() as usize],
            storage: self.storage(),
            event: self.event,
        }
    }

    fn done(&self, end_ns: u64) -> Done {
        let extra = self.extra.as_ref().map_or(&[][..], |x| &x.tensors[..]);
        let mut tensors: Vec<Arc<str>> = Vec::with_capacity(1 + extra.len());
        tensors.extend(self.tensor().map(Arc::from));
        tensors.extend(extra.iter().map(|t| Arc::from(&**t)));
        if tensors.len() > 1 {
            tensors.sort_unstable();
            tensors.dedup();
        }
        Done {
            life: self.life,
            start_seq: self.start_seq,
            start_ns: self.start_ns,
            end_ns,
            bytes: self.bytes,
            device: self.device(),
            event: self.event,
            storage: self.storage().map(Arc::from),
            tensors: tensors.into(),
            desc: self.desc,
        }
    }
}

/// A point of a running maximum: after which event (its sequence number and index), when, how
/// many bytes, and the span the event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeakPoint {
    pub seq: u32,
    pub event: u32,
    pub timestamp_ns: u64,
    pub live_bytes: u64,
    pub span: Option<Sym>,
}

/// The counts at a tracked moment: storages live per device, live bytes per device × category.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    pub per_device: Vec<u64>,
    pub cells: Vec<u64>,
}

impl Counts {
    /// Storages live on `device` (all devices: `None`).
    pub fn count(&self, device: Option<u32>) -> u64 {
        match device {
            Some(d) => self.per_device.get(d as usize).copied().unwrap_or(0),
            None => self.per_device.iter().sum(),
        }
    }

    /// Live bytes of one device × category cell (0 for a device not seen yet at the moment).
    pub fn cell(&self, cell: usize) -> u64 {
        self.cells.get(cell).copied().unwrap_or(0)
    }
}

/// Which storages a tracker lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// None: counts only.
    Counts,
    /// Every storage live at the moment.
    All,
    /// The first `n` in rank order.
    Top(usize),
}

/// The rank key of a finished lifetime.
fn done_key<'a>(d: &'a Done, names: &'a [Arc<str>]) -> RankKey<'a> {
    RankKey {
        bytes: d.bytes,
        start_ns: d.start_ns,
        device: &names[d.device as usize],
        storage: d.storage.as_deref(),
        event: d.event,
    }
}

/// A candidate of a top list, ordered by rank (the heap's top is the last in rank order).
#[derive(Debug)]
struct Cand {
    done: Rc<Done>,
    name: Arc<str>,
}

impl Cand {
    fn key(&self) -> RankKey<'_> {
        RankKey {
            bytes: self.done.bytes,
            start_ns: self.done.start_ns,
            device: &self.name,
            storage: self.done.storage.as_deref(),
            event: self.done.event,
        }
    }
}

impl PartialEq for Cand {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Cand {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// The storages live at one moment and what they hold, reconstructed at the end: live then
/// (their start sequence is below `applied`, the number of events applied at that moment) and
/// either still live at the end or freed since (the record: every one, or the best `n`).
#[derive(Debug)]
pub(crate) struct Tracker {
    /// Events applied at the tracked moment (`None` before there is one).
    pub applied: Option<u32>,
    /// Only storages of this device.
    pub device: Option<u32>,
    pub keep: Keep,
    /// The counts at the moment.
    pub counts: Counts,
    /// Storages live at the moment and freed since ([`Keep::All`]).
    log: Vec<Rc<Done>>,
    /// The best of them ([`Keep::Top`]).
    top: std::collections::BinaryHeap<Cand>,
    /// Summary detail: the listed storages, decided when the pass ended.
    final_list: Option<Vec<Rc<Done>>>,
}

impl Tracker {
    fn new(keep: Keep, device: Option<u32>) -> Self {
        Self {
            applied: None,
            device,
            keep,
            counts: Counts::default(),
            log: Vec::new(),
            top: std::collections::BinaryHeap::new(),
            final_list: None,
        }
    }

    fn wants(&self, e: &Entry) -> bool {
        self.keep != Keep::Counts
            && self.applied.is_some_and(|a| e.start_seq < a)
            && self.device.is_none_or(|d| d == e.device())
    }

    /// Whether a freed `e` would enter the list (it was live at the moment and, for a top list,
    /// ranks among the best so far).
    fn would_keep(&self, e: &Entry, names: &[Arc<str>]) -> bool {
        if !self.wants(e) {
            return false;
        }
        match self.keep {
            Keep::Top(n) if self.top.len() >= n => self
                .top
                .peek()
                .is_some_and(|worst| e.key(names).cmp(&worst.key()).is_lt()),
            Keep::Top(0) => false,
            _ => true,
        }
    }

    fn keep(&mut self, done: &Rc<Done>, names: &[Arc<str>]) {
        match self.keep {
            Keep::Counts => {}
            Keep::All => self.log.push(done.clone()),
            Keep::Top(n) => {
                self.top.push(Cand {
                    done: done.clone(),
                    name: names[done.device as usize].clone(),
                });
                if self.top.len() > n {
                    self.top.pop();
                }
            }
        }
    }

    /// The listed storages: live ones at the end it wants, plus its record (unranked; for a
    /// top list, a superset of the best `n`).
    pub fn listed<'a>(&'a self, end: &'a [Rc<Done>]) -> Vec<&'a Done> {
        if let Some(list) = &self.final_list {
            return list.iter().map(|d| &**d).collect();
        }
        let Some(a) = self.applied.filter(|_| self.keep != Keep::Counts) else {
            return Vec::new();
        };
        let record: Vec<&Done> = match self.keep {
            Keep::All => self.log.iter().map(|d| &**d).collect(),
            _ => self.top.iter().map(|c| &*c.done).collect(),
        };
        end.iter()
            .map(|d| &**d)
            .filter(|d| d.start_seq < a && self.device.is_none_or(|x| x == d.device))
            .chain(record)
            .collect()
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
    /// The device's first-reached peak.
    pub peak: Option<PeakPoint>,
}

/// Per-category accumulators over lifetimes (live-at-end figures are added at the end).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CategoryAcc {
    pub seen: bool,
    pub allocation_count: u64,
    pub total_allocated_bytes: u64,
    pub pre_existing_count: u64,
    pub pre_existing_bytes: u64,
}

/// Where a pass peak comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PassPos {
    /// After this changing event (its index and span).
    Event(u32, Option<Sym>),
    /// The value carried into an interval's start.
    Carried,
}

/// The running peak of one pass over its merged intervals.
#[derive(Debug)]
pub(crate) struct PassTrack {
    /// Merged `[start, end)` intervals (an open span runs to [`OPEN`]).
    pub intervals: Vec<(u64, u64)>,
    /// Spans declaring the pass.
    pub span_count: u64,
    /// Intervals crossed so far.
    crossed: usize,
    /// `(time, where, bytes)` of the best point.
    pub best: Option<(u64, PassPos, u64)>,
    pub tracker: Tracker,
}

/// Activations live when a span begins, and of those still live after it ends.
#[derive(Debug, Default, Clone)]
pub(crate) struct SpanWatch {
    pub end_ns: Option<u64>,
    pub crossed: bool,
    pub count: u64,
    pub bytes: u64,
    pub kept_count: u64,
    pub kept_bytes: u64,
}

/// A free whose alloc was never seen.
#[derive(Debug, Clone)]
pub(crate) struct Unmatched {
    pub event: u32,
    pub timestamp_ns: u64,
    pub device: Sym,
    pub storage: Option<Arc<str>>,
    pub tensor: Option<Arc<str>>,
    pub bytes: Option<u64>,
}

/// A free stating another size than its alloc.
#[derive(Debug, Clone)]
pub(crate) struct Mismatch {
    pub life: u32,
    pub device: u32,
    pub storage: Option<Arc<str>>,
    pub alloc_bytes: u64,
    pub free_bytes: u64,
    pub free_timestamp_ns: u64,
}

/// An alloc of a live storage by a tensor (or no tensor) that already allocated it.
#[derive(Debug, Clone)]
pub(crate) struct Duplicate {
    pub event: u32,
    pub device: Sym,
    pub id: Arc<str>,
    pub tensor: Option<Arc<str>>,
}

/// The merged `[start, end)` intervals of one pass's spans and the number of those spans.
pub(crate) type PassIntervals = (Vec<(u64, u64)>, u64);

/// What the pass was asked to watch (spans are known before it starts).
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// Per pass in [`trace_schema::Pass`] order: merged intervals and span counts (`None` for a
    /// pass without spans).
    pub passes: [Option<PassIntervals>; 3],
    /// The first backward and first optimizer spans: `(start, end)`.
    pub spans: [Option<(u64, Option<u64>)>; 2],
}

/// What is live at the end: per device storages and bytes, per device × category bytes, per
/// category storages and bytes.
#[derive(Debug, Default)]
pub(crate) struct EndStats {
    pub device: Vec<(u64, u64)>,
    pub cells: Vec<u64>,
    pub category: [(u64, u64); CATEGORIES],
}

/// Everything the pass produces.
#[derive(Debug)]
pub(crate) struct Replay {
    pub detail: Detail,
    pub devices: Vec<Sym>,
    pub device_acc: Vec<DeviceAcc>,
    pub categories: [CategoryAcc; CATEGORIES],
    /// Lifetimes counted (allocations and pre-existing storages).
    pub life_count: u32,
    /// Storages live at the end, in lifetime order (full detail).
    pub end: Vec<Rc<Done>>,
    /// Storages live at the end, in lifetime order (summary detail).
    pub end_lifetimes: Vec<crate::StorageLifetime>,
    /// Counts of the storages live at the end.
    pub end_stats: EndStats,
    /// The first-reached global peak and the storages live at it.
    pub peak: Option<PeakPoint>,
    pub peak_set: Tracker,
    pub device_sets: Vec<Tracker>,
    pub passes: [Option<PassTrack>; 3],
    pub spans: [Option<SpanWatch>; 2],
    /// Allocations (pre-existing excluded) per span: count and bytes.
    pub span_alloc: FxHashMap<Sym, (u64, u64)>,
    pub unmatched: Vec<Unmatched>,
    pub mismatches: Vec<Mismatch>,
    pub duplicates: Vec<Duplicate>,
    pub alias_event_count: u64,
    pub unidentified_alloc_count: u64,
    pub alloc_without_bytes_count: u64,
    pub aliases_detectable: bool,
    /// The sizes of all allocs add up past `u64::MAX` (every figure is refused).
    pub overflowed: bool,
    pub first_ns: u64,
    pub last_ns: u64,
    pub events: u32,
    // full detail
    pub lives: Vec<Life>,
    pub lifetimes: Vec<Option<Rc<Done>>>,
    /// Event index of each sequence number.
    pub order: Vec<u32>,
    /// Time of each sequence number.
    pub times: Vec<u64>,
    pub totals: Vec<TotalPoint>,
    pub changes: Vec<CellChange>,
    // summary detail
    pub log: Option<TimelineLog>,
}

fn hash_key(device: u32, by_tensor: bool, id: &str) -> u64 {
    FxBuildHasher.hash_one((device, by_tensor, id))
}

/// Entries per slab chunk.
const CHUNK: usize = 4096;

/// The live storages: entries in fixed-size chunks (no large reallocation while the live set
/// grows), found through a table of 4-byte slots.
#[derive(Default)]
struct LiveSet {
    chunks: Vec<Vec<Option<Entry>>>,
    free: Vec<u32>,
    table: HashTable<u32>,
}

impl LiveSet {
    fn get(&self, i: u32) -> &Entry {
        self.chunks[i as usize / CHUNK][i as usize % CHUNK]
            .as_ref()
            .expect("a slot in the table holds an entry")
    }

    fn get_mut(&mut self, i: u32) -> &mut Entry {
        self.chunks[i as usize / CHUNK][i as usize % CHUNK]
            .as_mut()
            .expect("a slot in the table holds an entry")
    }

    fn find(&self, hash: u64, eq: impl Fn(&Entry) -> bool) -> Option<u32> {
        self.table.find(hash, |&i| eq(self.get(i))).copied()
    }

    fn insert(&mut self, hash: u64, e: Entry) {
        let i = match self.free.pop() {
            Some(i) => {
                self.chunks[i as usize / CHUNK][i as usize % CHUNK] = Some(e);
                i
            }
            None => {
                if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                    self.chunks.push(Vec::with_capacity(CHUNK));
                }
                let n = (self.chunks.len() - 1) * CHUNK + self.chunks.last().map_or(0, Vec::len);
                self.chunks.last_mut().expect("pushed").push(Some(e));
                n as u32
            }
        };
        let chunks = &self.chunks;
        self.table.insert_unique(hash, i, |&j| {
            let e = chunks[j as usize / CHUNK][j as usize % CHUNK]
                .as_ref()
                .expect("live");
            hash_key(e.device(), e.by_tensor(), e.id())
        });
    }

    fn remove(&mut self, hash: u64, eq: impl Fn(&Entry) -> bool) -> Option<Entry> {
        let chunks = &self.chunks;
        let i = self
            .table
            .find_entry(hash, |&i| {
                eq(chunks[i as usize / CHUNK][i as usize % CHUNK]
                    .as_ref()
                    .expect("live"))
            })
            .ok()?
            .remove()
            .0;
        self.free.push(i);
        self.chunks[i as usize / CHUNK][i as usize % CHUNK].take()
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.chunks.iter_mut().flatten().flatten()
    }

    fn drain(&mut self) -> impl Iterator<Item = Entry> + '_ {
        self.table.clear();
        self.free.clear();
        self.chunks.drain(..).flatten().flatten()
    }
}

impl std::fmt::Debug for LiveSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSet")
            .field("live", &self.table.len())
            .finish()
    }
}

/// The online state.
struct State<'d> {
    doc: &'d TraceDocument,
    r: Replay,
    device_of_sym: FxHashMap<Sym, u32>,
    names: Vec<Arc<str>>,
    live: LiveSet,
    unidentified: Vec<Entry>,
    cells: Vec<u64>,
    /// Storages live per device.
    live_count: Vec<u64>,
    total: u64,
    alloc_sum: u64,
    seq: u32,
    /// Time marks in order: `(time, what)`; what = pass (0..3) or finding span (3..5).
    marks: Vec<(u64, u8)>,
    next_mark: usize,
    /// Which list a device tracker keeps.
    device_keep: Keep,
}

impl State<'_> {
    fn device(&mut self, sym: Sym) -> u32 {
        if let Some(&d) = self.device_of_sym.get(&sym) {
            return d;
        }
        let d = self.r.devices.len() as u32;
        self.r.devices.push(sym);
        self.names.push(Arc::from(self.doc.str(sym)));
        self.r.device_acc.push(DeviceAcc::default());
        self.r
            .device_sets
            .push(Tracker::new(self.device_keep, Some(d)));
        self.device_of_sym.insert(sym, d);
        self.cells.resize(self.cells.len() + CATEGORIES, 0);
        self.live_count.push(0);
        d
    }

    fn add(&mut self, a: u64, b: u64) -> u64 {
        a.checked_add(b).unwrap_or_else(|| {
            self.r.overflowed = true;
            a
        })
    }

    fn sub(&mut self, a: u64, b: u64) -> u64 {
        a.checked_sub(b).unwrap_or_else(|| {
            self.r.overflowed = true;
            a
        })
    }

    /// Starts tracking the moment after `applied` events: snapshot the counts, clear the record.
    fn set(t: &mut Tracker, applied: u32, cells: &[u64], live_count: &[u64]) {
        t.applied = Some(applied);
        t.log.clear();
        t.top.clear();
        t.counts.cells.clear();
        t.counts.per_device.clear();
        match t.device {
            None => {
                t.counts.cells.extend_from_slice(cells);
                t.counts.per_device.extend_from_slice(live_count);
            }
            Some(d) => {
                let d = d as usize;
                t.counts.cells.resize(d * CATEGORIES, 0);
                t.counts
                    .cells
                    .extend_from_slice(&cells[d * CATEGORIES..(d + 1) * CATEGORIES]);
                t.counts.per_device.resize(d, 0);
                t.counts.per_device.push(live_count[d]);
            }
        }
    }

    /// Crosses the time marks at or before `t` (`None`: all, at the end), before the event at
    /// `t` applies.
    fn cross(&mut self, t: Option<u64>) {
        while let Some(&(at, what)) = self.marks.get(self.next_mark) {
            if t.is_some_and(|t| at > t) {
                break;
            }
            self.next_mark += 1;
            let applied = self.seq;
            let total = self.total;
            if (what as usize) < 3 {
                let p = self.r.passes[what as usize].as_mut().expect("marked");
                p.crossed += 1;
                if p.best.is_none_or(|b| total > b.2) {
                    p.best = Some((at, PassPos::Carried, total));
                    Self::set(&mut p.tracker, applied, &self.cells, &self.live_count);
                }
            } else {
                let k = what as usize - 3;
                let w = self.r.spans[k].as_mut().expect("marked");
                w.crossed = true;
                let bit = 1u8 << k;
                for e in self.live.iter_mut().chain(self.unidentified.iter_mut()) {
                    if e.desc.category == MemoryCategory::Activation {
                        w.count += 1;
                        // distinct lifetimes: bounded by the checked total (wrapping only once
                        // the total overflowed, when every figure is refused)
                        w.bytes = w.bytes.wrapping_add(e.bytes);
                        e.marks |= bit;
                    }
                }
                w.kept_count = w.count;
                w.kept_bytes = w.bytes;
            }
        }
    }

    /// Records the change of `cell` by the event `seq` at `ts`, and any new peak.
    fn changed(&mut self, ts: u64, event: u32, cell: usize, span: Option<Sym>, alloc: bool) {
        let seq = self.seq;
        let device = cell / CATEGORIES;
        let total = self.total;
        let value = self.cells[cell];
        let total_point = TotalPoint {
            timestamp_ns: ts,
            event_index: event,
            live_bytes: total,
        };
        let change = CellChange {
            timestamp_ns: ts,
            event_index: event,
            device: device as u32,
            category: MemoryCategory::ALL[cell % CATEGORIES],
            live_bytes: value,
        };
        match self.r.detail {
            Detail::Full => {
                self.r.totals.push(total_point);
                self.r.changes.push(change);
            }
            Detail::Summary => {
                if let Some(log) = self.r.log.as_mut() {
                    log.push(&total_point, &change);
                }
            }
        }
        // Pass peaks: an event inside the current interval of a pass.
        for p in self.r.passes.iter_mut().flatten() {
            let Some(&(s, e)) = p.crossed.checked_sub(1).and_then(|j| p.intervals.get(j)) else {
                continue;
            };
            let inside = ts >= s && (ts < e || (s == e && ts == s));
            if inside && p.best.is_none_or(|b| total > b.2) {
                p.best = Some((ts, PassPos::Event(event, span), total));
                Self::set(&mut p.tracker, seq + 1, &self.cells, &self.live_count);
            }
        }
        if !alloc {
            return;
        }
        let point = |live_bytes| PeakPoint {
            seq,
            event,
            timestamp_ns: ts,
            live_bytes,
            span,
        };
        if self.r.peak.is_none_or(|p| total > p.live_bytes) {
            self.r.peak = Some(point(total));
            Self::set(&mut self.r.peak_set, seq + 1, &self.cells, &self.live_count);
        }
        let acc = &mut self.r.device_acc[device];
        if acc.peak.is_none_or(|p| acc.live_bytes > p.live_bytes) {
            acc.peak = Some(point(acc.live_bytes));
            Self::set(
                &mut self.r.device_sets[device],
                seq + 1,
                &self.cells,
                &self.live_count,
            );
        }
    }

    fn apply(&mut self, m: &MemoryItem<'_>) {
        let ts = m.timestamp_ns;
        self.cross(Some(ts));
        let seq = self.seq;
        if seq == 0 {
            self.r.first_ns = ts;
        }
        self.r.last_ns = ts;
        if self.r.detail == Detail::Full {
            self.r.order.push(m.index);
            self.r.times.push(ts);
        }
        let device = self.device(m.device);
        if m.storage.is_none() {
            self.r.aliases_detectable = false;
        }
        let key: Option<(bool, &str)> = match (m.storage, m.tensor) {
            (Some(s), _) => Some((false, s)),
            (None, Some(t)) => Some((true, t)),
            (None, None) => None,
        };
        let hash = key.map(|(by_tensor, id)| hash_key(device, by_tensor, id));
        let find = |e: &Entry, (by_tensor, id): (bool, &str)| {
            e.device() == device && e.by_tensor() == by_tensor && e.id() == id
        };
        match m.action {
            MemoryAction::Alloc => {
                self.alloc_sum = match self.alloc_sum.checked_add(m.bytes.unwrap_or(0)) {
                    Some(s) => s,
                    None => {
                        self.r.overflowed = true;
                        self.alloc_sum
                    }
                };
                if let (Some(k), Some(h)) = (key, hash) {
                    if let Some(slot) = self.live.find(h, |e| find(e, k)) {
                        let entry = self.live.get_mut(slot);
                        self.r.alias_event_count += 1;
                        let extra = entry.extra.get_or_insert_with(Default::default);
                        let alloc_tensor = if entry.flags & HAS_TENSOR != 0 {
                            Some(&entry.ids[entry.split as usize..])
                        } else {
                            None
                        };
                        if let Some(t) = m.tensor {
                            if alloc_tensor != Some(t) {
                                extra.tensors.push(Box::from(t));
                            }
                        }
                        let again = alloc_tensor == m.tensor
                            || match m.tensor {
                                Some(t) => extra.allocs_by.contains(t),
                                None => extra.alloc_by_untensored,
                            };
                        if again {
                            self.r.duplicates.push(Duplicate {
                                event: m.index,
                                device: m.device,
                                id: Arc::from(entry.id()),
                                tensor: m.tensor.map(Arc::from),
                            });
                        } else {
                            match m.tensor {
                                Some(t) => {
                                    extra.allocs_by.insert(Box::from(t));
                                }
                                None => extra.alloc_by_untensored = true,
                            }
                        }
                        self.seq += 1;
                        return;
                    }
                }
                let bytes = match m.bytes {
                    Some(b) => b,
                    None => {
                        self.r.alloc_without_bytes_count += 1;
                        0
                    }
                };
                let life = self.r.life_count;
                self.r.life_count += 1;
                let k = category_index(m.category);
                let cell = device as usize * CATEGORIES + k;
                let mut ids = String::with_capacity(
                    m.storage.map_or(0, str::len) + m.tensor.map_or(0, str::len),
                );
                ids.push_str(m.storage.unwrap_or(""));
                let split = ids.len() as u32;
                ids.push_str(m.tensor.unwrap_or(""));
                let mut flags = 0;
                if m.storage.is_some() {
                    flags |= HAS_STORAGE;
                }
                if m.tensor.is_some() {
                    flags |= HAS_TENSOR;
                }
                if matches!(key, Some((true, _))) {
                    flags |= BY_TENSOR;
                }
                let entry = Entry {
                    ids: ids.into_boxed_str(),
                    split,
                    flags,
                    marks: 0,
                    life,
                    start_seq: seq,
                    event: m.index,
                    cell: cell as u32,
                    start_ns: ts,
                    bytes,
                    desc: Desc {
                        span: m.span,
                        op_name: m.op_name,
                        label: m.label,
                        shape: m.shape,
                        dtype: m.dtype,
                        category: m.category,
                        category_source: m.category_source,
                        source: m.source,
                        pre_existing: m.pre_existing,
                    },
                    extra: None,
                };
                if self.r.detail == Detail::Full {
                    self.r.lives.push(Life {
                        start_ns: ts,
                        end_ns: OPEN,
                        start_seq: seq,
                        end_seq: OPEN_SEQ,
                        bytes,
                        event: m.index,
                        device,
                        span: m.span,
                        op_name: m.op_name,
                        category: m.category,
                        pre_existing: m.pre_existing,
                    });
                    self.r.lifetimes.push(None);
                }
                match hash {
                    Some(h) => {
                        self.live.insert(h, entry);
                    }
                    None => {
                        self.r.unidentified_alloc_count += 1;
                        self.unidentified.push(entry);
                    }
                }
                self.live_count[device as usize] += 1;
                let cat = &mut self.r.categories[k];
                cat.seen = true;
                if m.pre_existing {
                    cat.pre_existing_count += 1;
                    cat.pre_existing_bytes = cat.pre_existing_bytes.wrapping_add(bytes);
                } else {
                    cat.allocation_count += 1;
                    cat.total_allocated_bytes = cat.total_allocated_bytes.wrapping_add(bytes);
                    if let Some(span) = m.span {
                        let a = self.r.span_alloc.entry(span).or_insert((0, 0));
                        a.0 += 1;
                        a.1 = a.1.wrapping_add(bytes); // bounded by the checked total
                    }
                }
                let acc = &self.r.device_acc[device as usize];
                let (pb, ab, lb) = (
                    acc.pre_existing_bytes,
                    acc.total_allocated_bytes,
                    acc.live_bytes,
                );
                let (pb, ab) = if m.pre_existing {
                    (self.add(pb, bytes), ab)
                } else {
                    (pb, self.add(ab, bytes))
                };
                let lb = self.add(lb, bytes);
                let cellv = self.add(self.cells[cell], bytes);
                let total = self.add(self.total, bytes);
                let acc = &mut self.r.device_acc[device as usize];
                if m.pre_existing {
                    acc.pre_existing_count += 1;
                } else {
                    acc.allocation_count += 1;
                }
                acc.pre_existing_bytes = pb;
                acc.total_allocated_bytes = ab;
                acc.live_bytes = lb;
                self.cells[cell] = cellv;
                self.total = total;
                self.changed(ts, m.index, cell, m.span, true);
            }
            MemoryAction::Free => {
                let removed = match (key, hash) {
                    (Some(k), Some(h)) => self.live.remove(h, |e| find(e, k)),
                    _ => None,
                };
                let Some(mut entry) = removed else {
                    self.r.unmatched.push(Unmatched {
                        event: m.index,
                        timestamp_ns: ts,
                        device: m.device,
                        storage: m.storage.map(Arc::from),
                        tensor: m.tensor.map(Arc::from),
                        bytes: m.bytes,
                    });
                    self.r.device_acc[device as usize].unpaired_free_count += 1;
                    self.seq += 1;
                    return;
                };
                let bytes = entry.bytes;
                if let Some(b) = m.bytes.filter(|&b| b != bytes) {
                    self.r.mismatches.push(Mismatch {
                        life: entry.life,
                        device: entry.device(),
                        storage: entry.storage().map(Arc::from),
                        alloc_bytes: bytes,
                        free_bytes: b,
                        free_timestamp_ns: ts,
                    });
                }
                if let Some(t) = m.tensor {
                    if entry.tensor() != Some(t) {
                        let extra = entry.extra.get_or_insert_with(Default::default);
                        extra.tensors.push(Box::from(t));
                    }
                }
                for (k, w) in self.r.spans.iter_mut().enumerate() {
                    if let Some(w) = w.as_mut() {
                        let kept = w.end_ns.is_some_and(|e| ts > e);
                        if entry.marks & (1 << k) != 0 && !kept {
                            w.kept_count -= 1;
                            w.kept_bytes = w.kept_bytes.wrapping_sub(bytes);
                        }
                    }
                }
                // The lists whose moment it was live at, before any new peak clears them.
                let names = &self.names;
                let d = device as usize;
                let global = self.r.peak_set.would_keep(&entry, names);
                let dev = self.r.device_sets[d].would_keep(&entry, names);
                let mut passes = [false; 3];
                for (i, p) in self.r.passes.iter().enumerate() {
                    passes[i] = p
                        .as_ref()
                        .is_some_and(|p| p.tracker.would_keep(&entry, names));
                }
                let full = self.r.detail == Detail::Full;
                if global || dev || passes.iter().any(|&x| x) || full {
                    let done = Rc::new(entry.done(ts));
                    if global {
                        self.r.peak_set.keep(&done, names);
                    }
                    if dev {
                        self.r.device_sets[d].keep(&done, names);
                    }
                    for (i, p) in self.r.passes.iter_mut().enumerate() {
                        if passes[i] {
                            p.as_mut().expect("kept").tracker.keep(&done, names);
                        }
                    }
                    if full {
                        let l = &mut self.r.lives[entry.life as usize];
                        l.end_ns = ts;
                        l.end_seq = seq;
                        self.r.lifetimes[entry.life as usize] = Some(done);
                    }
                }
                self.live_count[d] -= 1;
                let cell = entry.cell as usize;
                let lb = self.sub(self.r.device_acc[d].live_bytes, bytes);
                let cellv = self.sub(self.cells[cell], bytes);
                let total = self.sub(self.total, bytes);
                let acc = &mut self.r.device_acc[d];
                acc.matched_free_count += 1;
                acc.live_bytes = lb;
                self.cells[cell] = cellv;
                self.total = total;
                self.changed(ts, m.index, cell, m.span, false);
            }
        }
        self.seq += 1;
    }

    fn finish(mut self) -> Replay {
        self.cross(None);
        let entries = by_life(self.live.drain().chain(self.unidentified.drain(..)));
        let nd = self.r.devices.len();
        let stats = &mut self.r.end_stats;
        stats.device = vec![(0, 0); nd];
        stats.cells = vec![0; nd * CATEGORIES];
        for e in &entries {
            // sums of distinct storages' bytes: bounded by the checked total (wrapping only
            // once it overflowed, when every figure is refused)
            let d = &mut stats.device[e.device() as usize];
            d.0 += 1;
            d.1 = d.1.wrapping_add(e.bytes);
            let c = &mut stats.cells[e.cell as usize];
            *c = c.wrapping_add(e.bytes);
            let k = &mut stats.category[e.cell as usize % CATEGORIES];
            k.0 += 1;
            k.1 = k.1.wrapping_add(e.bytes);
        }
        match self.r.detail {
            Detail::Full => {
                let end: Vec<Rc<Done>> = entries.iter().map(|e| Rc::new(e.done(OPEN))).collect();
                for d in &end {
                    self.r.lifetimes[d.life as usize] = Some(d.clone());
                }
                self.r.end = end;
            }
            Detail::Summary => {
                // Each list: the best of its record and of the end's storages it wants, without
                // building every end storage twice.
                let names = &self.names;
                let decide = |t: &mut Tracker| {
                    let (Keep::Top(n), Some(a)) = (t.keep, t.applied) else {
                        return;
                    };
                    // (bytes, start, index): the rank key's leading fields side by side, so
                    // the selection over millions of end storages compares in cache and looks
                    // at an entry only on a tie; streamed, so it holds O(n) keys, not O(live)
                    let wanted = entries
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| {
                            e.start_seq < a && t.device.is_none_or(|d| d == e.device())
                        })
                        .map(|(i, e)| (e.bytes, e.start_ns, i as u32));
                    let idx = crate::select::first_k_by(wanted, n, |x, y| {
                        y.0.cmp(&x.0).then(x.1.cmp(&y.1)).then_with(|| {
                            entries[x.2 as usize]
                                .key(names)
                                .cmp(&entries[y.2 as usize].key(names))
                        })
                    });
                    let mut list: Vec<Rc<Done>> = idx
                        .into_iter()
                        .map(|(_, _, i)| Rc::new(entries[i as usize].done(OPEN)))
                        .chain(t.top.drain().map(|c| c.done))
                        .collect();
                    list.sort_by(|a, b| done_key(a, names).cmp(&done_key(b, names)));
                    list.truncate(n);
                    t.final_list = Some(list);
                };
                decide(&mut self.r.peak_set);
                for t in &mut self.r.device_sets {
                    decide(t);
                }
                for p in self.r.passes.iter_mut().flatten() {
                    decide(&mut p.tracker);
                }
                let mut res = trace_schema::SharedStrings::new(self.doc);
                let devices = &self.r.devices;
                self.r.end_lifetimes = entries
                    .iter()
                    .map(|e| crate::lifetime::to_lifetime(&e.done(OPEN), devices, &mut res))
                    .collect();
            }
        }
        self.r.events = self.seq;
        self.r
    }
}

/// `entries` in lifetime order (allocation order): see [`sort_moving_once`].
fn by_life(entries: impl Iterator<Item = Entry>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = entries.collect();
    sort_moving_once(&mut entries, |e| e.life);
    entries
}

/// Sorts `items` by `key` (equal keys keep their order) moving each item along its cycle of
/// the permutation once, with 8 bytes per item besides: for large items (an [`Entry`] is ~100
/// bytes and a trace can end with millions live) where a sort would move each one log n times.
fn sort_moving_once<T>(items: &mut [T], key: impl Fn(&T) -> u32) {
    // (key, position), sorted: position `p` takes the item now at `keys[p] & MASK`
    let mut keys: Vec<u64> = items
        .iter()
        .enumerate()
        .map(|(i, x)| (key(x) as u64) << 32 | i as u64)
        .collect();
    keys.sort_unstable();
    const MASK: u64 = u32::MAX as u64;
    const DONE: u64 = u64::MAX;
    for start in 0..keys.len() {
        let mut pos = start;
        while keys[pos] != DONE {
            let from = (keys[pos] & MASK) as usize;
            keys[pos] = DONE;
            if from == start {
                break;
            }
            items.swap(pos, from);
            pos = from;
        }
    }
}

/// Runs the pass over the memory events of `doc` (see the module docs).
pub(crate) fn replay(
    doc: &TraceDocument,
    watch: Watch,
    detail: Detail,
    top: usize,
    observe: &mut dyn FnMut(&MemoryItem<'_>),
) -> Replay {
    let mut marks: Vec<(u64, u8)> = Vec::new();
    let mut passes: [Option<PassTrack>; 3] = Default::default();
    for (i, p) in watch.passes.into_iter().enumerate() {
        if let Some((intervals, span_count)) = p {
            marks.extend(intervals.iter().map(|&(s, _)| (s, i as u8)));
            passes[i] = Some(PassTrack {
                intervals,
                span_count,
                crossed: 0,
                best: None,
                tracker: Tracker::new(Keep::Top(crate::PASS_PEAK_TOP), None),
            });
        }
    }
    let mut spans: [Option<SpanWatch>; 2] = Default::default();
    for (k, s) in watch.spans.into_iter().enumerate() {
        if let Some((start_ns, end_ns)) = s {
            marks.push((start_ns, 3 + k as u8));
            spans[k] = Some(SpanWatch {
                end_ns,
                ..SpanWatch::default()
            });
        }
    }
    marks.sort_by_key(|&(t, what)| (t, what));
    let (log, peak_keep, device_keep) = match detail {
        Detail::Full => (None, Keep::All, Keep::Counts),
        Detail::Summary => (Some(TimelineLog::default()), Keep::Top(top), Keep::Top(top)),
    };
    let mut st = State {
        doc,
        r: Replay {
            detail,
            devices: Vec::new(),
            device_acc: Vec::new(),
            categories: Default::default(),
            life_count: 0,
            end: Vec::new(),
            end_lifetimes: Vec::new(),
            end_stats: EndStats::default(),
            peak: None,
            peak_set: Tracker::new(peak_keep, None),
            device_sets: Vec::new(),
            passes,
            spans,
            span_alloc: FxHashMap::default(),
            unmatched: Vec::new(),
            mismatches: Vec::new(),
            duplicates: Vec::new(),
            alias_event_count: 0,
            unidentified_alloc_count: 0,
            alloc_without_bytes_count: 0,
            aliases_detectable: true,
            overflowed: false,
            first_ns: 0,
            last_ns: 0,
            events: 0,
            lives: Vec::new(),
            lifetimes: Vec::new(),
            order: Vec::new(),
            times: Vec::new(),
            totals: Vec::new(),
            changes: Vec::new(),
            log,
        },
        device_of_sym: FxHashMap::default(),
        names: Vec::new(),
        live: LiveSet::default(),
        unidentified: Vec::new(),
        cells: Vec::new(),
        live_count: Vec::new(),
        total: 0,
        alloc_sum: 0,
        seq: 0,
        marks,
        next_mark: 0,
        device_keep,
    };
    doc.for_each_memory_pipelined(trace_schema::MemoryOrder::Replay, |m| {
        observe(m);
        st.apply(m);
    });
    st.finish()
}

/// The first alloc event (index among the memory events, file order) at which the sizes of all
/// allocs, in file order, add up past `u64::MAX`; `None` when every sum of the trace's byte
/// counts fits.
///
/// Every live, category, device, total and timeline figure is a sum of distinct allocs' bytes,
/// so when this is `None` none of them can overflow.
pub fn alloc_bytes_overflow(doc: &TraceDocument) -> Option<usize> {
    let mut total = 0u64;
    let mut at: Option<usize> = None;
    doc.for_each_memory(trace_schema::MemoryOrder::File, |m| {
        if at.is_some() || m.action != MemoryAction::Alloc {
            return;
        }
        match total.checked_add(m.bytes.unwrap_or(0)) {
            Some(t) => total = t,
            None => at = Some(m.index as usize),
        }
    });
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same order as a stable sort by the key.
        #[test]
        fn sort_moving_once_is_a_stable_sort(keys in proptest::collection::vec(0u32..20, 0..300)) {
            let mut items: Vec<(u32, usize)> = keys.iter().copied().zip(0..).collect();
            let mut want = items.clone();
            want.sort_by_key(|x| x.0);
            sort_moving_once(&mut items, |x| x.0);
            prop_assert_eq!(items, want);
        }
    }
}
