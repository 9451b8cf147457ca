//! `demo`: train a built-in model (or several ranks of it, or run inference), then print the
//! captured step's summary.

use std::io::IsTerminal;

use anyhow::Result;
use trace_views::load::Detail;

use crate::cli::DemoArgs;
use crate::commands::demo;
use crate::input::load;
use crate::output::{self, Output};

/// Runs `demo` as its flags say.
///
/// # Errors
/// Training or profiling failures; reading the trace it wrote.
pub fn run(args: &DemoArgs) -> Result<Output> {
    if args.inference {
        let report = demo::run_inference(args)?;
        eprintln!("{}", demo::describe_inference(&report));
        let (trace, analysis) = load(&report.trace_path, Detail::Summary)?;
        // the summary carries the inference figures (prefill, decode, the KV cache)
        return output::summary(trace, analysis, args.json);
    }
    if args.rank_worker {
        let (report, times) = demo::run(args, false)?;
        eprintln!("{}", demo::describe(args, &report, &times));
        return Ok(Output::ok(String::new()));
    }
    if let Some(ranks) = args.ranks {
        for o in demo::run_ranks(args, ranks)? {
            if o.status != Some(0) {
                eprintln!(
                    "candle-graph: warning: rank {} exited with {}; the summary says what it lacks",
                    o.rank,
                    o.status
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "a signal".into())
                );
            }
        }
        return super::ranks::summary(&args.out, args.json);
    }
    let progress = !args.json && std::io::stderr().is_terminal();
    let (report, times) = demo::run(args, progress)?;
    eprintln!("{}", demo::describe(args, &report, &times));
    if args.every.is_some() {
        // the run directory's story: its series
        return super::bundle::run_series(std::slice::from_ref(&report.trace_path), args.json);
    }
    let (trace, analysis) = load(&report.trace_path, Detail::Summary)?;
    output::summary(trace, analysis, args.json)
}
