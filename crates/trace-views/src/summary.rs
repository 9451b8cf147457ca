//! `candle-graph summary TRACE`: identity, health, coverage, wall time, memory peak and what held
//! it, slowest spans, per-module backward spans (when the trace has them), gradient verdicts and
//! findings.

use std::fmt::Write as _;

use serde::Serialize;
use trace_format::{bytes, duration, escape, opt_duration};
use trace_graph::{Analysis, CapabilityLevel, Severity};
use trace_memory::BytesOverflow;
use trace_schema::{Device, TraceDocument};

use crate::advice::advice;
use crate::backward::{self, BackwardModules};
use crate::peak::{self, Peaks};

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
    /// The top rows by samples, one per op and pass (estimates with 95% intervals).
    pub rows: Vec<trace_ops::OpRow>,
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
                    .take(SLOWEST_OPS)
                    .collect(),
            },
            Err(u) => Self {
                available: false,
                reason: Some(u.reason.clone()),
                totals: None,
                rows: Vec::new(),
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

/// Groups of the peak's storages the answer names.
pub const ANSWER_GROUPS: usize = 3;
/// Findings the answer names as what would lower the peak.
pub const ANSWER_FINDINGS: usize = 2;

/// One category at the peak.
#[derive(Debug, Clone, Serialize)]
pub struct HeldCategory {
    /// The category.
    pub category: trace_schema::MemoryCategory,
    /// Its live bytes at the peak.
    pub bytes: u64,
}

/// A finding the answer names, with its figure.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerFinding {
    /// Its code.
    pub code: String,
    /// The figure: the what-if sentence (memory) or the estimated time and share (time).
    pub text: String,
    /// The share of the run's peak or time it would remove, in [0, 1].
    pub share: f64,
    /// The figure is exact (memory: the replay frees exactly what the advice frees).
    pub exact: bool,
}

/// The answer first: what held the peak (by category, its fixed and batch-scaled parts and
/// the largest merged groups), the findings that would lower it most with their replayed
/// figures, and the time finding with the most to gain.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AnswerRecord {
    /// Categories live at the peak, largest first.
    pub held_by: Vec<HeldCategory>,
    /// Bytes of the peak that do not scale with the batch (parameters, gradients, optimizer
    /// state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_bytes: Option<u64>,
    /// Bytes that scale with the batch (activations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_scaled_bytes: Option<u64>,
    /// The largest groups of storages live at the peak, identical ones merged (by op and pass
    /// with allocation sites, else by allocating span).
    pub top_groups: Vec<crate::live::HeldGroup>,
    /// The grouping of `top_groups`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_by: Option<crate::live::GroupBy>,
    /// The groups are over the largest storages only (a summary analysis lists the first
    /// `SUMMARY_TOP`): their bytes are lower bounds.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub groups_lower_bound: bool,
    /// The memory findings whose advice lowers the run's peak most, largest saving first.
    pub lower_the_peak: Vec<AnswerFinding>,
    /// The finding about time with the largest share of the measured region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save_time: Option<AnswerFinding>,
}

