//! Building the execution graph of a trace that passed [`crate::graph::refusal_reasons`]: the
//! host scope of each span, one node per span, op and tensor (tensors in order of first
//! appearance), the edges (explicit ones win over inferred ones) and the rankings.

use std::collections::HashSet;
use std::sync::Arc;

use trace_memory::{natural_cmp, Detail, NodeMetrics};
use trace_schema::{EdgeRecord, SharedStrings, SpanKind, Sym, TraceDocument};

use crate::graph::{
    EdgeKind, ExecutionGraph, GraphEdge, GraphNode, GraphRefusal, HostScope, NodeKind, NodeMemory,
    Rankings, SpanBytes, SpanCost, Text,
};
use crate::index::{TraceIndex, NONE};
use crate::timing::HostTiming;

fn span_kind(kind: SpanKind, root: bool) -> NodeKind {
    match (root, kind) {
        (true, _) => NodeKind::Root,
        (false, SpanKind::Function) => NodeKind::Function,
        (false, SpanKind::Module) => NodeKind::Module,
        (false, SpanKind::Op) => NodeKind::Op,
    }
}
/// Builds the graph of a trace that passed [`crate::graph::refusal_reasons`].
pub(crate) fn build_graph(
    doc: &TraceDocument,
    index: &TraceIndex,
    timing: &HostTiming,
    measured: Option<usize>,
    memory: Option<&NodeMetrics>,
    incomplete_capture: bool,
    detail: Detail,
) -> Result<ExecutionGraph, GraphRefusal> {
    let scope = host_scopes(index, timing, measured, doc.spans.len());
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
    let (mut nodes, span_node) = span_nodes(doc, index, timing, &scope, memory);
    // The ops' tensor ids, when a spilled document keeps them out of its records.
    let full = doc.with_op_tensors();
    let doc = &*full;
    let mut texts = SharedStrings::new(doc);
    let mut slots = TensorSlots::new(doc);
    let op_node = push_op_nodes(
        doc, index, &scope, memory, &mut texts, &mut nodes, &mut slots,
    );
    let tensor_base = push_tensor_nodes(doc, index, &mut texts, &mut nodes, &mut slots);
    check_unique_ids(index, &nodes)?;
    let nodes_of = NodesOf {
        span: &span_node,
        op: &op_node,
        tensor_base,
        slots: &slots,
    };
    let edges = graph_edges(doc, index, timing, &nodes_of, &nodes, &mut texts);
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

/// Each span's host scope: the measured subtree is a contiguous range of the pre-order; a span
/// outside it (and not its ancestor) that overlaps the measured region in time is concurrent.
fn host_scopes(
    index: &TraceIndex,
    timing: &HostTiming,
    measured: Option<usize>,
    n_spans: usize,
) -> Vec<HostScope> {
    let mut scope = vec![HostScope::Outside; n_spans];
    let Some(m) = measured else {
        return scope;
    };
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
    scope
}

/// One node per span in pre-order, and the node index of each span.
fn span_nodes(
    doc: &TraceDocument,
    index: &TraceIndex,
    timing: &HostTiming,
    scope: &[HostScope],
    memory: Option<&NodeMetrics>,
) -> (Vec<GraphNode>, Vec<u32>) {
    let n_spans = doc.spans.len();
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
            memory: memory
                .and_then(|m| m.spans.get(s))
                .cloned()
                .unwrap_or_default(),
        });
    }
    (nodes, span_node)
}

/// Tensors get node slots in order of first appearance: op inputs and outputs in canonical op
/// order, then tensor events by span, then explicit data edges.
struct TensorSlots {
    /// The slot of each string symbol that names a tensor (`u32::MAX`: none).
    slot: Vec<u32>,
    /// The tensor of each slot.
    tensors: Vec<Sym>,
}

impl TensorSlots {
    fn new(doc: &TraceDocument) -> Self {
        Self {
            slot: vec![u32::MAX; doc.strings.len()],
            tensors: Vec::new(),
        }
    }

    /// Gives `t` the next slot unless it has one.
    fn see(&mut self, t: Sym) {
        if self.slot[t.index()] == u32::MAX {
            self.slot[t.index()] = self.tensors.len() as u32;
            self.tensors.push(t);
        }
    }

