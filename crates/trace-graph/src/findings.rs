//! Typed findings `{code, severity, summary, evidence, requires}`, each produced only when the
//! capabilities it relies on are available (partial or complete).

use serde::Serialize;
use trace_schema::{ExecutionStep, MemoryCategory};

use crate::capability::{CapabilityKind, CapabilityLevel, CapabilityMatrix};
use crate::gradients::GradientSummary;
use crate::graph::ExecutionGraph;
use crate::health::Severity;

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingCode {
    /// The span with the largest host self time in the measured subtree.
    LargestHostSelfTime,
    /// The logical memory peak: when, in which step, what dominates it.
    MemoryPeak,
    /// Activations still live when the optimizer step runs.
    ActivationsRetainedIntoOptimizer,
    /// Parameters that received no gradient.
    ParametersWithoutGradient,
    /// Parameters whose gradient is all zero.
    ZeroGradients,
    /// Parameters whose gradient has NaN or ±inf elements.
    NonFiniteGradients,
    /// Storages allocated in the capture still live at its end.
    StoragesRetainedAtEnd,
    /// A capability that is not complete.
    CoverageGap,
}

/// Evidence behind a finding; every field only when it applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Evidence {
    /// Graph node ids (spans, ops, tensors).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<String>,
    /// `{device}:{storage_id}` of storages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub storages: Vec<String>,
    /// `root/key` of gradients.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gradients: Vec<String>,
    /// Bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// A duration, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// A reference duration (e.g. outer wall time), ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of_duration_ns: Option<u64>,
    /// A point in time, ns since session start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp_ns: Option<u64>,
    /// A count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The total the count is out of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of_count: Option<u64>,
    /// Training step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<ExecutionStep>,
    /// Memory category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<MemoryCategory>,
    /// Capability (coverage gaps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<CapabilityKind>,
    /// Capability level (coverage gaps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<CapabilityLevel>,
    /// Byte figures are lower bounds (the capture is incomplete).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lower_bound: bool,
}

/// A finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub code: FindingCode,
    /// Error (a defect), warning or info.
    pub severity: Severity,
    /// One-sentence summary with the figures.
    pub summary: String,
    /// Ids, bytes and times behind it.
    pub evidence: Evidence,
    /// Capabilities it relies on.
    pub requires: Vec<CapabilityKind>,
}

