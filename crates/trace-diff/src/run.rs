//! The runs being compared: one analysed trace ([`Run`]), how spans were matched
//! ([`AlignmentMode`]), and a run prepared for the comparison (its span keys and per-span
//! figures).

use serde::Serialize;
use trace_graph::{Analysis, GraphNode, NodeKind};
use trace_memory::{node_memory_metrics, NodeMemoryMetrics};
use trace_schema::TraceDocument;

/// One analysed trace.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The loaded trace.
    pub doc: &'a TraceDocument,
    /// Its analysis (`trace_graph::analyze(doc)`).
    pub analysis: &'a Analysis,
    /// How reports name it (e.g. its path).
    pub label: &'a str,
}

/// How spans were matched.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AlignmentMode {
    /// By path of names (enough spans align).
    SpanPaths,
    /// By pass: span paths do not match (different models or producers); the pass table and
    /// pass-matched storages carry the comparison.
    Passes,
}

/// Per-span figures of one run, index like `doc.spans`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SpanFigures {
    pub total_ns: Option<u64>,
    pub self_ns: Option<u64>,
    pub direct_bytes: Option<u64>,
    pub subtree_peak_bytes: Option<u64>,
}

/// A run with its span keys and figures.
pub(crate) struct Prepared<'a> {
    pub run: Run<'a>,
    /// Key of each span (index like `doc.spans`).
    pub keys: Vec<Option<u32>>,
    pub figures: Vec<SpanFigures>,
}

pub(crate) fn span_figures(run: &Run<'_>) -> Vec<SpanFigures> {
    let doc = run.doc;
    let mut out = vec![SpanFigures::default(); doc.spans.len()];
    let from_memory = |out: &mut Vec<SpanFigures>, m: &[NodeMemoryMetrics]| {
        for (f, m) in out.iter_mut().zip(m) {
            f.direct_bytes = m.direct_allocated_bytes;
            f.subtree_peak_bytes = m.subtree_peak_live_bytes;
        }
    };
    match &run.analysis.graph {
        Some(graph) => {
            let nodes: rustc_hash::FxHashMap<&str, &GraphNode> = graph
                .nodes
                .iter()
                .filter(|n| !matches!(n.kind, NodeKind::Operation | NodeKind::Tensor))
                .map(|n| (&*n.id, n))
                .collect();
            for (i, span) in doc.spans.iter().enumerate() {
                if let Some(n) = nodes.get(doc.str(span.id)) {
                    out[i] = SpanFigures {
                        total_ns: n.host_total_time_ns,
                        self_ns: n.host_self_time_ns,
                        direct_bytes: n.memory.direct_allocated_bytes,
                        subtree_peak_bytes: n.memory.subtree_peak_live_bytes,
                    };
                }
            }
        }
        // No graph (an invalid or failed capture): no times; memory figures still apply.
        None => from_memory(
            &mut out,
            &node_memory_metrics(doc, run.analysis.memory.logical.as_ref()).spans,
        ),
    }
    out
}
