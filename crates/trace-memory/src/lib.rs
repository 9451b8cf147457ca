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
//! - Events apply in `(timestamp_ns, file order)`. All events of one timestamp form a batch:
//!   live figures are read after the whole batch, and inside it file order decides identity
//!   (free X then alloc X at one instant is a new lifetime).
//! - A second alloc of a live storage is an alias: one lifetime, more tensor ids, bytes once.
//!   A storage freed and allocated again (address reuse) is a new lifetime.
//! - `pre_existing` storages count toward live bytes and peaks, not toward allocation counts
//!   or total allocated bytes.
//! - A free whose alloc was never seen is recorded in [`LogicalMemoryProfile::unmatched_frees`]
//!   (size `None` when the event has none) and changes no total. A free stating another size is
//!   recorded in [`LogicalMemoryProfile::size_mismatches`]; the alloc size is used.
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
//! assert!(profile.physical.is_none());
//! ```

#![deny(missing_docs)]

pub mod error;
mod fasthash;
pub mod lifetime;
pub mod logical;
pub mod node;
pub mod physical;
mod replay;
mod segtree;
pub mod steps;
mod strings;
pub mod timeline;

use serde::Serialize;
use trace_schema::TraceDocument;

pub use error::MemoryQueryError;
pub use lifetime::StorageLifetime;
pub use logical::{
    CategoryTotals, DevicePeak, LiveAtEnd, LogicalDeviceStats, LogicalMemoryProfile, LogicalPeak,
    LogicalTotals, SizeMismatch, UnmatchedFree,
};
pub use node::{node_memory_metrics, NodeMemoryMetrics, NodeMetrics};
pub use physical::{
    LogicalVsPhysical, Observed, PhysicalDeviceStats, PhysicalMemoryProfile, PhysicalSample,
};
pub use steps::{ActivationsAtSpan, FindingsSupport, StepPeak, StepPeakPoint};
pub use timeline::{CellChange, LogicalTimeline, TimelinePoint, TotalPoint};

/// Memory evidence of a trace. An absent plane is `None`, never zeros.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemoryProfile {
    /// From `memory` events; `None` when the trace has none.
    pub logical: Option<LogicalMemoryProfile>,
    /// From `device_memory` samples; `None` when the trace has none.
    pub physical: Option<PhysicalMemoryProfile>,
}

/// Analyzes both memory planes of `doc`. Never fails: malformed memory evidence (unmatched
/// frees, size mismatches, spans missing from the document) is reported in the profile.
pub fn analyze_memory(doc: &TraceDocument) -> MemoryProfile {
    let logical = logical::analyze_logical(doc);
    let physical = physical::analyze_physical(doc, logical.as_ref());
    MemoryProfile { logical, physical }
}
