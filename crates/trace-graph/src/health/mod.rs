//! Structural health: every check of the original tool (§2.1 of the reference) plus the
//! checks added by this project, run once per document.
//!
//! A trace is `structurally_valid` when no issue has severity [`Severity::Error`];
//! `capture_complete` when the terminal says `complete`, the trace was not cut short and no
//! events were dropped. Memory figures of an incomplete capture are lower bounds.

mod coverage;
mod gradients;
mod hierarchy;
mod issues;
mod memory;
mod references;

use std::collections::BTreeMap;

use serde::Serialize;
use trace_schema::{SemanticCode, TraceDocument};

use crate::index::TraceIndex;

pub use coverage::EvidenceCoverage;
use issues::{CaptureState, Issues};
pub use issues::{HealthCode, HealthIssue, IssueLocation, Severity, MAX_ISSUES_PER_CODE};
pub(crate) use memory::{lifetime_label, retained};
pub(crate) use references::MemorySpans;

/// Result of `analyze_health`.
#[derive(Debug, Clone, Serialize)]
pub struct TraceHealth {
    /// No issue has severity error.
    pub structurally_valid: bool,
    /// Terminal `complete`, not truncated, no dropped events.
    pub capture_complete: bool,
    /// The terminal outcome is `failed`.
    pub capture_failed: bool,
    /// The trace was cut short (partial last line or missing terminal).
    pub truncated: bool,
    /// Memory figures are lower bounds (truncated, failed or events dropped).
    pub memory_lower_bound: bool,
    /// Number of error issues (including those not listed).
    pub error_count: u64,
    /// Number of warning issues (including those not listed).
    pub warning_count: u64,
    /// Issues, errors first, at most [`MAX_ISSUES_PER_CODE`] per code.
    pub issues: Vec<HealthIssue>,
    /// Issues not listed because their code hit the cap, per code.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub omitted_issues: BTreeMap<HealthCode, u64>,
    /// What the trace contains.
    pub coverage: EvidenceCoverage,
}

impl TraceHealth {
    /// Messages of all warnings (the evidence gaps).
    pub fn gaps(&self) -> impl Iterator<Item = &HealthIssue> {
        self.issues
            .iter()
            .filter(|i| i.severity == Severity::Warning)
    }

    /// Error issues.
    pub fn errors(&self) -> impl Iterator<Item = &HealthIssue> {
        self.issues.iter().filter(|i| i.severity == Severity::Error)
    }

    /// True when some issue (listed or omitted) has this code.
    pub fn has(&self, code: HealthCode) -> bool {
        self.omitted_issues.contains_key(&code) || self.issues.iter().any(|i| i.code == code)
    }
}

/// Runs every check once; memory checks read the logical memory profile (computed once by the
/// caller with `trace_memory::analyze_memory`).
pub(crate) fn analyze_health(
    doc: &TraceDocument,
    index: &TraceIndex,
    memory_spans: &MemorySpans,
    memory_profile: &trace_memory::MemoryProfile,
    gradient_summary: &crate::gradients::GradientSummary,
    origin_ns: u64,
) -> TraceHealth {
    let logical = memory_profile.logical.as_ref();
    let peak_categorized_share = logical.and_then(memory::peak_categorized_share);
    let state = CaptureState::of(doc);
    let mut issues = Issues::default();
    // First: when nothing was captured, every other issue follows from it.
    let not_started = capture_not_started(doc, state, &mut issues);
    semantic(doc, &mut issues);
    capture(doc, state, not_started, &mut issues);
    hierarchy::check(doc, index, state, origin_ns, &mut issues);
    references::check(doc, index, memory_spans, origin_ns, &mut issues);
    references::check_edges(doc, index, &mut issues);
    memory::report(memory_profile, gradient_summary, origin_ns, &mut issues);
    gradients::check(doc, state, &mut issues);
    let coverage = coverage::check(doc, peak_categorized_share, &mut issues);

    let Issues {
        mut list,
        per_code,
        errors,
        warnings,
    } = issues;
    list.sort_by_key(|i| i.severity);
    let omitted_issues = per_code
        .into_iter()
        .filter(|&(_, n)| n as usize > MAX_ISSUES_PER_CODE)
        .map(|(c, n)| (c, n - MAX_ISSUES_PER_CODE as u64))
        .collect();
    TraceHealth {
        structurally_valid: errors == 0,
        capture_complete: state.complete(),
        capture_failed: state.failed,
        truncated: state.truncated,
        memory_lower_bound: !state.complete(),
        error_count: errors,
        warning_count: warnings,
        issues: list,
        omitted_issues,
        coverage,
    }
}

