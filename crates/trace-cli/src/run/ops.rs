//! `ops`: where the time went per Candle operation (sampled), or the exact table of a producer
//! that timed every op (a PyTorch import).

use anyhow::Result;
use trace_views::load::Detail;
use trace_views::ops::{self, ByArg, MeasuredOps, OpsQuery, PassArg};

use crate::cli::OpsArgs;
use crate::input::load;
use crate::output::{self, Output};

/// Runs `ops`.
///
/// # Errors
/// Reading the trace.
pub fn run(args: &OpsArgs) -> Result<Output> {
    let (trace, analysis) = load(&args.input.trace, Detail::Summary)?;
    let json = args.input.json;
    if analysis.operations.is_err() {
        // A producer that timed every op (a PyTorch import) gets the exact table.
        if let Some(measured) = MeasuredOps::from_document(&trace.doc) {
            let report = trace_views::ops_measured::build(
                &measured,
                args.by == Some(ByArg::Op),
                args.pass.map(PassArg::pass),
                args.top,
            );
            return output::record("ops", Some(trace), json, &report, |r| {
                trace_views::ops_measured::render(r)
            })
            .map(Output::ok);
        }
    }
    let report = ops::build(
        &analysis.operations,
        analysis.sites.as_ref(),
        OpsQuery {
            by: args.by,
            pass: args.pass,
            sort: args.sort,
            top: args.top,
        },
    );
    output::record("ops", Some(trace), json, &report, ops::render).map(Output::ok)
}
