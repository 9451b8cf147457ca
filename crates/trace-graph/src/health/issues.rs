//! The health report's vocabulary: each issue's code, severity and location, the report of a
//! trace, and the collector the checks push issues into.

use serde::Serialize;
use std::collections::BTreeMap;
use trace_schema::{TerminalOutcome, TraceDocument};

/// How bad an issue or finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Severity {
    /// The trace cannot be trusted structurally (health) / a defect (finding).
    Error,
    /// A gap or a suspicious fact; the trace stays valid.
    Warning,
    /// Informational (findings only).
    Info,
}

/// Snake_case code of a health check. Codes of the original tool keep their names.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum HealthCode {
    // loader rules (trace_schema::SemanticCode)
    /// A `span_start` id repeats (loader).
    DuplicateSpanId,
    /// A `span_end` names no started span (loader).
    UnknownSpanEnd,
    /// A span is closed twice (loader).
    RepeatedSpanEnd,
    /// A `complete` terminal carries a reason (loader).
    CompleteWithFailureReason,
    /// A `failed` terminal has no reason (loader).
    FailedWithoutReason,
    /// The terminal is earlier than the latest host evidence (loader).
    TerminalPrecedesEvidence,
    /// A `tensor_stats` event breaks its rules (loader).
    InvalidTensorStats,
    /// A `frame`, `stack`, `sample` or `sampler` event breaks its id rules and was dropped
    /// (loader; a warning: the other samples stay usable).
    InvalidSamples,
    /// A `site` or `alloc_sites` event, or a memory event's site, breaks its rules and was
    /// dropped (loader; a warning: the other sites stay usable).
    InvalidSites,
    /// A step span's `step_index` is 0 or past `u32::MAX` and names no step (the span stays,
    /// but not as a step of the per-step table), repeats an earlier step span's, or is below
    /// the previous one's (loader; a warning).
    InvalidStepIndex,
    /// A gradient norm does not fit its state (loader).
    GradientStateNormInconsistent,
    /// The meta fails validation, e.g. `capture_step` 0 (loader).
    InvalidMeta,
    // capture
    /// The capture never started: the terminal is `failed` and no span was recorded (e.g. the
    /// run ended before the capture step). Listed first (error).
    CaptureNotStarted,
    /// The terminal outcome is `failed` (warning).
    CaptureFailed,
    /// Partial last line or no terminal: capture incomplete (warning).
    TraceTruncated,
    /// The probe dropped events: capture incomplete (warning).
    DroppedEvents,
    /// The terminal says the capture lost coverage the meta declared (warning).
    CoverageLost,
    // hierarchy
    /// Not exactly one root span.
    RootCount,
    /// Not exactly one measured span (finished runs only).
    MeasurementCount,
    /// A span was never closed (error in finished runs, warning otherwise).
    OpenSpan,
    /// A span names a parent that does not exist.
    UnknownParent,
    /// A child span starts outside its parent's interval.
    ChildOutsideParent,
    /// A child span ends after its closed parent (warning; clipped).
    ChildOutlivesParent,
    /// A span is on or below a parent cycle.
    SpanCycle,
    /// Children of one span overlap in time: siblings on one thread cannot; their time is
    /// counted once (warning).
    OverlappingSiblings,
    /// A span recorded no duration (0 ns) but its children or ops take time: its time is their
    /// extent (warning).
    SpanShorterThanChildren,
    /// A span or op ends past `u64::MAX` ns: an impossible duration (error).
    TimeOverflow,
    // references
    /// An op, tensor, tensor_stats or device interval names a missing span.
    UnknownSpan,
    /// Memory events name a missing span (warning).
    MemoryUnknownSpan,
    /// Memory events lie outside the interval of the span they name (warning).
    MemoryOutsideSpan,
    /// A device interval has duration 0.
    EmptyDeviceInterval,
    /// An op starts outside its span's interval.
    OperationOutsideSpan,
    /// An op ends after its closed span (warning; clipped).
    OperationOutlivesSpan,
    /// Ops of one span are out of time order (warning).
    OperationsOutOfOrder,
    /// A device memory sample has no field.
    EmptyDeviceMemorySample,
    /// A device memory sample reports capacity 0, or more used than its capacity (warning).
    ImplausibleDeviceMemorySample,
    /// Host-timed ops on a non-CPU device: durations are launch times (warning).
    HostTimedDeviceOps,
    // edges
    /// A call edge names a missing span.
    UnknownCallEdgeSpan,
    /// A call edge target's parent is not its source.
    CallEdgeHierarchyMismatch,
    /// A call edge duration differs from the span duration.
    CallEdgeDurationMismatch,
    /// A data edge has an empty endpoint.
    EmptyDataEdgeEndpoint,
    /// A data edge endpoint is no known tensor.
    UnknownDataEdgeTensor,
    // logical memory pairing
    /// A free states another size than its alloc (warning).
    AllocationSizeMismatch,
    /// The same tensor allocates a live storage again.
    DuplicateAllocation,
    /// Byte counts (allocations, gradient bytes) add up past 2^64: they cannot be real
    /// (error); the figures built from them are refused, never wrapped.
    MemoryBytesOverflow,
    /// A free of a storage not allocated in the capture (warning).
    UnpairedFree,
    /// Storages allocated in the window still live at the end (warning).
    RetainedAllocations,
    /// Most bytes at the logical peak are `other` (warning).
    MemoryUncategorised,
    // gradients
    /// A gradient event id is empty.
    EmptyGradientEventId,
    /// A gradient key is empty.
    EmptyGradientParameterKey,
    /// A gradient event id repeats.
    DuplicateGradientEventId,
    /// Complete gradient coverage declared without a contract.
    GradientContractMissing,
    /// A gradient contract without complete coverage.
    GradientContractWithoutCompleteCoverage,
    /// The gradient contract fails validation.
    GradientContractInvalid,
    /// A manifest key is reported twice.
    GradientManifestDuplicateKey,
    /// A parameter gradient not in the manifest.
    GradientManifestUndeclaredKey,
    /// A manifest key without a gradient event (warning in failed runs).
    GradientManifestMissingKey,
    /// A family has non-finite gradients (warning).
    GradientFamilyNonFinite,
    /// An active family has fewer present gradients than required (warning).
    GradientActiveFamilyBelowMinimum,
    /// An inactive family has gradients attached (warning).
    GradientInactiveFamilyLeakage,
    /// An attached data-conditional family is below its minimum (warning).
    GradientConditionalFamilyBelowMinimum,
    // absence and labels
    /// No op events (warning).
    OperationsAbsent,
    /// No tensor events (warning).
    TensorsAbsent,
    /// No memory events (warning).
    LogicalMemoryAbsent,
    /// No device memory samples (warning).
    PhysicalMemoryAbsent,
    /// No device intervals (warning).
    DeviceTimingAbsent,
    /// No gradient events in a train run (warning).
    GradientsAbsent,
    /// No forward span in a train run (warning).
    ForwardAbsent,
    /// No backward span in a train run (warning).
    BackwardAbsent,
    /// No optimizer span in a train run (warning).
    OptimizerAbsent,
    /// A required label is declared twice (warning).
    DuplicateRequiredSemanticLabel,
    /// A required label is not exactly one span name (warning).
    RequiredSemanticLabelCardinality,
}