impl AnswerRecord {
    /// From the analysis and the ranked findings.
    pub fn of(doc: &TraceDocument, analysis: &Analysis, findings: &[FindingRecord]) -> Self {
        let mut a = Self::default();
        if let Some(p) = analysis
            .memory
            .logical
            .as_ref()
            .and_then(|l| l.peak.as_ref())
        {
            let mut held: Vec<HeldCategory> = p
                .by_category
                .iter()
                .filter(|(_, &b)| b > 0)
                .map(|(&category, &bytes)| HeldCategory { category, bytes })
                .collect();
            held.sort_by_key(|h| std::cmp::Reverse(h.bytes));
            a.held_by = held;
            let (fixed, scaled) = trace_graph::batch_split(&p.by_category);
            a.fixed_bytes = Some(fixed);
            a.batch_scaled_bytes = Some(scaled);
            // the first SUMMARY_TOP storages (largest first), in either detail: what
            // `summary` prints does not depend on how much the analysis kept
            let live: Vec<&trace_memory::StorageLifetime> = p
                .live_allocations
                .iter()
                .take(trace_memory::SUMMARY_TOP)
                .collect();
            let by = if analysis.sites.is_some() {
                crate::live::GroupBy::Op
            } else {
                crate::live::GroupBy::Span
            };
            let mut groups =
                crate::live::group(&live, doc, &analysis.spans, analysis.sites.as_ref(), by);
            groups.truncate(ANSWER_GROUPS);
            a.groups_lower_bound = (live.len() as u64) < p.live_allocation_count;
            a.groups_by = (!groups.is_empty()).then_some(by);
            a.top_groups = groups;
        }
        let mut memory: Vec<&FindingRecord> = findings
            .iter()
            .filter(|f| f.what_if.as_ref().is_some_and(|w| w.saving_bytes() > 0))
            .collect();
        memory
            .sort_by_key(|f| std::cmp::Reverse(f.what_if.as_ref().map_or(0, |w| w.saving_bytes())));
        a.lower_the_peak = memory
            .into_iter()
            .take(ANSWER_FINDINGS)
            .filter_map(|f| {
                let w = f.what_if.as_ref()?;
                Some(AnswerFinding {
                    code: f.code.clone(),
                    text: w.sentence(),
                    share: w.saving_share(),
                    exact: w.exact,
                })
            })
            .collect();
        a.save_time = findings
            .iter()
            .filter(|f| f.impact.is_some_and(|i| i.plane == "time"))
            .find_map(|f| {
                let i = f.impact?;
                let e = &analysis
                    .findings
                    .iter()
                    .find(|x| x.code.as_str() == f.code && x.summary == f.summary)?
                    .evidence;
                let d = e.duration_ns?;
                let est = if e.share.is_some() { "est. " } else { "" };
                Some(AnswerFinding {
                    code: f.code.clone(),
                    text: format!(
                        "{est}{} ({:.1}% of the measured region){}",
                        duration(d),
                        i.share * 100.0,
                        e.operation
                            .as_deref()
                            .map(|op| format!(" in {op}"))
                            .unwrap_or_default()
                    ),
                    share: i.share,
                    exact: e.share.is_none(),
                })
            });
        a
    }
}

/// The coverage statement: every capability below complete with its reason, dropped events, and
/// the host-handle caveat on GPU devices.
pub fn not_seen(doc: &TraceDocument, analysis: &Analysis) -> Vec<String> {
    let mut out = Vec::new();
    for c in &analysis.capabilities.capabilities {
        if c.level != CapabilityLevel::Complete {
            out.push(format!(
                "{} {}: {}",
                c.kind.as_str(),
                c.level.as_str(),
                c.reason
            ));
        }
    }
    out.extend(caveats(doc));
    out
}

