//! # trace-graph
//!
//! Structural health, the capability matrix, the execution graph and typed findings for
//! candle-graph traces. Consumers call one function, [`analyze`], which runs every analysis
//! once and passes results on: the memory profile (`trace_memory::analyze_memory`), the
//! hierarchy index and health first, then the capability matrix, gradients, host timing,
//! per-node memory metrics (`trace_memory::node_memory_metrics`, from the same profile), the
//! graph and the findings.
//!
//! Graph-dependent results (the graph, the largest self time) are refused for failed,
//! truncated or structurally invalid traces, with every reason listed; health, capabilities,
//! gradients and memory-based findings still work for them.
//!
//! ```
//! use trace_schema::load_str;
//! let text = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"infer","timestamp":"2026-01-01T00:00:00.000Z"}
//! {"kind":"span_start","id":"s1","name":"e","start_ns":0,"span_kind":"function","measured":true}
//! {"kind":"op","span_id":"s1","op_name":"matmul","dtype":"f32","device":"cpu","duration_ns":4,"timestamp_ns":2}
//! {"kind":"span_end","id":"s1","duration_ns":10}
//! {"kind":"terminal","outcome":"complete","timestamp_ns":10}
//! "#;
//! let analysis = trace_graph::analyze(&load_str(text).unwrap());
//! assert!(analysis.health.structurally_valid);
//! let graph = analysis.graph.as_ref().unwrap();
//! assert_eq!(graph.nodes[0].host_self_time_ns, Some(6));
//! assert_eq!(&*graph.nodes[1].id, "s1/op/0");
//! ```
//!
//! All outputs implement `serde::Serialize` with owned strings.

#![deny(missing_docs)]

mod advice;
mod build;
pub mod capability;
pub mod cut;
pub mod earlier;
pub mod figures;
mod finding;
pub mod findings;
pub mod gradients;
pub mod graph;
pub mod health;
mod index;
mod intervals;
pub mod operations;
pub mod optimizer;
pub mod rank;
mod retention;
mod ridden;
pub mod steps;
mod timing;
pub mod what_if;

use serde::Serialize;
use trace_memory::{node_memory_metrics, MemoryProfile, SpanIndex};
use trace_schema::TraceDocument;

pub use trace_memory::Detail;

pub use capability::{
    assess_capabilities, observed_coverage, Capability, CapabilityKind, CapabilityLevel,
    CapabilityMatrix,
};
pub use figures::StepFigures;
pub use findings::{batch_split, Evidence, Finding, FindingCode, Holder, Holding};
pub use gradients::{
    summarize_gradients, GradientCounts, GradientSummary, NonParameterGradient, ParameterGradient,
};
pub use graph::{
    EdgeKind, ExecutionGraph, GraphEdge, GraphNode, GraphRefusal, HostScope, NodeKind, NodeMemory,
    Rankings, ScopeRankings, SpanBytes, SpanCost,
};
pub use health::{
    EvidenceCoverage, HealthCode, HealthIssue, IssueLocation, Severity, TraceHealth,
    MAX_ISSUES_PER_CODE,
};
pub use rank::{impact, ranked, Impact};
pub use steps::{StepRow, Steps};
pub use what_if::{WhatIf, DROP_LOSS_SNIPPET};

