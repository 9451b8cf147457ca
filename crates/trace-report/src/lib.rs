//! # trace-report
//!
//! The outputs people look at, built on the analysis API (trace-memory, trace-graph, trace-ops) and the
//! one formatter (trace-format), never on a second reading of the trace:
//! - [`chrome`]: the Chrome Trace Event Format export for Perfetto UI and chrome://tracing;
//! - [`window`]: the export's `--window START..END` (a time window parsed from its text);
//! - [`page`] and [`html`]: the offline HTML report — a page model of sections and blocks that
//!   callers compose from their own reports, rendered into one self-contained file (embedded
//!   script, style and data, a strict Content-Security-Policy, every string escaped);
//! - [`speedscope`]: the sampled call stacks in speedscope's JSON file format;
//! - [`flame`]: the flame graph's page data from trace-ops's flame trees (per thread and pass);
//! - [`data`]: the pre-aggregated, peak-preserving chart data the page embeds;
//! - [`layout`]: which host lane each span is drawn on and whether it nests there (shared by
//!   the export and the report, so both draw the same tracks).
//!
//! No Candle dependency: arrows point down to the analysis crates only.

#![deny(missing_docs)]

pub mod chrome;
pub mod data;
pub mod flame;
pub mod html;
pub mod layout;
pub mod page;
pub mod speedscope;
pub mod step_chart;
pub mod window;

use serde::Serialize;

/// A finding as a report states it: the analyser's summary and the caller's advice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindingText {
    /// `error`, `warning` or `info`.
    pub severity: String,
    /// Finding code (`memory_peak`, …).
    pub code: String,
    /// One sentence with the figures.
    pub summary: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
    /// When it happened, ns since session start (from its evidence), when it has a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp_ns: Option<u64>,
}
