//! Peaks per pass (forward / backward / optimizer) of a training step and the figures behind
//! the memory findings (autograd retention, activations held across the optimizer pass).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{MemoryCategory, Pass, SharedStrings, TraceDocument};

use crate::context::{peak_context, PeakContext};
use crate::lifetime::{top_live, StorageLifetime};
use crate::logical::{breakdown, Compact};
use crate::replay::{Life, OPEN};
use crate::spans::SpanIndex;
use crate::timeline::LogicalTimeline;

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

/// Pass peaks, in [`Pass`] order, for the passes that have spans.
pub(crate) fn pass_peaks(
    doc: &TraceDocument,
    spans: &SpanIndex,
    compact: &Compact,
    lifetimes: &[StorageLifetime],
    timeline: &LogicalTimeline,
    res: &mut SharedStrings<'_>,
) -> Vec<PassPeak> {
    let lives = &compact.lives;
    let mut alloc = [(0u64, 0u64); 3];
    for l in lives {
        let ev = &doc.memory[l.event as usize];
        if ev.pre_existing {
            continue;
        }
        if let Some(pass) = ev
            .span
            .and_then(|s| doc.span_index(s))
            .and_then(|i| spans.pass[i])
        {
            let a = &mut alloc[pass as usize];
            a.0 += 1;
            a.1 += l.bytes; // a sum of distinct lifetimes: bounded by the checked total
        }
    }
    let totals = &timeline.totals;
    let mut out = Vec::new();
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
        // The best point: its time, where it comes from, its bytes.
        let mut best: Option<(u64, Pos, u64)> = None;
        for &(s, e) in &merged {
            let first_inside = totals.partition_point(|p| p.timestamp_ns < s);
            let before = first_inside.checked_sub(1);
            let carried = before.map_or(0, |i| totals[i].live_bytes);
            if best.is_none_or(|b| carried > b.2) {
                best = Some((s, Pos::Carried(before), carried));
            }
            // [s, e); a zero-length interval holds its start instant.
            let inside = |t: u64| t < e || (s == e && t == s);
            let mut i = first_inside;
            while i < totals.len() && inside(totals[i].timestamp_ns) {
                if best.is_none_or(|b| totals[i].live_bytes > b.2) {
                    best = Some((totals[i].timestamp_ns, Pos::Event(i), totals[i].live_bytes));
                }
                i += 1;
            }
        }
        let (ts, pos, live_bytes) = best.unwrap_or((0, Pos::Carried(None), 0));
        let seq_of = |k: usize| compact.seq_of_event[totals[k].event_index as usize];
        let (seq, event_index) = match pos {
            Pos::Carried(k) => (k.map(seq_of), None),
            Pos::Event(k) => (Some(seq_of(k)), Some(totals[k].event_index as usize)),
        };
        let live = |l: &Life| seq.is_some_and(|q| l.live_after(q));
        let (idx, top) = top_live(doc, lives, PASS_PEAK_TOP, live);
        let (by_device, by_category) = breakdown(idx.iter().map(|&i| &lifetimes[i as usize]));
        let context = peak_context(
            doc,
            spans,
            res,
            event_index.map(|e| e as u32),
            ts,
            &by_category,
        );
        let (count, bytes) = alloc[pass as usize];
        out.push(PassPeak {
            pass,
            span_count,
            interval_count: merged.len() as u64,
            allocation_count: count,
            allocated_bytes: bytes,
            peak: PassPeakPoint {
                timestamp_ns: ts,
                event_index,
                live_bytes,
                by_category,
                by_device,
                context,
                live_allocation_count: idx.len() as u64,
                top_allocations: top.iter().map(|&i| lifetimes[i as usize].clone()).collect(),
            },
        });
    }
    out
}

/// Where a pass peak comes from: an event inside an interval (index into the timeline's
/// totals), or the value carried into an interval (after the last event before it, if any).
#[derive(Clone, Copy)]
enum Pos {
    Event(usize),
    Carried(Option<usize>),
}

fn activations_at(
    doc: &TraceDocument,
    lives: &[Life],
    res: &mut SharedStrings<'_>,
    span: usize,
) -> ActivationsAtSpan {
    let sp = &doc.spans[span];
    let end = sp.end_ns();
    let (mut count, mut bytes, mut kept_count, mut kept_bytes) = (0u64, 0u64, 0u64, 0u64);
    for l in lives {
        if doc.memory[l.event as usize].category != MemoryCategory::Activation
            || !l.live_entering(sp.start_ns)
        {
            continue;
        }
        count += 1;
        bytes += l.bytes; // sums of distinct lifetimes: bounded by the checked total
        if end.is_some_and(|e| l.end_ns > e) {
            kept_count += 1;
            kept_bytes += l.bytes;
        }
    }
    ActivationsAtSpan {
        span_id: res.get(sp.id),
        span_name: res.get(sp.name),
        start_ns: sp.start_ns,
        end_ns: end,
        activation_live_count: count,
        activation_live_bytes: bytes,
        still_live_at_end_count: end.map(|_| kept_count),
        still_live_at_end_bytes: end.map(|_| kept_bytes),
    }
}

/// The figures at the first backward and first optimizer spans ([`SpanIndex::first_declaring`]:
/// earliest, then outermost, then canonical order, so the file's interleaving never decides).
pub(crate) fn findings_support(
    doc: &TraceDocument,
    spans: &SpanIndex,
    lives: &[Life],
    res: &mut SharedStrings<'_>,
) -> FindingsSupport {
    FindingsSupport {
        first_backward: spans
            .first_declaring(doc, Pass::Backward)
            .map(|i| activations_at(doc, lives, res, i)),
        first_optimizer: spans
            .first_declaring(doc, Pass::Optimizer)
            .map(|i| activations_at(doc, lives, res, i)),
    }
}
