//! `candle-graph summary TRACE`: identity, health, coverage, wall time, memory peak and what held
//! it, slowest spans, per-module backward spans (when the trace has them), gradient verdicts and
//! findings.

mod answer;
mod answer_text;
mod record;
mod records;
mod text;

use crate::backward::{self};
use crate::peak::Peaks;
pub use answer::{
    not_seen, AnswerFinding, AnswerRecord, HeldCategory, ANSWER_FINDINGS, ANSWER_GROUPS,
};
pub(crate) use answer_text::held_by_text;
pub use answer_text::{overflow_line, render_answer, render_operations};
pub use record::SummaryReport;
pub use records::{
    findings, CoverageLine, FindingRecord, GradientRecord, HealthRecord, ImpactRecord, RunRecord,
    SlowSpan, SlowestOperations, HELD_ROWS, SLOWEST_OPS, SLOWEST_ROWS,
};
pub use text::{
    finding_texts, health_line, issue_codes_suffix, render, render_findings, render_steps,
    SHOWN_CODES,
};
use trace_graph::Analysis;
use trace_schema::TraceDocument;

/// Builds the report.
pub fn build(doc: &TraceDocument, analysis: &Analysis) -> SummaryReport {
    let spans = &analysis.spans;
    let lower_bound = analysis.health.memory_lower_bound;
    let peaks = analysis.memory.logical.as_ref().map(|l| {
        let view = crate::peak::HeldView {
            sites: analysis.sites.as_ref(),
            ..Default::default()
        };
        Peaks::of(doc, spans, l, None, HELD_ROWS, lower_bound, view)
    });
    let (outer, slowest, refused, incomplete) = match (&analysis.graph, &analysis.graph_refusal) {
        (Some(g), _) => (
            g.outer_wall_time_ns,
            g.rankings
                .measured
                .slowest_by_self_time
                .iter()
                .take(SLOWEST_ROWS)
                .map(|c| SlowSpan {
                    id: c.id.to_string(),
                    path: spans
                        .indexed_path_of_id(doc, &c.id)
                        .unwrap_or_else(|| c.name.to_string()),
                    host_self_time_ns: c.host_self_time_ns,
                    host_total_time_ns: c.host_total_time_ns,
                })
                .collect(),
            Vec::new(),
            g.incomplete_capture,
        ),
        (None, Some(r)) => (None, Vec::new(), r.reasons.clone(), false),
        (None, None) => (None, Vec::new(), Vec::new(), false),
    };
    let g = &analysis.gradients;
    let gradients = GradientRecord {
        parameters: g.parameter_count(),
        present: g.counts.present,
        missing: g.counts.missing,
        zero: g.counts.zero,
        non_finite: g.counts.non_finite,
        not_reported: g.counts.not_reported,
        without_gradient: g.without_gradient.clone(),
        zero_keys: g.zero.clone(),
        non_finite_keys: g.non_finite.clone(),
        non_parameter_count: g.non_parameter.len(),
        non_parameter_bytes: g.non_parameter_bytes,
        non_parameter_bytes_overflowed: g.non_parameter_bytes_overflowed,
        coverage: analysis
            .capabilities
            .level(trace_graph::CapabilityKind::Gradients),
    };
    let findings = findings(analysis);
    SummaryReport {
        run: RunRecord::of(doc),
        health: HealthRecord::of(&analysis.health),
        answer: AnswerRecord::of(doc, analysis, &findings),
        coverage: CoverageLine::of(doc, analysis),
        not_seen: not_seen(doc, analysis),
        time_origin_ns: analysis.time_origin_ns,
        outer_wall_time_ns: outer,
        timing_from_incomplete_capture: incomplete,
        peaks,
        memory_overflow: analysis.memory.logical_overflow.clone(),
        slowest_spans: slowest,
        timing_refused: refused,
        slowest_operations: SlowestOperations::of(analysis),
        backward_modules: backward::build(doc, analysis, SLOWEST_ROWS),
        gradients,
        steps: analysis.steps.clone(),
        inference: crate::inference::InferenceFigures::of_inference(doc).map(|f| f.record()),
        findings,
    }
}