/// Formats nanoseconds with a readable unit (ns, µs, ms, s).
pub(crate) fn ms(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// Formats bytes with a binary unit.
pub(crate) fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The largest host self time in the measured subtree.
pub(crate) fn largest_self_time(
    graph: &ExecutionGraph,
    caps: &CapabilityMatrix,
) -> Option<Finding> {
    let requires = vec![
        CapabilityKind::StructuralTrace,
        CapabilityKind::NestedHostTime,
    ];
    if !caps.allows(&requires) {
        return None;
    }
    let top = graph.rankings.measured.slowest_by_self_time.first()?;
    let outer = graph.outer_wall_time_ns;
    let share = outer
        .filter(|&o| o > 0)
        .map(|o| {
            format!(
                " ({:.1}% of the {} measured region)",
                100.0 * top.host_self_time_ns as f64 / o as f64,
                ms(o)
            )
        })
        .unwrap_or_default();
    Some(Finding {
        code: FindingCode::LargestHostSelfTime,
        severity: Severity::Info,
        summary: format!(
            "span {} ({}) has the largest host self time: {}{share}",
            top.name,
            top.id,
            ms(top.host_self_time_ns)
        ),
        evidence: Evidence {
            node_ids: vec![top.id.to_string()],
            duration_ns: Some(top.host_self_time_ns),
            of_duration_ns: outer,
            ..Evidence::default()
        },
        requires,
    })
}

/// Missing, zero and non-finite gradients.
pub(crate) fn gradient_findings(
    g: &GradientSummary,
    caps: &CapabilityMatrix,
    out: &mut Vec<Finding>,
) {
    let requires = vec![CapabilityKind::Gradients];
    if !caps.allows(&requires) {
        return;
    }
    let n = g.parameter_count();
    if n == 0 {
        return;
    }
    let without = g.without_gradient.len() as u64;
    if without > 0 {
        let all = without == n;
        let summary = if all {
            format!("{without} of {n} parameters received no gradient: the symptom of an op without a backward (or a detached tensor) between the parameters and the loss")
        } else {
            format!("{without} of {n} parameters received no gradient: they are unused in the loss or cut off from it")
        };
        out.push(Finding {
            code: FindingCode::ParametersWithoutGradient,
            severity: if all {
                Severity::Error
            } else {
                Severity::Warning
            },
            summary,
            evidence: Evidence {
                gradients: g.without_gradient.clone(),
                count: Some(without),
                of_count: Some(n),
                ..Evidence::default()
            },
            requires: requires.clone(),
        });
    }
    let zero = g.zero.len() as u64;
    if zero > 0 {
        out.push(Finding {
            code: FindingCode::ZeroGradients,
            severity: Severity::Warning,
            summary: format!("{zero} of {n} parameters received an all-zero gradient"),
            evidence: Evidence {
                gradients: g.zero.clone(),
                count: Some(zero),
                of_count: Some(n),
                ..Evidence::default()
            },
            requires: requires.clone(),
        });
    }
    let bad = g.non_finite.len() as u64;
    if bad > 0 {
        out.push(Finding {
            code: FindingCode::NonFiniteGradients,
            severity: Severity::Error,
            summary: format!(
                "{bad} of {n} parameters received a gradient with NaN or infinite elements"
            ),
            evidence: Evidence {
                gradients: g.non_finite.clone(),
                count: Some(bad),
                of_count: Some(n),
                ..Evidence::default()
            },
            requires,
        });
    }
}

/// One finding per capability that is not complete.
pub(crate) fn coverage_gaps(caps: &CapabilityMatrix, out: &mut Vec<Finding>) {
    for c in &caps.capabilities {
        let severity = match c.level {
            CapabilityLevel::Complete => continue,
            CapabilityLevel::Unavailable => Severity::Info,
            CapabilityLevel::Partial => Severity::Warning,
            CapabilityLevel::Invalid => Severity::Error,
        };
        let kind = serde_json::to_value(c.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let level = serde_json::to_value(c.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        out.push(Finding {
            code: FindingCode::CoverageGap,
            severity,
            summary: format!("{kind} is {level}: {}", c.reason),
            evidence: Evidence {
                capability: Some(c.kind),
                level: Some(c.level),
                count: Some(c.observed),
                ..Evidence::default()
            },
            requires: Vec::new(),
        });
    }
}

/// The innermost span containing `ts` and its step (own or inherited from an ancestor).
pub(crate) fn step_at(
    doc: &trace_schema::TraceDocument,
    index: &crate::index::TraceIndex,
    ts: u64,
) -> (Option<usize>, Option<ExecutionStep>) {
    use crate::index::{recorded_end, NONE};
    let n = doc.spans.len();
    let mut step: Vec<Option<ExecutionStep>> = vec![None; n];
    let mut depth = vec![0u32; n];
    let mut best: Option<(u32, u64, usize)> = None;
    for &s in &index.preorder {
        let s = s as usize;
        let span = &doc.spans[s];
        let p = index.parent[s];
        if p != NONE {
            step[s] = span.pass.or(step[p as usize]);
            depth[s] = depth[p as usize] + 1;
        } else {
            step[s] = span.pass;
        }
        let end = match span.duration_ns {
            None => u64::MAX,
            Some(_) => match recorded_end(span) {
                Some(e) => e,
                None => continue,
            },
        };
        if span.start_ns <= ts && ts < end {
            let key = (depth[s], span.start_ns, s);
            if best.is_none_or(|b| key > b) {
                best = Some(key);
            }
        }
    }
    match best {
        Some((_, _, s)) => (Some(s), step[s]),
        None => (None, None),
    }
}

fn step_name(step: Option<ExecutionStep>) -> &'static str {
    match step {
        Some(ExecutionStep::Forward) => "the forward step",
        Some(ExecutionStep::Backward) => "the backward step",
        Some(ExecutionStep::Optimizer) => "the optimizer step",
        None => "no declared step",
    }
}

fn category_name(c: MemoryCategory) -> &'static str {
    c.as_str()
}

/// How many storages a memory finding names.
pub const TOP_STORAGES: usize = 5;

/// Names a storage for a reader: its label, else its shape and dtype, then `device:storage id`.
fn describe(l: &trace_memory::StorageLifetime) -> String {
    let mut name = match (&l.label, &l.shape, &l.dtype) {
        (Some(label), _, _) => format!("{label} "),
        (None, Some(shape), Some(dtype)) => format!("{shape:?} {dtype} "),
        _ => String::new(),
    };
    name.push_str(&crate::health::lifetime_label(l));
    let mut s = format!(
        "{name} ({}, {}",
        human_bytes(l.bytes),
        category_name(l.category)
    );
    if let Some(span) = &l.span_id {
        s.push_str(&format!(", allocated in {span}"));
    }
    if let Some(op) = &l.op_name {
        s.push_str(&format!(" by {op}"));
    }
    s.push(')');
    s
}

/// Memory findings: the peak, activations retained into the optimizer step, storages retained
/// at the end.
pub(crate) fn memory_findings(
    doc: &trace_schema::TraceDocument,
    index: &crate::index::TraceIndex,
    logical: Option<&trace_memory::LogicalMemoryProfile>,
    health: &crate::health::TraceHealth,
    caps: &CapabilityMatrix,
    out: &mut Vec<Finding>,
) {
    let requires = vec![CapabilityKind::LogicalMemory];
    let Some(logical) = logical.filter(|_| caps.allows(&requires)) else {
        return;
    };
    let lower_bound = health.memory_lower_bound;
    let bound = if lower_bound {
        " (a lower bound: the capture is incomplete)"
    } else {
        ""
    };
    if let Some(peak) = logical.peak.as_ref().filter(|p| p.live_bytes > 0) {
        let (span, step) = step_at(doc, index, peak.timestamp_ns);
        let dominant = peak
            .by_category
            .iter()
            .max_by_key(|(c, b)| (**b, std::cmp::Reverse(**c)))
            .map(|(c, b)| (*c, *b));
        let top: Vec<&trace_memory::StorageLifetime> =
            peak.live_allocations.iter().take(TOP_STORAGES).collect();
        let mut summary = format!(
            "logical memory peaks at {}{bound} at {} during {}",
            human_bytes(peak.live_bytes),
            crate::findings::ms(peak.timestamp_ns),
            step_name(step)
        );
        if let Some(s) = span {
            summary.push_str(&format!(" (span {})", doc.str(doc.spans[s].id)));
        }
        if let Some((c, b)) = dominant {
            summary.push_str(&format!(
                "; {} dominates with {} ({:.1}%)",
                category_name(c),
                human_bytes(b),
                100.0 * b as f64 / peak.live_bytes as f64
            ));
        }
        if !top.is_empty() {
            let names: Vec<String> = top.iter().map(|l| describe(l)).collect();
            summary.push_str(&format!("; largest: {}", names.join(", ")));
        }
        let mut node_ids: Vec<String> = span
            .map(|s| doc.str(doc.spans[s].id).to_string())
            .into_iter()
            .collect();
        for l in &top {
            if let Some(s) = &l.span_id {
                if !node_ids.iter().any(|n| n == &**s) {
                    node_ids.push(s.to_string());
                }
            }
        }
        out.push(Finding {
            code: FindingCode::MemoryPeak,
            severity: Severity::Info,
            summary,
            evidence: Evidence {
                node_ids,
                storages: top
                    .iter()
                    .map(|l| crate::health::lifetime_label(l))
                    .collect(),
                bytes: Some(peak.live_bytes),
                timestamp_ns: Some(peak.timestamp_ns),
                count: Some(peak.live_allocations.len() as u64),
                step,
                category: dominant.map(|(c, _)| c),
                lower_bound,
                ..Evidence::default()
            },
            requires: requires.clone(),
        });
    }
    if let Some(opt) = logical
        .findings
        .first_optimizer
        .as_ref()
        .filter(|o| o.activation_live_bytes > 0)
    {
        let still = opt
            .still_live_at_end_bytes
            .map(|b| format!(", {} still live when it ends", human_bytes(b)))
            .unwrap_or_default();
        out.push(Finding {
            code: FindingCode::ActivationsRetainedIntoOptimizer,
            severity: Severity::Warning,
            summary: format!(
                "{} of activations ({} storages) are still live when the optimizer step {} ({}) starts{still}{bound}: run backward, drop the loss, then step, so they are freed before the optimizer runs",
                human_bytes(opt.activation_live_bytes),
                opt.activation_live_count,
                opt.span_name,
                opt.span_id
            ),
            evidence: Evidence {
                node_ids: vec![opt.span_id.to_string()],
                bytes: Some(opt.activation_live_bytes),
                timestamp_ns: Some(opt.start_ns),
                count: Some(opt.activation_live_count),
                step: Some(ExecutionStep::Optimizer),
                category: Some(MemoryCategory::Activation),
                lower_bound,
                ..Evidence::default()
            },
            requires: requires.clone(),
        });
    }
    let retained: Vec<&trace_memory::StorageLifetime> = crate::health::retained(logical).collect();
    if !retained.is_empty() {
        let bytes: u64 = retained.iter().map(|l| l.bytes).sum();
        let mut ranked = retained.clone();
        ranked.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.start_ns.cmp(&b.start_ns)));
        let top: Vec<String> = ranked
            .iter()
            .take(TOP_STORAGES)
            .map(|l| describe(l))
            .collect();
        let when = if health.truncated || logical.live_at_end.trace_truncated {
            "when the trace was cut short"
        } else if health.capture_failed {
            "when the capture failed"
        } else {
            "at the end of the capture"
        };
        out.push(Finding {
            code: FindingCode::StoragesRetainedAtEnd,
            severity: Severity::Warning,
            summary: format!(
                "{} storage(s) holding {} allocated inside the capture are still live {when} (parameters, optimizer state and pre-existing storages excluded); largest: {}",
                retained.len(),
                human_bytes(bytes),
                top.join(", ")
            ),
            evidence: Evidence {
                storages: ranked
                    .iter()
                    .map(|l| crate::health::lifetime_label(l))
                    .collect(),
                bytes: Some(bytes),
                count: Some(retained.len() as u64),
                lower_bound,
                ..Evidence::default()
            },
            requires,
        });
    }
}
