//! The parts of the `summary` record: the run, its health, the slowest spans and operations,
//! the gradients, the findings and the coverage of each plane.

use crate::advice::advice;
use serde::Serialize;
use trace_graph::{Analysis, CapabilityLevel, Severity};
use trace_schema::{Device, TraceDocument};

/// Rows shown in the "held at the peak" table.
pub const HELD_ROWS: usize = 8;

/// Slowest spans shown.
pub const SLOWEST_ROWS: usize = 5;

/// Slowest operations shown.
pub const SLOWEST_OPS: usize = 8;

/// The slowest sampled operations (op and pass), or why there are none.
#[derive(Debug, Clone, Serialize)]
pub struct SlowestOperations {
    /// Samples were recorded.
    pub available: bool,
    /// Why not, when not available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Totals of the samples (rate, lost, few samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub totals: Option<trace_ops::SampleTotals>,
    /// The top rows by samples, one per op and pass (estimates with 95% intervals); the
    /// probe's own frames are not among them (see `probe`).
    pub rows: Vec<trace_ops::OpRow>,
    /// The probe's own cost in the sampled region: its samples of every pass in one row
    /// (`op` = [`trace_ops::PROBE_OP`]); `None` when no sample was in the probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<trace_ops::OpRow>,
    /// Captured steps the samples come from, when the capture has several (`capture_steps`):
    /// the rows' figures are of all of them together; a step's share is the row's `self_ns`
    /// (and interval) divided by this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
}

impl SlowestOperations {
    /// The section from the analysis' profile.
    pub fn of(analysis: &Analysis) -> Self {
        match &analysis.operations {
            Ok(p) => Self {
                available: true,
                reason: None,
                totals: Some(p.totals.clone()),
                rows: p
                    .rows_by(trace_ops::GroupBy::OpPass)
                    .into_iter()
                    .filter(|r| r.kind != Some(trace_ops::OpKind::Probe))
                    .take(SLOWEST_OPS)
                    .collect(),
                probe: p
                    .rows_by(trace_ops::GroupBy::Op)
                    .into_iter()
                    .find(|r| r.kind == Some(trace_ops::OpKind::Probe)),
                steps: Some(analysis.steps.rows.len() as u64).filter(|&n| n > 1),
            },
            Err(u) => Self {
                available: false,
                reason: Some(u.reason.clone()),
                totals: None,
                rows: Vec::new(),
                probe: None,
                steps: None,
            },
        }
    }
}

/// Run identity.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// Run id.
    pub run_id: String,
    /// Entrypoint.
    pub entrypoint: String,
    /// `train` or `infer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Captured step (one-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_step: Option<u64>,
    /// The last captured step, when the capture has several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_capture_step: Option<u64>,
    /// Warm-up steps before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_steps: Option<u64>,
    /// Device label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Candle version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candle_version: Option<String>,
    /// Probe version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_version: Option<String>,
    /// Capture timestamp (ISO-8601 UTC).
    pub timestamp: String,
}

impl RunRecord {
    /// From the trace meta.
    pub fn of(doc: &TraceDocument) -> Self {
        let m = &doc.meta;
        Self {
            run_id: m.run_id.clone(),
            entrypoint: m.entrypoint.clone(),
            phase: m.phase.map(|p| p.as_str().to_string()),
            capture_step: m.capture_step,
            last_capture_step: m.last_capture_step,
            warmup_steps: m.warmup_steps,
            device: m.device.clone(),
            candle_version: m.candle_version.clone(),
            probe_version: m.probe_version.clone(),
            timestamp: m.timestamp.clone(),
        }
    }
}

/// Health verdict counts.
#[derive(Debug, Clone, Serialize)]
pub struct HealthRecord {
    /// The span hierarchy can be trusted.
    pub structurally_valid: bool,
    /// The capture finished without failure, truncation or dropped events.
    pub capture_complete: bool,
    /// Error count.
    pub error_count: u64,
    /// Warning count.
    pub warning_count: u64,
    /// The distinct codes of the issues, errors first (`check` explains each).
    pub issue_codes: Vec<&'static str>,
}

