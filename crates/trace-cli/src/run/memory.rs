//! `memory`: the peak and what was live at it, per category and device (the rank table on a
//! directory of rank traces).

use anyhow::Result;
use trace_views::load::{peak_beyond_summary, Detail, SUMMARY_TOP};

use crate::cli::MemoryArgs;
use crate::input::load;
use crate::output::{self, Output};

/// Rows of `memory`'s live-at-peak table in the terminal (`--top` changes it; `--json` gives
/// every row).
const MEMORY_TOP: usize = 10;

/// Runs `memory`.
///
/// # Errors
/// Reading the trace; an unknown `--device`.
pub fn run(args: &MemoryArgs) -> Result<Output> {
    // a directory of rank traces: the per-rank table (peak per device, what held it, the
    // imbalance) is the summary across ranks
    if super::ranks::is_rank_directory(&args.input.trace) {
        return super::ranks::summary(&args.input.trace, args.input.json);
    }
    // A summary analysis lists the largest SUMMARY_TOP storages of each peak; grouping
    // reads every storage live at the peak: both need the full detail beyond that.
    // The terminal shows the top 10 rows; the JSON every row (for scripts).
    let top = args.top.unwrap_or(if args.input.json {
        usize::MAX
    } else {
        MEMORY_TOP
    });
    let detail = if top > SUMMARY_TOP || args.group_by.is_some() {
        Detail::Full
    } else {
        Detail::Summary
    };
    let (mut trace, mut analysis) = load(&args.input.trace, detail)?;
    // Merged rows (and, with allocation sites, the op coverage) need every storage
    // live at the peak: past the summary's SUMMARY_TOP, read the trace again in full.
    if detail == Detail::Summary && !args.ungrouped && peak_beyond_summary(analysis) {
        (trace, analysis) = load(&args.input.trace, Detail::Full)?;
    }
    let report = trace_views::memory::build(
        &trace.doc,
        analysis,
        args.device.as_deref(),
        top,
        args.group_by,
        args.ungrouped,
    )?;
    output::record("memory", Some(trace), args.input.json, &report, |r| {
        r.render_text()
    })
    .map(Output::ok)
}