/// Maps the loader's semantic issues (never recomputed here).
fn semantic(doc: &TraceDocument, issues: &mut Issues) {
    let contract = doc.meta.capture_contract.as_ref();
    let coverage_mismatch = contract.is_some_and(|c| {
        c.gradient_contract.is_none() == (c.gradients == trace_schema::CoverageLevel::Complete)
    });
    let mismatch_code = match contract.map(|c| c.gradient_contract.is_some()) {
        Some(true) => HealthCode::GradientContractWithoutCompleteCoverage,
        _ => HealthCode::GradientContractMissing,
    };
    let mut first_contract_issue = true;
    for s in &doc.semantic_issues {
        let code = match s.code {
            SemanticCode::DuplicateSpanId => HealthCode::DuplicateSpanId,
            SemanticCode::UnknownSpanEnd => HealthCode::UnknownSpanEnd,
            SemanticCode::RepeatedSpanEnd => HealthCode::RepeatedSpanEnd,
            SemanticCode::CompleteWithFailureReason => HealthCode::CompleteWithFailureReason,
            SemanticCode::FailedWithoutReason => HealthCode::FailedWithoutReason,
            SemanticCode::TerminalPrecedesEvidence => HealthCode::TerminalPrecedesEvidence,
            SemanticCode::InvalidTensorStats => HealthCode::InvalidTensorStats,
            SemanticCode::InvalidSamples => {
                let location = IssueLocation::line(s.line);
                issues.warning(HealthCode::InvalidSamples, s.message.clone(), location);
                continue;
            }
            SemanticCode::InvalidSites => {
                let location = IssueLocation::line(s.line);
                issues.warning(HealthCode::InvalidSites, s.message.clone(), location);
                continue;
            }
            SemanticCode::InvalidStepIndex => {
                let location = IssueLocation::line(s.line);
                issues.warning(HealthCode::InvalidStepIndex, s.message.clone(), location);
                continue;
            }
            SemanticCode::GradientStateNormInconsistent => {
                HealthCode::GradientStateNormInconsistent
            }
            SemanticCode::InvalidMeta => HealthCode::InvalidMeta,
            // `CaptureContract::validate` reports the coverage/contract mismatch first, then
            // the gradient contract's own problems.
            SemanticCode::InvalidCaptureContract => {
                let first = std::mem::replace(&mut first_contract_issue, false);
                if first && coverage_mismatch {
                    mismatch_code
                } else {
                    HealthCode::GradientContractInvalid
                }
            }
        };
        issues.error(code, s.message.clone(), IssueLocation::line(s.line));
    }
}

/// The reason of a failed terminal.
fn failure_reason(doc: &TraceDocument) -> &str {
    doc.terminal
        .as_ref()
        .and_then(|t| t.reason.as_deref())
        .unwrap_or("no reason given")
}

/// `capture_not_started`: a `failed` terminal and no span at all — the probe writes that when
/// `finish()` comes before the capture step (the meta, then the terminal with the reason).
/// Returns whether it was reported.
fn capture_not_started(doc: &TraceDocument, state: CaptureState, issues: &mut Issues) -> bool {
    if !state.failed || !doc.spans.is_empty() {
        return false;
    }
    let step = match doc.meta.capture_step {
        Some(n) => format!("capture step {n}"),
        None => "the capture step".to_string(),
    };
    let advice = match doc.meta.capture_step {
        Some(n) if n > 1 => {
            format!("if the run ended before it, run at least {n} steps or capture an earlier step")
        }
        _ => "if the run ended before it, run the step the profiler captures".to_string(),
    };
    issues.error(
        HealthCode::CaptureNotStarted,
        format!(
            "the capture never started: no span was recorded and the terminal failed ({}); nothing of {step} is in the trace: {advice}",
            failure_reason(doc)
        ),
        IssueLocation::document(),
    );
    true
}

fn capture(doc: &TraceDocument, state: CaptureState, not_started: bool, issues: &mut Issues) {
    if state.failed && !not_started {
        let reason = failure_reason(doc);
        issues.warning(
            HealthCode::CaptureFailed,
            format!("the captured step failed: {reason}; results are diagnostic only"),
            IssueLocation::document(),
        );
    }
    if let Some(t) = &doc.truncation {
        let mut what = Vec::new();
        if let Some(line) = t.partial_line {
            what.push(format!(
                "partial last line {line} ({} bytes) dropped",
                t.dropped_bytes
            ));
        }
        if t.terminal_missing {
            what.push("no terminal event".to_string());
        }
        issues.warning(
            HealthCode::TraceTruncated,
            format!(
                "trace was cut short ({}): capture incomplete, memory figures are lower bounds",
                what.join(", ")
            ),
            IssueLocation::line(t.partial_line.unwrap_or(0)),
        );
    }
    for (field, why) in doc.terminal.iter().flat_map(|t| &t.coverage_lost) {
        issues.warning(
            HealthCode::CoverageLost,
            format!("{} is at most partial: {why}", field.as_str()),
            IssueLocation::document(),
        );
    }
    if let Some(n) = doc.dropped_events.filter(|&n| n > 0) {
        issues.warning(
            HealthCode::DroppedEvents,
            format!("{n} events were dropped by the probe: capture incomplete, memory figures are lower bounds"),
            IssueLocation::document(),
        );
    }
}

trace_schema::wire_names!(Severity, HealthCode);