impl HealthRecord {
    /// The verdict of `health` (see [`HealthRecord`]'s fields).
    pub fn of(health: &trace_graph::TraceHealth) -> Self {
        // `issues` is sorted by severity, errors first
        let mut issue_codes: Vec<&'static str> = Vec::new();
        for issue in &health.issues {
            let code: &'static str = issue.code.into();
            if !issue_codes.contains(&code) {
                issue_codes.push(code);
            }
        }
        Self {
            structurally_valid: health.structurally_valid,
            capture_complete: health.capture_complete,
            error_count: health.error_count,
            warning_count: health.warning_count,
            issue_codes,
        }
    }
}

/// One slow span.
#[derive(Debug, Clone, Serialize)]
pub struct SlowSpan {
    /// Span id.
    pub id: String,
    /// Span path.
    pub path: String,
    /// Host self time, ns.
    pub host_self_time_ns: u64,
    /// Host total time, ns.
    pub host_total_time_ns: u64,
}

/// Gradient verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct GradientRecord {
    /// Parameters in the manifest or reported.
    pub parameters: u64,
    /// Present (finite, non-zero).
    pub present: u64,
    /// Missing.
    pub missing: u64,
    /// All zero.
    pub zero: u64,
    /// NaN or ±inf.
    pub non_finite: u64,
    /// Expected but not reported.
    pub not_reported: u64,
    /// Parameters without a gradient (`root/key`).
    pub without_gradient: Vec<String>,
    /// Zero-gradient parameters.
    pub zero_keys: Vec<String>,
    /// Non-finite parameters.
    pub non_finite_keys: Vec<String>,
    /// Gradients of non-parameters (e.g. the input batch).
    pub non_parameter_count: usize,
    /// Their bytes, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_parameter_bytes: Option<u64>,
    /// Their bytes add up past 2^64 (health code `memory_bytes_overflow`): no total is shown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub non_parameter_bytes_overflowed: bool,
    /// Capability level of the gradient evidence.
    pub coverage: CapabilityLevel,
}

/// A finding with its actionable reading.
#[derive(Debug, Clone, Serialize)]
pub struct FindingRecord {
    /// Severity.
    pub severity: Severity,
    /// Code.
    pub code: String,
    /// One sentence with the figures.
    pub summary: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
    /// What acting on the advice would leave, replayed from the lifetimes (memory findings
    /// with advice): `run_peak_bytes`, `pass_peaks`, `exact` (false: a bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<trace_graph::WhatIf>,
    /// The share of the run's peak (`peak`) or measured time (`time`) acting on it would
    /// remove, as far as the evidence shows; the rank's key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impact: Option<ImpactRecord>,
}

/// What acting on a finding changes (see [`trace_graph::impact`]).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ImpactRecord {
    /// `peak` or `time`.
    pub plane: &'static str,
    /// The share of the run's peak or measured time, in [0, 1].
    pub share: f64,
}

/// Findings with advice, ranked by what acting on them changes ([`trace_graph::ranked`]:
/// errors, then the largest saving on the run's peak or time, then warnings, then the rest);
/// coverage gaps are left out (the coverage line states them once).
pub fn findings(analysis: &Analysis) -> Vec<FindingRecord> {
    let ended_early = analysis.health.truncated || analysis.health.capture_failed;
    trace_graph::ranked(&analysis.findings)
        .into_iter()
        .map(|i| &analysis.findings[i])
        .map(|f| FindingRecord {
            severity: f.severity,
            code: f.code.as_str().to_string(),
            summary: f.summary.clone(),
            advice: match f.code {
                // Live at a cut or a failure is not retention into the next step.
                trace_graph::FindingCode::StoragesRetainedAtEnd if ended_early => Some(
                    "the capture did not finish: these storages were live when it stopped, not necessarily retained".to_string(),
                ),
                _ => advice(f),
            },
            what_if: f.evidence.what_if.clone(),
            impact: trace_graph::impact(f).map(|i| ImpactRecord {
                plane: match i {
                    trace_graph::Impact::Peak(_) => "peak",
                    trace_graph::Impact::Time(_) => "time",
                },
                share: i.share(),
            }),
        })
        .collect()
}