/// Everything the analyzers say about one trace.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// Structural health.
    pub health: TraceHealth,
    /// Capability matrix.
    pub capabilities: CapabilityMatrix,
    /// Gradient summary.
    pub gradients: GradientSummary,
    /// Logical and physical memory profiles (from `trace_memory`); computed for every trace,
    /// failed and truncated ones included (their figures are lower bounds).
    pub memory: MemoryProfile,
    /// The execution graph; `None` when refused (see `graph_refusal`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<ExecutionGraph>,
    /// Why the graph was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_refusal: Option<GraphRefusal>,
    /// The per-step table of a capture of several steps (empty for a single-step capture).
    #[serde(skip_serializing_if = "Steps::is_empty")]
    pub steps: Steps,
    /// Findings, in a fixed order: the capture (no warm-up), time, memory, gradients, coverage
    /// gaps.
    pub findings: Vec<Finding>,
    /// The span hierarchy every result above was derived with (paths, effective passes,
    /// parents; not serialized): displays ask it instead of walking the document again.
    #[serde(skip)]
    pub spans: SpanIndex,
    /// The time origin of displays, ns: the start of the measured region, else of the first
    /// span or memory event, else 0. Times shown to a person are relative to it.
    pub time_origin_ns: u64,
    /// How much per-event evidence the analysis kept (see [`analyze_with`]; not serialized).
    #[serde(skip)]
    pub detail: Detail,
    /// The sampled operations ([`trace_ops::OpProfile`]), or why there are none (not
    /// serialized: `candle-graph ops` shows it).
    #[serde(skip)]
    pub operations: Result<trace_ops::OpProfile, trace_ops::Unavailable>,
    /// The allocation sites read as operations ([`trace_ops::SiteProfile`]: each storage's
    /// op, module and pass, exact call counts, alloc-clocked time), when the trace has sites
    /// (trace/13); not serialized. Their calls and times are attached to `operations`' rows.
    #[serde(skip)]
    pub sites: Option<trace_ops::SiteProfile>,
}

/// The time origin of displays: the measured region's start, else the first span's or memory
/// event's time, else 0.
pub fn time_origin(doc: &TraceDocument, spans: &SpanIndex) -> u64 {
    spans
        .measured_region(doc)
        .map(|(start, _)| start)
        .or_else(|| doc.spans.iter().map(|s| s.start_ns).min())
        .or_else(|| doc.first_memory_ns())
        .unwrap_or(0)
}

/// Runs every analysis once on `doc`, in full detail. O(n log n) in the number of events.
pub fn analyze(doc: &TraceDocument) -> Analysis {
    analyze_with(doc, Detail::Full)
}

/// Runs every analysis once on `doc`, keeping `detail`:
/// - [`Detail::Full`]: everything, as [`analyze`];
/// - [`Detail::Summary`]: the same health, capabilities, gradients, findings, memory figures
///   and time rankings, holding only the live set, the span tree and the answer — the memory
///   profile keeps the storages its figures name and its timeline in a temporary log (see
///   [`trace_memory::Detail`]); the graph has no nodes or edges and its rankings the first
///   [`trace_memory::SUMMARY_TOP`] spans (no memory rankings). With a document whose
///   memory events are spilled ([`trace_schema::LoadOptions::spill_memory`]) resident memory
///   does not grow with the memory events. What `summary`, `memory` and `check` show is equal
///   in both details.
pub fn analyze_with(doc: &TraceDocument, detail: Detail) -> Analysis {
    analyze_with_graph(doc, detail, detail)
}

