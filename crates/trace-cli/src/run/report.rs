//! `report`: the self-contained HTML page of a trace, or of the rank traces of a directory.

use anyhow::Result;
use trace_views::format::bytes;
use trace_views::load::Detail;

use crate::cli::ReportArgs;
use crate::input::load;
use crate::output::{count, Output};
use crate::output_file;

/// Runs `report`: writes the page, says where on stderr.
///
/// # Errors
/// Reading the trace; writing the page.
pub fn run(args: &ReportArgs) -> Result<Output> {
    output_file::refuse_input(&args.output, &args.trace)?;
    if super::bundle::is_run_directory(&args.trace) {
        let out = super::bundle::series(&crate::cli::SeriesArgs {
            bundles: vec![args.trace.clone()],
            json: false,
            html: Some(args.output.clone()),
        })?;
        // the page is the output; the story's text goes nowhere, a refusal to stderr
        if out.code != 0 {
            eprint!(
                "candle-graph: report: no page written for {}: {}",
                args.trace.display(),
                out.stdout
            );
        }
        return Ok(Output::with_code(String::new(), out.code));
    }
    if super::ranks::is_rank_directory(&args.trace) {
        let report = super::ranks::report(&args.trace)?;
        let shown = args.trace.display().to_string();
        let html = trace_views::ranks_html::html(&report, &shown);
        output_file::write(&args.output, html.as_bytes(), "report.html")?;
        eprintln!(
            "candle-graph: wrote {} ({}, {}); open it in a browser (it loads nothing from the network)",
            args.output.display(),
            bytes(html.len() as u64),
            count(report.ranks.len() as u64, "rank")
        );
        return Ok(Output::ok(String::new()));
    }
    let (trace, analysis) = load(&args.trace, Detail::Full)?;
    let path = trace.path.display().to_string();
    let html = trace_views::report_html(&trace.doc, analysis, &path);
    output_file::write(&args.output, html.as_bytes(), "report.html")?;
    eprintln!(
        "candle-graph: wrote {} ({}); open it in a browser (it loads nothing from the network)",
        args.output.display(),
        bytes(html.len() as u64)
    );
    Ok(Output::ok(String::new()))
}
