//! # trace-memory
//!
//! Memory analysis of candle-graph traces, in two planes kept apart:
//! - **logical** ([`LogicalMemoryProfile`], from `memory` events): storage lifetimes keyed by
//!   (device, storage id) — trace/6: (device, tensor id) with `aliases_detectable = false` —,
//!   the simultaneous peak (global and per device, first reached on ties) with everything live
//!   at it ranked by bytes, peaks inside forward / backward / optimizer spans, a change-list
//!   timeline with a peak-preserving display series, totals and live-at-end;
//! - **physical** ([`PhysicalMemoryProfile`], from `device_memory` samples): per-device
//!   extremes, each `None` when never observed, and the logical-vs-physical comparison.
//!
//! An absent plane is `None`, never zeros; an unknown figure is `None`, never 0.
//! [`node_memory_metrics`] attaches per-span and per-operation figures; [`step_memory`] gives
//! each step of a multi-step capture its own figures and what it left live, and
//! [`memory_growth`] says whether that grows.
//!
//! # Semantics
//! - Events apply one at a time in `(timestamp_ns, file order)` — file order inside one tick is
//!   the producer's order — and every live figure is read after each event: the peak is the
//!   largest live total any prefix of that order reaches, so a storage allocated and freed
//!   within one tick of a coarse clock still counts. Pass peaks, per-device peaks, the
//!   timeline and per-node metrics follow the same rule.
//! - A second alloc of a live storage is an alias: one lifetime, more tensor ids, bytes once.
//!   A storage freed and allocated again (address reuse) is a new lifetime.
//! - `pre_existing` storages count toward live bytes and peaks, not toward allocation counts
//!   or total allocated bytes.
//! - A free whose alloc was never seen is recorded in [`LogicalMemoryProfile::unmatched_frees`]
//!   (size `None` when the event has none) and changes no total. A free stating another size is
//!   recorded in [`LogicalMemoryProfile::size_mismatches`]; the alloc size is used.
//! - Byte sums are checked: a trace whose allocation sizes add up past `u64::MAX` gets no
//!   logical figures at all ([`MemoryProfile::logical_overflow`] says where), never a wrapped
//!   or saturated number.
//! - Which span, pass and category hold a peak is decided here, once ([`PeakContext`]), with
//!   the span hierarchy of [`SpanIndex`].
//!
//! # Cost
//! O(n log n) in memory events (O(n) when the file is in time order): one replay pass with O(1)
//! expected work per event; the live set is rebuilt once at the peak time (never copied per
//! new peak); per-node metrics are one sweep with a segment tree.
//!
//! ```
//! use trace_schema::load_str;
//! let text = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}
//! {"kind":"memory","timestamp_ns":0,"action":"alloc","device":"cpu","storage_id":"P","bytes":100,"category":"parameter"}
//! {"kind":"memory","timestamp_ns":6,"action":"alloc","device":"cpu","storage_id":"T","bytes":20,"category":"activation"}
//! {"kind":"memory","timestamp_ns":7,"action":"free","device":"cpu","storage_id":"T"}
//! {"kind":"terminal","outcome":"complete","timestamp_ns":9}
//! "#;
//! let doc = load_str(text).unwrap();
//! let profile = trace_memory::analyze_memory(&doc);
//! let logical = profile.logical.unwrap();
//! let peak = logical.peak.unwrap();
//! assert_eq!((peak.live_bytes, peak.timestamp_ns), (120, 6));
//! assert_eq!(peak.context.dominant_category, Some(trace_schema::MemoryCategory::Parameter));
//! assert!(profile.physical.is_none());
//! ```

#![deny(missing_docs)]

pub mod context;
pub mod error;
pub mod lifetime;
pub mod logical;
pub mod node;
pub mod passes;
pub mod physical;
mod replay;
mod segtree;
pub mod select;
pub mod spans;
pub mod steps;
pub mod storage_map;
pub mod timeline;
pub mod what_if;

use serde::Serialize;
use trace_schema::TraceDocument;

