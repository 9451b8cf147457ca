//! `summary`: the record of one trace, or the table across the rank traces of a directory.

use anyhow::Result;
use trace_views::load::Detail;

use crate::cli::TraceArgs;
use crate::input::load;
use crate::output::{self, Output};

/// Runs `summary`.
///
/// # Errors
/// Reading the trace (or the rank traces).
pub fn run(args: &TraceArgs) -> Result<Output> {
    if super::ranks::is_rank_directory(&args.trace) {
        return super::ranks::summary(&args.trace, args.json);
    }
    let (trace, analysis) = load(&args.trace, Detail::Summary)?;
    output::summary(trace, analysis, args.json)
}
