//! What the replay returns: the accumulators per device and category, the pass and span
//! watches, the events that did not pair, and the timeline.

use super::tracker::*;
use super::*;
use crate::timeline::{CellChange, TimelineLog, TotalPoint};
use rustc_hash::FxHashMap;
use std::rc::Rc;
use std::sync::Arc;
use trace_schema::Sym;

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
    pub(super) crossed: usize,
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
    pub end_lifetimes: Vec<crate::lifetime::StorageLifetime>,
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
