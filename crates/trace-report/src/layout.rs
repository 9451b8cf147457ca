//! Where each span and operation is drawn: on which host lane, and whether it nests there.
//!
//! A candle-graph trace does not record host thread ids, so spans are laid out on **lanes**:
//! every root span tree goes on the first lane free at its start (root trees that overlap in
//! time go on separate lanes, the way concurrent threads would). Inside a lane a span **nests**
//! when it is closed or open-ended inside its parent's interval, does not start before the
//! previous nested sibling ended, and its parent nests; a nesting span is a complete (`X`)
//! slice of its lane. Anything else — a child outliving its parent, overlapping siblings, a
//! span under such a span, a span on a parent cycle — does not nest and is drawn apart (async
//! slices in the Chrome export, its own rows in the HTML report), never silently mis-nested.
//! Operations nest inside a nesting span when they lie inside it and overlap neither its
//! nesting children nor its earlier nesting operations.
//!
//! Intervals are `[start, end]` in ns; a span never closed (a cut-short trace) runs to the end
//! of the trace (`end = None`). Built in O((S + P) log(S + P)) for S spans and P operations.

use trace_memory::SpanIndex;
use trace_schema::TraceDocument;

/// Why a span or an operation does not nest on its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotNested {
    /// It starts before its parent or ends after it (or is open while its parent closed).
    OutsideParent,
    /// It starts before an earlier sibling (or operation) of the same parent ended.
    OverlapsSibling,
    /// Its parent span does not nest.
    ParentNotNested,
    /// It sits on or below a cycle of parent ids.
    InCycle,
}

impl NotNested {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            NotNested::OutsideParent => "outside_parent",
            NotNested::OverlapsSibling => "overlaps_sibling",
            NotNested::ParentNotNested => "parent_not_nested",
            NotNested::InCycle => "in_cycle",
        }
    }
}

/// The layout of one document: `lane[i]` and `nesting[i]` for `doc.spans[i]`, `op_lane[j]`
/// and `op_nesting[j]` for `doc.ops[j]`.
#[derive(Debug, Clone, Default)]
pub struct SpanLayout {
    /// Lane of each span (its root tree's lane; 0 for spans on a cycle).
    pub lane: Vec<u32>,
    /// `None` when the span nests on its lane, else why not.
    pub nesting: Vec<Option<NotNested>>,
    /// Number of lanes (at least 1 when there is a span).
    pub lanes: u32,
    /// Lane of each operation (its span's lane; 0 when the span is unknown).
    pub op_lane: Vec<u32>,
    /// `None` when the operation nests inside its span, else why not.
    pub op_nesting: Vec<Option<NotNested>>,
}

/// A closed interval `[start, end]` in ns; `end = None`: open, runs to the end of the trace.
///
/// What it **occupies** on a lane is half-open, `[start, end)`, the way trace viewers close a
/// slice when the next one starts at its end; a zero-length interval occupies its own instant
/// (`[start, start + 1)`), so nothing that starts at that instant can nest with it unambiguously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Iv {
    start: u64,
    end: Option<u64>,
}

impl Iv {
    fn span(doc: &TraceDocument, i: usize) -> Self {
        Self {
            start: doc.spans[i].start_ns,
            end: doc.spans[i].end_ns(),
        }
    }

    /// End of what it occupies (`None`: never ends).
    fn occupied_end(self) -> Option<u64> {
        self.end.map(|e| e.max(self.start.saturating_add(1)))
    }

    /// `self` nests inside `outer`: starts no earlier and occupies nothing past its end.
    fn inside(self, outer: Iv) -> bool {
        self.start >= outer.start
            && match (self.occupied_end(), outer.end) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => a <= b,
            }
    }

    /// `self` starts once `before` stopped occupying its lane.
    fn after(self, before: Iv) -> bool {
        before.occupied_end().is_some_and(|e| e <= self.start)
    }

    /// The occupied intervals overlap.
    fn overlaps(self, other: Iv) -> bool {
        !self.after(other) && !other.after(self)
    }
}

