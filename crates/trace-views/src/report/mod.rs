//! `candle-graph report TRACE [-o report.html]`: one self-contained HTML file (no network:
//! script, style and data embedded; a strict Content-Security-Policy) that opens on the summary
//! and shows the memory timeline per device, what held each peak, the span tree, gradients,
//! tensor statistics, health, capabilities and findings.
//!
//! The page is composed from the records `summary`, `memory` and `check` print (their builders
//! and trace-format's formatter), so it says what they say; the charts draw trace-report's
//! pre-aggregated, peak-preserving data. Rendering is trace-report's: see `trace_report::html`.

mod cells;
mod gradients;
mod health;
mod held;
mod memory_chart;
mod operations;
mod overview;
mod spans;

pub use self::cells::{GROUP_ROWS, HELD_ROWS, MEASURED_OP_ROWS, OP_ROWS, SPAN_ROWS};
use self::{
    gradients::{gradients_section, tensor_stats_section},
    health::health_section,
    held::held_section,
    memory_chart::memory_section,
    operations::{measured_ops_section, ops_section},
    overview::{identity, summary_section},
    spans::time_section,
};
use crate::summary::{self, finding_texts};
use trace_graph::Analysis;
use trace_report::data::{chart_data, ChartOptions};
use trace_report::page::{Block, Page, Section, Text};
use trace_schema::TraceDocument;

/// Builds the page of a trace. `path` is shown as the trace's name.
pub fn build(doc: &TraceDocument, analysis: &Analysis, path: &str) -> Page {
    let summary = summary::build(doc, analysis);
    let mut data = chart_data(doc, analysis, ChartOptions::default());
    let profile = &analysis.operations;
    if let Ok(p) = profile {
        let trees = trace_ops::flame_trees(doc, p, &trace_ops::FlameOptions::default());
        data["flame"] = trace_report::flame::flame_data(&trees);
    }
    // the answer first: the summary, then the findings ranked by what acting on them changes
    let mut sections = vec![
        summary_section(&summary, path),
        Section {
            id: "findings".into(),
            title: "Findings".into(),
            blocks: vec![Block::Findings(finding_texts(analysis))],
        },
    ];
    sections.push(memory_section(doc, analysis, &summary));
    sections.push(held_section(doc, analysis));
    sections.push(time_section(doc, analysis));
    sections.push(
        match (profile, trace_ops::MeasuredOps::from_document(doc)) {
            (Err(_), Some(measured)) => measured_ops_section(&measured),
            _ => ops_section(profile),
        },
    );
    sections.push(gradients_section(analysis));
    sections.push(tensor_stats_section(doc));
    sections.push(health_section(analysis));
    let run = &summary.run;
    Page {
        title: Text::trace(&format!(
            "candle-graph report · {}",
            trace_format::elide_middle(&run.entrypoint, trace_format::NAME_COLUMNS)
        )),
        subtitle: Text::trace(&identity(&summary)),
        sections,
        data,
    }
}

/// The self-contained HTML file of the report of `doc` (what `report --html` writes);
/// `trace_path` is shown as the trace's name.
pub fn html(doc: &TraceDocument, analysis: &Analysis, trace_path: &str) -> String {
    trace_report::html::render(&build(doc, analysis, trace_path))
}
