//! Host timing of spans, computed once, bottom up: total time (recorded duration, or the sum of
//! children and ops when none was recorded), self time (total minus the union of the child
//! intervals clipped to the span, overlapping children counted once, so never negative) and the
//! part of the self time inside the measured interval. O(n log n).

use trace_schema::TraceDocument;

use crate::index::TraceIndex;

/// Per-span host timing, indexed like `doc.spans`.
#[derive(Debug, Clone)]
pub(crate) struct HostTiming {
    /// Total host time, ns.
    pub total_ns: Vec<u64>,
    /// True when the total was inferred from children and ops (no recorded duration).
    pub inferred: Vec<bool>,
    /// Self time, ns (`total − |∪ child intervals ∩ span|`).
    pub self_ns: Vec<u64>,
    /// Self time inside the measured interval, ns.
    pub measured_self_ns: Vec<u64>,
    /// Total time inside the measured interval, ns.
    pub measured_total_ns: Vec<u64>,
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

impl HostTiming {
    /// `measured` is the index of the measured span, if any.
    pub fn compute(doc: &TraceDocument, index: &TraceIndex, measured: Option<usize>) -> Self {
        let n = doc.spans.len();
        let mut total_ns = vec![0u64; n];
        let mut inferred = vec![false; n];
        // Bottom up: reverse pre-order visits children before parents. Spans on a cycle are
        // not in the pre-order; they keep their recorded duration.
        for (i, s) in doc.spans.iter().enumerate() {
            if let Some(d) = s.duration_ns.filter(|&d| d > 0) {
                total_ns[i] = d;
            }
        }
        for &s in index.preorder.iter().rev() {
            let s = s as usize;
            if doc.spans[s].duration_ns.is_some_and(|d| d > 0) {
                continue;
            }
            let children: u64 = index.children[s]
                .iter()
                .map(|&c| total_ns[c as usize])
                .sum();
            let ops: u64 = index.ops_by_span[s]
                .iter()
                .map(|&o| doc.ops[o as usize].duration_ns)
                .sum();
            total_ns[s] = children.saturating_add(ops);
            inferred[s] = true;
        }
        let interval = |i: usize| {
            let start = doc.spans[i].start_ns;
            (start, start.saturating_add(total_ns[i]))
        };
        let m = measured.map(interval).unwrap_or((0, 0));
        let mut self_ns = vec![0u64; n];
        let mut measured_self_ns = vec![0u64; n];
        let mut measured_total_ns = vec![0u64; n];
        let mut buf: Vec<(u64, u64)> = Vec::new();
        for i in 0..n {
            let own = interval(i);
            buf.clear();
            buf.extend(index.children[i].iter().map(|&c| interval(c as usize)));
            buf.extend(index.ops_by_span[i].iter().map(|&o| {
                let op = &doc.ops[o as usize];
                (
                    op.timestamp_ns,
                    op.timestamp_ns.saturating_add(op.duration_ns),
                )
            }));
            for iv in buf.iter_mut() {
                *iv = (iv.0.clamp(own.0, own.1), iv.1.clamp(own.0, own.1));
            }
            buf.retain(|iv| iv.1 > iv.0);
            buf.sort_unstable();
            let (mut union, mut union_in_m) = (0u64, 0u64);
            let mut cur: Option<(u64, u64)> = None;
            for &iv in buf.iter() {
                match cur {
                    Some(c) if iv.0 <= c.1 => cur = Some((c.0, c.1.max(iv.1))),
                    _ => {
                        if let Some(c) = cur {
                            union += c.1 - c.0;
                            union_in_m += overlap(c, m);
                        }
                        cur = Some(iv);
                    }
                }
            }
            if let Some(c) = cur {
                union += c.1 - c.0;
                union_in_m += overlap(c, m);
            }
            self_ns[i] = (own.1 - own.0).saturating_sub(union);
            measured_total_ns[i] = overlap(own, m);
            measured_self_ns[i] = measured_total_ns[i].saturating_sub(union_in_m);
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
