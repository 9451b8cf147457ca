//! Peaks per pass (forward / backward / optimizer) of a training step and the figures behind
//! the memory findings (autograd retention, activations held across the optimizer pass).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{MemoryCategory, Pass, SharedStrings, Sym, TraceDocument};

use crate::context::{peak_context, PeakContext};
use crate::lifetime::{to_lifetime, top, StorageLifetime};
use crate::replay::record::{PassIntervals, PassPos, Replay};
use crate::replay::tracker::counts_breakdown;
use crate::replay::OPEN;
use crate::spans::SpanIndex;

/// How many allocations a pass peak lists (the full live set is one
/// [`crate::LogicalMemoryProfile::live_allocations_after`] call away).
pub const PASS_PEAK_TOP: usize = 5;

/// The highest live bytes while inside the spans of one pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PassPeak {
    /// The pass.
    pub pass: Pass,
    /// Spans declaring this pass.
    pub span_count: u64,
    /// Disjoint time intervals after merging those spans (an open span runs to the end).
    pub interval_count: u64,
    /// Allocations (pre-existing excluded) whose span's effective pass is this one.
    pub allocation_count: u64,
    /// Their bytes.
    pub allocated_bytes: u64,
    /// Highest total live bytes (everything live, including what was live before the span
    /// began) after any event inside the intervals, or carried into one; first reached on ties.
    pub peak: PassPeakPoint,
}

/// The peak inside one pass and what holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PassPeakPoint {
    /// Time, ns (an interval's start when the peak is what was already live on entry).
    pub timestamp_ns: u64,
    /// The event after which the peak holds (index into `doc.memory`); `None` when it is the
    /// value carried into an interval's start.
    pub event_index: Option<usize>,
    /// Live bytes over all devices.
    pub live_bytes: u64,
    /// Per category.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// Per device.
    pub by_device: BTreeMap<String, u64>,
    /// The span, pass and dominant category holding the peak.
    #[serde(flatten)]
    pub context: PeakContext,
    /// Storages live at the peak.
    pub live_allocation_count: u64,
    /// The largest [`PASS_PEAK_TOP`] of them, ranked.
    pub top_allocations: Vec<StorageLifetime>,
}

/// Activation bytes alive when a span begins (after every batch strictly before its start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActivationsAtSpan {
    /// Span id.
    pub span_id: Arc<str>,
    /// Span name.
    pub span_name: Arc<str>,
    /// Span start, ns.
    pub start_ns: u64,
    /// Span end, ns (`None` when never closed).
    pub end_ns: Option<u64>,
    /// Activation storages alive at the start.
    pub activation_live_count: u64,
    /// Their bytes.
    pub activation_live_bytes: u64,
    /// Of those, still live after the span's end (not freed by it): count; `None` for an open
    /// span.
    pub still_live_at_end_count: Option<u64>,
    /// Their bytes.
    pub still_live_at_end_bytes: Option<u64>,
}

/// Figures behind the memory findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FindingsSupport {
    /// Activations live at the start of the first backward span (autograd retention).
    pub first_backward: Option<ActivationsAtSpan>,
    /// Activations live at the start of the first optimizer span and still live at its end:
    /// memory that running backward, dropping the loss, then stepping would have freed.
    pub first_optimizer: Option<ActivationsAtSpan>,
}

/// The merged intervals and span count of each pass (in [`Pass`] order; `None` without spans),
/// for the replay to watch.
pub(crate) fn pass_intervals(doc: &TraceDocument) -> [Option<PassIntervals>; 3] {
    let mut out: [Option<PassIntervals>; 3] = Default::default();
    for pass in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
        let mut intervals: Vec<(u64, u64)> = doc
            .spans
            .iter()
            .filter(|s| s.pass == Some(pass))
            .map(|s| (s.start_ns, s.end_ns().unwrap_or(OPEN)))
            .collect();
        if intervals.is_empty() {
            continue;
        }
        let span_count = intervals.len() as u64;
        intervals.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (s, e) in intervals {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        out[pass as usize] = Some((merged, span_count));
    }
    out
}

/// The first backward and first optimizer spans ([`SpanIndex::first_declaring`]: earliest, then
/// outermost, then canonical order, so the file's interleaving never decides).
pub(crate) fn watched_spans(doc: &TraceDocument, spans: &SpanIndex) -> [Option<usize>; 2] {
    [
        spans.first_declaring(doc, Pass::Backward),
        spans.first_declaring(doc, Pass::Optimizer),
    ]
}

/// Pass peaks, in [`Pass`] order, for the passes that have spans.
pub(crate) fn pass_peaks(
    doc: &TraceDocument,
    spans: &SpanIndex,
    r: &Replay,
    devices: &[Sym],
    device_names: &[String],
    res: &mut SharedStrings<'_>,
) -> Vec<PassPeak> {
    // Allocations (pre-existing excluded) whose span's effective pass is this one. Sums of
    // distinct lifetimes: bounded by the checked total.
    let mut alloc = [(0u64, 0u64); 3];
    for (&span, &(count, bytes)) in &r.span_alloc {
        if let Some(pass) = doc.span_index(span).and_then(|i| spans.pass[i]) {
            let a = &mut alloc[pass as usize];
            a.0 += count;
            a.1 += bytes;
        }
    }
    let mut out = Vec::new();
    for pass in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
        let Some(p) = &r.passes[pass as usize] else {
            continue;
        };
        let (ts, pos, live_bytes) = p.best.unwrap_or((0, PassPos::Carried, 0));
        let counts = &p.tracker.counts;
        let (by_device, by_category) = counts_breakdown(counts, None, device_names);
        let count = counts.count(None);
        let top: Vec<StorageLifetime> = top(doc, devices, p.tracker.listed(&r.end), PASS_PEAK_TOP)
            .into_iter()
            .map(|d| to_lifetime(d, devices, res))
            .collect();
        let (event_index, span) = match pos {
            PassPos::Event(e, span) => (Some(e as usize), span),
            PassPos::Carried => (None, None),
        };
        let context = peak_context(doc, spans, res, span, ts, &by_category);
        let (count_alloc, bytes_alloc) = alloc[pass as usize];
        out.push(PassPeak {
            pass,
            span_count: p.span_count,
            interval_count: p.intervals.len() as u64,
            allocation_count: count_alloc,
            allocated_bytes: bytes_alloc,
            peak: PassPeakPoint {
                timestamp_ns: ts,
                event_index,
                live_bytes,
                by_category,
                by_device,
                context,
                live_allocation_count: count,
                top_allocations: top,
            },
        });
    }
    out
}

/// The figures at the first backward and first optimizer spans.
pub(crate) fn findings_support(
    doc: &TraceDocument,
    spans: &SpanIndex,
    r: &Replay,
    res: &mut SharedStrings<'_>,
) -> FindingsSupport {
    let watched = watched_spans(doc, spans);
    let at = |k: usize, res: &mut SharedStrings<'_>| -> Option<ActivationsAtSpan> {
        let span = watched[k]?;
        let w = r.spans[k].as_ref()?;
        let sp = &doc.spans[span];
        let end = sp.end_ns();
        Some(ActivationsAtSpan {
            span_id: res.get(sp.id),
            span_name: res.get(sp.name),
            start_ns: sp.start_ns,
            end_ns: end,
            activation_live_count: w.count,
            activation_live_bytes: w.bytes,
            still_live_at_end_count: end.map(|_| w.kept_count),
            still_live_at_end_bytes: end.map(|_| w.kept_bytes),
        })
    };
    FindingsSupport {
        first_backward: at(0, res),
        first_optimizer: at(1, res),
    }
}
