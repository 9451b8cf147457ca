//! `diff`: what changed between runs (one trace or several per side), as text, JSON, Markdown
//! or JUnit, the page with `--html`, and the gates of `--fail-on` (exit 1 when one failed).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use trace_views::diff::{compare, DiffOptions, DiffReport, RoleMap, Run};
use trace_views::envelope::InputRecord;
use trace_views::format::bytes;
use trace_views::load::{Analysis, Detail};

use crate::cli::DiffArgs;
use crate::commands::budget;
use crate::input::{load, InputRecordOf as _, LoadedTrace};
use crate::output::{terminal_safe, Output};
use crate::output_file;

/// One side's traces and their analyses, as loaded.
type Side = Vec<(&'static LoadedTrace, &'static Analysis)>;

/// Runs `diff`.
///
/// # Errors
/// Bad sides; a bundle that does not verify; reading the traces or the op map; writing the
/// page.
pub fn run(args: &DiffArgs) -> Result<Output> {
    let (baseline, candidate) = args.sides().map_err(anyhow::Error::msg)?;
    for path in baseline.iter().chain(&candidate) {
        budget::verify_if_bundle(path)?;
    }
    let load_side = |paths: &[PathBuf]| -> Result<Side> {
        // the comparison reads the execution graph and the live sets at the peaks: full detail
        paths.iter().map(|p| load(p, Detail::Full)).collect()
    };
    let (b, c) = (load_side(&baseline)?, load_side(&candidate)?);
    let (lb, lc) = (labels(&b), labels(&c));
    let mut options = DiffOptions {
        norm_ratio_threshold: args.norm_ratio,
        ..DiffOptions::default()
    };
    if let Some(path) = &args.op_map {
        options.op_roles = RoleMap::builtin().extended_by(op_map(path)?);
    }
    let diff = compare(&runs(&b, &lb), &runs(&c, &lc), &options)?;
    if let Some(path) = &args.html {
        let html = trace_views::diff_html(&diff, args.top);
        output_file::write(path, html.as_bytes(), "diff.html")?;
        eprintln!(
            "candle-graph: wrote {} ({}); open it in a browser (it loads nothing from the network)",
            path.display(),
            bytes(html.len() as u64)
        );
    }
    let gates = budget::check_gates(&args.fail_on, &diff);
    let stdout = if args.json {
        let report = DiffReport {
            baseline_inputs: b.iter().map(|(t, _)| InputRecord::of(t)).collect(),
            candidate_inputs: c.iter().map(|(t, _)| InputRecord::of(t)).collect(),
            diff: &diff,
        };
        let report = budget::WithGates {
            diff: report,
            gates: (!gates.checked.is_empty()).then_some(&gates),
        };
        trace_views::envelope::to_json("diff", None, &report)?
    } else {
        terminal_safe(budget::render_diff(&diff, &gates, args.format, || {
            trace_views::diff_text(&diff, args.top)
        }))
    };
    Ok(Output::with_code(stdout, budget::code(&gates)))
}

/// The paths of one side's traces, their labels.
fn labels(side: &Side) -> Vec<String> {
    side.iter()
        .map(|(t, _)| t.path.display().to_string())
        .collect()
}

/// The runs of one side, labelled by path.
fn runs<'a>(side: &'a Side, labels: &'a [String]) -> Vec<Run<'a>> {
    side.iter()
        .zip(labels)
        .map(|(&(t, a), l)| Run {
            doc: &t.doc,
            analysis: a,
            label: l,
        })
        .collect()
}

/// The user's op role map at `path` (`--op-map`).
fn op_map(path: &Path) -> Result<RoleMap> {
    // A role map is small; a file of more than 16 MiB is not one.
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the op map {}", path.display()))?;
    anyhow::ensure!(
        meta.len() <= 16 << 20,
        "the op map {} is {} bytes: not a role map (at most 16 MiB)",
        path.display(),
        meta.len()
    );
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the op map {}", path.display()))?;
    RoleMap::from_json(&text).with_context(|| format!("the op map {}", path.display()))
}