impl SpanLayout {
    /// Lays out the spans and operations of `doc` with its span index.
    pub fn build(doc: &TraceDocument, spans: &SpanIndex) -> Self {
        let n = doc.spans.len();
        let mut lane = vec![0u32; n];
        let mut nesting: Vec<Option<NotNested>> = vec![Some(NotNested::InCycle); n];
        // Roots on the first lane free at their start (roots are in canonical start order).
        let mut lane_last: Vec<Iv> = Vec::new();
        for &r in &spans.roots {
            let r = r as usize;
            let iv = Iv::span(doc, r);
            let l = match lane_last.iter().position(|&last| iv.after(last)) {
                Some(l) => l,
                None => {
                    lane_last.push(iv);
                    lane_last.len() - 1
                }
            };
            lane_last[l] = iv;
            lane[r] = l as u32;
            nesting[r] = None;
        }
        // Children in pre-order: parents are decided first.
        for &s in &spans.preorder {
            let s = s as usize;
            let children = &spans.children[s];
            let parent_iv = Iv::span(doc, s);
            let mut last: Option<Iv> = None;
            for &c in children {
                let c = c as usize;
                lane[c] = lane[s];
                let iv = Iv::span(doc, c);
                nesting[c] = if nesting[s].is_some() {
                    Some(NotNested::ParentNotNested)
                } else if !iv.inside(parent_iv) {
                    Some(NotNested::OutsideParent)
                } else if last.is_some_and(|l| !iv.after(l)) {
                    Some(NotNested::OverlapsSibling)
                } else {
                    last = Some(iv);
                    None
                };
            }
        }
        // Operations per span, in time order, against the span's nesting children.
        let mut op_lane = vec![0u32; doc.ops.len()];
        let mut op_nesting: Vec<Option<NotNested>> =
            vec![Some(NotNested::ParentNotNested); doc.ops.len()];
        let mut by_span: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (j, op) in doc.ops.iter().enumerate() {
            if let Some(s) = doc.span_index(op.span) {
                by_span[s].push(j as u32);
                op_lane[j] = lane[s];
            }
        }
        for s in 0..n {
            if by_span[s].is_empty() {
                continue;
            }
            let ops = &mut by_span[s];
            ops.sort_by_key(|&j| (doc.ops[j as usize].timestamp_ns, j));
            // Nesting children's intervals, sorted by start (canonical order) and disjoint.
            let kids: Vec<Iv> = spans.children[s]
                .iter()
                .map(|&c| c as usize)
                .filter(|&c| nesting[c].is_none())
                .map(|c| Iv::span(doc, c))
                .collect();
            let span_iv = Iv::span(doc, s);
            let mut last: Option<Iv> = None;
            for &j in ops.iter() {
                let j = j as usize;
                let op = &doc.ops[j];
                let end = op.timestamp_ns.checked_add(op.duration_ns);
                let iv = Iv {
                    start: op.timestamp_ns,
                    end,
                };
                op_nesting[j] = if nesting[s].is_some() {
                    Some(NotNested::ParentNotNested)
                } else if end.is_none() || !iv.inside(span_iv) {
                    Some(NotNested::OutsideParent)
                } else if last.is_some_and(|l| !iv.after(l)) || overlaps_any(&kids, iv) {
                    Some(NotNested::OverlapsSibling)
                } else {
                    last = Some(iv);
                    None
                };
            }
        }
        Self {
            lane,
            nesting,
            lanes: lane_last.len().max(usize::from(n > 0)) as u32,
            op_lane,
            op_nesting,
        }
    }
}

