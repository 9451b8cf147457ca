//! [`PeakContext`]: which span, pass and category hold a peak — one rule for every peak the
//! crate reports (global, per device, per pass), so no consumer derives it again.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{MemoryCategory, Pass, SharedStrings, Sym, TraceDocument};

use crate::spans::SpanIndex;

/// Where a peak was reached and what dominates it.
///
/// The span is the one named by the event that reached the peak (the allocation after which
/// it holds) when that span exists; otherwise (no event, an event without a span, or a span
/// missing from the document) the innermost span whose interval holds the peak's time
/// ([`SpanIndex::innermost_at`]). The pass is that span's effective pass (its own or its
/// nearest ancestor's, [`SpanIndex::pass`]). The dominant category holds the most bytes; ties
/// go to the first in [`MemoryCategory::ALL`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PeakContext {
    /// The span holding the peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<Arc<str>>,
    /// Its pass (forward / backward / optimizer); `None` outside every pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// The category holding the most bytes at the peak (`None` when nothing is live).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dominant_category: Option<MemoryCategory>,
}

/// The category with the most bytes (first in [`MemoryCategory::ALL`] order on ties), among
/// non-zero ones.
pub fn dominant_category(by_category: &BTreeMap<MemoryCategory, u64>) -> Option<MemoryCategory> {
    MemoryCategory::ALL
        .iter()
        .filter_map(|c| by_category.get(c).filter(|&&b| b > 0).map(|&b| (*c, b)))
        .fold(
            None,
            |best: Option<(MemoryCategory, u64)>, (c, b)| match best {
                Some((_, x)) if x >= b => best,
                _ => Some((c, b)),
            },
        )
        .map(|(c, _)| c)
}

/// The context of a peak reached at `timestamp_ns` after an event naming span `span` (`None`
/// without an event or when the event names no span).
pub(crate) fn peak_context(
    doc: &TraceDocument,
    spans: &SpanIndex,
    strings: &mut SharedStrings<'_>,
    span: Option<Sym>,
    timestamp_ns: u64,
    by_category: &BTreeMap<MemoryCategory, u64>,
) -> PeakContext {
    let named = span.and_then(|s| doc.span_index(s));
    let span = named.or_else(|| spans.innermost_at(doc, timestamp_ns));
    PeakContext {
        span_id: span.map(|s| strings.get(doc.spans[s].id)),
        pass: span.and_then(|s| spans.pass[s]),
        dominant_category: dominant_category(by_category),
    }
}
