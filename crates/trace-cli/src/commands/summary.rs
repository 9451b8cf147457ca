//! `candle-graph summary TRACE`: identity, health, coverage, wall time, memory peak and what held
//! it, slowest spans, gradient verdicts and findings.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use trace_graph::{Analysis, CapabilityLevel, Severity};
use trace_memory::LogicalMemoryProfile;
use trace_schema::{ExecutionStep, MemoryCategory, TraceDocument};

use crate::advice::advice;
use crate::envelope::snake;
use crate::live::{self, StorageRow};
use crate::spans::SpanPaths;
use crate::units;

/// Rows shown in the "held at the peak" table.
pub const HELD_ROWS: usize = 8;
/// Slowest spans shown.
pub const SLOWEST_ROWS: usize = 5;

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
            phase: m.phase.map(|p| snake(&p)),
            capture_step: m.capture_step,
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
}

/// The peak of one step kind.
#[derive(Debug, Clone, Serialize)]
pub struct StepPeakRecord {
    /// Forward, backward or optimizer.
    pub step: ExecutionStep,
    /// Live bytes at the step's peak.
    pub live_bytes: u64,
    /// When, ns.
    pub timestamp_ns: u64,
    /// Largest category at that moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dominant_category: Option<MemoryCategory>,
}

/// The logical memory peak and what held it.
#[derive(Debug, Clone, Serialize)]
pub struct PeakRecord {
    /// Live bytes at the peak (pre-existing storages included).
    pub live_bytes: u64,
    /// When it was first reached, ns since session start.
    pub timestamp_ns: u64,
    /// Live bytes per device.
    pub by_device: BTreeMap<String, u64>,
    /// Step kind whose span contains the peak, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<ExecutionStep>,
    /// Path of the span whose allocation reached the peak, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reached_in: Option<String>,
    /// Live bytes per category.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// The peak of each step kind.
    pub step_peaks: Vec<StepPeakRecord>,
    /// The largest storages live at the peak.
    pub held: Vec<StorageRow>,
    /// Storages live at the peak not listed in `held`.
    pub held_more_count: usize,
    /// Their bytes.
    pub held_more_bytes: u64,
    /// Figures are lower bounds (truncated, failed or lossy capture).
    pub lower_bound: bool,
}

