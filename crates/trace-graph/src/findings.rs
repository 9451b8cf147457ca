//! Typed findings `{code, severity, summary, evidence, requires}`, each produced only when the
//! capabilities it relies on are available (partial or complete).

use serde::Serialize;
use trace_format::{at, bytes as human_bytes, duration};
use trace_schema::{MemoryCategory, Pass, TraceDocument};

use crate::capability::{CapabilityKind, CapabilityLevel, CapabilityMatrix};
use crate::gradients::GradientSummary;
use crate::graph::ExecutionGraph;
use crate::health::Severity;

/// What a finding is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FindingCode {
    /// The captured step ran with no warm-up step before it (`warmup_steps` 0, or capture step
    /// 1): its figures may include one-time costs.
    CapturedWithoutWarmUp,
    /// The span with the largest host self time in the measured subtree.
    LargestHostSelfTime,
    /// The logical memory peak (one per device when there are several): when, in which span
    /// and pass, what dominates it.
    MemoryPeak,
    /// Activations still live when the optimizer step runs.
    ActivationsRetainedIntoOptimizer,
    /// Parameters that received no gradient; with module spans named after their
    /// `VarBuilder` prefix, the module where the gradient stops (`module`, `node_ids`) and,
    /// with allocation sites, the op inside it without a backward (`operation`).
    ParametersWithoutGradient,
    /// Optimizer state kept for parameters that received no gradient (AdamW's two moments,
    /// each the parameter's size, never updated): its bytes, the parameters (`count` of
    /// `of_count`) and all the optimizer state (`of_bytes`).
    OptimizerStateWithoutGradient,
    /// Parameters whose gradient is all zero.
    ZeroGradients,
    /// Parameters whose gradient has NaN or ±inf elements.
    NonFiniteGradients,
    /// Storages allocated in the capture still live at its end.
    StoragesRetainedAtEnd,
    /// An op, backward op, non-op function or the probe with a large share of the sampled
    /// step (its share with the 95% interval, passes and main module).
    LargeOperationShare,
    /// Samples reading or opening files below an op frame (the functions between them named).
    FileIoInOperation,
    /// The share of the backward pass spent in gradient accumulation (`grad_accumulate`).
    GradientAccumulationShare,
    /// Storages allocated and freed inside the optimizer pass (an out-of-place update's
    /// temporaries): their bytes at the run's peak, ratio to the parameters, part of the peak,
    /// and the peak replayed without them.
    OptimizerTemporaries,
    /// Storages live at capture start that are neither parameters, optimizer state nor
    /// labelled (what earlier steps left alive), at least half this step's forward bytes: their
    /// bytes, count and ratio (`share`) to this step's activations.
    EarlierStepsRetained,
    /// Live memory higher at the end of every step of a multi-step capture than at the end of
    /// the step before: the growth per step (`bytes`), the steps (`count`), the total growth
    /// (`allocated_bytes`) and the live bytes at the end (`of_bytes`); the step spans in
    /// `node_ids`.
    MemoryGrowth,
    /// A capability that is not complete.
    CoverageGap,
}

