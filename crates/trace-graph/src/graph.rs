//! The execution graph: span, operation and tensor nodes with host total/self time and memory
//! metrics, explicit plus inferred call/data edges (deduplicated, stable order), measured
//! versus concurrent host scopes and rankings. Built only for valid, finished traces.
//!
//! Node order is canonical (spans in depth-first pre-order with children by start time, then
//! each span's ops in recorded order, then tensors by id), so the graph does not depend on how
//! events of different spans were interleaved in the file. O(n log n).

use std::sync::Arc;

use serde::Serialize;
use trace_schema::{MemoryCategory, Pass, TraceDocument};

use crate::health::TraceHealth;

/// Per-node memory metrics, from `trace_memory::node_memory_metrics` (definitions there).
pub use trace_memory::NodeMemoryMetrics as NodeMemory;

/// A shared string of the graph (node ids, names, labels); serialized as a plain string.
/// Node ids are shared between nodes, edges and rankings, never copied.
pub type Text = Arc<str>;

/// Kind of a graph node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum NodeKind {
    /// Span without a parent.
    Root,
    /// Function span.
    Function,
    /// Module span.
    Module,
    /// Op-sized span.
    Op,
    /// A recorded operation (`{span}/op/{n}`).
    Operation,
    /// A tensor (`tensor/{id}`).
    Tensor,
}

/// Host scope of a span relative to the measured region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum HostScope {
    /// The measured span or a descendant.
    MeasuredSubtree,
    /// Not in the measured subtree and not an ancestor, but overlapping the measured interval
    /// (concurrent work; keeps its real parent).
    ConcurrentOverlap,
    /// Ancestors of the measured span and spans outside its interval.
    Outside,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphNode {
    /// Span id, `{span}/op/{n}` or `tensor/{id}`.
    pub id: Text,
    /// Parent node (span of an op; parent span of a span).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<Text>,
    /// Span name, op name, or tensor label (tensor id when unlabelled).
    pub name: Text,
    /// Kind.
    pub kind: NodeKind,
    /// Module path of module spans, where recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module_path: Option<Text>,
    /// Pass a span declares (forward / backward / optimizer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Host scope (spans and ops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<HostScope>,
    /// Start, ns since session start (spans and ops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_ns: Option<u64>,
    /// Host total time, ns (spans and ops); absent when unknown (a span left open in a
    /// cut-short trace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_total_time_ns: Option<u64>,
    /// Host self time, ns: total minus the union of child intervals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_self_time_ns: Option<u64>,
    /// The span recorded no duration; its total is the sum of its children and ops.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub host_time_inferred: bool,
    /// Shape (ops: output; tensors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Arc<[u64]>>,
    /// Dtype label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<Text>,
    /// Device label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<Text>,
    /// Tensor category (tensors with a tensor event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<MemoryCategory>,
    /// Tensor tracks gradients (tensors with a tensor event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_grad: Option<bool>,
    /// Dense bytes of a tensor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense_bytes: Option<u64>,
    /// Memory metrics.
    #[serde(flatten)]
    pub memory: NodeMemory,
}

/// Kind of an edge.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EdgeKind {
    /// Caller → callee (span → span, span → op).
    Call,
    /// Tensor → op → tensor, or tensor → tensor.
    Data,
}

/// An edge between two node ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphEdge {
    /// Source node id.
    pub from: Text,
    /// Target node id.
    pub to: Text,
    /// Call or data.
    pub kind: EdgeKind,
    /// Inferred from the hierarchy or op inputs/outputs (false: an explicit trace edge).
    pub inferred: bool,
    /// Op name (span → op), `input` / `output` (op data edges).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<Text>,
    /// Host duration of the callee, ns (call edges).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
}

/// A span in a time ranking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpanCost {
    /// Span id.
    pub id: Text,
    /// Span name.
    pub name: Text,
    /// Host self time, ns.
    pub host_self_time_ns: u64,
    /// Self time inside the measured interval, ns.
    pub measured_overlap_self_time_ns: u64,
    /// Host total time, ns.
    pub host_total_time_ns: u64,
    /// Total time inside the measured interval, ns.
    pub measured_overlap_duration_ns: u64,
}

/// A span in a bytes ranking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpanBytes {
    /// Span id.
    pub id: Text,
    /// Span name.
    pub name: Text,
    /// The ranked figure, bytes.
    pub bytes: u64,
}

/// Rankings of one host scope (displays choose N; the data keeps every ranked span).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScopeRankings {
    /// By self time (measured: host self time; concurrent: self time inside the measured
    /// interval), descending, ties by id.
    pub slowest_by_self_time: Vec<SpanCost>,
    /// By directly allocated bytes (spans with an observed figure > 0), descending.
    pub heaviest_by_direct_allocated: Vec<SpanBytes>,
    /// By subtree peak live bytes (spans with an observed figure > 0), descending.
    pub heaviest_by_subtree_peak: Vec<SpanBytes>,
}

/// Rankings kept apart per scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rankings {
    /// The measured subtree.
    pub measured: ScopeRankings,
    /// Spans that merely overlap the measured interval.
    pub concurrent: ScopeRankings,
}

impl Rankings {
    /// Keeps the first `n` spans of each ranking.
    pub fn truncate(&mut self, n: usize) {
        for r in [&mut self.measured, &mut self.concurrent] {
            r.slowest_by_self_time.truncate(n);
            r.heaviest_by_direct_allocated.truncate(n);
            r.heaviest_by_subtree_peak.truncate(n);
        }
    }
}

/// The execution graph. A summary-detail analysis ([`crate::analyze_with`]) keeps no nodes or
/// edges, and the first [`trace_memory::SUMMARY_TOP`] spans of each ranking (no memory
/// rankings: no per-node memory metrics).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionGraph {
    /// Entrypoint from the meta.
    pub entrypoint: String,
    /// Id of the measured span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_span: Option<Text>,
    /// Host total of the measured span, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outer_wall_time_ns: Option<u64>,
    /// The trace was cut short: closed spans keep their times (from an incomplete capture),
    /// open spans have none.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub incomplete_capture: bool,
    /// Nodes in canonical order.
    pub nodes: Vec<GraphNode>,
    /// Edges sorted by (source node, target node, kind), without duplicates.
    pub edges: Vec<GraphEdge>,
    /// Time and memory rankings.
    pub rankings: Rankings,
}

/// Why the graph (and graph-dependent findings) were not built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphRefusal {
    /// Every reason.
    pub reasons: Vec<String>,
}

/// Reasons to refuse graph-dependent results, empty when the graph may be built.
pub(crate) fn refusal_reasons(doc: &TraceDocument, health: &TraceHealth) -> Vec<String> {
    let mut reasons = Vec::new();
    if health.capture_failed {
        let reason = doc
            .terminal
            .as_ref()
            .and_then(|t| t.reason.as_deref())
            .unwrap_or("no reason given");
        reasons.push(format!("capture failed: {reason}"));
    }
    // A cut-short trace keeps the graph: closed spans keep their times (marked as from an
    // incomplete capture); only open spans lose theirs.
    if !health.structurally_valid {
        for issue in health.errors() {
            reasons.push(format!("{}: {}", issue.code.as_str(), issue.message));
        }
        let omitted: u64 = health
            .omitted_issues
            .iter()
            .filter(|(c, _)| health.errors().any(|i| i.code == **c))
            .map(|(_, n)| n)
            .sum();
        if omitted > 0 {
            reasons.push(format!("{omitted} more structural errors"));
        }
    }
    reasons
}

trace_schema::wire_names!(NodeKind, HostScope, EdgeKind);
