//! Operations a producer measured one by one: spans of kind `op` (what `trace-import` makes of
//! Kineto's `cpu_op` events — PyTorch's RecordFunction ranges around every aten op call).
//!
//! Unlike [`crate::OpProfile`] (estimated from stack samples), these figures are exact sums of
//! measured durations, with PyTorch's own definitions (`torch.autograd.profiler_util`,
//! `FunctionEventAvg`, the rows of `prof.key_averages()`):
//! - **total** time of a call: its duration; an op's total time sums its calls' durations;
//! - **self** time of a call: its duration less the durations of the spans directly inside it
//!   (its children of every kind on its thread: ops and `record_function` ranges), never below 0;
//! - **calls**: the number of calls;
//! - an op call that is the **only child of a call of the same name** (an op dispatching to
//!   itself through another dispatch key: `aten::div_` inside `aten::div_`) is one call, not
//!   two: the outer keeps its time and adopts the inner one's children, as
//!   `EventList._remove_dup_nodes` does before `key_averages()` (repeated until no such pair is
//!   left).
//!
//! Rows are grouped by op name and pass (the pass of the call's nearest span that declares one:
//! `forward`, `backward`, the optimizer step). A call is **top level** when no op span encloses
//! it: the op the model's code called (`aten::linear`), not the ones it called in turn
//! (`aten::addmm`); the top-level time of a pass is what its ops cost, each counted once.

use std::collections::HashMap;

use trace_memory::SpanIndex;
use trace_schema::{Pass, SpanKind, TraceDocument};

/// One op name in one pass, measured.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MeasuredRow {
    /// The op's name as the trace has it (`aten::mm`; trace text: escape before display).
    pub op: String,
    /// The pass its calls ran in; `None` outside every pass.
    pub pass: Option<Pass>,
    /// Calls.
    pub calls: u64,
    /// Sum of the calls' durations, ns (saturating).
    pub total_ns: u64,
    /// Sum of the calls' self times, ns (saturating).
    pub self_ns: u64,
    /// Calls that no other op encloses.
    pub top_level_calls: u64,
    /// Sum of the top-level calls' durations, ns.
    pub top_level_ns: u64,
    /// Bytes allocated inside the top-level calls (their spans and everything below them:
    /// the memory events attributed there, storages older than the capture left out).
    pub top_level_allocated_bytes: u64,
}

/// The measured op table of a trace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MeasuredOps {
    /// Rows by total time, longest first (then name, then pass).
    pub rows: Vec<MeasuredRow>,
    /// Op spans left out because they never closed (no duration).
    pub open_calls: u64,
    /// The trace has memory events (else the allocated bytes are unknown, not 0).
    pub has_memory: bool,
}

impl MeasuredOps {
    /// The table of `doc`'s closed `op` spans; `None` when the trace has no op span (a Candle
    /// capture: its operations are sampled, see [`crate::OpProfile`]).
    pub fn from_document(doc: &TraceDocument) -> Option<Self> {
        Self::from_document_with(doc, &SpanIndex::build(doc))
    }

