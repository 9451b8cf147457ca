//! Typed findings `{code, severity, summary, evidence, requires}`, each produced only when the
//! capabilities it relies on are available (partial or complete).

use crate::capability::{CapabilityKind, CapabilityLevel, CapabilityMatrix};
use crate::gradients::GradientSummary;
use crate::graph::ExecutionGraph;
use crate::health::Severity;
use trace_format::{at, bytes as human_bytes, duration};
use trace_schema::{MemoryCategory, Pass, TraceDocument};

pub use crate::finding::{
    batch_split, fixed_categories, Evidence, Finding, FindingCode, Holder, Holding,
};
use crate::finding::{describe, TOP_STORAGES};

/// The largest host self time in the measured subtree, the span named by its path
/// (`llama::train_step/step 6/backward`, as the summary's slowest spans are).
pub(crate) fn largest_self_time(
    doc: &TraceDocument,
    spans: &trace_memory::SpanIndex,
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
                duration(o)
            )
        })
        .unwrap_or_default();
    Some(Finding {
        code: FindingCode::LargestHostSelfTime,
        severity: Severity::Info,
        summary: format!(
            "span {} ({}) has the largest host self time: {}{share}",
            spans
                .indexed_path_of_id(doc, &top.id)
                .unwrap_or_else(|| top.name.to_string()),
            top.id,
            duration(top.host_self_time_ns)
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

/// What the gradient findings read beside the gradient summary: where the gradient stops and
/// the optimizer state kept for parameters without one.
#[derive(Debug, Clone, Default)]
pub(crate) struct GradientContext {
    /// See [`crate::cut::gradient_cut`].
    pub cut: Option<crate::cut::GradientCut>,
    /// See [`crate::cut::unused_state`].
    pub unused_state: Option<crate::cut::UnusedState>,
}

/// Missing, zero and non-finite gradients, and the optimizer state of parameters without one.
pub(crate) fn gradient_findings(
    g: &GradientSummary,
    context: &GradientContext,
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
        let mut summary = if all {
            format!("{without} of {n} parameters received no gradient: the symptom of an op without a backward (or a detached tensor) between the parameters and the loss")
        } else {
            format!("{without} of {n} parameters received no gradient: they are unused in the loss or cut off from it")
        };
        if let Some(cut) = &context.cut {
            summary.push_str(&format!(
                "; the gradient stops at module {} (the last module of the forward whose parameters got none)",
                cut.module
            ));
            if let Some(op) = &cut.op {
                summary.push_str(&format!(", whose op {op} has no backward in Candle"));
            }
        }
        out.push(Finding {
            code: FindingCode::ParametersWithoutGradient,
            severity: if all {
                Severity::Error
            } else {
                Severity::Warning
            },
            summary,
            evidence: Evidence {
                node_ids: context.cut.iter().map(|c| c.span_id.clone()).collect(),
                gradients: g.without_gradient.clone(),
                count: Some(without),
                of_count: Some(n),
                module: context.cut.as_ref().map(|c| c.module.clone()),
                operation: context.cut.as_ref().and_then(|c| c.op.clone()),
                ..Evidence::default()
            },
            requires: requires.clone(),
        });
    }
    if let Some(u) = context
        .unused_state
        .filter(|_| caps.allows(&[CapabilityKind::Gradients, CapabilityKind::LogicalMemory]))
    {
        out.push(Finding {
            code: FindingCode::OptimizerStateWithoutGradient,
            severity: Severity::Warning,
            summary: format!(
                "the optimizer keeps {} of state for the {} that received no gradient ({}, never updated; {:.1}% of the {} of optimizer state)",
                human_bytes(u.bytes),
                if u.parameters == 1 {
                    "1 parameter".to_string()
                } else {
                    format!("{} parameters", u.parameters)
                },
                match (u.moments, u.by_label) {
                    (2, _) => "two moments per parameter, each the parameter's size",
                    (1, _) => "one moment per parameter, the parameter's size",
                    (_, true) => "the state labelled with their names",
                    _ => "state",
                },
                100.0 * u.bytes as f64 / u.state_bytes as f64,
                human_bytes(u.state_bytes)
            ),
            evidence: Evidence {
                bytes: Some(u.bytes),
                of_bytes: Some(u.state_bytes),
                count: Some(u.parameters),
                of_count: Some(n),
                category: Some(MemoryCategory::Optimizer),
                ..Evidence::default()
            },
            requires: vec![CapabilityKind::Gradients, CapabilityKind::LogicalMemory],
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
            // Sampled is what was promised: every figure built on it carries its interval.
            CapabilityLevel::Complete | CapabilityLevel::Sampled => continue,
            CapabilityLevel::Unavailable => Severity::Info,
            CapabilityLevel::Partial => Severity::Warning,
            CapabilityLevel::Invalid => Severity::Error,
        };
        let (kind, level) = (c.kind.as_str(), c.level.as_str());
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

fn pass_name(pass: Option<Pass>) -> &'static str {
    match pass {
        Some(Pass::Forward) => "the forward pass",
        Some(Pass::Backward) => "the backward pass",
        Some(Pass::Optimizer) => "the optimizer pass",
        None => "no declared pass",
    }
}

/// One `MemoryPeak` finding: the global peak with one device, one per device otherwise.
#[allow(clippy::too_many_arguments)]
fn peak_finding(
    doc: &TraceDocument,
    spans: &trace_memory::SpanIndex,
    live_bytes: u64,
    timestamp_ns: u64,
    by_category: &std::collections::BTreeMap<MemoryCategory, u64>,
    context: &trace_memory::PeakContext,
    top: &[&trace_memory::StorageLifetime],
    live_count: u64,
    device: Option<&str>,
    bound: &str,
    origin_ns: u64,
) -> (String, Evidence) {
    let on = device.map(|d| format!(" on {d}")).unwrap_or_default();
    let mut summary = format!(
        "logical memory{on} peaks at {}{bound} at {} during {}",
        human_bytes(live_bytes),
        at(timestamp_ns, origin_ns),
        pass_name(context.pass)
    );
    let span = context.span_id.as_deref();
    if let Some(path) = span.and_then(|id| spans.indexed_path_of_id(doc, id)) {
        summary.push_str(&format!(" (in {path})"));
    }
    if let Some(c) = context.dominant_category {
        let b = by_category.get(&c).copied().unwrap_or(0);
        summary.push_str(&format!(
            "; {} dominates with {} ({:.1}%)",
            c.as_str(),
            human_bytes(b),
            100.0 * b as f64 / live_bytes as f64
        ));
    }
    let (fixed, scaled) = batch_split(by_category);
    if live_bytes > 0 {
        summary.push_str(&format!(
            "; fixed ({}) {} ({:.1}%), activations {} ({:.1}%) scale with the batch",
            fixed_categories(by_category),
            human_bytes(fixed),
            100.0 * fixed as f64 / live_bytes as f64,
            human_bytes(scaled),
            100.0 * scaled as f64 / live_bytes as f64
        ));
    }
    if !top.is_empty() {
        let names: Vec<String> = top.iter().map(|l| describe(doc, spans, l)).collect();
        summary.push_str(&format!("; largest: {}", names.join(", ")));
    }
    let mut node_ids: Vec<String> = span.map(str::to_string).into_iter().collect();
    for l in top {
        if let Some(s) = &l.span_id {
            if !node_ids.iter().any(|n| n == &**s) {
                node_ids.push(s.to_string());
            }
        }
    }
    let evidence = Evidence {
        node_ids,
        storages: top
            .iter()
            .map(|l| crate::health::lifetime_label(l))
            .collect(),
        bytes: Some(live_bytes),
        timestamp_ns: Some(timestamp_ns),
        count: Some(live_count),
        pass: context.pass,
        category: context.dominant_category,
        device: device.map(str::to_string),
        fixed_bytes: Some(fixed),
        batch_scaled_bytes: Some(scaled),
        ..Evidence::default()
    };
    (summary, evidence)
}

/// Memory findings: the peak (per device with several devices), activations retained into the
/// optimizer pass, storages retained at the end. Times are relative to `origin_ns`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn memory_findings(
    doc: &TraceDocument,
    index: &crate::index::TraceIndex,
    logical: Option<&trace_memory::LogicalMemoryProfile>,
    health: &crate::health::TraceHealth,
    caps: &CapabilityMatrix,
    origin_ns: u64,
    what_ifs: &mut crate::what_if::WhatIfs,
    out: &mut Vec<Finding>,
) {
    let spans = &index.spans;
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
    let mut push_peak = |(summary, mut evidence): (String, Evidence)| {
        evidence.lower_bound = lower_bound;
        out.push(Finding {
            code: FindingCode::MemoryPeak,
            severity: Severity::Info,
            summary,
            evidence,
            requires: requires.clone(),
        });
    };
    if logical.by_device.len() > 1 {
        for d in &logical.by_device {
            let Some(p) = d.peak.as_ref().filter(|p| p.live_bytes > 0) else {
                continue;
            };
            let live = logical.live_allocations_after(p.event_index, Some(&d.device));
            let top: Vec<_> = live.iter().take(TOP_STORAGES).copied().collect();
            push_peak(peak_finding(
                doc,
                spans,
                p.live_bytes,
                p.timestamp_ns,
                &p.by_category,
                &p.context,
                &top,
                p.live_allocation_count,
                Some(&d.device),
                bound,
                origin_ns,
            ));
        }
    } else if let Some(peak) = logical.peak.as_ref().filter(|p| p.live_bytes > 0) {
        let top: Vec<_> = peak.live_allocations.iter().take(TOP_STORAGES).collect();
        push_peak(peak_finding(
            doc,
            spans,
            peak.live_bytes,
            peak.timestamp_ns,
            &peak.by_category,
            &peak.context,
            &top,
            peak.live_allocation_count,
            None,
            bound,
            origin_ns,
        ));
    }
    let ctx = MemoryContext {
        doc,
        spans,
        logical,
        health,
        origin_ns,
        bound,
    };
    if let Some((finding, plan)) = optimizer_retention_finding(&ctx) {
        out.push(finding);
        if let Some((plan, action, exact)) = plan {
            what_ifs.request(out.len() - 1, plan, action, exact, true);
        }
    }
    out.extend(retained_at_end_finding(&ctx));
}

/// What the memory findings read: the trace, its spans, the logical profile, the health and
/// the time origin; `bound` is the lower-bound note of a summary.
#[derive(Clone, Copy)]
struct MemoryContext<'a> {
    doc: &'a TraceDocument,
    spans: &'a trace_memory::SpanIndex,
    logical: &'a trace_memory::LogicalMemoryProfile,
    health: &'a crate::health::TraceHealth,
    origin_ns: u64,
    bound: &'static str,
}

/// `activations_retained_into_optimizer`: activations still live when the first optimizer pass
/// starts, with the advice of what holds them, and the plan of its what-if (replayed with the
/// others, its sentence appended to the summary then).
#[allow(clippy::type_complexity)]
fn optimizer_retention_finding(
    ctx: &MemoryContext<'_>,
) -> Option<(
    Finding,
    Option<(trace_memory::ReleasePlan, &'static str, bool)>,
)> {
    let MemoryContext {
        doc,
        spans,
        logical,
        health,
        origin_ns,
        bound,
    } = *ctx;
    let lower_bound = health.memory_lower_bound;
    let opt = logical
        .findings
        .first_optimizer
        .as_ref()
        .filter(|o| o.activation_live_bytes > 0)?;
    let still = opt
        .still_live_at_end_bytes
        .map(|b| format!(", {} still live when it ends", human_bytes(b)))
        .unwrap_or_default();
    let path = spans
        .indexed_path_of_id(doc, &opt.span_id)
        .unwrap_or_else(|| opt.span_name.to_string());
    let listed = match logical.detail {
        trace_memory::Detail::Full => usize::MAX,
        trace_memory::Detail::Summary => trace_memory::SUMMARY_TOP,
    };
    let r = crate::retention::retention(doc, opt.start_ns);
    let (advice, held_by) = crate::advice::retention_advice(doc, spans, &r, origin_ns, listed);
    let plan = crate::what_if::retention_plan(&r, opt.start_ns);
    let finding = Finding {
        code: FindingCode::ActivationsRetainedIntoOptimizer,
        severity: Severity::Warning,
        summary: format!(
            "{} of activations ({}) are still live when the optimizer pass {path} starts{still}{bound}{advice}",
            human_bytes(opt.activation_live_bytes),
            trace_format::count(opt.activation_live_count, "storage", "storages"),
        ),
        evidence: Evidence {
            node_ids: vec![opt.span_id.to_string()],
            bytes: Some(opt.activation_live_bytes),
            timestamp_ns: Some(opt.start_ns),
            count: Some(opt.activation_live_count),
            pass: Some(Pass::Optimizer),
            category: Some(MemoryCategory::Activation),
            lower_bound,
            held_by,
            ..Evidence::default()
        },
        requires: vec![CapabilityKind::LogicalMemory],
    };
    Some((finding, plan))
}

/// `storages_retained_at_end`: storages allocated inside the capture still live at its end
/// (streamed: the count and bytes, then the largest it names).
fn retained_at_end_finding(ctx: &MemoryContext<'_>) -> Option<Finding> {
    // streamed (the live set at the end can be millions): the count and bytes, then the ones
    // the finding names
    let MemoryContext {
        doc,
        spans,
        logical,
        health,
        ..
    } = *ctx;
    let lower_bound = health.memory_lower_bound;
    let retained_count = crate::health::retained(logical).count();
    if retained_count == 0 {
        return None;
    }
    let bytes = trace_memory::sum_bytes(crate::health::retained(logical).map(|l| l.bytes));
    // a summary analysis names the largest ones only
    let named = match logical.detail {
        trace_memory::Detail::Full => usize::MAX,
        trace_memory::Detail::Summary => trace_memory::SUMMARY_TOP,
    };
    let ranked = trace_memory::first_k_by(crate::health::retained(logical), named, |a, b| {
        b.bytes.cmp(&a.bytes).then(a.start_ns.cmp(&b.start_ns))
    });
    let top: Vec<String> = ranked
        .iter()
        .take(TOP_STORAGES)
        .map(|l| describe(doc, spans, l))
        .collect();
    let when = if health.truncated || logical.live_at_end.trace_truncated {
        "when the trace was cut short"
    } else if health.capture_failed {
        "when the capture failed"
    } else {
        "at the end of the capture"
    };
    Some(Finding {
        code: FindingCode::StoragesRetainedAtEnd,
        severity: Severity::Warning,
        summary: format!(
            "{} storage(s) holding {} allocated inside the capture are still live {when} (parameters, optimizer state and pre-existing storages excluded); largest: {}",
            retained_count,
            trace_format::checked_bytes(bytes),
            top.join(", ")
        ),
        evidence: Evidence {
            storages: ranked
                .iter()
                .map(|l| crate::health::lifetime_label(l))
                .collect(),
            bytes,
            count: Some(retained_count as u64),
            lower_bound,
            ..Evidence::default()
        },
        requires: vec![CapabilityKind::LogicalMemory],
    })
}
