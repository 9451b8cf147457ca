//! Evidence coverage counts, absence warnings and required semantic labels. O(n).

use std::collections::HashMap;

use serde::Serialize;
use trace_schema::{
    ContractField, CoverageLevel, EdgeRecord, ExecutionPhase, ExecutionStep, TraceDocument,
};

use super::issues::{HealthCode, IssueLocation, Issues};

/// Counts of what the trace contains (the original's `EvidenceCoverage` plus tensor stats,
/// dropped events and the categorised share of the logical peak).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EvidenceCoverage {
    /// Spans.
    pub spans: u64,
    /// Spans with a `span_end`.
    pub closed_spans: u64,
    /// Spans without a parent.
    pub root_spans: u64,
    /// Spans marked measured.
    pub measured_spans: u64,
    /// Operations (`op` events).
    pub operations: u64,
    /// Stack samples (trace/12): operations observed by sampling.
    pub samples: u64,
    /// Memory (alloc) events whose allocation site was captured (trace/13): storages the
    /// allocating operation can be named for. 0 when the capture recorded no sites.
    pub site_storages: u64,
    /// Distinct allocation sites (trace/13).
    pub alloc_sites: u64,
    /// Tensor facts.
    pub tensors: u64,
    /// Tensor statistics.
    pub tensor_stats: u64,
    /// Memory (alloc/free) events.
    pub memory_events: u64,
    /// Device memory samples.
    pub device_memory_samples: u64,
    /// Device intervals.
    pub device_intervals: u64,
    /// Gradient facts.
    pub gradients: u64,
    /// Explicit call edges.
    pub call_edges: u64,
    /// Explicit data edges.
    pub data_edges: u64,
    /// Spans with step `forward`.
    pub forward_spans: u64,
    /// Spans with step `backward`.
    pub backward_spans: u64,
    /// Spans with step `optimizer`.
    pub optimizer_spans: u64,
    /// Events the probe reported as dropped; `None` when never reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_events: Option<u64>,
    /// Share (0..=1) of bytes live at the logical peak whose category is not `other`; `None`
    /// without a logical peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_categorized_share: Option<f64>,
}

pub(super) fn check(
    doc: &TraceDocument,
    peak_categorized_share: Option<f64>,
    issues: &mut Issues,
) -> EvidenceCoverage {
    let mut c = EvidenceCoverage {
        spans: doc.spans.len() as u64,
        operations: doc.ops.len() as u64,
        samples: doc.samples.samples.len() as u64,
        site_storages: doc.sites.storages.len() as u64,
        alloc_sites: doc.sites.sites.len() as u64,
        tensors: doc.tensors.len() as u64,
        tensor_stats: doc.tensor_stats.len() as u64,
        memory_events: doc.memory_len() as u64,
        device_memory_samples: doc.device_memory.len() as u64,
        device_intervals: doc.device_intervals.len() as u64,
        gradients: doc.gradients.len() as u64,
        dropped_events: doc.dropped_events,
        peak_categorized_share,
        ..EvidenceCoverage::default()
    };
    for s in &doc.spans {
        c.closed_spans += s.duration_ns.is_some() as u64;
        c.root_spans += s.parent.is_none() as u64;
        c.measured_spans += s.measured as u64;
        match s.pass {
            Some(ExecutionStep::Forward) => c.forward_spans += 1,
            Some(ExecutionStep::Backward) => c.backward_spans += 1,
            Some(ExecutionStep::Optimizer) => c.optimizer_spans += 1,
            None => {}
        }
    }
    for e in &doc.edges {
        match e {
            EdgeRecord::Call { .. } => c.call_edges += 1,
            EdgeRecord::Data { .. } => c.data_edges += 1,
        }
    }

    // A plane the producer's contract never promised (declared `none`) is not missing: no
    // warning for it. Without a contract nothing says what was promised: every plane warns.
    let unpromised = |field: ContractField| {
        doc.meta
            .capture_contract
            .as_ref()
            .is_some_and(|c| c.level(field) == CoverageLevel::None)
    };
    let promised_field = |code: HealthCode| match code {
        HealthCode::OperationsAbsent => Some(ContractField::Operations),
        HealthCode::TensorsAbsent => Some(ContractField::Tensors),
        HealthCode::DeviceTimingAbsent => Some(ContractField::DeviceTiming),
        HealthCode::PhysicalMemoryAbsent => Some(ContractField::PhysicalMemory),
        _ => None,
    };
    let mut absent = |count: u64, code: HealthCode, what: &str| {
        if promised_field(code).is_some_and(unpromised) {
            return;
        }
        if count == 0 {
            issues.warning(
                code,
                format!("no {what} were recorded"),
                IssueLocation::document(),
            );
        }
    };
    absent(
        c.operations.saturating_add(c.samples),
        HealthCode::OperationsAbsent,
        "operations",
    );
    absent(c.tensors, HealthCode::TensorsAbsent, "tensor facts");
    absent(
        c.memory_events,
        HealthCode::LogicalMemoryAbsent,
        "logical memory (alloc/free) events",
    );
    absent(
        c.device_memory_samples,
        HealthCode::PhysicalMemoryAbsent,
        "device memory samples",
    );
    absent(
        c.device_intervals,
        HealthCode::DeviceTimingAbsent,
        "device intervals",
    );
    if doc.meta.phase == Some(ExecutionPhase::Train) {
        absent(c.gradients, HealthCode::GradientsAbsent, "gradient facts");
        absent(c.forward_spans, HealthCode::ForwardAbsent, "forward spans");
        absent(
            c.backward_spans,
            HealthCode::BackwardAbsent,
            "backward spans",
        );
        absent(
            c.optimizer_spans,
            HealthCode::OptimizerAbsent,
            "optimizer spans",
        );
    }

    if let Some(contract) = &doc.meta.capture_contract {
        if !contract.required_semantic_labels.is_empty() {
            let mut names: HashMap<&str, u64> = HashMap::new();
            for s in &doc.spans {
                *names.entry(doc.str(s.name)).or_default() += 1;
            }
            let mut declared: HashMap<&str, u64> = HashMap::new();
            for label in &contract.required_semantic_labels {
                let n = declared.entry(label.as_str()).or_default();
                *n += 1;
                if *n == 2 {
                    issues.warning(
                        HealthCode::DuplicateRequiredSemanticLabel,
                        format!("required semantic label {label} is declared more than once"),
                        IssueLocation::document(),
                    );
                }
                if *n > 1 {
                    continue;
                }
                let found = names.get(label.as_str()).copied().unwrap_or(0);
                if found != 1 {
                    issues.warning(
                        HealthCode::RequiredSemanticLabelCardinality,
                        format!("required semantic label {label} occurs {found} times as a span name, expected exactly once"),
                        IssueLocation::document(),
                    );
                }
            }
        }
    }
    c
}