/// What makes the figures lower bounds or changes their meaning: dropped events, a cut-short
/// trace, storages seen through host handles.
fn caveats(doc: &TraceDocument) -> Vec<String> {
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

/// A capability in a reader's words (`device time`, `operations`).
fn plane_name(kind: trace_graph::CapabilityKind) -> &'static str {
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

/// Builds the report.
pub fn build(doc: &TraceDocument, analysis: &Analysis) -> SummaryReport {
    let spans = &analysis.spans;
    let lower_bound = analysis.health.memory_lower_bound;
    let peaks = analysis.memory.logical.as_ref().map(|l| {
        let view = crate::peak::HeldView {
            sites: analysis.sites.as_ref(),
            ..Default::default()
        };
        Peaks::of(doc, spans, l, None, HELD_ROWS, lower_bound, view)
    });
    let (outer, slowest, refused, incomplete) = match (&analysis.graph, &analysis.graph_refusal) {
        (Some(g), _) => (
            g.outer_wall_time_ns,
            g.rankings
                .measured
                .slowest_by_self_time
                .iter()
                .take(SLOWEST_ROWS)
                .map(|c| SlowSpan {
                    id: c.id.to_string(),
                    path: spans
                        .indexed_path_of_id(doc, &c.id)
                        .unwrap_or_else(|| c.name.to_string()),
                    host_self_time_ns: c.host_self_time_ns,
                    host_total_time_ns: c.host_total_time_ns,
                })
                .collect(),
            Vec::new(),
            g.incomplete_capture,
        ),
        (None, Some(r)) => (None, Vec::new(), r.reasons.clone(), false),
        (None, None) => (None, Vec::new(), Vec::new(), false),
    };
    let g = &analysis.gradients;
    let gradients = GradientRecord {
        parameters: g.parameter_count(),
        present: g.counts.present,
        missing: g.counts.missing,
        zero: g.counts.zero,
        non_finite: g.counts.non_finite,
        not_reported: g.counts.not_reported,
        without_gradient: g.without_gradient.clone(),
        zero_keys: g.zero.clone(),
        non_finite_keys: g.non_finite.clone(),
        non_parameter_count: g.non_parameter.len(),
        non_parameter_bytes: g.non_parameter_bytes,
        non_parameter_bytes_overflowed: g.non_parameter_bytes_overflowed,
        coverage: analysis
            .capabilities
            .level(trace_graph::CapabilityKind::Gradients),
    };
    let findings = findings(analysis);
    SummaryReport {
        run: RunRecord::of(doc),
        health: HealthRecord::of(&analysis.health),
        answer: AnswerRecord::of(doc, analysis, &findings),
        coverage: CoverageLine::of(doc, analysis),
        not_seen: not_seen(doc, analysis),
        time_origin_ns: analysis.time_origin_ns,
        outer_wall_time_ns: outer,
        timing_from_incomplete_capture: incomplete,
        peaks,
        memory_overflow: analysis.memory.logical_overflow.clone(),
        slowest_spans: slowest,
        timing_refused: refused,
        slowest_operations: SlowestOperations::of(analysis),
        backward_modules: backward::build(doc, analysis, SLOWEST_ROWS),
        gradients,
        steps: analysis.steps.clone(),
        inference: crate::inference::InferenceFigures::of_inference(doc).map(|f| f.record()),
        findings,
    }
}

/// The line shown instead of every logical figure when allocation sizes overflow.
pub fn overflow_line(o: &BytesOverflow) -> String {
    format!(
        "overflowed: allocation sizes add up past 2^64 bytes (at the alloc of {} on {}, {}); no logical memory figure is shown (health: memory_bytes_overflow)",
        escape(o.storage_id.as_deref().unwrap_or("?")),
        escape(&o.device),
        bytes(o.bytes)
    )
}

/// `validity, completeness (n errors, m warnings)`.
pub fn health_line(h: &HealthRecord) -> String {
    format!(
        "{}, {} ({} errors, {} warnings)",
        if h.structurally_valid {
            "valid"
        } else {
            "INVALID"
        },
        if h.capture_complete {
            "complete"
        } else {
            "incomplete"
        },
        h.error_count,
        h.warning_count
    )
}

/// `: code, code (…) — check explains them` naming the issues' codes (at most
/// [`SHOWN_CODES`]), or "" without issues.
pub fn issue_codes_suffix(h: &HealthRecord) -> String {
    if h.issue_codes.is_empty() {
        return String::new();
    }
    let shown = h.issue_codes.len().min(SHOWN_CODES);
    let more = match h.issue_codes.len() - shown {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        ": {}{more} (`check` explains them)",
        h.issue_codes[..shown].join(", ")
    )
}

/// Issue codes the summary's health line names.
pub const SHOWN_CODES: usize = 4;

/// Renders the report as text.
pub fn render(r: &SummaryReport, path: &str) -> String {
    let mut out = String::new();
    let run = &r.run;
    let _ = writeln!(out, "trace        {}", escape(path));
    let mut identity = format!("{} · {}", run.entrypoint, run.run_id);
    if let Some(phase) = &run.phase {
        let _ = write!(identity, " · {phase}");
    }
    if let Some(step) = run.capture_step {
        match run.last_capture_step.filter(|&l| l > step) {
            Some(last) => {
                let _ = write!(identity, " · steps {step}–{last}");
            }
            None => {
                let _ = write!(identity, " · step {step}");
            }
        }
        if let Some(w) = run.warmup_steps {
            let _ = write!(identity, " after {w} warm-up");
        }
    }
    if let Some(d) = &run.device {
        let _ = write!(identity, " · {d}");
    }
    if let Some(c) = &run.candle_version {
        let _ = write!(identity, " · candle {c}");
    }
    let _ = writeln!(out, "run          {}", escape(&identity));
    render_answer(&mut out, r);
    let _ = writeln!(
        out,
        "health       {}{}",
        health_line(&r.health),
        issue_codes_suffix(&r.health)
    );
    let _ = writeln!(out, "coverage     {}", escape(&r.coverage.text()));
    out.push('\n');
    match (&r.peaks, &r.memory_overflow) {
        (_, Some(o)) => {
            let _ = writeln!(out, "memory peak  {}", overflow_line(o));
        }
        (Some(p), None) if p.memory_peak.is_some() => peak::render(&mut out, p, r.time_origin_ns),
        _ => out.push_str("memory peak  no memory events in this trace\n"),
    }
    out.push('\n');
    if !r.timing_refused.is_empty() {
        let _ = writeln!(
            out,
            "slowest spans  unavailable: {}",
            escape(&r.timing_refused.join("; "))
        );
    } else if !r.slowest_spans.is_empty() {
        out.push_str(if r.timing_from_incomplete_capture {
            "slowest spans (host self time in the measured region; closed spans of an incomplete capture)\n"
        } else {
            "slowest spans (host self time in the measured region)\n"
        });
        let mut t = crate::table::Table::new(&[
            ("SELF", crate::table::Align::Right),
            ("TOTAL", crate::table::Align::Right),
            ("SPAN", crate::table::Align::Left),
        ]);
        for s in &r.slowest_spans {
            t.row([
                duration(s.host_self_time_ns),
                duration(s.host_total_time_ns),
                crate::table::Table::path(&s.path),
            ]);
        }
        out.push_str(&t.render("  "));
    }
    out.push('\n');
    if render_steps(&mut out, &r.steps) {
        out.push('\n');
    }
    if let Some(i) = &r.inference {
        out.push_str(&crate::inference::render_record(i));
        out.push('\n');
    }
    render_operations(&mut out, &r.slowest_operations);
    if let Some(b) = &r.backward_modules {
        out.push('\n');
        backward::render(&mut out, b);
    }
    out.push('\n');
    let g = &r.gradients;
    if g.parameters == 0 && g.coverage == CapabilityLevel::Unavailable {
        out.push_str("gradients    not captured\n");
    } else {
        let _ = writeln!(
            out,
            "gradients    {} of {} parameters present · {} missing · {} zero · {} non-finite{}",
            g.present,
            g.parameters,
            g.missing,
            g.zero,
            g.non_finite,
            if g.not_reported > 0 {
                format!(" · {} not reported", g.not_reported)
            } else {
                String::new()
            }
        );
        for (what, keys) in [
            (
                if g.not_reported > 0 {
                    "without gradient or not reported"
                } else {
                    "without gradient"
                },
                &g.without_gradient,
            ),
            ("zero", &g.zero_keys),
            ("non-finite", &g.non_finite_keys),
        ] {
            if !keys.is_empty() {
                let shown: Vec<&str> = keys.iter().take(5).map(String::as_str).collect();
                let more = keys.len().saturating_sub(shown.len());
                let _ = writeln!(
                    out,
                    "  {what}: {}{}",
                    escape(&shown.join(", ")),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
        }
        if g.non_parameter_count > 0 {
            let _ = writeln!(
                out,
                "  {} non-parameter gradient{} ({}): tensors that are not parameters kept a gradient",
                g.non_parameter_count,
                if g.non_parameter_count == 1 { "" } else { "s" },
                if g.non_parameter_bytes_overflowed {
                    trace_format::OVERFLOWED.to_string()
                } else {
                    trace_format::opt_bytes(g.non_parameter_bytes)
                }
            );
        }
    }
    out.push('\n');
    render_findings(&mut out, &r.findings);
    out
}

/// The per-step table of a capture of several steps (nothing for a single step); true when it
/// wrote one.
pub fn render_steps(out: &mut String, steps: &trace_graph::Steps) -> bool {
    if steps.rows.len() < 2 {
        return false;
    }
    let first = steps.rows.first().map_or(0, |r| r.step_index);
    let last = steps.rows.last().map_or(0, |r| r.step_index);
    let growth = match &steps.growth {
        Some(g) => format!(
            " · live memory grows {}+{} per step",
            if g.constant {
                "exactly "
            } else {
                "on average "
            },
            bytes(g.bytes_per_step)
        ),
        None if steps.rows.iter().all(|r| r.memory.is_some()) => {
            " · no growth across steps".to_string()
        }
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "steps        {} captured ({first}–{last}){growth}",
        steps.rows.len()
    );
    use crate::table::{Align, Table};
    use trace_schema::Pass;
    let mut t = Table::new(&[
        ("STEP", Align::Left),
        ("TIME", Align::Right),
        ("FORWARD", Align::Right),
        ("BACKWARD", Align::Right),
        ("OPTIMIZER", Align::Right),
        ("PEAK", Align::Right),
        ("LIVE AT END", Align::Right),
        ("LEFT LIVE", Align::Right),
    ]);
    let pass = |r: &trace_graph::StepRow, p: Pass| opt_duration(r.pass_time_ns.get(&p).copied());
    for r in &steps.rows {
        let m = r.memory.as_ref();
        t.row([
            Table::text(&r.name),
            opt_duration(r.duration_ns),
            pass(r, Pass::Forward),
            pass(r, Pass::Backward),
            pass(r, Pass::Optimizer),
            m.map_or("-".to_string(), |m| bytes(m.peak_bytes)),
            m.and_then(|m| m.live_at_end_bytes)
                .map_or("-".to_string(), bytes),
            m.and_then(|m| m.retained_bytes.zip(m.retained_count))
                .map_or("-".to_string(), |(b, n)| format!("{} in {n}", bytes(b))),
        ]);
    }
    out.push_str(&t.render("  "));
    out.push_str("  (LEFT LIVE: storages the step allocated and still live at its end)\n");
    true
}

/// The answer first: the peak (when, where, which pass), what held it, what would lower it
/// most (replayed), then the time.
pub fn render_answer(out: &mut String, r: &SummaryReport) {
    let a = &r.answer;
    match (&r.peaks, &r.memory_overflow) {
        (_, Some(o)) => {
            let _ = writeln!(out, "peak         {}", overflow_line(o));
        }
        (Some(p), None) => {
            if let Some(m) = p.memory_peak.as_ref().filter(|m| m.live_bytes > 0) {
                let on = m
                    .device
                    .as_deref()
                    .map(|d| format!(" on {}", escape(d)))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "peak         {}",
                    peak::headline(m, &on, r.time_origin_ns)
                );
                answer_held(out, a, m.live_bytes);
            }
        }
        _ => out.push_str("peak         no memory events in this trace\n"),
    }
    for (i, f) in a.lower_the_peak.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}{}. {} [{}]",
            if i == 0 {
                "to lower it  "
            } else {
                "             "
            },
            i + 1,
            escape(&f.text),
            f.code
        );
    }
    let mut time = opt_duration(r.outer_wall_time_ns);
    if r.timing_from_incomplete_capture && r.outer_wall_time_ns.is_some() {
        time.push_str(" (from an incomplete capture)");
    }
    if let Some(s) = r.slowest_spans.first() {
        let share = r
            .outer_wall_time_ns
            .filter(|&o| o > 0)
            .map(|o| format!(", {:.1}%", 100.0 * s.host_self_time_ns as f64 / o as f64))
            .unwrap_or_default();
        let _ = write!(
            time,
            "; slowest span {} ({} self{share})",
            escape(&s.path),
            duration(s.host_self_time_ns)
        );
    }
    if let Some(t) = &a.save_time {
        let _ = write!(time, "; most to gain: {}, {}", t.code, escape(&t.text));
    }
    let _ = writeln!(out, "time         {time}");
}

