//! `candle-graph diff … --html FILE`: the comparison as one offline HTML page, composed from
//! trace-diff's [`TraceDiff`] with trace-report's page model and rendered by its renderer (the
//! same strict Content-Security-Policy, embedded script and style, escaping, no network).
//!
//! Sections: the headline deltas (timing compared or refused and why, wall time, the peak of
//! each device, gradients), memory (where each side peaked, bytes by category at the peak, the
//! storages live at the peak on one side only), passes by role, aligned spans ranked by impact
//! (sortable by every figure), spans on one side only, gradient verdict and norm changes, and
//! the terminal text. Figures read as the terminal prints them (trace-format); numeric cells
//! sort by their exact value. Trace text goes through [`Text::trace`] or was escaped by the
//! terminal helpers it shares with the text output.

mod gradients;
mod headline;
mod memory;
mod ops;
mod spans;

use trace_diff::{Delta, TraceDiff};
use trace_report::page::{Block, Page, Section, Text};

use crate::diff::render;

/// Rows of each live-at-peak table (the rest is counted in its footer).
pub const STORAGE_ROWS: usize = 200;
/// Rows of the aligned-span table (the rest is counted in its footer).
pub const SPAN_ROWS: usize = 300;
/// Rows of each one-side-only table and gradient table.
pub const LIST_ROWS: usize = 200;

/// A signed figure as a sort key (`None` when not observed or not compared).
pub(crate) fn key(d: &Delta) -> Option<f64> {
    d.delta.map(|v| v as f64)
}

/// The `data-*` attributes of a headline delta, for tests and scripts.
pub(crate) fn delta_data(prefix: &str, d: &Delta) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(b) = d.baseline {
        out.push((format!("{prefix}-baseline"), b.median.to_string()));
    }
    if let Some(c) = d.candidate {
        out.push((format!("{prefix}-candidate"), c.median.to_string()));
    }
    if let Some(v) = d.delta {
        out.push((format!("{prefix}-delta"), v.to_string()));
    }
    out.push((format!("{prefix}-verdict"), d.verdict.as_str().to_string()));
    out
}

/// Builds the page of a comparison; `top` is the text output's row count (its `<pre>` copy).
pub fn build(diff: &TraceDiff, top: usize) -> Page {
    let side = |runs: &[trace_diff::RunIdentity]| match runs {
        [one] => one.label.clone(),
        [first, ..] => format!("{} (+{} runs)", first.label, runs.len() - 1),
        [] => "-".to_string(),
    };
    let entry = |runs: &[trace_diff::RunIdentity]| {
        runs.first()
            .map(|r| r.entrypoint.clone())
            .unwrap_or_default()
    };
    let (b, c) = (&diff.identity.baseline, &diff.identity.candidate);
    let title = if entry(b) == entry(c) {
        format!("candle-graph diff · {}", entry(b))
    } else {
        format!("candle-graph diff · {} vs {}", entry(b), entry(c))
    };
    Page {
        title: Text::trace(&title),
        subtitle: Text::trace(&format!("baseline {} → candidate {}", side(b), side(c))),
        sections: vec![
            headline::section(diff),
            memory::section(diff),
            ops::passes_section(diff),
            ops::section(diff),
            spans::section(diff),
            gradients::section(diff),
            Section {
                id: "text".into(),
                title: "As the terminal prints it".into(),
                blocks: vec![Block::Pre {
                    summary: "candle-graph diff (text)".into(),
                    text: Text::from(render(diff, top)),
                }],
            },
        ],
        // no charts: the script only makes the tables sortable
        data: serde_json::json!({ "view": "diff" }),
    }
}

/// The self-contained HTML file of the diff page (what `diff --html` writes); `top` rows per
/// table as in the text.
pub fn html(diff: &TraceDiff, top: usize) -> String {
    trace_report::html::render(&build(diff, top))
}
