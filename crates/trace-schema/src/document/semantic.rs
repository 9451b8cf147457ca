//! The semantic rules the loader checks without failing: their codes, the issue record, and
//! the rule functions the builder calls.

use serde::Serialize;

use crate::event::{GradientEvent, TerminalEvent, TerminalOutcome};
use crate::meta::RunMeta;

/// Codes of the semantic rules the loader keeps for the health check (snake_case on output).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SemanticCode {
    /// A `span_start` id repeats (the first one is kept).
    DuplicateSpanId,
    /// A `span_end` names no started span.
    UnknownSpanEnd,
    /// A `span_end` closes a span twice.
    RepeatedSpanEnd,
    /// A `complete` terminal carries a reason.
    CompleteWithFailureReason,
    /// A `failed` terminal has no (or an empty) reason.
    FailedWithoutReason,
    /// The terminal timestamp is earlier than the latest host evidence.
    TerminalPrecedesEvidence,
    /// A `tensor_stats` event breaks its rules.
    InvalidTensorStats,
    /// A gradient's norm does not fit its state.
    GradientStateNormInconsistent,
    /// The meta fails validation.
    InvalidMeta,
    /// The capture contract fails validation.
    InvalidCaptureContract,
    /// A `frame`, `stack`, `sample` or `sampler` event breaks its id rules (repeated id,
    /// reference to an id not defined before it, a second sampler): the record is dropped.
    InvalidSamples,
    /// A `site` or `alloc_sites` event, or a memory event's `site`, breaks its rules (a site id
    /// no `site` defines, a site naming a stack not defined before it, a repeated site id, a
    /// second account, a site on a free event, an account that breaks its own rules or
    /// miscounts the sites): the record (or the event's site) is dropped.
    InvalidSites,
    /// A step span's `step_index` is 0 or past `u32::MAX` (it names no step, so the span is not
    /// counted as one), repeats an earlier step span's, or is below the previous one's
    /// (trace/13).
    InvalidStepIndex,
}

crate::wire_names!(SemanticCode);

/// A semantic rule broken by the trace; the load still succeeds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SemanticIssue {
    /// Which rule.
    pub code: SemanticCode,
    /// 1-based line of the offending event (0 when about the whole document).
    pub line: u64,
    /// Human-readable explanation.
    pub message: String,
}

/// How a trace was cut short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Truncation {
    /// A final line without `\n` that did not parse was dropped: its 1-based line number.
    pub partial_line: Option<u64>,
    /// Bytes of that partial line.
    pub dropped_bytes: u64,
    /// The version has a terminal event but none was found.
    pub terminal_missing: bool,
}

/// The terminal's outcome/reason rule: a `complete` terminal carries no reason, a `failed` one
/// a non-empty reason.
pub(crate) fn terminal_reason_issue(e: &TerminalEvent) -> Option<(SemanticCode, String)> {
    match (e.outcome, e.reason.as_deref()) {
        (TerminalOutcome::Complete, Some(reason)) => Some((
            SemanticCode::CompleteWithFailureReason,
            format!("complete terminal carries a failure reason: {reason}"),
        )),
        (TerminalOutcome::Failed, None) => Some((
            SemanticCode::FailedWithoutReason,
            "failed terminal has no reason".to_string(),
        )),
        (TerminalOutcome::Failed, Some(r)) if r.trim().is_empty() => Some((
            SemanticCode::FailedWithoutReason,
            "failed terminal has an empty reason".to_string(),
        )),
        _ => None,
    }
}

/// The meta's validation problems: `(code, message)` for the run meta, then the contract.
pub(crate) fn meta_issues(meta: &RunMeta) -> Vec<(SemanticCode, String)> {
    let contract_problems = meta
        .capture_contract
        .as_ref()
        .map(|c| c.validate())
        .unwrap_or_default();
    let meta_only = RunMeta {
        capture_contract: None,
        ..meta.clone()
    };
    meta_only
        .validate()
        .into_iter()
        .map(|p| (SemanticCode::InvalidMeta, p))
        .chain(
            contract_problems
                .into_iter()
                .map(|p| (SemanticCode::InvalidCaptureContract, p)),
        )
        .collect()
}

/// The gradient state/norm rule, with its message when broken.
pub(crate) fn gradient_issue(e: &GradientEvent) -> Option<(SemanticCode, String)> {
    (!e.state_norm_consistent()).then(|| {
        (
            SemanticCode::GradientStateNormInconsistent,
            format!(
                "gradient {}/{}: state {:?} does not fit norm {:?}",
                e.root, e.key, e.state, e.norm
            ),
        )
    })
}