/// What held the peak, as the summary and the report's first screen both say it: the
/// categories with their bytes and share of `peak_bytes` (`category 1.00 MiB (40%) · …`), and
/// the fixed vs batch-scaled split when known.
pub(crate) fn held_by_text(a: &AnswerRecord, peak_bytes: u64) -> (String, Option<String>) {
    let pct = |b: u64| 100.0 * b as f64 / peak_bytes.max(1) as f64;
    let cats: Vec<String> = a
        .held_by
        .iter()
        .map(|c| {
            format!(
                "{} {} ({:.0}%)",
                c.category.as_str(),
                bytes(c.bytes),
                pct(c.bytes)
            )
        })
        .collect();
    let by_category: std::collections::BTreeMap<_, _> =
        a.held_by.iter().map(|c| (c.category, c.bytes)).collect();
    let split = match (a.fixed_bytes, a.batch_scaled_bytes) {
        (Some(fixed), Some(scaled)) => Some(format!(
            "fixed {} ({:.0}%: {}) · batch-scaled {} ({:.0}%: activations)",
            bytes(fixed),
            pct(fixed),
            trace_graph::findings::fixed_categories(&by_category),
            bytes(scaled),
            pct(scaled)
        )),
        _ => None,
    };
    (cats.join(" · "), split)
}

