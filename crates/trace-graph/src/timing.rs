//! Host timing of spans, computed once, bottom up, with checked arithmetic:
//! - total time: the recorded duration; when none was recorded (duration 0, as old traces
//!   wrote), the extent of its children and ops (from its start to the last end), so
//!   overlapping children count once; unknown (`None`) for a span never closed and for one
//!   whose end would pass `u64::MAX` (an impossible duration, a health error);
//! - self time: total minus the union of the child and op intervals clipped to the span
//!   (overlapping children counted once, so never negative), and the parts of both inside the
//!   measured interval. A child without a known end runs to its parent's end.
//!
//! O(n log n).

use trace_schema::TraceDocument;

use crate::index::TraceIndex;

/// Per-span host timing, indexed like `doc.spans`.
#[derive(Debug, Clone)]
pub(crate) struct HostTiming {
    /// Total host time, ns; `None` when unknown (open span, impossible end).
    pub total_ns: Vec<Option<u64>>,
    /// True when the total was inferred from children and ops (no recorded duration).
    pub inferred: Vec<bool>,
    /// Self time, ns (`total − |∪ child intervals ∩ span|`); `None` with the total.
    pub self_ns: Vec<Option<u64>>,
    /// Self time inside the measured interval, ns.
    pub measured_self_ns: Vec<Option<u64>>,
    /// Total time inside the measured interval, ns.
    pub measured_total_ns: Vec<Option<u64>>,
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

/// The end of an interval that starts at `start` and lasts `duration`, when it fits in u64.
pub(crate) fn end_of(start: u64, duration: u64) -> Option<u64> {
    start.checked_add(duration)
}

/// `(length of the union, length of the union inside m)` of intervals, each clipped to `own`.
fn union(buf: &mut [(u64, u64)], own: (u64, u64), m: (u64, u64)) -> (u64, u64) {
    for iv in buf.iter_mut() {
        *iv = (iv.0.clamp(own.0, own.1), iv.1.clamp(own.0, own.1));
    }
    buf.sort_unstable();
    let (mut total, mut in_m) = (0u64, 0u64);
    let mut cur: Option<(u64, u64)> = None;
    for &iv in buf.iter().filter(|iv| iv.1 > iv.0) {
        match cur {
            Some(c) if iv.0 <= c.1 => cur = Some((c.0, c.1.max(iv.1))),
            _ => {
                if let Some(c) = cur {
                    // disjoint pieces inside `own`: their lengths add up to at most its length
                    total += c.1 - c.0;
                    in_m += overlap(c, m);
                }
                cur = Some(iv);
            }
        }
    }
    if let Some(c) = cur {
        total += c.1 - c.0;
        in_m += overlap(c, m);
    }
    (total, in_m)
}

impl HostTiming {
    /// `measured` is the index of the measured span, if any.
    pub fn compute(doc: &TraceDocument, index: &TraceIndex, measured: Option<usize>) -> Self {
        let n = doc.spans.len();
        let mut total_ns: Vec<Option<u64>> = vec![None; n];
        let mut inferred = vec![false; n];
        let op_iv = |o: u32| {
            let op = &doc.ops[o as usize];
            end_of(op.timestamp_ns, op.duration_ns).map(|e| (op.timestamp_ns, e))
        };
        // Recorded durations first; spans on a cycle keep only theirs.
        for (i, s) in doc.spans.iter().enumerate() {
            if let Some(d) = s.duration_ns.filter(|&d| d > 0) {
                total_ns[i] = end_of(s.start_ns, d).map(|_| d);
            }
        }
        // Bottom up (reverse pre-order visits children before parents): a span closed without
        // a recorded duration spans to the last end of its children and ops.
        for &s in index.preorder.iter().rev() {
            let s = s as usize;
            let span = &doc.spans[s];
            if span.duration_ns != Some(0) {
                continue;
            }
            let start = span.start_ns;
            let child_ends = index.children[s].iter().map(|&c| {
                let c = c as usize;
                total_ns[c].and_then(|t| end_of(doc.spans[c].start_ns, t))
            });
            let op_ends = index.ops_by_span[s]
                .iter()
                .map(|&o| op_iv(o).map(|iv| iv.1));
            let mut last = Some(start);
            for end in child_ends.chain(op_ends) {
                last = match (last, end) {
                    (Some(l), Some(e)) => Some(l.max(e)),
                    _ => None,
                };
            }
            total_ns[s] = last.map(|l| l.saturating_sub(start));
            inferred[s] = true;
        }
        let interval = |i: usize| {
            let start = doc.spans[i].start_ns;
            total_ns[i]
                .and_then(|t| end_of(start, t))
                .map(|e| (start, e))
        };
        let m = measured.and_then(interval).unwrap_or((0, 0));
        let mut self_ns = vec![None; n];
        let mut measured_self_ns = vec![None; n];
        let mut measured_total_ns = vec![None; n];
        let mut buf: Vec<(u64, u64)> = Vec::new();
        for i in 0..n {
            let Some(own) = interval(i) else { continue };
            buf.clear();
            buf.extend(index.children[i].iter().map(|&c| {
                let c = c as usize;
                // a child without a known end runs to its parent's end
                interval(c).unwrap_or((doc.spans[c].start_ns, own.1))
            }));
            buf.extend(index.ops_by_span[i].iter().filter_map(|&o| op_iv(o)));
            let (covered, covered_in_m) = union(&mut buf, own, m);
            self_ns[i] = Some((own.1 - own.0) - covered);
            let in_m = overlap(own, m);
            measured_total_ns[i] = Some(in_m);
            measured_self_ns[i] = Some(in_m - covered_in_m);
        }
        Self {
            total_ns,
            inferred,
            self_ns,
            measured_self_ns,
            measured_total_ns,
        }
    }
}
