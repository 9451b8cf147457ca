//! `check TRACE --budget budget.toml` and `diff BASELINE CANDIDATE --fail-on GATE`: the
//! budgets and gates of `trace_budget`, printed as a table (text), Markdown (a CI job summary
//! or a pull-request comment) or JUnit XML; exit 1 when one failed or could not be decided.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use trace_budget::report::markdown_cell;
use trace_budget::{BudgetFile, Figures, Gate, Report};
use trace_views::diff::{Delta, RunIdentity, Stat, TraceDiff};
use trace_views::format::{bytes, duration, percent, UNKNOWN};
use trace_views::load::{Analysis, TraceDocument};

use crate::cli::ReportFormat;

/// The budgets of the file at `budget` checked on one trace.
///
/// # Errors
/// The budget file's error, naming its line.
pub fn check_budgets(doc: &TraceDocument, analysis: &Analysis, budget: &Path) -> Result<Report> {
    let file = BudgetFile::read(budget)?;
    let figures = Figures::from_analysis(doc, analysis);
    Ok(file.budgets.evaluate(&figures))
}

/// The budget report as `format` says; `trace` names the trace.
pub fn render_budgets(report: &Report, format: ReportFormat, trace: &str) -> String {
    match format {
        ReportFormat::Text => report.render_text("budget"),
        ReportFormat::Markdown => {
            report.render_markdown(&format!("candle-graph check {trace}"), "budget")
        }
        ReportFormat::Junit => report.render_junit(&format!("candle-graph check {trace}")),
    }
}

/// Exit code of a report: 0 when everything passed, else 1.
pub fn code(report: &Report) -> u8 {
    u8::from(!report.all_passed())
}

/// A baseline or candidate kept as a bundle (a directory with `bundle.json`) is verified
/// against its manifest before it is compared.
///
/// # Errors
/// The bundle does not verify: every file that does not match is named.
pub fn verify_if_bundle(path: &Path) -> Result<()> {
    if !(path.is_dir() && path.join(trace_views::bundle::MANIFEST_FILE).is_file()) {
        return Ok(());
    }
    let v = trace_views::bundle::verify(path)
        .with_context(|| format!("cannot verify the bundle {}", path.display()))?;
    // One stderr line (the CLI's rule for errors): the verification's lines joined.
    let problems: Vec<String> = v.problems.iter().map(|p| p.to_string()).collect();
    anyhow::ensure!(
        v.is_valid(),
        "the bundle {} does not match its manifest, so it is not compared: {} problem{}: {}",
        path.display(),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        problems.join("; ")
    );
    Ok(())
}

/// `diff --json`'s record with the gates beside it (the field `gates`, only when `--fail-on`
/// was given: the record is otherwise unchanged).
#[derive(serde::Serialize)]
pub struct WithGates<'a, T: serde::Serialize> {
    /// The diff's record.
    #[serde(flatten)]
    pub diff: T,
    /// The gates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gates: Option<&'a Report>,
}

/// The gates checked on `diff`.
pub fn check_gates(gates: &[Gate], diff: &TraceDiff) -> Report {
    trace_budget::check_all(gates, diff)
}

/// The diff's gate report as `format` says: text is the gates' table after the diff's own
/// text; Markdown is the headline, the gates and the table of changes; JUnit the gates.
pub fn render_diff(
    diff: &TraceDiff,
    gates: &Report,
    format: ReportFormat,
    diff_text: impl FnOnce() -> String,
) -> String {
    match format {
        ReportFormat::Text if gates.checked.is_empty() => diff_text(),
        ReportFormat::Text => format!("{}\n{}", diff_text(), gates.render_text("gate")),
        ReportFormat::Markdown => markdown_diff(diff, gates),
        ReportFormat::Junit => gates.render_junit("candle-graph diff"),
    }
}

/// One change as Markdown cells: baseline, candidate, change, verdict.
fn delta_cells(d: &Delta, show: fn(u64) -> String) -> [String; 4] {
    let side = |s: Option<Stat>| match s {
        None => UNKNOWN.to_string(),
        Some(s) if s.runs == 1 => show(s.median),
        Some(s) => format!(
            "{} ({}–{}, {} runs)",
            show(s.median),
            show(s.min),
            show(s.max),
            s.runs
        ),
    };
    let change = match d.relative {
        Some(r) => percent(r),
        None => UNKNOWN.to_string(),
    };
    [
        side(d.baseline),
        side(d.candidate),
        change,
        d.verdict.as_str().to_string(),
    ]
}

fn markdown_diff(diff: &TraceDiff, gates: &Report) -> String {
    let mut out = String::from("### candle-graph diff\n\n");
    let label = |runs: &[RunIdentity]| {
        runs.iter()
            .map(|r| format!("`{}`", markdown_cell(&r.label).replace('`', "'")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "baseline {} → candidate {}{}\n",
        label(&diff.identity.baseline),
        label(&diff.identity.candidate),
        if diff.spread_known {
            ""
        } else {
            " (one run on a side: the run-to-run spread is unknown)"
        }
    );
    if !gates.checked.is_empty() {
        let gate_md = gates.render_markdown("gates", "gate");
        out.push_str(gate_md.trim_start_matches("### gates\n\n"));
        out.push('\n');
    }
    out.push_str("| figure | baseline | candidate | change | verdict |\n|---|---|---|---|---|\n");
    let mut row = |name: &str, d: &Delta, show: fn(u64) -> String| {
        let [b, c, change, verdict] = delta_cells(d, show);
        let _ = writeln!(out, "| {name} | {b} | {c} | {change} | {verdict} |");
    };
    row("wall", &diff.wall_time_ns, duration);
    if let Some(m) = &diff.memory {
        row("peak", &m.peak_bytes, bytes);
    }
    for p in &diff.passes {
        let name = p.pass.as_str();
        row(&format!("pass.{name}"), &p.time_ns, duration);
        row(&format!("pass.{name}.peak"), &p.peak_bytes, bytes);
        row(&format!("pass.{name}.allocated"), &p.allocated_bytes, bytes);
    }
    if let Some(why) = &diff.memory_unavailable {
        let _ = writeln!(out, "\nmemory not compared: {}", markdown_cell(why));
    }
    for r in &diff.identity.refusals {
        let _ = writeln!(out, "\ntiming not compared: {}", markdown_cell(&r.message));
    }
    out
}