/// As [`analyze_with`] with the memory in `detail` but the execution graph in `graph_detail`:
/// [`Detail::Summary`] builds no graph nodes or edges (no per-tensor node, no per-node memory
/// metrics) and keeps the first [`trace_memory::SUMMARY_TOP`] spans of each ranking — what a
/// consumer needs that writes every storage and memory event but no graph (the Parquet
/// export). Findings are the same in both graph details (they read the span rankings).
pub fn analyze_with_graph(doc: &TraceDocument, detail: Detail, graph_detail: Detail) -> Analysis {
    let spans = SpanIndex::build(doc);
    let ridden::Ridden {
        memory,
        ops,
        gradients,
        memory_spans,
        step_memory,
        sites,
        temporary_marks,
        earlier,
    } = ridden::replay(doc, &spans, detail);
    let logical = memory.logical.as_ref();
    let index = index::TraceIndex::new(spans, ops);
    let time_origin_ns = time_origin(doc, &index.spans);
    let measured = index.measured;
    let (health, timing) = rayon::join(
        || {
            health::analyze_health(
                doc,
                &index,
                &memory_spans,
                &memory,
                &gradients,
                time_origin_ns,
            )
        },
        || timing::HostTiming::compute(doc, &index, measured),
    );
    let mut capabilities = assess_capabilities(doc, &health);
    let mut operations = trace_ops::OpProfile::from_document_with(doc, &index.spans);
    match &operations {
        Ok(p) => capability::describe_sampled_operations(&mut capabilities, p),
        Err(u) => capability::no_sampled_estimate(&mut capabilities, u),
    }
    if let (Ok(p), Some(s)) = (&mut operations, &sites) {
        p.attach_sites(s);
    }

    let (graph, graph_refusal) =
        execution_graph(doc, &index, &timing, &health, logical, graph_detail);

    let mut findings: Vec<findings::Finding> = advice::warm_up_finding(doc).into_iter().collect();
    if let Some(g) = &graph {
        findings.extend(findings::largest_self_time(
            doc,
            &index.spans,
            g,
            &capabilities,
        ));
    }
    operations::operation_findings(operations.as_ref().ok(), &capabilities, &mut findings);
    let mut what_ifs = what_if::WhatIfs::default();
    // The memory findings (the retention pass) and the earlier-steps one (a pass) on one core,
    // the optimizer's (two passes) on the other; their findings kept in this order.
    let mut optimizer_what_ifs = what_if::WhatIfs::default();
    let (mut optimizer_findings, mut earlier_findings) = (Vec::new(), Vec::new());
    rayon::join(
        || {
            findings::memory_findings(
                doc,
                &index,
                logical,
                &health,
                &capabilities,
                time_origin_ns,
                &mut what_ifs,
                &mut findings,
            );
            earlier::finding(earlier, &capabilities, &mut earlier_findings);
        },
        || {
            optimizer::finding(
                doc,
                &index.spans,
                temporary_marks,
                sites.as_ref(),
                &capabilities,
                health.memory_lower_bound,
                &mut optimizer_what_ifs,
                &mut optimizer_findings,
            )
        },
    );
    what_ifs.append(optimizer_what_ifs, findings.len());
    findings.append(&mut optimizer_findings);
    findings.append(&mut earlier_findings);
    let steps = steps::steps_with(doc, &index.spans, step_memory);
    steps::finding(doc, &steps, &capabilities, &mut findings);
    let gradient_context = findings::GradientContext {
        cut: cut::gradient_cut(doc, &index.spans, sites.as_ref(), &gradients),
        unused_state: cut::unused_state(doc, &gradients),
    };
    findings::gradient_findings(&gradients, &gradient_context, &capabilities, &mut findings);
    findings::coverage_gaps(&capabilities, &mut findings);
    // every what-if and their baseline in one replay, now that every finding asked
    for (i, w, in_summary) in what_ifs.replay(doc) {
        if let Some(f) = findings.get_mut(i) {
            if in_summary {
                f.summary
                    .push_str(&format!(". What-if, replayed: {}", w.sentence()));
            }
            f.evidence.what_if = Some(w);
        }
    }
    Analysis {
        health,
        capabilities,
        gradients,
        memory,
        graph,
        graph_refusal,
        steps,
        findings,
        spans: index.spans,
        time_origin_ns,
        detail,
        operations,
        sites,
    }
}

/// The execution graph, or why timing refuses one (see [`build::build_graph`]).
fn execution_graph(
    doc: &TraceDocument,
    index: &index::TraceIndex,
    timing: &timing::HostTiming,
    health: &health::TraceHealth,
    logical: Option<&trace_memory::LogicalMemoryProfile>,
    graph_detail: Detail,
) -> (Option<ExecutionGraph>, Option<GraphRefusal>) {
    let measured = index.measured;
    let reasons = graph::refusal_reasons(doc, health);
    if reasons.is_empty() {
        let metrics = match graph_detail {
            Detail::Full => Some(node_memory_metrics(doc, logical)),
            Detail::Summary => None,
        };
        let incomplete = health.truncated;
        let built = build::build_graph(
            doc,
            index,
            timing,
            measured,
            metrics.as_ref(),
            incomplete,
            graph_detail,
        );
        match built {
            Ok(g) => (Some(g), None),
            Err(r) => (None, Some(r)),
        }
    } else {
        (None, Some(GraphRefusal { reasons }))
    }
}