/// Evidence behind a finding; every field only when it applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Evidence {
    /// Graph node ids (spans, ops, tensors).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<String>,
    /// `{device}:{storage_id}` of storages (ids for scripts; summaries name storages by label,
    /// shape, dtype, category and allocating span instead). A summary-detail analysis names at
    /// most [`trace_memory::SUMMARY_TOP`], the largest first.
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
    /// Pass (forward / backward / optimizer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Device (per-device findings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
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
    /// Who holds the storages, as far as the trace shows (activations retained into the
    /// optimizer), one entry per holder.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_by: Vec<Holding>,
    /// A sampled operation (`matmul`, `grad_accumulate`) or non-op function (operation
    /// findings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// What kind of thing `operation` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_kind: Option<trace_ops::OpKind>,
    /// The module path holding most of its samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// A sampled share `count / of_count`, in [0, 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// Its 95% Wilson interval, lower bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_low: Option<f64>,
    /// Upper bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_high: Option<f64>,
    /// The 95% interval of an estimated `duration_ns`, lower bound, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_low_ns: Option<u64>,
    /// Upper bound, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_high_ns: Option<u64>,
    /// Function paths behind the finding (file I/O: from the op to the I/O, outermost first,
    /// then the I/O functions).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
    /// The total `bytes` are part of (the run's peak), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of_bytes: Option<u64>,
    /// Bytes of the parameters live at that moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter_bytes: Option<u64>,
    /// Bytes allocated by the storages the finding is about, all of them (not only those live
    /// at one moment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_bytes: Option<u64>,
    /// The run's peak replayed from the lifetimes without those storages, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed_peak_bytes: Option<u64>,
    /// When the replayed peak is first reached, ns since session start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed_peak_ns: Option<u64>,
    /// The pass it is reached in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed_peak_pass: Option<Pass>,
    /// The optimizer temporaries live at the peak, largest first: bytes, op (from the
    /// allocation site) and the parameter tied by size (`1.53 MiB sqr · update of
    /// fc1.weight (by size) · optimizer`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub temporaries: Vec<String>,
    /// What acting on the finding's advice would leave, replayed from the lifetimes (memory
    /// findings with advice): the new run peak, pass peaks, where the peak moves, and whether
    /// the figure is exact or a bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<crate::what_if::WhatIf>,
    /// Of a peak, the bytes that do not scale with the batch (parameters, gradients,
    /// optimizer state), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_bytes: Option<u64>,
    /// Of a peak, the bytes that scale with the batch (activations), bytes; the rest
    /// (`other`) is neither known to scale nor to be fixed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_scaled_bytes: Option<u64>,
}

/// `(fixed, batch-scaled)` bytes of a peak's categories: parameters, gradients and optimizer
/// state do not change with the batch; activations scale with it; `other` is neither.
pub fn batch_split(by_category: &std::collections::BTreeMap<MemoryCategory, u64>) -> (u64, u64) {
    let get = |c| by_category.get(&c).copied().unwrap_or(0);
    let fixed = get(MemoryCategory::Parameter)
        .saturating_add(get(MemoryCategory::Gradient))
        .saturating_add(get(MemoryCategory::Optimizer));
    (fixed, get(MemoryCategory::Activation))
}

/// The fixed categories a peak holds, as a reader names them: `parameters, gradients,
/// optimizer state`, only those with bytes (an inference run reads `parameters`); `no
/// parameters, gradients or optimizer state` when it holds none.
pub fn fixed_categories(by_category: &std::collections::BTreeMap<MemoryCategory, u64>) -> String {
    let names: Vec<&str> = [
        (MemoryCategory::Parameter, "parameters"),
        (MemoryCategory::Gradient, "gradients"),
        (MemoryCategory::Optimizer, "optimizer state"),
    ]
    .into_iter()
    .filter(|(c, _)| by_category.get(c).is_some_and(|b| *b > 0))
    .map(|(_, n)| n)
    .collect();
    if names.is_empty() {
        "no parameters, gradients or optimizer state".to_string()
    } else {
        names.join(", ")
    }
}

/// What holds storages that outlive the point where they could have been freed, read from
/// their lifetimes (see the `activations_retained_into_optimizer` finding in the README).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Holder {
    /// The loss, still live when the optimizer starts: every node of its autograd graph stays
    /// live with it (the storages the probe registered as graph nodes).
    Loss,
    /// The gradient store: the loss was dropped before the optimizer started, and these are
    /// freed only with the gradients, in the run of frees that drops the store.
    GradientStore,
    /// Freed with the gradients, but the trace cannot tell whether the loss was still live
    /// (the probe did not see it).
    LossOrGradientStore,
    /// The trace does not show what holds them.
    Unknown,
}