impl HealthCode {
    /// True for the gradient-contract and gradient-manifest family of checks.
    pub fn is_gradient_check(self) -> bool {
        use HealthCode::*;
        matches!(
            self,
            EmptyGradientEventId
                | EmptyGradientParameterKey
                | DuplicateGradientEventId
                | GradientStateNormInconsistent
                | GradientContractMissing
                | GradientContractWithoutCompleteCoverage
                | GradientContractInvalid
                | GradientManifestDuplicateKey
                | GradientManifestUndeclaredKey
                | GradientManifestMissingKey
                | GradientFamilyNonFinite
                | GradientActiveFamilyBelowMinimum
                | GradientInactiveFamilyLeakage
                | GradientConditionalFamilyBelowMinimum
        )
    }
}

/// Where an issue was found; every field only when known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IssueLocation {
    /// 1-based line of the trace file (only for rules the loader checked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Graph node id: a span id, `{span}/op/{n}` or `tensor/{id}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `{device}:{storage_id}` of a storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// `root/key` of a gradient.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gradient: Option<String>,
}

impl IssueLocation {
    /// At a line.
    pub fn line(line: u64) -> Self {
        Self {
            line: (line > 0).then_some(line),
            ..Self::default()
        }
    }
    /// At a node.
    pub fn node(id: impl Into<String>) -> Self {
        Self {
            node: Some(id.into()),
            ..Self::default()
        }
    }
    /// At a storage.
    pub fn storage(id: impl Into<String>) -> Self {
        Self {
            storage: Some(id.into()),
            ..Self::default()
        }
    }
    /// At a gradient.
    pub fn gradient(id: impl Into<String>) -> Self {
        Self {
            gradient: Some(id.into()),
            ..Self::default()
        }
    }
    /// Nowhere in particular (the whole document).
    pub fn document() -> Self {
        Self::default()
    }
}

/// One health issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthIssue {
    /// Error or warning.
    pub severity: Severity,
    /// Which check.
    pub code: HealthCode,
    /// Human-readable explanation naming the offending ids.
    pub message: String,
    /// Where in the trace.
    #[serde(rename = "where")]
    pub location: IssueLocation,
}

/// Collects issues with the per-code cap.
#[derive(Debug, Default)]
pub(crate) struct Issues {
    pub(super) list: Vec<HealthIssue>,
    pub(super) per_code: BTreeMap<HealthCode, u64>,
    pub(super) errors: u64,
    pub(super) warnings: u64,
}

impl Issues {
    pub fn push(
        &mut self,
        severity: Severity,
        code: HealthCode,
        message: String,
        location: IssueLocation,
    ) {
        match severity {
            Severity::Error => self.errors += 1,
            _ => self.warnings += 1,
        }
        let n = self.per_code.entry(code).or_insert(0);
        *n += 1;
        if *n as usize <= MAX_ISSUES_PER_CODE {
            self.list.push(HealthIssue {
                severity,
                code,
                message,
                location,
            });
        }
    }

    pub fn error(&mut self, code: HealthCode, message: String, location: IssueLocation) {
        self.push(Severity::Error, code, message, location);
    }

    pub fn warning(&mut self, code: HealthCode, message: String, location: IssueLocation) {
        self.push(Severity::Warning, code, message, location);
    }
}

/// State of the capture, read from the terminal, truncation and dropped events.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CaptureState {
    pub failed: bool,
    pub truncated: bool,
    pub dropped: bool,
}

impl CaptureState {
    pub fn of(doc: &TraceDocument) -> Self {
        Self {
            failed: doc
                .terminal
                .as_ref()
                .is_some_and(|t| t.outcome == TerminalOutcome::Failed),
            truncated: doc.truncation.is_some(),
            dropped: doc.dropped_events.is_some_and(|d| d > 0),
        }
    }
    /// Failed or cut short: spans may legitimately stay open.
    pub fn ended_early(self) -> bool {
        self.failed || self.truncated
    }
    pub fn complete(self) -> bool {
        !self.failed && !self.truncated && !self.dropped
    }
}

/// Issues listed per code; the rest are counted in `omitted_issues`.
pub const MAX_ISSUES_PER_CODE: usize = 20;
