//! The execution graph: span, operation and tensor nodes with host total/self time and memory
//! metrics, explicit plus inferred call/data edges (deduplicated, stable order), measured
//! versus concurrent host scopes and rankings. Built only for valid, finished traces.
//!
//! Node order is canonical (spans in depth-first pre-order with children by start time, then
//! each span's ops in recorded order, then tensors by id), so the graph does not depend on how
//! events of different spans were interleaved in the file. O(n log n).

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{EdgeRecord, MemoryCategory, Pass, SharedStrings, SpanKind, Sym, TraceDocument};

use crate::health::TraceHealth;
use crate::index::{TraceIndex, NONE};
use crate::timing::HostTiming;
use trace_memory::{natural_cmp, Detail};

/// Per-node memory metrics, from `trace_memory::node_memory_metrics` (definitions there).
pub use trace_memory::NodeMemoryMetrics as NodeMemory;
use trace_memory::NodeMetrics;

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

fn span_kind(kind: SpanKind, root: bool) -> NodeKind {
    match (root, kind) {
        (true, _) => NodeKind::Root,
        (false, SpanKind::Function) => NodeKind::Function,
        (false, SpanKind::Module) => NodeKind::Module,
        (false, SpanKind::Op) => NodeKind::Op,
    }
}

/// Builds the graph of a trace that passed [`refusal_reasons`].
pub(crate) fn build_graph(
    doc: &TraceDocument,
    index: &TraceIndex,
    timing: &HostTiming,
    measured: Option<usize>,
    memory: Option<&NodeMetrics>,
    incomplete_capture: bool,
    detail: Detail,
) -> Result<ExecutionGraph, GraphRefusal> {
    let n_spans = doc.spans.len();
    // Scopes: the measured subtree is a contiguous range of the pre-order.
    let mut scope = vec![HostScope::Outside; n_spans];
    if let Some(m) = measured {
        let mut pos = vec![NONE; n_spans];
        for (p, &s) in index.preorder.iter().enumerate() {
            pos[s as usize] = p as u32;
        }
        let mut size = vec![1u32; n_spans];
        for &s in index.preorder.iter().rev() {
            if let Some(p) = index.parent[s as usize] {
                size[p as usize] += size[s as usize];
            }
        }
        let (lo, hi) = (pos[m] as usize, pos[m] as usize + size[m] as usize);
        for &s in &index.preorder[lo..hi] {
            scope[s as usize] = HostScope::MeasuredSubtree;
        }
        let mut ancestor = vec![false; n_spans];
        let mut a = index.parent[m];
        while let Some(x) = a.filter(|&x| !ancestor[x as usize]) {
            ancestor[x as usize] = true;
            a = index.parent[x as usize];
        }
        for i in 0..n_spans {
            if scope[i] == HostScope::Outside
                && !ancestor[i]
                && timing.measured_total_ns[i].is_some_and(|t| t > 0)
            {
                scope[i] = HostScope::ConcurrentOverlap;
            }
        }
    }

    // A summary graph has no nodes and keeps the first SUMMARY_TOP spans of each ranking,
    // unless a span id could collide with a generated op or tensor id: then the whole graph is
    // built (to refuse it alike) and cut afterwards.
    let suspicious_spans = doc.spans.iter().any(|span| {
        let id = doc.str(span.id);
        id.contains("/op/") || id.starts_with("tensor/")
    });
    if detail == Detail::Summary && !suspicious_spans {
        let mut texts = SharedStrings::new(doc);
        let mut rankings = rank(doc, index, timing, &scope, memory, &mut texts);
        rankings.truncate(trace_memory::SUMMARY_TOP);
        return Ok(ExecutionGraph {
            entrypoint: doc.meta.entrypoint.clone(),
            measured_span: measured.map(|m| texts.get(doc.spans[m].id)),
            outer_wall_time_ns: measured.and_then(|m| timing.total_ns[m]),
            incomplete_capture,
            nodes: Vec::new(),
            edges: Vec::new(),
            rankings,
        });
    }
    let mem_span = |i: usize| {
        memory
            .and_then(|m| m.spans.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let mem_op = |i: usize| {
        memory
            .and_then(|m| m.ops.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let mut texts = SharedStrings::new(doc);

    let mut nodes: Vec<GraphNode> = Vec::with_capacity(n_spans + 2 * doc.ops.len());
    let mut span_node = vec![NONE; n_spans];
    for &s in &index.preorder {
        let s = s as usize;
        let span = &doc.spans[s];
        span_node[s] = nodes.len() as u32;
        let parent = index.parent[s];
        nodes.push(GraphNode {
            id: texts.get(span.id),
            parent_id: parent.map(|p| texts.get(doc.spans[p as usize].id)),
            name: texts.get(span.name),
            kind: span_kind(span.kind, parent.is_none()),
            module_path: span.module_path.map(|m| texts.get(m)),
            pass: span.pass,
            scope: Some(scope[s]),
            start_ns: Some(span.start_ns),
            host_total_time_ns: timing.total_ns[s],
            host_self_time_ns: timing.self_ns[s],
            host_time_inferred: timing.inferred[s],
            shape: None,
            dtype: None,
            device: None,
            category: None,
            requires_grad: None,
            dense_bytes: None,
            memory: mem_span(s),
        });
    }
    // The ops' tensor ids, when a spilled document keeps them out of its records.
    let full = doc.with_op_tensors();
    let doc = &*full;
    let mut texts = SharedStrings::new(doc);
    // Tensors get node slots in order of first appearance: op inputs and outputs in canonical
    // op order, then tensor events by span, then explicit data edges.
    let mut tensor_slot = vec![u32::MAX; doc.strings.len()];
    let mut tensors: Vec<Sym> = Vec::new();
    fn see(t: Sym, slots: &mut [u32], tensors: &mut Vec<Sym>) {
        if slots[t.index()] == u32::MAX {
            slots[t.index()] = tensors.len() as u32;
            tensors.push(t);
        }
    }
    let mut op_node = vec![NONE; doc.ops.len()];
    for &s in &index.preorder {
        for &o in &index.ops_by_span[s as usize] {
            let o = o as usize;
            let op = &doc.ops[o];
            op_node[o] = nodes.len() as u32;
            let mut memory = mem_op(o);
            memory.output_dense_bytes = memory.output_dense_bytes.or(op.output_dense_bytes);
            for &input in op.inputs.iter() {
                see(input, &mut tensor_slot, &mut tensors);
            }
            if let Some(out) = op.output {
                see(out, &mut tensor_slot, &mut tensors);
            }
            nodes.push(GraphNode {
                id: Arc::from(index.op_node_id(doc, o)),
                parent_id: Some(texts.get(op.span)),
                name: texts.get(op.op_name),
                kind: NodeKind::Operation,
                module_path: None,
                pass: None,
                scope: Some(scope[s as usize]),
                start_ns: Some(op.timestamp_ns),
                host_total_time_ns: Some(op.duration_ns),
                host_self_time_ns: Some(op.duration_ns),
                host_time_inferred: false,
                shape: Some(texts.shape(op.shape)),
                dtype: Some(texts.get(op.dtype)),
                device: Some(texts.get(op.device)),
                category: None,
                requires_grad: None,
                dense_bytes: None,
                memory,
            });
        }
    }
    // First tensor event per tensor, in canonical span order.
    let mut tensor_events: Vec<Vec<u32>> = vec![Vec::new(); n_spans];
    for (i, t) in doc.tensors.iter().enumerate() {
        if let Some(si) = doc.span_index(t.span) {
            tensor_events[si].push(i as u32);
        }
    }
    let mut tensor_fact: Vec<u32> = Vec::new();
    for &s in &index.preorder {
        for &i in &tensor_events[s as usize] {
            let t = doc.tensors[i as usize].tensor_id;
            see(t, &mut tensor_slot, &mut tensors);
            let slot = tensor_slot[t.index()] as usize;
            if tensor_fact.len() <= slot {
                tensor_fact.resize(slot + 1, NONE);
            }
            if tensor_fact[slot] == NONE {
                tensor_fact[slot] = i;
            }
        }
    }
    for e in &doc.edges {
        if let EdgeRecord::Data {
            from_tensor,
            to_tensor,
        } = *e
        {
            see(from_tensor, &mut tensor_slot, &mut tensors);
            see(to_tensor, &mut tensor_slot, &mut tensors);
        }
    }
    tensor_fact.resize(tensors.len(), NONE);
    // Output op of each tensor (first in canonical order) for tensors without a fact.
    let mut tensor_output = vec![NONE; tensors.len()];
    for &s in &index.preorder {
        for &o in &index.ops_by_span[s as usize] {
            if let Some(out) = doc.ops[o as usize].output {
                let slot = tensor_slot[out.index()] as usize;
                if tensor_output[slot] == NONE {
                    tensor_output[slot] = o;
                }
            }
        }
    }
    // One exact growth for the tensor nodes (a doubling would leave up to half of the largest
    // vector of the analysis unused: 347 MB of 780 MB at 10^6 events, heaptrack).
    nodes.reserve_exact(tensors.len());
    let tensor_base = nodes.len() as u32;
    for (slot, &t) in tensors.iter().enumerate() {
        let id = doc.str(t);
        let mut node = GraphNode {
            id: Arc::from(format!("tensor/{id}")),
            parent_id: None,
            name: texts.get(t),
            kind: NodeKind::Tensor,
            module_path: None,
            pass: None,
            scope: None,
            start_ns: None,
            host_total_time_ns: None,
            host_self_time_ns: None,
            host_time_inferred: false,
            shape: None,
            dtype: None,
            device: None,
            category: None,
            requires_grad: None,
            dense_bytes: None,
            memory: NodeMemory::default(),
        };
        if tensor_fact[slot] != NONE {
            let fact = &doc.tensors[tensor_fact[slot] as usize];
            if let Some(label) = fact.label {
                node.name = texts.get(label);
            }
            node.shape = Some(texts.shape(fact.shape));
            node.dtype = Some(texts.get(fact.dtype));
            node.device = Some(texts.get(fact.device));
            node.category = Some(fact.category);
            node.requires_grad = Some(fact.requires_grad);
            node.dense_bytes = fact.dense_bytes;
        } else if tensor_output[slot] != NONE {
            let op = &doc.ops[tensor_output[slot] as usize];
            node.shape = Some(texts.shape(op.shape));
            node.dtype = Some(texts.get(op.dtype));
            node.device = Some(texts.get(op.device));
            node.dense_bytes = op.output_dense_bytes;
        }
        nodes.push(node);
    }
    let tensor_node = |t: Sym| tensor_base + tensor_slot[t.index()];
    // Op ids (`{span}/op/{n}`) are unique among themselves, tensor ids too; a generated id
    // can only collide with a span id containing `/op/` or starting with `tensor/`, or an op
    // id of such a span with a tensor id. Check only when such span ids exist.
    let suspicious: HashSet<&str> = nodes[..index.preorder.len()]
        .iter()
        .map(|n| &*n.id)
        .filter(|id| id.contains("/op/") || id.starts_with("tensor/"))
        .collect();
    if !suspicious.is_empty() {
        let mut seen: HashSet<&str> = HashSet::with_capacity(nodes.len());
        for node in &nodes {
            if !seen.insert(&node.id) {
                return Err(GraphRefusal {
                    reasons: vec![format!(
                        "duplicate node id {}: a span id collides with a generated op or tensor id",
                        node.id
                    )],
                });
            }
        }
    }

    // Edges over node indices; the label is an op name symbol or a fixed word.
    #[derive(Clone, Copy)]
    enum Label {
        None,
        Op(Sym),
        Input,
        Output,
    }
    struct E {
        from: u32,
        to: u32,
        kind: EdgeKind,
        inferred: bool,
        label: Label,
        duration_ns: Option<u64>,
    }
    // Room for every edge pushed below (before the dedup): no growth.
    let op_edges: usize = doc
        .ops
        .iter()
        .map(|o| 1 + o.inputs.len() + usize::from(o.output.is_some()))
        .sum();
    let child_edges: usize = index.children.iter().map(Vec::len).sum();
    let mut edges: Vec<E> = Vec::with_capacity(doc.edges.len() + child_edges + op_edges);
    for e in &doc.edges {
        match *e {
            EdgeRecord::Call {
                from_span,
                to_span,
                host_duration_ns,
            } => {
                let (Some(f), Some(t)) = (doc.span_index(from_span), doc.span_index(to_span))
                else {
                    continue;
                };
                if span_node[f] == NONE || span_node[t] == NONE {
                    continue;
                }
                edges.push(E {
                    from: span_node[f],
                    to: span_node[t],
                    kind: EdgeKind::Call,
                    inferred: false,
                    label: Label::None,
                    duration_ns: Some(host_duration_ns),
                });
            }
            EdgeRecord::Data {
                from_tensor,
                to_tensor,
            } => edges.push(E {
                from: tensor_node(from_tensor),
                to: tensor_node(to_tensor),
                kind: EdgeKind::Data,
                inferred: false,
                label: Label::None,
                duration_ns: None,
            }),
        }
    }
    for &s in &index.preorder {
        let s = s as usize;
        for &c in &index.children[s] {
            edges.push(E {
                from: span_node[s],
                to: span_node[c as usize],
                kind: EdgeKind::Call,
                inferred: true,
                label: Label::None,
                duration_ns: timing.total_ns[c as usize],
            });
        }
        for &o in &index.ops_by_span[s] {
            let op = &doc.ops[o as usize];
            let on = op_node[o as usize];
            edges.push(E {
                from: span_node[s],
                to: on,
                kind: EdgeKind::Call,
                inferred: true,
                label: Label::Op(op.op_name),
                duration_ns: Some(op.duration_ns),
            });
            for &input in op.inputs.iter() {
                edges.push(E {
                    from: tensor_node(input),
                    to: on,
                    kind: EdgeKind::Data,
                    inferred: true,
                    label: Label::Input,
                    duration_ns: None,
                });
            }
            if let Some(out) = op.output {
                edges.push(E {
                    from: on,
                    to: tensor_node(out),
                    kind: EdgeKind::Data,
                    inferred: true,
                    label: Label::Output,
                    duration_ns: None,
                });
            }
        }
    }
    // Explicit edges (inferred = false) sort before inferred ones and win the dedup.
    edges.sort_unstable_by_key(|e| (e.from, e.to, e.kind, e.inferred));
    edges.dedup_by_key(|e| (e.from, e.to, e.kind));
    let (input, output): (Text, Text) = (Arc::from("input"), Arc::from("output"));
    let edges: Vec<GraphEdge> = edges
        .into_iter()
        .map(|e| GraphEdge {
            from: nodes[e.from as usize].id.clone(),
            to: nodes[e.to as usize].id.clone(),
            kind: e.kind,
            inferred: e.inferred,
            label: match e.label {
                Label::None => None,
                Label::Op(sym) => Some(texts.get(sym)),
                Label::Input => Some(input.clone()),
                Label::Output => Some(output.clone()),
            },
            duration_ns: e.duration_ns,
        })
        .collect();

    let mut rankings = rank(doc, index, timing, &scope, memory, &mut texts);
    let (mut nodes, mut edges) = (nodes, edges);
    if detail == Detail::Summary {
        nodes.clear();
        edges.clear();
        rankings.truncate(trace_memory::SUMMARY_TOP);
    }
    Ok(ExecutionGraph {
        entrypoint: doc.meta.entrypoint.clone(),
        measured_span: measured.map(|m| texts.get(doc.spans[m].id)),
        outer_wall_time_ns: measured.and_then(|m| timing.total_ns[m]),
        incomplete_capture,
        nodes,
        edges,
        rankings,
    })
}

fn rank(
    doc: &TraceDocument,
    index: &TraceIndex,
    timing: &HostTiming,
    scope: &[HostScope],
    memory: Option<&NodeMetrics>,
    texts: &mut SharedStrings<'_>,
) -> Rankings {
    let mut out = Rankings::default();
    for &s in &index.preorder {
        let s = s as usize;
        let target = match scope[s] {
            HostScope::MeasuredSubtree => &mut out.measured,
            HostScope::ConcurrentOverlap => &mut out.concurrent,
            HostScope::Outside => continue,
        };
        let span = &doc.spans[s];
        let (id, name) = (texts.get(span.id), texts.get(span.name));
        // Spans without a known time (open in a cut-short trace) are not ranked by time.
        if let (Some(self_ns), Some(total), Some(m_self), Some(m_total)) = (
            timing.self_ns[s],
            timing.total_ns[s],
            timing.measured_self_ns[s],
            timing.measured_total_ns[s],
        ) {
            target.slowest_by_self_time.push(SpanCost {
                id: id.clone(),
                name: name.clone(),
                host_self_time_ns: self_ns,
                measured_overlap_self_time_ns: m_self,
                host_total_time_ns: total,
                measured_overlap_duration_ns: m_total,
            });
        }
        let m = memory
            .and_then(|m| m.spans.get(s))
            .cloned()
            .unwrap_or_default();
        if let Some(b) = m.direct_allocated_bytes.filter(|&b| b > 0) {
            target.heaviest_by_direct_allocated.push(SpanBytes {
                id: id.clone(),
                name: name.clone(),
                bytes: b,
            });
        }
        if let Some(b) = m.subtree_peak_live_bytes.filter(|&b| b > 0) {
            target
                .heaviest_by_subtree_peak
                .push(SpanBytes { id, name, bytes: b });
        }
    }
    let by_id = |a: &str, b: &str| natural_cmp(a, b);
    out.measured.slowest_by_self_time.sort_by(|a, b| {
        b.host_self_time_ns
            .cmp(&a.host_self_time_ns)
            .then_with(|| by_id(&a.id, &b.id))
    });
    out.concurrent.slowest_by_self_time.sort_by(|a, b| {
        b.measured_overlap_self_time_ns
            .cmp(&a.measured_overlap_self_time_ns)
            .then_with(|| b.host_self_time_ns.cmp(&a.host_self_time_ns))
            .then_with(|| by_id(&a.id, &b.id))
    });
    for r in [&mut out.measured, &mut out.concurrent] {
        for list in [
            &mut r.heaviest_by_direct_allocated,
            &mut r.heaviest_by_subtree_peak,
        ] {
            list.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| by_id(&a.id, &b.id)));
        }
    }
    out
}

trace_schema::wire_names!(NodeKind, HostScope, EdgeKind);
