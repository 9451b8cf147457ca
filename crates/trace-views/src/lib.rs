//! # trace-views
//!
//! candle-graph's views as a library: the records the CLI prints (`summary`, `memory`, `check`,
//! `ops`, `query`, `diff`), their text, and the HTML report and diff pages. A program or a test
//! calls the same functions the `candle-graph` binary calls and gets, byte for byte, what it
//! prints:
//!
//! ```no_run
//! let doc = trace_schema::load_path("out/demo/trace.jsonl")?;
//! let analysis = trace_views::analyze(&doc);
//! let summary = trace_views::summary(&doc, &analysis);
//! println!("{}", summary.render_text("out/demo/trace.jsonl"));
//! let peak_bytes = summary.memory_peak().map(|p| p.live_bytes);
//! std::fs::write("report.html", trace_views::report_html(&doc, &analysis, "demo"))?;
//! # let _ = peak_bytes;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The front door is the functions of this page; the modules hold the records (each
//! `Serialize`: the `--json` output is the record in the [`envelope`]) and the pieces they are
//! rendered from. Unobserved figures are `None`, never 0; trace text is escaped where it is
//! inserted (terminal text) or by the page renderer (HTML).
//!
//! For a program that depends on trace-views alone (the CLI), [`load`], [`export`], [`mod@format`]
//! and the `diff`, `ranks`, `bundle` and `ops` modules re-export what the views are built on.
//!
//! No Candle dependency: the views read a [`TraceDocument`] and its [`Analysis`] only.

#![deny(missing_docs)]

pub mod advice;
pub mod backward;
pub mod bundle;
pub mod check;
pub mod device_check;
pub mod diff;
pub mod diff_html;
pub mod diff_ops;
pub mod envelope;
pub mod error;
pub mod export;
pub mod format;
pub mod import;
pub mod inference;
pub mod live;
pub mod load;
pub mod memory;
pub mod ops;
pub mod ops_measured;
pub mod peak;
pub mod query;
pub mod ranks;
pub mod ranks_html;
pub mod report;
pub mod run_story;
pub mod safe_json;
pub mod slice;
pub mod sparkline;
pub mod summary;
pub mod table;

pub use error::{Error, Result};
pub use memory::MemoryReport;
pub use summary::SummaryReport;

use trace_diff::TraceDiff;
use trace_graph::{Analysis, Detail};
use trace_schema::TraceDocument;

/// Rows per table in `memory` and `diff` when the caller does not say (the CLI's `--top`
/// default).
pub const DEFAULT_TOP: usize = 10;

/// Every analysis of `doc` at full detail (the live sets at the peaks, the execution graph):
/// what the views read. The CLI's `summary` analyses at [`Detail::Summary`], which gives the
/// same summary.
pub fn analyze(doc: &TraceDocument) -> Analysis {
    trace_graph::analyze_with(doc, Detail::Full)
}

/// The `summary` record (`candle-graph summary --json` without the input record): the peak,
/// what held it, the findings that would change it most with their savings, then the time.
pub fn summary(doc: &TraceDocument, analysis: &Analysis) -> SummaryReport {
    summary::build(doc, analysis)
}

impl SummaryReport {
    /// The text `candle-graph summary` prints for this record; `trace_name` is shown on its
    /// `trace` line (the CLI shows the file's path).
    pub fn render_text(&self, trace_name: &str) -> String {
        summary::render(self, trace_name)
    }

    /// The run's logical memory peak (the headline; `None` without memory events).
    pub fn memory_peak(&self) -> Option<&peak::PeakRecord> {
        self.peaks.as_ref().and_then(|p| p.memory_peak.as_ref())
    }
}

/// The `memory` record with the CLI's defaults (every device, [`DEFAULT_TOP`] rows, storages
/// grouped as `memory` groups them).
///
/// # Errors
/// Never for these defaults (the errors of [`memory::build`] are for an unknown `device`).
pub fn memory(doc: &TraceDocument, analysis: &Analysis) -> Result<MemoryReport> {
    memory::build(doc, analysis, None, DEFAULT_TOP, None, false)
}

impl MemoryReport {
    /// The text `candle-graph memory` prints for this record.
    pub fn render_text(&self) -> String {
        memory::render(self)
    }
}

/// The report page of `doc` (the model `report --html` renders); `trace_name` is shown as the
/// trace's name.
pub fn report(
    doc: &TraceDocument,
    analysis: &Analysis,
    trace_name: &str,
) -> trace_report::page::Page {
    report::build(doc, analysis, trace_name)
}

/// The self-contained HTML file `candle-graph report --html` writes (no network access, every
/// string escaped).
pub fn report_html(doc: &TraceDocument, analysis: &Analysis, trace_name: &str) -> String {
    report::html(doc, analysis, trace_name)
}

/// The text `candle-graph diff` prints for a comparison made with [`trace_diff::compare`],
/// `top` rows per table.
pub fn diff_text(diff: &TraceDiff, top: usize) -> String {
    diff::render(diff, top)
}

/// The self-contained HTML file `candle-graph diff --html` writes.
pub fn diff_html(diff: &TraceDiff, top: usize) -> String {
    diff_html::html(diff, top)
}