/// The coverage in one line: what was not seen, what is sampled (estimates), partial or
/// invalid, by plane, then the caveats — `check` explains each.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CoverageLine {
    /// Planes with nothing seen.
    pub not_seen: Vec<&'static str>,
    /// Planes observed by sampling: figures are estimates with intervals.
    pub sampled: Vec<&'static str>,
    /// Planes seen in part (or not declared complete).
    pub partial: Vec<&'static str>,
    /// Planes the trace contradicts.
    pub invalid: Vec<&'static str>,
    /// Dropped events, truncation, host handles.
    pub caveats: Vec<String>,
}

impl CoverageLine {
    /// From the capability matrix and the document.
    pub fn of(doc: &TraceDocument, analysis: &Analysis) -> Self {
        let mut line = Self {
            caveats: caveats(doc),
            ..Self::default()
        };
        for c in &analysis.capabilities.capabilities {
            let name = plane_name(c.kind);
            match c.level {
                CapabilityLevel::Complete => {}
                CapabilityLevel::Unavailable => line.not_seen.push(name),
                CapabilityLevel::Sampled => line.sampled.push(name),
                CapabilityLevel::Partial => line.partial.push(name),
                CapabilityLevel::Invalid => line.invalid.push(name),
            }
        }
        line
    }

    /// `not seen: device time · sampled: operations · partial: tensors — `check` explains`.
    pub fn text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (what, planes) in [
            ("INVALID", &self.invalid),
            ("not seen", &self.not_seen),
            ("sampled (estimates)", &self.sampled),
            ("partial", &self.partial),
        ] {
            if !planes.is_empty() {
                parts.push(format!("{what}: {}", planes.join(", ")));
            }
        }
        parts.extend(self.caveats.iter().cloned());
        if parts.is_empty() {
            "everything declared was seen".to_string()
        } else {
            format!("{} — `check` explains", parts.join(" · "))
        }
    }
}

/// A capability in a reader's words (`device time`, `operations`).
pub(super) fn plane_name(kind: trace_graph::CapabilityKind) -> &'static str {
    use trace_graph::CapabilityKind as K;
    match kind {
        K::StructuralTrace => "span structure",
        K::OuterWallTime => "wall time",
        K::NestedHostTime => "span times",
        K::NestedDeviceTime => "device time",
        K::Operations => "operations",
        K::Tensors => "tensors",
        K::LogicalMemory => "memory",
        K::PhysicalMemory => "physical memory",
        K::Gradients => "gradients",
        K::TensorStats => "tensor stats",
    }
}

/// What makes the figures lower bounds or changes their meaning: dropped events, a cut-short
/// trace, storages seen through host handles.
pub(super) fn caveats(doc: &TraceDocument) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(d) = doc.dropped_events.filter(|&d| d > 0) {
        out.push(format!(
            "{d} events dropped (full buffer): memory figures are lower bounds"
        ));
    }
    if let Some(t) = &doc.truncation {
        out.push(match t.partial_line {
            Some(line) => format!("trace truncated at line {line}: analysed the valid prefix"),
            None => "trace ended without a terminal event: analysed what was written".to_string(),
        });
    }
    if let Some(device) = doc.meta.device.as_deref() {
        if !Device::parse(device).is_host() {
            out.push(format!(
                "storages on {device} are seen through host handles: logical bytes are tensor storages, not the device allocator's pool"
            ));
        }
    }
    out
}
