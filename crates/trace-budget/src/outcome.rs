//! What checking a budget or a gate gives: the outcome, what was checked and the figure,
//! and the helpers the checks build them with.

use std::fmt::Write as _;

use serde::Serialize;
use trace_format::bytes;

use crate::budget::Budget;
use crate::figures::Figures;
use crate::gate::Gate;

/// What checking one budget gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "snake_case")]
pub enum Outcome {
    /// Within the limit.
    Pass,
    /// Over it (the message says by how much and why).
    Fail,
    /// The trace cannot tell: the reason.
    Unknown(String),
}

/// What was checked: a budget on one trace, or a gate on a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Subject {
    /// A budget.
    Budget(Budget),
    /// A diff gate.
    Gate(Gate),
}

impl Subject {
    /// One line (`peak ≤ 6.00 MiB`, `peak > +5.0%`).
    pub fn describe(&self) -> String {
        match self {
            Subject::Budget(b) => b.describe(),
            Subject::Gate(g) => g.describe(),
        }
    }
}

/// One checked budget or gate: what was checked, the figure measured (text, `-` when
/// unknown), the outcome and, for a failure, the message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checked {
    /// The budget or gate.
    pub subject: Subject,
    /// What was measured, as text (`5.72 MiB`, `52.0% (45.1–58.9%)`); `-` when unknown.
    pub figure: String,
    /// The outcome.
    pub outcome: Outcome,
    /// For a failure: the figure against its limit, then what held the peak, what grew, or
    /// the op's interval (several lines); for an unknown: the reason; empty for a pass.
    pub message: String,
}

/// `figure` against `limit` in bytes: `5.72 MiB > budget 5.00 MiB (+14.4%)`.
pub(crate) fn over_bytes(figure: u64, limit: u64) -> String {
    let by = if limit > 0 {
        format!(
            " ({})",
            trace_format::percent((figure as f64 - limit as f64) / limit as f64)
        )
    } else {
        String::new()
    };
    format!("{} > budget {}{by}", bytes(figure), bytes(limit))
}

pub(crate) fn unknown(budget: &Budget, reason: String) -> Checked {
    Checked {
        subject: Subject::Budget(budget.clone()),
        figure: trace_format::UNKNOWN.to_string(),
        message: reason.clone(),
        outcome: Outcome::Unknown(reason),
    }
}

pub(crate) fn pass(budget: &Budget, figure: String) -> Checked {
    Checked {
        subject: Subject::Budget(budget.clone()),
        figure,
        outcome: Outcome::Pass,
        message: String::new(),
    }
}

pub(crate) fn fail(budget: &Budget, figure: String, message: String) -> Checked {
    Checked {
        subject: Subject::Budget(budget.clone()),
        figure,
        outcome: Outcome::Fail,
        message,
    }
}

/// Appends the held rows of the peak (`op · module · pass`, merged) to `out`.
pub(crate) fn held_lines(out: &mut String, figures: &Figures) {
    let Some(peak) = &figures.peak else { return };
    if peak.held.is_empty() {
        return;
    }
    out.push_str("\n  held at the peak (op · module · pass, merged rows):");
    for row in &peak.held {
        let what = row
            .operation()
            .or_else(|| row.span_path.clone())
            .or_else(|| row.label.clone())
            .unwrap_or_else(|| row.category.as_str().to_string());
        let _ = write!(
            out,
            "\n    {:<28} {} ({})",
            row.bytes_cell(),
            trace_format::cell(&what, 72),
            row.category.as_str()
        );
    }
    if peak.held_more_count > 0 {
        let _ = write!(
            out,
            "\n    … {} more storages ({})",
            peak.held_more_count,
            trace_format::opt_bytes(peak.held_more_bytes)
        );
    }
}
