//! The `summary` record: the run, the answer, the peaks, time, gradients and findings of one
//! trace, and how many rows of each it lists.

use crate::backward::BackwardModules;
use crate::peak::Peaks;
use serde::Serialize;

use super::answer::AnswerRecord;
use super::records::{
    CoverageLine, FindingRecord, GradientRecord, HealthRecord, RunRecord, SlowSpan,
    SlowestOperations,
};
use trace_memory::BytesOverflow;

/// The `summary` report (`candle-graph/summary/1`).
#[derive(Debug, Clone, Serialize)]
pub struct SummaryReport {
    /// Run identity.
    pub run: RunRecord,
    /// Health verdict.
    pub health: HealthRecord,
    /// The answer first: what held the peak, what would lower it most, where time goes.
    pub answer: AnswerRecord,
    /// The coverage in one line, by plane.
    pub coverage: CoverageLine,
    /// What the capture did not see (empty: nothing known to be missing), each with its
    /// reason.
    pub not_seen: Vec<String>,
    /// Start of the measured region, ns since session start: times shown as text are
    /// relative to it; the `_ns` times in this report are trace times.
    pub time_origin_ns: u64,
    /// Wall time of the measured region, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outer_wall_time_ns: Option<u64>,
    /// Times are from a cut-short trace: closed spans keep theirs, open ones have none.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timing_from_incomplete_capture: bool,
    /// Logical memory peaks (absent without memory events): `memory_peak`, and `device_peaks`
    /// with more than one device.
    #[serde(flatten)]
    pub peaks: Option<Peaks>,
    /// Allocation sizes add up past 2^64: no logical figure is shown (health code
    /// `memory_bytes_overflow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_overflow: Option<BytesOverflow>,
    /// Spans with the largest host self time in the measured region.
    pub slowest_spans: Vec<SlowSpan>,
    /// Why timing is unavailable, when the graph was refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timing_refused: Vec<String>,
    /// The slowest sampled operations (`candle-graph ops` has them all).
    pub slowest_operations: SlowestOperations,
    /// Per-module backward spans (only in a trace that has them: `demo --backward-spans`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backward_modules: Option<BackwardModules>,
    /// Gradient verdicts.
    pub gradients: GradientRecord,
    /// Per step of a capture of several steps (absent for a single-step capture): time,
    /// passes, memory, what each step left live, and the growth when memory grows.
    #[serde(skip_serializing_if = "trace_graph::Steps::is_empty")]
    pub steps: trace_graph::Steps,
    /// An inference trace's prefill/decode split and what the call keeps (absent without a
    /// `prefill` or `decode` span).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inference: Option<crate::inference::InferenceRecord>,
    /// Findings.
    pub findings: Vec<FindingRecord>,
}