    /// [`Self::from_document`] with a span index already built.
    pub fn from_document_with(doc: &TraceDocument, spans: &SpanIndex) -> Option<Self> {
        if !doc.spans.iter().any(|s| s.kind == SpanKind::Op) {
            return None;
        }
        // Whether an op encloses each span, parents before children (preorder): linear, no
        // recursion whatever the depth; spans on a parent cycle count as enclosed by none.
        let mut under_op = vec![false; doc.spans.len()];
        // The top-level op call each span is in (itself, or its outermost op ancestor).
        let mut top_op: Vec<Option<u32>> = vec![None; doc.spans.len()];
        for &i in &spans.preorder {
            let i = i as usize;
            if let Some(p) = spans.parent[i] {
                let p = p as usize;
                under_op[i] = under_op[p] || doc.spans[p].kind == SpanKind::Op;
                top_op[i] = top_op[p];
            }
            if top_op[i].is_none() && doc.spans[i].kind == SpanKind::Op {
                top_op[i] = Some(i as u32);
            }
        }
        let same_name_only_child = |i: usize| -> Option<usize> {
            match spans.children[i].as_slice() {
                [c] if doc.spans[*c as usize].kind == SpanKind::Op
                    && doc.spans[*c as usize].name == doc.spans[i].name =>
                {
                    Some(*c as usize)
                }
                _ => None,
            }
        };
        // Calls folded into their parent (see the module docs).
        let mut folded = vec![false; doc.spans.len()];
        for (i, span) in doc.spans.iter().enumerate() {
            if span.kind == SpanKind::Op {
                if let Some(c) = same_name_only_child(i) {
                    folded[c] = true;
                }
            }
        }
        let mut rows: HashMap<(&str, Option<Pass>), MeasuredRow> = HashMap::new();
        let mut open_calls = 0u64;
        for (i, span) in doc.spans.iter().enumerate() {
            if span.kind != SpanKind::Op || folded[i] {
                continue;
            }
            let Some(total) = span.duration_ns else {
                open_calls += 1;
                continue;
            };
            // The children it has after folding: those of the innermost call of its chain of
            // same-name only children (bounded by the chain: each span is in one chain).
            let mut inner = i;
            while let Some(c) = same_name_only_child(inner) {
                inner = c;
            }
            let children: u64 = spans.children[inner]
                .iter()
                .filter_map(|&c| doc.spans[c as usize].duration_ns)
                .fold(0u64, u64::saturating_add);
            let self_ns = total.saturating_sub(children);
            let top = !under_op[i];
            let name = doc.str(span.name);
            let pass = spans.pass[i];
            let row = rows.entry((name, pass)).or_insert_with(|| MeasuredRow {
                op: name.to_string(),
                pass,
                calls: 0,
                total_ns: 0,
                self_ns: 0,
                top_level_calls: 0,
                top_level_ns: 0,
                top_level_allocated_bytes: 0,
            });
            row.calls += 1;
            row.total_ns = row.total_ns.saturating_add(total);
            row.self_ns = row.self_ns.saturating_add(self_ns);
            if top {
                row.top_level_calls += 1;
                row.top_level_ns = row.top_level_ns.saturating_add(total);
            }
        }
        // Bytes allocated inside each top-level call, onto its row.
        let mut has_memory = false;
        doc.for_each_memory(trace_schema::MemoryOrder::File, |m| {
            has_memory = true;
            if m.action != trace_schema::MemoryAction::Alloc || m.pre_existing {
                return;
            }
            let Some(top) = m
                .span
                .and_then(|s| doc.span_index(s))
                .and_then(|i| top_op[i])
            else {
                return;
            };
            let t = top as usize;
            if doc.spans[t].duration_ns.is_none() {
                return;
            }
            let key = (doc.str(doc.spans[t].name), spans.pass[t]);
            if let Some(row) = rows.get_mut(&key) {
                row.top_level_allocated_bytes = row
                    .top_level_allocated_bytes
                    .saturating_add(m.bytes.unwrap_or(0));
            }
        });
        let mut rows: Vec<MeasuredRow> = rows.into_values().collect();
        rows.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.op.cmp(&b.op))
                .then_with(|| a.pass.cmp(&b.pass))
        });
        Some(Self {
            rows,
            open_calls,
            has_memory,
        })
    }

    /// Rows merged over passes (one per op name), by total time, longest first: the shape of
    /// PyTorch's `key_averages()` table.
    pub fn by_name(&self) -> Vec<MeasuredRow> {
        let mut merged: HashMap<&str, MeasuredRow> = HashMap::new();
        for r in &self.rows {
            let m = merged.entry(r.op.as_str()).or_insert_with(|| MeasuredRow {
                op: r.op.clone(),
                pass: r.pass,
                calls: 0,
                total_ns: 0,
                self_ns: 0,
                top_level_calls: 0,
                top_level_ns: 0,
                top_level_allocated_bytes: 0,
            });
            if m.pass != r.pass {
                m.pass = None;
            }
            m.calls += r.calls;
            m.total_ns = m.total_ns.saturating_add(r.total_ns);
            m.self_ns = m.self_ns.saturating_add(r.self_ns);
            m.top_level_calls += r.top_level_calls;
            m.top_level_ns = m.top_level_ns.saturating_add(r.top_level_ns);
            m.top_level_allocated_bytes = m
                .top_level_allocated_bytes
                .saturating_add(r.top_level_allocated_bytes);
        }
        let mut rows: Vec<MeasuredRow> = merged.into_values().collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.op.cmp(&b.op)));
        rows
    }

    /// Sum of top-level op time in `pass`, ns.
    pub fn top_level_ns(&self, pass: Option<Pass>) -> u64 {
        self.rows
            .iter()
            .filter(|r| r.pass == pass)
            .fold(0u64, |a, r| a.saturating_add(r.top_level_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        "\n",
        r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
        r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}"#,
        "\n",
        r#"{"kind":"span_start","id":"s3","parent_id":"s2","name":"aten::linear","start_ns":10,"span_kind":"op"}"#,
        "\n",
        r#"{"kind":"span_start","id":"s4","parent_id":"s3","name":"aten::addmm","start_ns":20,"span_kind":"op"}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":25,"action":"alloc","device":"cpu","storage_id":"a","bytes":64,"span_id":"s4","category":"activation","source":"allocator"}"#,
        "\n",
        r#"{"kind":"span_end","id":"s4","duration_ns":50}"#,
        "\n",
        r#"{"kind":"span_start","id":"s5","parent_id":"s3","name":"aten::t","start_ns":12,"span_kind":"op"}"#,
        "\n",
        r#"{"kind":"span_end","id":"s5","duration_ns":5}"#,
        "\n",
        r#"{"kind":"span_end","id":"s3","duration_ns":100}"#,
        "\n",
        r#"{"kind":"span_start","id":"s6","parent_id":"s2","name":"aten::addmm","start_ns":200,"span_kind":"op"}"#,
        "\n",
        r#"{"kind":"span_end","id":"s6","duration_ns":30}"#,
        "\n",
        r#"{"kind":"span_end","id":"s2","duration_ns":300}"#,
        "\n",
        r#"{"kind":"span_end","id":"s1","duration_ns":400}"#,
        "\n",
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":400}"#,
        "\n",
    );

    #[test]
    fn self_total_calls_and_top_level_follow_pytorch_definitions() {
        let doc = trace_schema::load_str(TRACE).unwrap();
        let t = MeasuredOps::from_document(&doc).unwrap();
        let row = |op: &str| t.rows.iter().find(|r| r.op == op).unwrap();
        let linear = row("aten::linear");
        assert_eq!(
            (linear.calls, linear.total_ns, linear.self_ns),
            (1, 100, 45)
        );
        assert_eq!((linear.top_level_calls, linear.top_level_ns), (1, 100));
        // the 64 B allocated inside `aten::addmm` inside `aten::linear` count for the
        // top-level call, `aten::linear`
        assert_eq!(linear.top_level_allocated_bytes, 64);
        assert!(t.has_memory);
        let addmm = row("aten::addmm");
        assert_eq!((addmm.calls, addmm.total_ns, addmm.self_ns), (2, 80, 80));
        assert_eq!((addmm.top_level_calls, addmm.top_level_ns), (1, 30));
        assert_eq!(addmm.top_level_allocated_bytes, 0);
        assert_eq!(addmm.pass, Some(Pass::Forward));
        assert_eq!(t.top_level_ns(Some(Pass::Forward)), 130);
        assert_eq!(t.rows[0].op, "aten::linear", "longest total first");
    }

    #[test]
    fn a_trace_without_op_spans_has_no_measured_table() {
        let doc = trace_schema::load_str(&TRACE.replace("\"op\"", "\"function\"")).unwrap();
        assert!(MeasuredOps::from_document(&doc).is_none());
    }
}
