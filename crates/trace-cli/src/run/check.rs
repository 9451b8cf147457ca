//! `check`: health issues and the capability matrix, or the budgets of `--budget FILE`; and
//! `device-check`, which trains on a device to verify the capture there.

use anyhow::Result;
use trace_views::check;
use trace_views::load::Detail;

use crate::cli::{CheckArgs, DeviceCheckArgs};
use crate::commands::budget;
use crate::input::load;
use crate::output::{self, Output};

/// Runs `check` (exit 1 with `--require-valid` on an invalid or incomplete capture).
///
/// # Errors
/// Reading the trace or the budget file.
pub fn run(args: &CheckArgs) -> Result<Output> {
    if let Some(file) = &args.budget {
        return budgets(args, file);
    }
    let (trace, analysis) = load(&args.input.trace, Detail::Summary)?;
    let report = check::build(analysis);
    let code = u8::from(args.require_valid && !report.valid_and_complete);
    let stdout = output::record("check", Some(trace), args.input.json, &report, |r| {
        check::render(r)
    })?;
    Ok(Output::with_code(stdout, code))
}

/// `check TRACE --budget FILE` (see [`budget`]).
fn budgets(args: &CheckArgs, file: &std::path::Path) -> Result<Output> {
    // budgets read the live sets at the peak: full detail
    let (trace, analysis) = load(&args.input.trace, Detail::Full)?;
    let report = budget::check_budgets(&trace.doc, analysis, file)?;
    let shown = trace.path.display().to_string();
    let stdout = output::record("budget", Some(trace), args.input.json, &report, |r| {
        budget::render_budgets(r, args.format, &shown)
    })?;
    // `--require-valid` still applies: an invalid or incomplete capture exits 1 too
    let invalid = args.require_valid && !check::build(analysis).valid_and_complete;
    Ok(Output::with_code(
        stdout,
        budget::code(&report).max(u8::from(invalid)),
    ))
}

/// Runs `device-check` (exit 1 when a check failed), its stages on stderr.
///
/// # Errors
/// Training or profiling failures, unreadable traces, I/O writing the results.
pub fn device(args: &DeviceCheckArgs) -> Result<Output> {
    let report = crate::commands::device_check::run(args, |line| {
        eprintln!("candle-graph device-check: {line}");
    })?;
    let code = if report.all_passed() { 0 } else { 1 };
    Ok(Output::with_code(report.render(), code))
}
