//! `otherData`: the export's format, the time origin, the window and what it kept.

use super::events::{ChromeOptions, Range, FORMAT};
use crate::layout::SpanLayout;
use crate::window::Window;
use serde::Serialize;
use std::collections::BTreeMap;
use trace_graph::Analysis;
use trace_schema::TraceDocument;

#[derive(Serialize)]
pub(super) struct OtherData<'a> {
    pub(super) format: &'static str,
    pub(super) tool: BTreeMap<&'static str, &'a str>,
    pub(super) trace_schema: &'static str,
    pub(super) run_id: &'a str,
    pub(super) entrypoint: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) phase: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) capture_step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) warmup_steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) device: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) candle_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) probe_version: Option<&'a str>,
    pub(super) timestamp: &'a str,
    pub(super) time_origin_ns: u64,
    pub(super) time_unit: &'static str,
    pub(super) truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) truncated_at_line: Option<u64>,
    pub(super) filtered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) filter: Option<Filter<'a>>,
    pub(super) host_threads: &'static str,
    pub(super) not_nested_spans: u64,
}

#[derive(Serialize)]
pub(super) struct Filter<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) span: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) window: Option<Window>,
    /// The kept range, ns since session start (inclusive; `null` end: open).
    pub(super) range_ns: (u64, Option<u64>),
}

pub(super) fn other_data<'a>(
    doc: &'a TraceDocument,
    analysis: &Analysis,
    opts: &'a ChromeOptions,
    filtered: bool,
    range: Range,
    layout: &SpanLayout,
) -> OtherData<'a> {
    let m = &doc.meta;
    OtherData {
        format: FORMAT,
        tool: BTreeMap::from([
            ("name", opts.tool.0.as_str()),
            ("version", opts.tool.1.as_str()),
        ]),
        trace_schema: doc.version.as_str(),
        run_id: &m.run_id,
        entrypoint: &m.entrypoint,
        phase: m.phase.map(|p| p.as_str()),
        capture_step: m.capture_step,
        warmup_steps: m.warmup_steps,
        device: m.device.as_deref(),
        candle_version: m.candle_version.as_deref(),
        probe_version: m.probe_version.as_deref(),
        timestamp: &m.timestamp,
        time_origin_ns: analysis.time_origin_ns,
        time_unit: "ts and dur are microseconds since the session start, nanoseconds as the fraction; time_origin_ns is the start of the measured region",
        truncated: doc.is_truncated(),
        truncated_at_line: doc.truncation.as_ref().and_then(|t| t.partial_line),
        filtered,
        filter: filtered.then_some(Filter {
            span: opts.span_path.as_deref(),
            window: opts.window,
            range_ns: (range.lo, (range.hi != u64::MAX).then_some(range.hi)),
        }),
        host_threads: "not recorded by the trace: spans are laid out on host lanes, one root span tree per lane, overlapping root trees on separate lanes",
        not_nested_spans: layout.nesting.iter().filter(|n| n.is_some()).count() as u64,
    }
}
