//! Per aligned span: total and self host time, directly allocated bytes and subtree peak live
//! bytes on each side (median and range over the side's runs), their deltas, and a rank by
//! impact; spans found on one side only, listed by their top-most span.
//!
//! # Impact
//! Each changed figure (verdict increased or decreased: never noise) is scaled by the run's
//! whole figure of its kind — self time by the baseline's wall time, bytes by the baseline's
//! logical peak (the candidate's when the baseline has none; the row's own larger side when
//! neither has one) — and a row's impact is the largest of them, named by
//! [`SpanDelta::impact_metric`]. Time counts as self time only: a total is its children's rows
//! plus its own self time, so ranking totals would put every ancestor of a change first. Memory
//! is not additive, so the subtree peak counts besides the direct bytes (the only figure that
//! moves when a fix frees storages earlier). Time figures count only when timing is comparable.
//! Ties keep the tree order (pre-order of the keys).

use serde::Serialize;
use trace_schema::Pass;

use crate::stats::{Delta, Stat, Verdict};

/// A figure of a span row.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SpanMetric {
    /// Host total time, ns.
    TotalTime,
    /// Host self time, ns.
    SelfTime,
    /// Directly allocated bytes.
    DirectAllocated,
    /// Subtree peak live bytes.
    SubtreePeak,
}

/// One aligned span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpanDelta {
    /// Path of names (see [`crate::align`]): repeated siblings as `name#n`.
    pub path: String,
    /// Depth below the root.
    pub depth: u32,
    /// Effective pass (forward / backward / optimizer) in the first run holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Host total time, ns.
    pub total_time_ns: Delta,
    /// Host self time, ns (total minus the union of children and ops).
    pub self_time_ns: Delta,
    /// Bytes of the storages whose alloc names this span (`trace_memory` definitions).
    pub direct_allocated_bytes: Delta,
    /// Peak live bytes of what was allocated during the span, clipped to it.
    pub subtree_peak_bytes: Delta,
    /// Largest scaled change (see the module docs); 0 when nothing changed.
    pub impact: f64,
    /// The figure that gave the impact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impact_metric: Option<SpanMetric>,
}

impl SpanDelta {
    /// True when some figure is a change (increased or decreased).
    pub fn changed(&self) -> bool {
        self.deltas().iter().any(|(_, d)| d.verdict.is_change())
    }

    /// True when some figure differs only within the run-to-run spread.
    pub fn within_noise(&self) -> bool {
        self.deltas()
            .iter()
            .any(|(_, d)| d.verdict == Verdict::WithinNoise)
    }

    /// The four figures with their names.
    pub fn deltas(&self) -> [(SpanMetric, &Delta); 4] {
        [
            (SpanMetric::TotalTime, &self.total_time_ns),
            (SpanMetric::SelfTime, &self.self_time_ns),
            (SpanMetric::DirectAllocated, &self.direct_allocated_bytes),
            (SpanMetric::SubtreePeak, &self.subtree_peak_bytes),
        ]
    }
}

/// A span found on one side only: the top-most one of its subtree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnmatchedSpan {
    /// Path of names.
    pub path: String,
    /// Effective pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Runs of its side holding it.
    pub runs: u32,
    /// Spans below it (also on this side only).
    pub descendants: u64,
    /// Host total time, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_time_ns: Option<Stat>,
    /// Subtree peak live bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtree_peak_bytes: Option<Stat>,
}

/// What the rows after the first `n` add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RestSummary {
    /// Rows summarised.
    pub rows: u64,
    /// Rows with a change.
    pub changed: u64,
    /// Rows whose only differences are within the run-to-run spread.
    pub within_noise: u64,
    /// Sum of the changed self-time deltas, ns; absent when timing is not compared (or the sum
    /// would not fit an i128).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_time_delta_ns: Option<i128>,
    /// Sum of the changed direct-allocation deltas, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_allocated_delta_bytes: Option<i128>,
}

/// Summarises `rows` (e.g. those after the displayed top rows).
pub fn summarize(rows: &[SpanDelta], timing_comparable: bool) -> RestSummary {
    let sum = |f: &dyn Fn(&SpanDelta) -> &Delta| {
        rows.iter()
            .filter(|r| f(r).verdict.is_change())
            .try_fold(0i128, |acc, r| acc.checked_add(f(r).delta.unwrap_or(0)))
    };
    RestSummary {
        rows: rows.len() as u64,
        changed: rows.iter().filter(|r| r.changed()).count() as u64,
        within_noise: rows
            .iter()
            .filter(|r| !r.changed() && r.within_noise())
            .count() as u64,
        self_time_delta_ns: if timing_comparable {
            sum(&|r| &r.self_time_ns)
        } else {
            None
        },
        direct_allocated_delta_bytes: sum(&|r| &r.direct_allocated_bytes),
    }
}

/// Scales of the impact (see the module docs); `None` when unknown or 0.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scales {
    pub time_ns: Option<u64>,
    pub bytes: Option<u64>,
}

/// Sets `impact` and `impact_metric` of a row.
pub(crate) fn score(row: &mut SpanDelta, scales: Scales) {
    let mut best: Option<(f64, SpanMetric)> = None;
    for (metric, d) in row.deltas() {
        let scale = match metric {
            SpanMetric::TotalTime => continue,
            SpanMetric::SelfTime => scales.time_ns,
            SpanMetric::DirectAllocated | SpanMetric::SubtreePeak => scales.bytes,
        };
        let changed = d.changed_by();
        if changed == 0 {
            continue;
        }
        // Without a whole-run scale, the row's own larger side.
        let scale = scale.filter(|&s| s > 0).or_else(|| {
            let own = d
                .baseline
                .map_or(0, |s| s.median)
                .max(d.candidate.map_or(0, |s| s.median));
            (own > 0).then_some(own)
        });
        let Some(scale) = scale else { continue };
        let v = changed as f64 / scale as f64;
        if best.is_none_or(|(b, _)| v > b) {
            best = Some((v, metric));
        }
    }
    row.impact = best.map_or(0.0, |b| b.0);
    row.impact_metric = best.map(|b| b.1);
}

trace_schema::wire_names!(SpanMetric);