impl PeakRecord {
    /// From the logical profile; `None` when no allocation was seen.
    pub fn of(
        logical: &LogicalMemoryProfile,
        paths: &mut SpanPaths<'_>,
        top: usize,
        device: Option<&str>,
        lower_bound: bool,
    ) -> Option<Self> {
        let peak = logical.peak.as_ref()?;
        let live: Vec<_> = peak
            .live_allocations
            .iter()
            .filter(|l| device.is_none_or(|d| &*l.device == d))
            .collect();
        let shown = top.min(live.len());
        let held = live[..shown]
            .iter()
            .map(|l| StorageRow::of(l, paths))
            .collect();
        let rest = &live[shown..];
        // the allocation that reached the peak: allocated exactly at the peak batch
        let reached = peak
            .live_allocations
            .iter()
            .filter(|l| l.start_ns == peak.timestamp_ns && !l.pre_existing)
            .find_map(|l| l.span_id.as_deref())
            .and_then(|s| paths.path(s));
        let step = logical
            .step_peaks
            .iter()
            .find(|s| {
                s.peak.timestamp_ns == peak.timestamp_ns && s.peak.live_bytes == peak.live_bytes
            })
            .map(|s| s.step)
            .or_else(|| {
                peak.live_allocations
                    .iter()
                    .filter(|l| l.start_ns == peak.timestamp_ns)
                    .find_map(|l| l.span_id.as_deref().and_then(|s| paths.step(s)))
            });
        Some(Self {
            live_bytes: peak.live_bytes,
            timestamp_ns: peak.timestamp_ns,
            by_device: peak.by_device.clone(),
            step,
            reached_in: reached,
            by_category: peak.by_category.clone(),
            step_peaks: logical
                .step_peaks
                .iter()
                .map(|s| StepPeakRecord {
                    step: s.step,
                    live_bytes: s.peak.live_bytes,
                    timestamp_ns: s.peak.timestamp_ns,
                    dominant_category: s.peak.dominant_category,
                })
                .collect(),
            held,
            held_more_count: rest.len(),
            held_more_bytes: rest.iter().map(|l| l.bytes).sum(),
            lower_bound,
        })
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
    pub advice: Option<&'static str>,
}

/// Findings with advice, in the analyzer's order.
pub fn findings(analysis: &Analysis) -> Vec<FindingRecord> {
    let ended_early = analysis.health.truncated || analysis.health.capture_failed;
    analysis
        .findings
        .iter()
        .map(|f| FindingRecord {
            severity: f.severity,
            code: snake(&f.code),
            summary: f.summary.clone(),
            advice: match f.code {
                // Live at a cut or a failure is not retention into the next step.
                trace_graph::FindingCode::StoragesRetainedAtEnd if ended_early => Some(
                    "the capture did not finish: these storages were live when it stopped, not necessarily retained",
                ),
                code => advice(code),
            },
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
    /// What the capture did not see (empty: nothing known to be missing).
    pub not_seen: Vec<String>,
    /// Wall time of the measured region, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outer_wall_time_ns: Option<u64>,
    /// Logical memory peak; absent without memory events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<PeakRecord>,
    /// Spans with the largest host self time in the measured region.
    pub slowest_spans: Vec<SlowSpan>,
    /// Why timing is unavailable, when the graph was refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timing_refused: Vec<String>,
    /// Gradient verdicts.
    pub gradients: GradientRecord,
    /// Findings.
    pub findings: Vec<FindingRecord>,
}

/// The coverage statement: every capability below complete with its reason, dropped events, and
/// the host-handle caveat on GPU devices.
pub fn not_seen(doc: &TraceDocument, analysis: &Analysis) -> Vec<String> {
    let mut out = Vec::new();
    for c in &analysis.capabilities.capabilities {
        if c.level != CapabilityLevel::Complete {
            out.push(format!(
                "{} {}: {}",
                snake(&c.kind),
                snake(&c.level),
                c.reason
            ));
        }
    }
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
        if device != "cpu" {
            out.push(format!(
                "storages on {device} are seen through host handles: logical bytes are tensor storages, not the device allocator's pool"
            ));
        }
    }
    out
}

/// Builds the report.
pub fn build(doc: &TraceDocument, analysis: &Analysis) -> SummaryReport {
    let mut paths = SpanPaths::new(doc);
    let lower_bound = analysis.health.memory_lower_bound;
    let memory_peak = analysis
        .memory
        .logical
        .as_ref()
        .and_then(|l| PeakRecord::of(l, &mut paths, HELD_ROWS, None, lower_bound));
    let (outer, slowest, refused) = match (&analysis.graph, &analysis.graph_refusal) {
        (Some(g), _) => (
            g.outer_wall_time_ns,
            g.rankings
                .measured
                .slowest_by_self_time
                .iter()
                .take(SLOWEST_ROWS)
                .map(|c| SlowSpan {
                    id: c.id.to_string(),
                    path: paths.path(&c.id).unwrap_or_else(|| c.name.to_string()),
                    host_self_time_ns: c.host_self_time_ns,
                    host_total_time_ns: c.host_total_time_ns,
                })
                .collect(),
            Vec::new(),
        ),
        (None, Some(r)) => (None, Vec::new(), r.reasons.clone()),
        (None, None) => (None, Vec::new(), Vec::new()),
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
        coverage: analysis
            .capabilities
            .level(trace_graph::CapabilityKind::Gradients),
    };
    SummaryReport {
        run: RunRecord::of(doc),
        health: HealthRecord {
            structurally_valid: analysis.health.structurally_valid,
            capture_complete: analysis.health.capture_complete,
            error_count: analysis.health.error_count,
            warning_count: analysis.health.warning_count,
        },
        not_seen: not_seen(doc, analysis),
        outer_wall_time_ns: outer,
        memory_peak,
        slowest_spans: slowest,
        timing_refused: refused,
        gradients,
        findings: findings(analysis),
    }
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

/// `parameter 1.00 MiB · activation 2.00 KiB …` in category order, zeros omitted.
pub fn categories_line(by_category: &BTreeMap<MemoryCategory, u64>) -> String {
    MemoryCategory::ALL
        .iter()
        .filter_map(|c| by_category.get(c).filter(|&&b| b > 0).map(|b| (c, b)))
        .map(|(c, b)| format!("{} {}", c.as_str(), units::bytes(*b)))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Renders the peak block shared by `summary` and `memory`.
pub fn render_peak(out: &mut String, p: &PeakRecord) {
    let devices: Vec<&str> = p.by_device.keys().map(String::as_str).collect();
    let _ = write!(
        out,
        "memory peak  {}{} at {} on {}",
        if p.lower_bound { "≥ " } else { "" },
        units::bytes(p.live_bytes),
        units::duration(p.timestamp_ns),
        devices.join(", ")
    );
    if let Some(step) = p.step {
        let _ = write!(out, ", in the {} step", snake(&step));
    }
    out.push('\n');
    if let Some(span) = &p.reached_in {
        let _ = writeln!(out, "  reached by an allocation in {span}");
    }
    let _ = writeln!(out, "  by category: {}", categories_line(&p.by_category));
    if !p.step_peaks.is_empty() {
        out.push_str("  peak of each step:\n");
        for s in &p.step_peaks {
            let _ = writeln!(
                out,
                "    {:<10} {:>11} at {}{}",
                snake(&s.step),
                units::bytes(s.live_bytes),
                units::duration(s.timestamp_ns),
                s.dominant_category
                    .map(|c| format!(", mostly {}", c.as_str()))
                    .unwrap_or_default()
            );
        }
    }
    let total = p.held.len() + p.held_more_count;
    let _ = writeln!(out, "  held at the peak (top {} of {total}):", p.held.len());
    out.push_str(&live::table(&p.held).render("    "));
    if p.held_more_count > 0 {
        let _ = writeln!(
            out,
            "    {} more = {}",
            p.held_more_count,
            units::bytes(p.held_more_bytes)
        );
    }
    let _ = writeln!(out, "    ({})", live::LEGEND);
}

/// Renders the report as text.
pub fn render(r: &SummaryReport, path: &str) -> String {
    let mut out = String::new();
    let run = &r.run;
    let _ = writeln!(out, "trace        {path}");
    let mut identity = format!("{} · {}", run.entrypoint, run.run_id);
    if let Some(phase) = &run.phase {
        let _ = write!(identity, " · {phase}");
    }
    if let Some(step) = run.capture_step {
        let _ = write!(identity, " · step {step}");
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
    let _ = writeln!(out, "run          {identity}");
    let _ = writeln!(out, "health       {}", health_line(&r.health));
    if r.not_seen.is_empty() {
        out.push_str("coverage     everything declared was seen\n");
    } else {
        out.push_str("coverage     not seen or not complete:\n");
        for item in &r.not_seen {
            let _ = writeln!(out, "  - {item}");
        }
    }
    let _ = writeln!(
        out,
        "wall time    {}",
        units::opt_duration(r.outer_wall_time_ns)
    );
    out.push('\n');
    match &r.memory_peak {
        Some(p) => render_peak(&mut out, p),
        None => out.push_str("memory peak  no memory events in this trace\n"),
    }
    out.push('\n');
    if !r.timing_refused.is_empty() {
        let _ = writeln!(
            out,
            "slowest spans  unavailable: {}",
            r.timing_refused.join("; ")
        );
    } else if !r.slowest_spans.is_empty() {
        out.push_str("slowest spans (host self time in the measured region)\n");
        let mut t = crate::table::Table::new(&[
            ("SELF", crate::table::Align::Right),
            ("TOTAL", crate::table::Align::Right),
            ("SPAN", crate::table::Align::Left),
        ]);
        for s in &r.slowest_spans {
            t.row([
                units::duration(s.host_self_time_ns),
                units::duration(s.host_total_time_ns),
                s.path.clone(),
            ]);
        }
        out.push_str(&t.render("  "));
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
                    shown.join(", "),
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
                units::opt_bytes(g.non_parameter_bytes)
            );
        }
    }
    out.push('\n');
    render_findings(&mut out, &r.findings);
    out
}

/// Renders findings with their advice.
pub fn render_findings(out: &mut String, findings: &[FindingRecord]) {
    if findings.is_empty() {
        out.push_str("findings     none\n");
        return;
    }
    out.push_str("findings\n");
    for f in findings {
        let _ = writeln!(out, "  [{}] {}: {}", snake(&f.severity), f.code, f.summary);
        if let Some(a) = f.advice {
            let _ = writeln!(out, "      → {a}");
        }
    }
}
