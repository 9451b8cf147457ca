//! Peaks per training step (forward / backward / optimizer) and the figures behind the memory
//! findings (autograd retention, activations held across the optimizer step).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{ExecutionStep, MemoryCategory, TraceDocument};

use crate::lifetime::{top_live, StorageLifetime};
use crate::logical::breakdown;
use crate::replay::{Life, OPEN};
use crate::strings::Resolver;
use crate::timeline::LogicalTimeline;

/// How many allocations a step peak lists (the full live set is one
/// [`crate::LogicalMemoryProfile::live_allocations_at`] call away).
pub const STEP_PEAK_TOP: usize = 5;

/// The highest live bytes while inside the spans of one training step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepPeak {
    /// The step.
    pub step: ExecutionStep,
    /// Spans declaring this step.
    pub span_count: u64,
    /// Disjoint time intervals after merging those spans (an open span runs to the end).
    pub interval_count: u64,
    /// Allocations (pre-existing excluded) whose span, or nearest ancestor span with a step,
    /// has this step.
    pub allocation_count: u64,
    /// Their bytes.
    pub allocated_bytes: u64,
    /// Highest total live bytes (everything live, including what was live before the span
    /// began) at any instant inside the intervals; first reached on ties.
    pub peak: StepPeakPoint,
}

/// The peak inside one step and what dominates it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepPeakPoint {
    /// Time, ns (an interval's start when the peak is what was already live on entry).
    pub timestamp_ns: u64,
    /// Live bytes over all devices.
    pub live_bytes: u64,
    /// Per category.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// Per device.
    pub by_device: BTreeMap<String, u64>,
    /// The category holding the most bytes (`None` when nothing is live).
    pub dominant_category: Option<MemoryCategory>,
    /// Storages live at the peak.
    pub live_allocation_count: u64,
    /// The largest [`STEP_PEAK_TOP`] of them, ranked.
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

const STEPS: [ExecutionStep; 3] = [
    ExecutionStep::Forward,
    ExecutionStep::Backward,
    ExecutionStep::Optimizer,
];

/// Step of each span: its own, else its nearest ancestor's. O(S) with memoisation; a parent
/// cycle or a missing parent ends the walk.
pub(crate) fn effective_steps(doc: &TraceDocument) -> Vec<Option<ExecutionStep>> {
    const UNSEEN: u8 = 0;
    const ACTIVE: u8 = 1;
    const DONE: u8 = 2;
    let n = doc.spans.len();
    let mut out: Vec<Option<ExecutionStep>> = vec![None; n];
    let mut state = vec![UNSEEN; n];
    let mut path = Vec::new();
    for start in 0..n {
        if state[start] == DONE {
            continue;
        }
        path.clear();
        let mut cur = Some(start);
        let mut found = None;
        while let Some(i) = cur {
            match state[i] {
                DONE => {
                    found = out[i];
                    break;
                }
                ACTIVE => break, // cycle
                _ => {}
            }
            if let Some(step) = doc.spans[i].pass {
                state[i] = DONE;
                out[i] = Some(step);
                found = Some(step);
                break;
            }
            state[i] = ACTIVE;
            path.push(i);
            cur = doc.spans[i].parent.and_then(|p| doc.span_index(p));
        }
        for &i in &path {
            out[i] = found;
            state[i] = DONE;
        }
    }
    out
}

pub(crate) fn step_peaks(
    doc: &TraceDocument,
    lives: &[Life],
    lifetimes: &[StorageLifetime],
    timeline: &LogicalTimeline,
) -> Vec<StepPeak> {
    let steps = effective_steps(doc);
    let mut alloc = [(0u64, 0u64); 3];
    for l in lives {
        let ev = &doc.memory[l.event as usize];
        if ev.pre_existing {
            continue;
        }
        if let Some(step) = ev
            .span
            .and_then(|s| doc.span_index(s))
            .and_then(|i| steps[i])
        {
            let a = &mut alloc[step as usize];
            a.0 += 1;
            a.1 = a.1.saturating_add(l.bytes);
        }
    }
    let totals = &timeline.totals;
    let mut out = Vec::new();
    for step in STEPS {
        let mut intervals: Vec<(u64, u64)> = doc
            .spans
            .iter()
            .filter(|s| s.pass == Some(step))
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
        let mut best: Option<(u64, u64)> = None;
        for &(s, e) in &merged {
            let carried = timeline.live_bytes_at(s);
            if best.is_none_or(|(_, b)| carried > b) {
                best = Some((s, carried));
            }
            let mut i = totals.partition_point(|p| p.timestamp_ns <= s);
            while i < totals.len() && totals[i].timestamp_ns < e {
                if best.is_none_or(|(_, b)| totals[i].live_bytes > b) {
                    best = Some((totals[i].timestamp_ns, totals[i].live_bytes));
                }
                i += 1;
            }
        }
        let (ts, live_bytes) = best.unwrap_or((0, 0));
        let (idx, top) = top_live(doc, lives, STEP_PEAK_TOP, |l| l.live_after(ts));
        let (by_device, by_category) = breakdown(idx.iter().map(|&i| &lifetimes[i as usize]));
        let dominant_category = by_category
            .iter()
            .fold(
                None,
                |acc: Option<(MemoryCategory, u64)>, (&c, &b)| match acc {
                    Some((_, best)) if best >= b => acc,
                    _ => Some((c, b)),
                },
            )
            .map(|(c, _)| c);
        let (count, bytes) = alloc[step as usize];
        out.push(StepPeak {
            step,
            span_count,
            interval_count: merged.len() as u64,
            allocation_count: count,
            allocated_bytes: bytes,
            peak: StepPeakPoint {
                timestamp_ns: ts,
                live_bytes,
                by_category,
                by_device,
                dominant_category,
                live_allocation_count: idx.len() as u64,
                top_allocations: top.iter().map(|&i| lifetimes[i as usize].clone()).collect(),
            },
        });
    }
    out
}

fn first_span_of(doc: &TraceDocument, step: ExecutionStep) -> Option<usize> {
    doc.spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.pass == Some(step))
        .min_by_key(|(i, s)| (s.start_ns, *i))
        .map(|(i, _)| i)
}

fn activations_at(
    doc: &TraceDocument,
    lives: &[Life],
    res: &mut Resolver<'_>,
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
        bytes = bytes.saturating_add(l.bytes);
        if end.is_some_and(|e| l.end_ns > e) {
            kept_count += 1;
            kept_bytes = kept_bytes.saturating_add(l.bytes);
        }
    }
    ActivationsAtSpan {
        span_id: res.s(sp.id),
        span_name: res.s(sp.name),
        start_ns: sp.start_ns,
        end_ns: end,
        activation_live_count: count,
        activation_live_bytes: bytes,
        still_live_at_end_count: end.map(|_| kept_count),
        still_live_at_end_bytes: end.map(|_| kept_bytes),
    }
}

pub(crate) fn findings_support(
    doc: &TraceDocument,
    lives: &[Life],
    res: &mut Resolver<'_>,
) -> FindingsSupport {
    FindingsSupport {
        first_backward: first_span_of(doc, ExecutionStep::Backward)
            .map(|i| activations_at(doc, lives, res, i)),
        first_optimizer: first_span_of(doc, ExecutionStep::Optimizer)
            .map(|i| activations_at(doc, lives, res, i)),
    }
}
