//! The finding record `{code, severity, summary, evidence, requires}` and its vocabulary (what
//! a finding is about, what holds a storage, the figures behind it), shared by the builders in
//! [`crate::findings`] and the advice they carry.

use crate::capability::{CapabilityKind, CapabilityLevel};
use crate::health::Severity;
use serde::Serialize;
use trace_format::bytes as human_bytes;
use trace_schema::{MemoryCategory, Pass, TraceDocument};

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

trace_schema::wire_names!(FindingCode, Holder);
