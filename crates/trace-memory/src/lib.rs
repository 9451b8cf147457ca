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
//! [`node_memory_metrics`] attaches per-span and per-operation figures.
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
pub mod spans;
pub mod timeline;

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
pub use replay::alloc_bytes_overflow;
pub use spans::{natural_cmp, SpanIndex};
pub use timeline::{CellChange, LogicalTimeline, TimelinePoint, TotalPoint};

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
}

/// Analyzes both memory planes of `doc`. Never fails: malformed memory evidence (unmatched
/// frees, size mismatches, spans missing from the document, overflowing sizes) is reported in
/// the profile.
pub fn analyze_memory(doc: &TraceDocument) -> MemoryProfile {
    analyze_memory_with(doc, &SpanIndex::build(doc))
}

/// [`analyze_memory`] with a span index the caller already built for `doc`.
pub fn analyze_memory_with(doc: &TraceDocument, spans: &SpanIndex) -> MemoryProfile {
    let (logical, logical_overflow) = logical_plane(doc, spans);
    let physical = physical::analyze_physical(doc, logical.as_ref());
    MemoryProfile {
        logical,
        logical_overflow,
        physical,
    }
}

fn logical_plane(
    doc: &TraceDocument,
    spans: &SpanIndex,
) -> (Option<LogicalMemoryProfile>, Option<BytesOverflow>) {
    if doc.memory.is_empty() {
        return (None, None);
    }
    let overflow = |i: usize| {
        let m = &doc.memory[i];
        BytesOverflow {
            event_index: i,
            timestamp_ns: m.timestamp_ns,
            device: doc.str(m.device).to_string(),
            storage_id: m.storage.or(m.tensor).map(|s| doc.str(s).to_string()),
            bytes: m.bytes.unwrap_or(0),
        }
    };
    if let Some(i) = alloc_bytes_overflow(doc) {
        return (None, Some(overflow(i)));
    }
    let r = replay::replay(doc);
    if r.overflowed {
        // Unreachable after the check above; refuse rather than report a wrapped sum.
        return (
            None,
            Some(overflow(r.lives.last().map_or(0, |l| l.event as usize))),
        );
    }
    (Some(logical::analyze_logical(doc, spans, r)), None)
}

/// A checked sum of byte counts: `None` when it overflows `u64` (show it as overflowed, never
/// as a number).
pub fn sum_bytes(bytes: impl IntoIterator<Item = u64>) -> Option<u64> {
    bytes.into_iter().try_fold(0u64, |a, b| a.checked_add(b))
}