pub use context::{dominant_category, PeakContext};
pub use error::MemoryQueryError;
pub use lifetime::StorageLifetime;
pub use logical::{
    CategoryTotals, DevicePeak, LiveAtEnd, LogicalDeviceStats, LogicalMemoryProfile, LogicalPeak,
    LogicalTotals, SizeMismatch, UnmatchedFree,
};
pub use node::{node_memory_metrics, NodeMemoryMetrics, NodeMetrics};
pub use passes::{ActivationsAtSpan, FindingsSupport, PassPeak, PassPeakPoint, PASS_PEAK_TOP};
pub use physical::{
    LogicalVsPhysical, Observed, PhysicalDeviceStats, PhysicalMemoryProfile, PhysicalSample,
};
pub use replay::run::alloc_bytes_overflow;
pub use replay::{Detail, SUMMARY_TOP};
pub use select::first_k_by;
pub use spans::{natural_cmp, SpanIndex};
pub use steps::{memory_growth, step_memory, MemoryGrowth, RetainedGroup, StepMemory};
pub use storage_map::{StorageKey, StorageMap, StorageRef};
pub use timeline::{CellChange, LogicalTimeline, TimelinePoint, TotalPoint};
pub use what_if::{replay_plans, replay_with_releases, ReleasePlan, Replayed, ReplayedPassPeak};

/// Allocation sizes that add up past `u64::MAX`: no logical figure of the trace can be real.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BytesOverflow {
    /// The alloc event (index into `doc.memory`, file order) at which the sum overflowed.
    pub event_index: usize,
    /// Its time, ns.
    pub timestamp_ns: u64,
    /// Its device.
    pub device: String,
    /// Its storage id (trace/6: tensor id), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_id: Option<String>,
    /// Its size.
    pub bytes: u64,
}

/// An alloc of a live storage by a tensor that already allocated it (or, without tensor ids, a
/// second anonymous alloc of it): the health check's `duplicate_allocation`. Identity as for
/// lifetimes: `(device, storage id)`, trace/6 `(device, tensor id)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DuplicateAllocation {
    /// The alloc event (index into `doc.memory`, file order).
    pub event_index: usize,
    /// Its device.
    pub device: String,
    /// The storage identity (storage id, trace/6: tensor id).
    pub storage_id: String,
    /// Its tensor id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_id: Option<String>,
}

/// Memory evidence of a trace. An absent plane is `None`, never zeros.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemoryProfile {
    /// From `memory` events; `None` when the trace has none, or when their sizes overflow
    /// (then `logical_overflow` is set).
    pub logical: Option<LogicalMemoryProfile>,
    /// Set when the allocation sizes add up past `u64::MAX`: the logical plane is refused
    /// (health code `memory_bytes_overflow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logical_overflow: Option<BytesOverflow>,
    /// From `device_memory` samples; `None` when the trace has none.
    pub physical: Option<PhysicalMemoryProfile>,
    /// Allocs of a live storage by a tensor that already allocated it, in file order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicate_allocations: Vec<DuplicateAllocation>,
}

/// Analyzes both memory planes of `doc` in full detail. Never fails: malformed memory evidence
/// (unmatched frees, size mismatches, spans missing from the document, overflowing sizes) is
/// reported in the profile.
pub fn analyze_memory(doc: &TraceDocument) -> MemoryProfile {
    analyze_memory_with(doc, &SpanIndex::build(doc))
}

/// [`analyze_memory`] with a span index the caller already built for `doc`.
pub fn analyze_memory_with(doc: &TraceDocument, spans: &SpanIndex) -> MemoryProfile {
    analyze_memory_detail(doc, spans, Detail::Full)
}

/// [`analyze_memory_with`] keeping `detail` (see [`Detail`]): [`Detail::Summary`] gives the same
/// figures holding only the live set, the span tree and the answer — with a spilled document
/// ([`trace_schema::LoadOptions::spill_memory`]), resident memory does not grow with the
/// memory events.
///
/// # Panics
/// When a spilled document's or a summary timeline's temporary file cannot be written or read
/// back (the disk failed).
pub fn analyze_memory_detail(
    doc: &TraceDocument,
    spans: &SpanIndex,
    detail: Detail,
) -> MemoryProfile {
    analyze_memory_observed(doc, spans, detail, &mut |_| {})
}

