//! The summary's per-module backward section: the backward module spans a probe wrote with
//! backward spans on (`demo --backward-spans`, `ProfileRun::backward_spans`), recognised by their
//! `forward_span_id` link, counted (with how many are `inferred`) and the slowest shown with the
//! bytes allocated inside them. Absent from a trace without such spans.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;
use trace_format::{opt_bytes, opt_duration};
use trace_graph::Analysis;
use trace_schema::{MemoryAction, MemoryOrder, SpanKind, Sym, TraceDocument};

use crate::table::{Align, Table};

/// One backward module span.
#[derive(Debug, Clone, Serialize)]
pub struct BackwardModuleRow {
    /// Span id.
    pub id: String,
    /// Span path (`<entrypoint>/backward/<module>`).
    pub path: String,
    /// The path from the backward pass span down (`backward/<module>`), as shown.
    pub pass_path: String,
    /// The forward module span it mirrors.
    pub forward_span_id: String,
    /// Host self time, ns (absent when the graph was refused or the span has no end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_self_time_ns: Option<u64>,
    /// Bytes allocated directly inside it (absent without an observed figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_allocated_bytes: Option<u64>,
    /// Its extent is inferred (Candle's order interleaved it), not observed exactly.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
}

/// The backward module spans of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct BackwardModules {
    /// Backward module spans (each one backward of one module call).
    pub spans: u64,
    /// Of which written as `inferred`.
    pub inferred: u64,
    /// The slowest by host self time (ties: processing order), at most the rows asked for.
    pub slowest: Vec<BackwardModuleRow>,
}

/// The section, or `None` when the trace has no backward module span. Self time is the span's
/// duration minus the union of its child spans; allocated bytes are the `alloc` events that
/// name the span (absent when the trace has no memory events, or their sum overflows). One pass
/// over the spans and one over the memory events.
pub fn build(doc: &TraceDocument, analysis: &Analysis, rows: usize) -> Option<BackwardModules> {
    let chosen: Vec<usize> = (0..doc.spans.len())
        .filter(|&i| {
            let s = &doc.spans[i];
            s.kind == SpanKind::Module && s.forward_span.is_some()
        })
        .collect();
    if chosen.is_empty() {
        return None;
    }
    let slot: HashMap<Sym, usize> = chosen
        .iter()
        .enumerate()
        .map(|(k, &i)| (doc.spans[i].id, k))
        .collect();
    // Child intervals of each chosen span.
    let mut children: Vec<Vec<(u64, u64)>> = vec![Vec::new(); chosen.len()];
    for s in &doc.spans {
        if let (Some(&k), Some(end)) = (s.parent.and_then(|p| slot.get(&p)), s.end_ns()) {
            children[k].push((s.start_ns, end));
        }
    }
    // Bytes allocated in each chosen span (checked: `None` on overflow).
    let mut allocated: Vec<Option<u64>> = vec![Some(0); chosen.len()];
    doc.for_each_memory(MemoryOrder::File, |m| {
        if m.action != MemoryAction::Alloc {
            return;
        }
        if let Some(&k) = m.span.and_then(|s| slot.get(&s)) {
            allocated[k] = allocated[k].and_then(|a| a.checked_add(m.bytes.unwrap_or(0)));
        }
    });
    let has_memory = doc.memory_len() > 0;
    let mut all: Vec<(u64, BackwardModuleRow)> = chosen
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let s = &doc.spans[i];
            let id = doc.str(s.id);
            let path = analysis
                .spans
                .indexed_path_of_id(doc, id)
                .unwrap_or_else(|| doc.str(s.name).to_string());
            let self_time = s
                .end_ns()
                .map(|end| self_time_ns(s.start_ns, end, &mut children[k]));
            let row = BackwardModuleRow {
                id: id.to_string(),
                pass_path: pass_relative(doc, analysis, s, &path),
                path,
                forward_span_id: s.forward_span.map(|f| doc.str(f)).unwrap_or("").to_string(),
                host_self_time_ns: self_time,
                direct_allocated_bytes: if has_memory { allocated[k] } else { None },
                inferred: s.inferred,
            };
            (s.start_ns, row)
        })
        .collect();
    let inferred = all.iter().filter(|(_, r)| r.inferred).count() as u64;
    all.sort_by(|(a_start, a), (b_start, b)| {
        b.host_self_time_ns
            .cmp(&a.host_self_time_ns)
            .then(a_start.cmp(b_start))
    });
    Some(BackwardModules {
        spans: chosen.len() as u64,
        inferred,
        slowest: all.into_iter().take(rows).map(|(_, r)| r).collect(),
    })
}

/// `[start, end)` minus the union of `children` (clipped to it), ns.
fn self_time_ns(start: u64, end: u64, children: &mut [(u64, u64)]) -> u64 {
    children.sort_unstable();
    let (mut covered, mut reach) = (0u64, start);
    for &(a, b) in children.iter() {
        let (a, b) = (a.max(reach), b.min(end));
        if b > a {
            covered = covered.saturating_add(b - a);
            reach = b;
        }
    }
    end.saturating_sub(start).saturating_sub(covered)
}

/// `path` from the enclosing pass span down: the prefix that is the pass span's parent's path
/// is dropped (the whole path when no pass span encloses the span).
fn pass_relative(
    doc: &TraceDocument,
    analysis: &Analysis,
    span: &trace_schema::SpanRecord,
    path: &str,
) -> String {
    let mut cur = span.parent;
    // Bounded: a parent chain is at most as long as the span list.
    for _ in 0..doc.spans.len() {
        let Some(i) = cur.and_then(|p| doc.span_index(p)) else {
            break;
        };
        let s = &doc.spans[i];
        if s.kind == SpanKind::Function && s.pass.is_some() {
            let prefix = s
                .parent
                .and_then(|p| analysis.spans.indexed_path_of_id(doc, doc.str(p)));
            return match prefix
                .and_then(|p| path.strip_prefix(&format!("{p}/")).map(str::to_string))
            {
                Some(rest) => rest,
                None => path.to_string(),
            };
        }
        cur = s.parent;
    }
    path.to_string()
}

/// Renders the section (after the slowest spans).
pub fn render(out: &mut String, b: &BackwardModules) {
    let _ = writeln!(
        out,
        "backward     {} module span{} in Candle's processing order ({} inferred: extent not observed exactly)",
        b.spans,
        if b.spans == 1 { "" } else { "s" },
        b.inferred
    );
    let mut t = Table::new(&[
        ("SELF", Align::Right),
        ("ALLOCATED", Align::Right),
        ("SPAN", Align::Left),
    ]);
    for r in &b.slowest {
        let path = if r.inferred {
            format!("{} (inferred)", r.pass_path)
        } else {
            r.pass_path.clone()
        };
        t.row([
            opt_duration(r.host_self_time_ns),
            opt_bytes(r.direct_allocated_bytes),
            Table::path(&path),
        ]);
    }
    out.push_str(&t.render("  "));
}

#[cfg(test)]
mod tests {
    use super::self_time_ns;

    #[test]
    fn self_time_subtracts_the_union_of_clipped_children() {
        assert_eq!(self_time_ns(10, 20, &mut []), 10);
        // overlapping children count once; a child running past the end is clipped
        assert_eq!(self_time_ns(10, 20, &mut [(12, 15), (14, 16), (18, 25)]), 4);
    }
}
