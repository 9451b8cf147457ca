//! `candle-graph bundle TRACE -o DIR`, `candle-graph verify DIR [--semantic]` and
//! `candle-graph series DIR…`: the outputs a bundle carries (made here, in one place, so that
//! `bundle` and `verify --semantic` derive them the same way) and the text of the three
//! commands. Publishing, verification and series are `trace_bundle`'s.

use std::fmt::Write as _;

use serde::Serialize;

use crate::error::Result;
use trace_bundle::{DerivedFile, Series, Verification};
use trace_format::{bytes, opt_duration};
use trace_graph::Analysis;
use trace_schema::{Pass, TraceDocument};

/// Run directories of scheduled captures (trace-bundle's `run`), re-exported.
pub use trace_bundle::run::{
    is_run_dir, list_bundles, read_run_log, scan as scan_run_dir, RunContents, RunLog, RUN_FILE,
};
/// Publishing and verifying bundles, and the series across them (trace-bundle), re-exported
/// for programs that depend on trace-views alone.
pub use trace_bundle::{
    build_series, publish, read_trace_identity, semantic_problems, verify, RunIdentity,
    SeriesError, MANIFEST_FILE, TRACE_FILE,
};

use crate::envelope::to_json;
use crate::table::{Align, Table};

/// File name of the `summary` JSON inside a bundle.
pub const SUMMARY_FILE: &str = "summary.json";
/// File name of the `memory` JSON inside a bundle.
pub const MEMORY_FILE: &str = "memory.json";

/// The derived outputs of a bundle: `summary.json` and `memory.json` (the commands' `--json`
/// output without the input record, whose path would differ between the trace and its copy in
/// the bundle) and `figures.json`. Deterministic: the same trace gives the same bytes.
///
/// # Errors
/// Serialisation errors; `memory`'s errors (an unknown device cannot happen here).
pub fn derive(doc: &TraceDocument, analysis: &Analysis) -> Result<Vec<DerivedFile>> {
    let summary = crate::summary::build(doc, analysis);
    let memory = crate::memory::build(doc, analysis, None, 10, None, false)?;
    let figures = trace_graph::StepFigures::of(doc, analysis);
    Ok(vec![
        DerivedFile {
            path: SUMMARY_FILE.into(),
            bytes: to_json("summary", None, &summary)?.into_bytes(),
        },
        DerivedFile {
            path: MEMORY_FILE.into(),
            bytes: to_json("memory", None, &memory)?.into_bytes(),
        },
        trace_bundle::figures_file(&figures)?,
    ])
}

/// `verify`'s JSON: the receipt and, with `--semantic`, whether the outputs re-derived.
#[derive(Debug, Serialize)]
pub struct VerifyReport {
    /// The receipt.
    pub verification: Verification,
    /// With `--semantic`: whether the derived outputs re-derived to the same bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic_match: Option<bool>,
}

/// `series --json` when the bundles cannot form a series: the typed reason.
#[derive(Debug, Serialize)]
pub struct Refused<'a> {
    /// Why.
    pub refused: &'a SeriesError,
}

/// The text of a verification: `verified` with its counts, or each problem on its own line.
pub fn render_verification(v: &Verification, semantic: Option<bool>) -> String {
    let mut out = String::new();
    let dir = v.bundle.display().to_string();
    if v.is_valid() {
        let run = v.run.as_ref().map(|r| r.run_id.as_str()).unwrap_or("-");
        let _ = writeln!(
            out,
            "verified     {} ({} files, {}) · run {}",
            trace_format::escape(&dir),
            v.files_verified,
            bytes(v.bytes_verified),
            trace_format::escape(run)
        );
        if semantic == Some(true) {
            out.push_str(
                "semantic     the derived outputs equal the ones re-derived from the trace\n",
            );
        }
        return out;
    }
    let _ = writeln!(
        out,
        "NOT VERIFIED {}: {} problem{}",
        trace_format::escape(&dir),
        v.problems.len(),
        if v.problems.len() == 1 { "" } else { "s" }
    );
    for p in &v.problems {
        let _ = writeln!(out, "  - {}", trace_format::escape(&p.to_string()));
    }
    out
}