/// [`analyze_memory_detail`], showing every memory event to `observe` as the replay applies it
/// (in `(timestamp_ns, file order)`), so that a caller's own per-event check needs no pass of
/// its own.
///
/// # Panics
/// As [`analyze_memory_detail`].
pub fn analyze_memory_observed(
    doc: &TraceDocument,
    spans: &SpanIndex,
    detail: Detail,
    observe: &mut dyn FnMut(&trace_schema::MemoryItem<'_>),
) -> MemoryProfile {
    analyze_memory_top(doc, spans, detail, SUMMARY_TOP, observe)
}

/// [`analyze_memory_observed`] with `top` storages listed per peak in summary detail instead of
/// [`SUMMARY_TOP`] (tests compare small lists with the full ones).
#[doc(hidden)]
pub fn analyze_memory_top(
    doc: &TraceDocument,
    spans: &SpanIndex,
    detail: Detail,
    top: usize,
    observe: &mut dyn FnMut(&trace_schema::MemoryItem<'_>),
) -> MemoryProfile {
    let (logical, logical_overflow, duplicate_allocations) =
        logical_plane(doc, spans, detail, top, observe);
    let physical = physical::analyze_physical(doc, logical.as_ref());
    MemoryProfile {
        logical,
        logical_overflow,
        physical,
        duplicate_allocations,
    }
}

fn logical_plane(
    doc: &TraceDocument,
    spans: &SpanIndex,
    detail: Detail,
    top: usize,
    observe: &mut dyn FnMut(&trace_schema::MemoryItem<'_>),
) -> (
    Option<LogicalMemoryProfile>,
    Option<BytesOverflow>,
    Vec<DuplicateAllocation>,
) {
    if doc.memory_len() == 0 {
        return (None, None, Vec::new());
    }
    let watched = passes::watched_spans(doc, spans);
    let watch = replay::record::Watch {
        passes: passes::pass_intervals(doc),
        spans: watched.map(|s| s.map(|i| (doc.spans[i].start_ns, doc.spans[i].end_ns()))),
    };
    let mut r = replay::run::replay(doc, watch, detail, top, observe);
    let mut duplicates: Vec<DuplicateAllocation> = r
        .duplicates
        .drain(..)
        .map(|d| DuplicateAllocation {
            event_index: d.event as usize,
            device: doc.str(d.device).to_string(),
            storage_id: d.id.to_string(),
            tensor_id: d.tensor.as_deref().map(str::to_string),
        })
        .collect();
    duplicates.sort_by_key(|d| d.event_index);
    if r.overflowed {
        // Refuse every logical figure rather than report a wrapped sum; name the alloc at which
        // the sizes (in file order) pass u64::MAX.
        let at = alloc_bytes_overflow(doc).unwrap_or(r.events.saturating_sub(1) as usize);
        let mut overflow = None;
        doc.for_each_memory(trace_schema::MemoryOrder::File, |m| {
            if m.index as usize == at {
                overflow = Some(BytesOverflow {
                    event_index: at,
                    timestamp_ns: m.timestamp_ns,
                    device: doc.str(m.device).to_string(),
                    storage_id: m.storage.or(m.tensor).map(str::to_string),
                    bytes: m.bytes.unwrap_or(0),
                });
            }
        });
        return (None, overflow, duplicates);
    }
    (
        Some(logical::analyze_logical(doc, spans, r, top)),
        None,
        duplicates,
    )
}

/// A checked sum of byte counts: `None` when it overflows `u64` (show it as overflowed, never
/// as a number).
pub fn sum_bytes(bytes: impl IntoIterator<Item = u64>) -> Option<u64> {
    bytes.into_iter().try_fold(0u64, |a, b| a.checked_add(b))
}
