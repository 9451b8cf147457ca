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

pub(crate) mod entries;
pub(crate) mod record;
pub(crate) mod run;
pub(crate) mod state;
pub(crate) mod tracker;

use std::sync::Arc;
use trace_schema::{CategorySource, MemoryCategory, MemorySource, ShapeId, Sym};

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