/// The text of a series: one row per step (wall time, pass times, peaks), then the tensor
/// statistics and gradient norms that changed, by step.
pub fn render_series(s: &Series) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "series       {} · {} · {} · {} captures",
        trace_format::name(&s.entrypoint),
        s.phase.as_deref().unwrap_or("-"),
        s.device.as_deref().unwrap_or("-"),
        s.steps.len()
    );
    let mut t = Table::new(&[
        ("STEP", Align::Right),
        ("WALL", Align::Right),
        ("FORWARD", Align::Right),
        ("BACKWARD", Align::Right),
        ("OPTIMIZER", Align::Right),
        ("PEAK", Align::Right),
        ("FWD PEAK", Align::Right),
        ("BWD PEAK", Align::Right),
        ("OPT PEAK", Align::Right),
        ("RUN", Align::Left),
    ]);
    let peak = |b: Option<u64>| b.map(bytes).unwrap_or_else(|| "-".into());
    for step in &s.steps {
        let f = &step.figures;
        let pass_t = |p: Pass| opt_duration(f.pass_time_ns.get(&p).copied());
        let pass_p = |p: Pass| peak(f.pass_peak_bytes.get(&p).copied());
        t.row([
            step.step.to_string(),
            opt_duration(f.outer_wall_time_ns),
            pass_t(Pass::Forward),
            pass_t(Pass::Backward),
            pass_t(Pass::Optimizer),
            peak(f.logical_peak_bytes),
            pass_p(Pass::Forward),
            pass_p(Pass::Backward),
            pass_p(Pass::Optimizer),
            Table::text(&step.run_id),
        ]);
    }
    out.push_str(&t.render("  "));
    // tensor statistics: one row per label seen, rms per step
    let mut labels: Vec<&String> = s
        .steps
        .iter()
        .flat_map(|st| st.figures.tensor_stats.keys())
        .collect();
    labels.sort();
    labels.dedup();
    if !labels.is_empty() {
        out.push_str("\ntensor statistics (rms by step)\n");
        let mut headers: Vec<(String, Align)> = vec![("LABEL".into(), Align::Left)];
        headers.extend(
            s.steps
                .iter()
                .map(|st| (format!("STEP {}", st.step), Align::Right)),
        );
        let cols: Vec<(&str, Align)> = headers.iter().map(|(h, a)| (h.as_str(), *a)).collect();
        let mut t = Table::new(&cols);
        for label in labels.iter().take(SERIES_TENSOR_ROWS) {
            let mut row = vec![Table::text(label)];
            for st in &s.steps {
                row.push(
                    st.figures
                        .tensor_stats
                        .get(*label)
                        .and_then(|x| x.rms)
                        .map(|v| format!("{v:.6}"))
                        .unwrap_or_else(|| "-".into()),
                );
            }
            t.row(row);
        }
        out.push_str(&t.render("  "));
        if labels.len() > SERIES_TENSOR_ROWS {
            let _ = writeln!(
                out,
                "  {} more labels (--json has them all)",
                labels.len() - SERIES_TENSOR_ROWS
            );
        }
    }
    let grads = s
        .steps
        .iter()
        .map(|st| st.figures.gradients.len())
        .max()
        .unwrap_or(0);
    if grads > 0 {
        let _ = writeln!(
            out,
            "\ngradients    {grads} per step; norms by step in --json (`steps[].figures.gradients`)"
        );
    }
    out
}

/// Tensor-statistics rows shown by `series` (the rest in `--json`).
pub const SERIES_TENSOR_ROWS: usize = 12;

/// The text of a refused series.
pub fn render_refusal(e: &SeriesError) -> String {
    format!("series refused: {}\n", trace_format::escape(&e.to_string()))
}