fn answer_held(out: &mut String, a: &AnswerRecord, peak_bytes: u64) {
    let (cats, split) = held_by_text(a, peak_bytes);
    if !cats.is_empty() {
        let _ = writeln!(out, "held by      {cats}");
    }
    if let Some(split) = split {
        let _ = writeln!(out, "             {split}");
    }
    if !a.top_groups.is_empty() {
        let bound = if a.groups_lower_bound { "≥ " } else { "" };
        let groups: Vec<String> = a
            .top_groups
            .iter()
            .map(|g| {
                format!(
                    "{bound}{} {} ({} storage{})",
                    bytes(g.bytes),
                    escape(&trace_format::elide_middle(&g.key, 60)),
                    g.storages,
                    if g.storages == 1 { "" } else { "s" }
                )
            })
            .collect();
        let _ = writeln!(out, "  largest    {}", groups.join(" · "));
    }
}

/// Renders the slowest operations: one line when they were not captured.
pub fn render_operations(out: &mut String, s: &SlowestOperations) {
    use crate::ops::{few_samples_line, header, lost_samples_line, pct};
    let Some(t) = s.totals.as_ref().filter(|_| s.available) else {
        let _ = writeln!(
            out,
            "slowest operations  unavailable — {}",
            escape(s.reason.as_deref().unwrap_or("not captured"))
        );
        return;
    };
    let _ = writeln!(out, "slowest operations ({})", header(t));
    for line in few_samples_line(t).into_iter().chain(lost_samples_line(t)) {
        let _ = writeln!(out, "  warning: {line}");
    }
    let mut table = crate::table::Table::new(&[
        ("EST. SELF", crate::table::Align::Right),
        ("95% INTERVAL", crate::table::Align::Right),
        ("SHARE", crate::table::Align::Right),
        ("SAMPLES", crate::table::Align::Right),
        ("PASS", crate::table::Align::Left),
        ("OPERATION", crate::table::Align::Left),
    ]);
    for row in &s.rows {
        table.row([
            opt_duration(row.self_ns),
            match (row.self_ns_low, row.self_ns_high) {
                (Some(l), Some(h)) => format!("{}–{}", duration(l), duration(h)),
                _ => "-".to_string(),
            },
            pct(row.share),
            row.samples.to_string(),
            row.pass.map_or("-", |p| p.as_str()).to_string(),
            crate::table::Table::path(row.op.as_deref().unwrap_or("-")),
        ]);
    }
    out.push_str(&table.render("  "));
}

/// Renders findings with their advice.
pub fn render_findings(out: &mut String, findings: &[FindingRecord]) {
    if findings.is_empty() {
        out.push_str("findings     none\n");
        return;
    }
    out.push_str("findings\n");
    for f in findings {
        let _ = writeln!(
            out,
            "  [{}] {}: {}",
            f.severity.as_str(),
            f.code,
            escape(&f.summary)
        );
        if let Some(a) = &f.advice {
            let _ = writeln!(out, "      → {a}");
        }
    }
}

/// Findings as `summary` states them (with advice), with the time of their evidence.
pub fn finding_texts(analysis: &Analysis) -> Vec<trace_report::FindingText> {
    findings(analysis)
        .into_iter()
        .zip(&analysis.findings)
        .map(|(r, f)| trace_report::FindingText {
            severity: r.severity.as_str().to_string(),
            code: r.code,
            summary: r.summary,
            advice: r.advice.clone(),
            timestamp_ns: f.evidence.timestamp_ns,
        })
        .collect()
}