/// True when `iv` overlaps one of `sorted` (occupied intervals that do not overlap each other,
/// sorted by start). O(log k): only the last one starting before `iv` stops occupying its lane
/// can overlap it without a later one overlapping too.
fn overlaps_any(sorted: &[Iv], iv: Iv) -> bool {
    let stop = iv.occupied_end().unwrap_or(u64::MAX);
    let k = sorted.partition_point(|x| x.start < stop);
    k > 0 && sorted[k - 1].overlaps(iv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(lines: &[&str]) -> TraceDocument {
        let mut text = String::from(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        );
        text.push('\n');
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        text.push_str(r#"{"kind":"terminal","outcome":"complete","timestamp_ns":1000}"#);
        text.push('\n');
        trace_schema::load_str(&text).unwrap()
    }

    fn span(id: &str, parent: Option<&str>, start: u64) -> String {
        match parent {
            Some(p) => format!(
                r#"{{"kind":"span_start","id":"{id}","parent_id":"{p}","name":"{id}","start_ns":{start},"span_kind":"function"}}"#
            ),
            None => format!(
                r#"{{"kind":"span_start","id":"{id}","name":"{id}","start_ns":{start},"span_kind":"function"}}"#
            ),
        }
    }

    fn end(id: &str, d: u64) -> String {
        format!(r#"{{"kind":"span_end","id":"{id}","duration_ns":{d}}}"#)
    }

    fn layout(lines: Vec<String>) -> (TraceDocument, SpanLayout) {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let d = doc(&refs);
        let ix = SpanIndex::build(&d);
        let l = SpanLayout::build(&d, &ix);
        (d, l)
    }

    fn nesting_of(d: &TraceDocument, l: &SpanLayout, id: &str) -> Option<NotNested> {
        l.nesting[d.span_index(d.sym(id).unwrap()).unwrap()]
    }

    #[test]
    fn well_nested_spans_nest_and_bad_ones_do_not() {
        let (d, l) = layout(vec![
            span("r", None, 0),
            span("a", Some("r"), 10),
            end("a", 10), // [10, 20]
            span("b", Some("r"), 15),
            end("b", 10), // overlaps a
            span("c", Some("r"), 30),
            end("c", 100), // [30, 130] outlives r
            span("d", Some("c"), 40),
            end("d", 5), // under a span that does not nest
            span("e", Some("r"), 20),
            end("e", 0), // touches a's end: nests
            end("r", 100),
        ]);
        assert_eq!(nesting_of(&d, &l, "r"), None);
        assert_eq!(nesting_of(&d, &l, "a"), None);
        assert_eq!(nesting_of(&d, &l, "e"), None);
        assert_eq!(nesting_of(&d, &l, "b"), Some(NotNested::OverlapsSibling));
        assert_eq!(nesting_of(&d, &l, "c"), Some(NotNested::OutsideParent));
        assert_eq!(nesting_of(&d, &l, "d"), Some(NotNested::ParentNotNested));
        assert_eq!(l.lanes, 1);
    }

    #[test]
    fn overlapping_roots_get_their_own_lanes_and_open_spans_run_to_the_end() {
        let (d, l) = layout(vec![
            span("r1", None, 0),
            end("r1", 50),
            span("r2", None, 10),      // overlaps r1: lane 1
            span("r3", None, 60),      // after r1: lane 0 again
            span("k", Some("r3"), 70), // open inside open r3: nests
            end("r3", 100),            // r3 closed; k open: outside
        ]);
        let lane = |id: &str| l.lane[d.span_index(d.sym(id).unwrap()).unwrap()];
        assert_eq!((lane("r1"), lane("r2"), lane("r3")), (0, 1, 0));
        assert_eq!(nesting_of(&d, &l, "k"), Some(NotNested::OutsideParent));
        assert_eq!(l.lanes, 2);
        // r2 never closed: a later root cannot share its lane
        let (d2, l2) = layout(vec![span("a", None, 0), span("b", None, 100), end("b", 1)]);
        assert_eq!(l2.lane[d2.span_index(d2.sym("b").unwrap()).unwrap()], 1);
    }

    #[test]
    fn operations_nest_between_child_spans() {
        let op = |span: &str, ts: u64, dur: u64| {
            format!(
                r#"{{"kind":"op","span_id":"{span}","op_name":"matmul","dtype":"f32","device":"cpu","duration_ns":{dur},"timestamp_ns":{ts}}}"#
            )
        };
        let (_d, l) = layout(vec![
            span("r", None, 0),
            span("c", Some("r"), 10),
            end("c", 10),    // [10, 20]
            op("r", 0, 5),   // nests
            op("r", 5, 10),  // overlaps c
            op("r", 20, 5),  // nests (touches c's end)
            op("r", 22, 5),  // overlaps previous op
            op("r", 95, 10), // outside r
            end("r", 100),
        ]);
        assert_eq!(
            l.op_nesting,
            vec![
                None,
                Some(NotNested::OverlapsSibling),
                None,
                Some(NotNested::OverlapsSibling),
                Some(NotNested::OutsideParent)
            ]
        );
    }

    #[test]
    fn overlap_check_handles_touching_and_zero_length_intervals() {
        let iv = |start, end| Iv { start, end };
        let kids = [iv(10, Some(20)), iv(30, Some(30)), iv(40, None)];
        assert!(!overlaps_any(&kids, iv(0, Some(10))));
        assert!(!overlaps_any(&kids, iv(20, Some(25))));
        assert!(overlaps_any(&kids, iv(15, Some(16))));
        assert!(overlaps_any(&kids, iv(25, Some(35)))); // holds the zero-length child
        assert!(overlaps_any(&kids, iv(30, Some(30)))); // the same instant
        assert!(!overlaps_any(&kids, iv(31, Some(31))));
        assert!(overlaps_any(&kids, iv(10, Some(10)))); // starts with a child
        assert!(overlaps_any(&kids, iv(45, Some(50)))); // inside the open child
                                                        // zero-length intervals: inside only when they start before the outer end
        assert!(iv(0, Some(0)).inside(iv(0, Some(10))));
        assert!(!iv(10, Some(10)).inside(iv(0, Some(10))));
        assert!(!iv(5, Some(5)).inside(iv(5, Some(5))));
        assert!(iv(20, Some(20)).after(iv(10, Some(20))));
        assert!(!iv(20, Some(25)).after(iv(20, Some(20))));
    }
}
