//! The pass-level comparison: forward, backward and optimizer compared by role, whatever their
//! spans are named — the comparison that still works when span paths do not match (two
//! models, or a PyTorch profiler trace against a Candle trace).
//!
//! Per pass and run: its host time is the length of the union of the intervals of the spans
//! declaring it (overlapping spans counted once; unknown when one of them never closed or its
//! end passes `u64::MAX`); its allocated bytes and peak are trace-memory's
//! [`trace_memory::PassPeak`] (`allocated_bytes`: storages allocated in spans of the pass;
//! `peak.live_bytes`: the highest total live bytes while inside the pass, everything live
//! counted).

use serde::Serialize;
use trace_schema::{Pass, TraceDocument};

use crate::run::Run;
use crate::stats::Delta;

/// One pass on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassDelta {
    /// The pass.
    pub pass: Pass,
    /// Host time inside the pass's spans, ns.
    pub time_ns: Delta,
    /// Bytes allocated in the pass.
    pub allocated_bytes: Delta,
    /// Highest live bytes (all devices) while inside the pass.
    pub peak_bytes: Delta,
}

/// Length of the union of the closed intervals of the spans declaring `pass`; `None` when none
/// declares it, one is open, or an end passes `u64::MAX`.
pub(crate) fn pass_time_ns(doc: &TraceDocument, pass: Pass) -> Option<u64> {
    let mut intervals: Vec<(u64, u64)> = Vec::new();
    for s in doc.spans.iter().filter(|s| s.pass == Some(pass)) {
        let end = s.start_ns.checked_add(s.duration_ns?)?;
        intervals.push((s.start_ns, end));
    }
    if intervals.is_empty() {
        return None;
    }
    intervals.sort_unstable();
    let mut total = 0u64;
    let mut cur = intervals[0];
    for &(s, e) in &intervals[1..] {
        if s <= cur.1 {
            cur.1 = cur.1.max(e);
        } else {
            total = total.checked_add(cur.1 - cur.0)?;
            cur = (s, e);
        }
    }
    total.checked_add(cur.1 - cur.0)
}

/// The passes either side declares, in pass order.
pub(crate) fn compare_passes(
    baseline: &[Run<'_>],
    candidate: &[Run<'_>],
    timing_comparable: bool,
) -> Vec<PassDelta> {
    let mut out = Vec::new();
    for pass in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
        let declares = |r: &Run<'_>| r.doc.spans.iter().any(|s| s.pass == Some(pass));
        if !baseline.iter().chain(candidate).any(declares) {
            continue;
        }
        let time = |runs: &[Run<'_>]| -> Vec<u64> {
            runs.iter()
                .filter_map(|r| pass_time_ns(r.doc, pass))
                .collect()
        };
        let peak = |r: &Run<'_>| {
            r.analysis
                .memory
                .logical
                .as_ref()
                .and_then(|l| l.pass_peaks.iter().find(|p| p.pass == pass).cloned())
        };
        let allocated = |runs: &[Run<'_>]| -> Vec<u64> {
            runs.iter()
                .filter_map(|r| peak(r).map(|p| p.allocated_bytes))
                .collect()
        };
        let peak_bytes = |runs: &[Run<'_>]| -> Vec<u64> {
            runs.iter()
                .filter_map(|r| peak(r).map(|p| p.peak.live_bytes))
                .collect()
        };
        let time_ns = Delta::of(time(baseline), time(candidate));
        out.push(PassDelta {
            pass,
            time_ns: if timing_comparable {
                time_ns
            } else {
                time_ns.not_compared()
            },
            allocated_bytes: Delta::of(allocated(baseline), allocated(candidate)),
            peak_bytes: Delta::of(peak_bytes(baseline), peak_bytes(candidate)),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_time_is_the_union_of_its_spans() {
        let doc = trace_schema::load_str(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#, "\n",
            r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
            r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"b1","start_ns":10,"span_kind":"function","step":"backward"}"#, "\n",
            r#"{"kind":"span_start","id":"s3","parent_id":"s2","name":"b2","start_ns":15,"span_kind":"function","step":"backward"}"#, "\n",
            r#"{"kind":"span_end","id":"s3","duration_ns":20}"#, "\n",
            r#"{"kind":"span_end","id":"s2","duration_ns":10}"#, "\n",
            r#"{"kind":"span_start","id":"s4","parent_id":"s1","name":"b3","start_ns":50,"span_kind":"function","step":"backward"}"#, "\n",
            r#"{"kind":"span_end","id":"s4","duration_ns":5}"#, "\n",
            r#"{"kind":"span_start","id":"s5","parent_id":"s1","name":"f","start_ns":60,"span_kind":"function","step":"forward"}"#, "\n",
        ))
        .unwrap();
        // [10,20) ∪ [15,35) ∪ [50,55) = 25 + 5
        assert_eq!(pass_time_ns(&doc, Pass::Backward), Some(30));
        assert_eq!(pass_time_ns(&doc, Pass::Forward), None); // open
        assert_eq!(pass_time_ns(&doc, Pass::Optimizer), None);
    }
}