/// Storages with one holder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holding {
    /// Who holds them.
    pub holder: Holder,
    /// How many storages.
    pub count: u64,
    /// Their bytes (`None` when the sum passes 2^64).
    pub bytes: Option<u64>,
    /// `{device}:{storage_id}`, largest first (a summary-detail analysis lists at most
    /// [`trace_memory::SUMMARY_TOP`]).
    pub storages: Vec<String>,
    /// When the holder let them go, ns since session start: the loss's free, the first free of
    /// the gradient release; absent when unknown or never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released_ns: Option<u64>,
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
                duration(o)
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
                "the optimizer keeps {} of state for the {} that received no gradient ({} per parameter, each the parameter's size, never updated; {:.1}% of the {} of optimizer state)",
                human_bytes(u.bytes),
                if u.parameters == 1 {
                    "1 parameter".to_string()
                } else {
                    format!("{} parameters", u.parameters)
                },
                if u.moments == 2 { "two moments" } else { "one moment" },
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

/// How many storages a memory finding names.
pub const TOP_STORAGES: usize = 5;

/// Names a storage for a reader, never by its address: its label, else its shape and dtype,
/// else the allocating op, with its size, category and allocating span's path.
pub(crate) fn describe(
    doc: &TraceDocument,
    spans: &trace_memory::SpanIndex,
    l: &trace_memory::StorageLifetime,
) -> String {
    let mut name = match (&l.label, &l.shape, &l.dtype, &l.op_name) {
        (Some(label), _, _, _) => label.to_string(),
        (None, Some(shape), Some(dtype), _) => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("[{}] {dtype}", dims.join(", "))
        }
        (None, _, _, Some(op)) => format!("output of {op}"),
        _ => "a storage".to_string(),
    };
    if l.label.is_some() {
        if let (Some(shape), Some(dtype)) = (&l.shape, &l.dtype) {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            name.push_str(&format!(" [{}] {dtype}", dims.join(", ")));
        }
    }
    let mut s = format!("{name} ({}, {}", human_bytes(l.bytes), l.category.as_str());
    if l.pre_existing {
        s.push_str(", from before the capture");
    } else if let Some(path) = l
        .span_id
        .as_deref()
        .and_then(|id| spans.indexed_path_of_id(doc, id))
    {
        s.push_str(&format!(", allocated in {path}"));
    }
    s.push(')');
    s
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
    baseline: &crate::what_if::Baseline,
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
    let requires = vec![CapabilityKind::LogicalMemory];
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
        let path = spans
            .indexed_path_of_id(doc, &opt.span_id)
            .unwrap_or_else(|| opt.span_name.to_string());
        let listed = match logical.detail {
            trace_memory::Detail::Full => usize::MAX,
            trace_memory::Detail::Summary => trace_memory::SUMMARY_TOP,
        };
        let r = crate::retention::retention(doc, opt.start_ns);
        let (advice, held_by) = crate::advice::retention_advice(doc, spans, &r, origin_ns, listed);
        let what_if = crate::what_if::retention_what_if(doc, baseline, &r, opt.start_ns);
        let replayed = what_if
            .as_ref()
            .map(|w| format!(". What-if, replayed: {}", w.sentence()))
            .unwrap_or_default();
        out.push(Finding {
            code: FindingCode::ActivationsRetainedIntoOptimizer,
            severity: Severity::Warning,
            summary: format!(
                "{} of activations ({}) are still live when the optimizer pass {path} starts{still}{bound}{advice}{replayed}",
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
                what_if,
                ..Evidence::default()
            },
            requires: requires.clone(),
        });
    }
    // streamed (the live set at the end can be millions): the count and bytes, then the ones
    // the finding names
    let retained_count = crate::health::retained(logical).count();
    if retained_count > 0 {
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
        out.push(Finding {
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
            requires,
        });
    }
}
trace_schema::wire_names!(FindingCode, Holder);