    fn of(&self, t: Sym) -> usize {
        self.slot[t.index()] as usize
    }
}

/// One node per op in canonical order (seeing its tensors); the node index of each op.
fn push_op_nodes(
    doc: &TraceDocument,
    index: &TraceIndex,
    scope: &[HostScope],
    memory: Option<&NodeMetrics>,
    texts: &mut SharedStrings<'_>,
    nodes: &mut Vec<GraphNode>,
    slots: &mut TensorSlots,
) -> Vec<u32> {
    let mut op_node = vec![NONE; doc.ops.len()];
    for &s in &index.preorder {
        for &o in &index.ops_by_span[s as usize] {
            let o = o as usize;
            let op = &doc.ops[o];
            op_node[o] = nodes.len() as u32;
            let mut memory = memory
                .and_then(|m| m.ops.get(o))
                .cloned()
                .unwrap_or_default();
            memory.output_dense_bytes = memory.output_dense_bytes.or(op.output_dense_bytes);
            for &input in op.inputs.iter() {
                slots.see(input);
            }
            if let Some(out) = op.output {
                slots.see(out);
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
    op_node
}

/// For each tensor slot: its first tensor event (in canonical span order) and the op that
/// first outputs it (`NONE` where there is none), seeing the tensors of the tensor events and
/// the explicit data edges.
fn tensor_sources(
    doc: &TraceDocument,
    index: &TraceIndex,
    slots: &mut TensorSlots,
) -> (Vec<u32>, Vec<u32>) {
    let mut tensor_events: Vec<Vec<u32>> = vec![Vec::new(); doc.spans.len()];
    for (i, t) in doc.tensors.iter().enumerate() {
        if let Some(si) = doc.span_index(t.span) {
            tensor_events[si].push(i as u32);
        }
    }
    let mut tensor_fact: Vec<u32> = Vec::new();
    for &s in &index.preorder {
        for &i in &tensor_events[s as usize] {
            let t = doc.tensors[i as usize].tensor_id;
            slots.see(t);
            let slot = slots.of(t);
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
            slots.see(from_tensor);
            slots.see(to_tensor);
        }
    }
    tensor_fact.resize(slots.tensors.len(), NONE);
    // Output op of each tensor (first in canonical order) for tensors without a fact.
    let mut tensor_output = vec![NONE; slots.tensors.len()];
    for &s in &index.preorder {
        for &o in &index.ops_by_span[s as usize] {
            if let Some(out) = doc.ops[o as usize].output {
                let slot = slots.of(out);
                if tensor_output[slot] == NONE {
                    tensor_output[slot] = o;
                }
            }
        }
    }
    (tensor_fact, tensor_output)
}

/// One node per tensor slot, described by its first tensor event, else by the op that outputs
/// it; returns the node index of slot 0.
fn push_tensor_nodes(
    doc: &TraceDocument,
    index: &TraceIndex,
    texts: &mut SharedStrings<'_>,
    nodes: &mut Vec<GraphNode>,
    slots: &mut TensorSlots,
) -> u32 {
    let (tensor_fact, tensor_output) = tensor_sources(doc, index, slots);
    // One exact growth for the tensor nodes (a doubling would leave up to half of the largest
    // vector of the analysis unused: 347 MB of 780 MB at 10^6 events, heaptrack).
    nodes.reserve_exact(slots.tensors.len());
    let tensor_base = nodes.len() as u32;
    for (slot, &t) in slots.tensors.iter().enumerate() {
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
    tensor_base
}

/// Op ids (`{span}/op/{n}`) are unique among themselves, tensor ids too; a generated id can
/// only collide with a span id containing `/op/` or starting with `tensor/`, or an op id of
/// such a span with a tensor id. Checked only when such span ids exist.
fn check_unique_ids(index: &TraceIndex, nodes: &[GraphNode]) -> Result<(), GraphRefusal> {
    let suspicious: HashSet<&str> = nodes[..index.preorder.len()]
        .iter()
        .map(|n| &*n.id)
        .filter(|id| id.contains("/op/") || id.starts_with("tensor/"))
        .collect();
    if !suspicious.is_empty() {
        let mut seen: HashSet<&str> = HashSet::with_capacity(nodes.len());
        for node in nodes {
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
    Ok(())
}

/// The node index of each span, op and tensor.
struct NodesOf<'a> {
    span: &'a [u32],
    op: &'a [u32],
    tensor_base: u32,
    slots: &'a TensorSlots,
}

impl NodesOf<'_> {
    fn tensor(&self, t: Sym) -> u32 {
        self.tensor_base + self.slots.slot[t.index()]
    }
}

/// An edge's label: an op name symbol or a fixed word.
#[derive(Clone, Copy)]
enum Label {
    None,
    Op(Sym),
    Input,
    Output,
}

/// An edge over node indices.
struct E {
    from: u32,
    to: u32,
    kind: EdgeKind,
    inferred: bool,
    label: Label,
    duration_ns: Option<u64>,
}

/// The explicit edges of the trace (calls between known spans, data between tensors).
fn explicit_edges(doc: &TraceDocument, of: &NodesOf<'_>, edges: &mut Vec<E>) {
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
                if of.span[f] == NONE || of.span[t] == NONE {
                    continue;
                }
                edges.push(E {
                    from: of.span[f],
                    to: of.span[t],
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
                from: of.tensor(from_tensor),
                to: of.tensor(to_tensor),
                kind: EdgeKind::Data,
                inferred: false,
                label: Label::None,
                duration_ns: None,
            }),
        }
    }
}

/// The inferred edges: span → child span, span → op, input tensor → op, op → output tensor.
fn inferred_edges(
    doc: &TraceDocument,
    index: &TraceIndex,
    timing: &HostTiming,
    of: &NodesOf<'_>,
    edges: &mut Vec<E>,
) {
    for &s in &index.preorder {
        let s = s as usize;
        for &c in &index.children[s] {
            edges.push(E {
                from: of.span[s],
                to: of.span[c as usize],
                kind: EdgeKind::Call,
                inferred: true,
                label: Label::None,
                duration_ns: timing.total_ns[c as usize],
            });
        }
        for &o in &index.ops_by_span[s] {
            let op = &doc.ops[o as usize];
            let on = of.op[o as usize];
            edges.push(E {
                from: of.span[s],
                to: on,
                kind: EdgeKind::Call,
                inferred: true,
                label: Label::Op(op.op_name),
                duration_ns: Some(op.duration_ns),
            });
            for &input in op.inputs.iter() {
                edges.push(E {
                    from: of.tensor(input),
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
                    to: of.tensor(out),
                    kind: EdgeKind::Data,
                    inferred: true,
                    label: Label::Output,
                    duration_ns: None,
                });
            }
        }
    }
}

/// Every edge, explicit and inferred, deduplicated (an explicit edge wins), with node ids.
fn graph_edges(
    doc: &TraceDocument,
    index: &TraceIndex,
    timing: &HostTiming,
    of: &NodesOf<'_>,
    nodes: &[GraphNode],
    texts: &mut SharedStrings<'_>,
) -> Vec<GraphEdge> {
    // Room for every edge pushed below (before the dedup): no growth.
    let op_edges: usize = doc
        .ops
        .iter()
        .map(|o| 1 + o.inputs.len() + usize::from(o.output.is_some()))
        .sum();
    let child_edges: usize = index.children.iter().map(Vec::len).sum();
    let mut edges: Vec<E> = Vec::with_capacity(doc.edges.len() + child_edges + op_edges);
    explicit_edges(doc, of, &mut edges);
    inferred_edges(doc, index, timing, of, &mut edges);
    // Explicit edges (inferred = false) sort before inferred ones and win the dedup.
    edges.sort_unstable_by_key(|e| (e.from, e.to, e.kind, e.inferred));
    edges.dedup_by_key(|e| (e.from, e.to, e.kind));
    let (input, output): (Text, Text) = (Arc::from("input"), Arc::from("output"));
    edges
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
        .collect()
}

/// The rankings of the spans in the measured subtree and of those overlapping it.
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
