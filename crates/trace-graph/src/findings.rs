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
            node_ids: vec![top.id.clone()],
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
