//! The capability matrix: for each kind of evidence, whether it is unavailable, partial,
//! complete or invalid, from the coverage the producer declared versus what was observed
//! (rules of the original tool, §2.2 of the reference), then downgraded for invalid traces
//! (available → invalid) and incomplete captures (complete → partial, diagnostic only).

use serde::Serialize;
use trace_schema::{CaptureContract, ContractField, CoverageLevel, TraceDocument};

use crate::health::{HealthCode, Severity, TraceHealth};

/// A kind of evidence.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CapabilityKind {
    /// The span hierarchy can be trusted.
    StructuralTrace,
    /// Wall time of the single measured region.
    OuterWallTime,
    /// Host total and self time of nested spans.
    NestedHostTime,
    /// Device-clock intervals.
    NestedDeviceTime,
    /// Operation events.
    Operations,
    /// Tensor facts.
    Tensors,
    /// Alloc/free storage events.
    LogicalMemory,
    /// Device memory samples.
    PhysicalMemory,
    /// Gradient facts.
    Gradients,
    /// Tensor statistics.
    TensorStats,
}

/// Level of a capability.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CapabilityLevel {
    /// Nothing to base it on.
    Unavailable,
    /// Some evidence, not complete (or a diagnostic-only capture).
    Partial,
    /// Observed by sampling: figures are estimates with intervals, never complete.
    Sampled,
    /// Declared complete and observed.
    Complete,
    /// Contradicted by the trace (e.g. declared complete, nothing observed).
    Invalid,
}

impl CapabilityLevel {
    /// Partial, sampled or complete.
    pub fn is_available(self) -> bool {
        matches!(self, Self::Partial | Self::Sampled | Self::Complete)
    }
}

/// One row of the matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capability {
    /// Which capability.
    pub kind: CapabilityKind,
    /// Its level.
    pub level: CapabilityLevel,
    /// Coverage the capture contract declared (for coverage-based rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared: Option<CoverageLevel>,
    /// Number of observations (events) behind it.
    pub observed: u64,
    /// Why this level.
    pub reason: String,
}

/// All capabilities, in [`CapabilityKind`] order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapabilityMatrix {
    /// One row per kind.
    pub capabilities: Vec<Capability>,
}

impl CapabilityMatrix {
    /// The level of `kind`.
    pub fn level(&self, kind: CapabilityKind) -> CapabilityLevel {
        self.capabilities
            .iter()
            .find(|c| c.kind == kind)
            .map_or(CapabilityLevel::Unavailable, |c| c.level)
    }

    /// True when every kind in `kinds` is available (partial or complete).
    pub fn allows(&self, kinds: &[CapabilityKind]) -> bool {
        kinds.iter().all(|&k| self.level(k).is_available())
    }
}

/// Reason of a capability declared complete with nothing observed.
const NOTHING_OBSERVED: &str = "declared complete but nothing was observed";

/// The original's `observed_coverage(declared, count)` table.
pub fn observed_coverage(declared: CoverageLevel, observed: u64) -> (CapabilityLevel, String) {
    use CapabilityLevel::*;
    match (declared, observed > 0) {
        (CoverageLevel::Complete, false) => (Invalid, NOTHING_OBSERVED.into()),
        (CoverageLevel::Complete, true) => (Complete, "declared complete and observed".into()),
        (CoverageLevel::Partial, false) => (
            Unavailable,
            "declared partial and nothing was observed".into(),
        ),
        (CoverageLevel::Partial, true) => (Partial, "declared partial".into()),
        (CoverageLevel::Sampled, false) => (
            Unavailable,
            "declared sampled but no sample was recorded".into(),
        ),
        (CoverageLevel::Sampled, true) => (Sampled, "sampled: figures are estimates".into()),
        (CoverageLevel::None, false) => (Unavailable, "not captured".into()),
        (CoverageLevel::None, true) => (Partial, "observed but coverage not declared".into()),
    }
}

/// Builds the matrix from the health report and declared coverage.
pub fn assess_capabilities(doc: &TraceDocument, health: &TraceHealth) -> CapabilityMatrix {
    use CapabilityKind as K;
    use CapabilityLevel::*;
    let contract = doc.effective_contract().unwrap_or_default();
    let valid = health.structurally_valid;
    let cov = &health.coverage;
    let mut rows = Vec::with_capacity(10);
    let mut row = |kind, (level, reason): (CapabilityLevel, String), declared, observed| {
        rows.push(Capability {
            kind,
            level,
            declared,
            observed,
            reason,
        })
    };
    row(
        K::StructuralTrace,
        if valid {
            (Complete, "no structural errors".into())
        } else {
            (Invalid, format!("{} structural errors", health.error_count))
        },
        None,
        cov.spans,
    );
    row(
        K::OuterWallTime,
        outer_wall_time(doc, health),
        None,
        cov.measured_spans,
    );
    row(
        K::NestedHostTime,
        nested_host_time(health),
        None,
        cov.closed_spans,
    );
    // The producer's own reason, when it gave one, follows ours.
    let with_reason =
        |(level, reason): (CapabilityLevel, String), field: ContractField| match contract
            .reason(field)
            .filter(|_| level != Complete)
        {
            Some(why) => (level, format!("{reason} ({why})")),
            None => (level, reason),
        };
    for (kind, field, observed) in [
        (
            K::NestedDeviceTime,
            ContractField::DeviceTiming,
            cov.device_intervals,
        ),
        (
            K::Operations,
            ContractField::Operations,
            cov.operations.saturating_add(cov.samples),
        ),
        (K::Tensors, ContractField::Tensors, cov.tensors),
        (
            K::LogicalMemory,
            ContractField::LogicalMemory,
            cov.memory_events,
        ),
        (
            K::PhysicalMemory,
            ContractField::PhysicalMemory,
            cov.device_memory_samples,
        ),
    ] {
        let declared = contract.level(field);
        row(
            kind,
            with_reason(observed_coverage(declared, observed), field),
            Some(declared),
            observed,
        );
    }
    let gradient_level = gradients(&contract, health);
    row(
        K::Gradients,
        with_reason(gradient_level, ContractField::Gradients),
        Some(contract.gradients),
        cov.gradients,
    );
    let stats_level = if health.has(HealthCode::InvalidTensorStats) {
        (Invalid, "tensor_stats events break their rules".into())
    } else {
        observed_coverage(contract.tensor_stats, cov.tensor_stats)
    };
    row(
        K::TensorStats,
        with_reason(stats_level, ContractField::TensorStats),
        Some(contract.tensor_stats),
        cov.tensor_stats,
    );

    downgrade(&mut rows, health);
    CapabilityMatrix { capabilities: rows }
}

/// Rewrites the reason of a `sampled` operations row with the sampler's figures: `1204 samples
/// at 1000 Hz, 3 lost: figures are estimates`, the dropped samples when the loader dropped any,
/// the producer's reason after it; lowers the row to `partial` when the dropped share may bias
/// the estimate ([`trace_ops::BIASED_SHARE`]).
pub(crate) fn describe_sampled_operations(matrix: &mut CapabilityMatrix, p: &trace_ops::OpProfile) {
    let Some(row) = matrix
        .capabilities
        .iter_mut()
        .find(|c| c.kind == CapabilityKind::Operations && c.level == CapabilityLevel::Sampled)
    else {
        return;
    };
    let t = &p.totals;
    let rate = t.hz.map(|hz| format!(" at {hz} Hz")).unwrap_or_default();
    let lost = match t.lost {
        Some(l) => format!(", {l} lost"),
        None => ", lost samples unknown (no sampler event)".to_string(),
    };
    let producer = row
        .reason
        .split_once(" (")
        .map(|(_, r)| format!(" ({r}"))
        .unwrap_or_default();
    let dropped = t
        .dropped
        .describe(t.samples)
        .map(|d| format!("; {d}"))
        .unwrap_or_default();
    row.reason = format!(
        "{}{rate}{lost}: figures are estimates{dropped}{producer}",
        trace_format::count(t.samples, "sample", "samples")
    );
    // one rule with the profile (trace_ops::availability): a biased share of dropped samples
    // lowers the capability
    if t.dropped.biased {
        row.level = CapabilityLevel::Partial;
    }
}

/// A `sampled` operations row whose samples give no estimate (cut short before the sampler's
/// account, no sample inside the measured region, every sample dropped): `unavailable`, with
/// the profile's reason, as `ops` says it.
pub(crate) fn no_sampled_estimate(matrix: &mut CapabilityMatrix, why: &trace_ops::Unavailable) {
    if let Some(row) = matrix
        .capabilities
        .iter_mut()
        .find(|c| c.kind == CapabilityKind::Operations && c.level == CapabilityLevel::Sampled)
    {
        row.level = CapabilityLevel::Unavailable;
        row.reason = format!("no estimate: {}", why.reason);
    }
}

trace_schema::wire_names!(CapabilityKind, CapabilityLevel);

/// The outer wall time: one closed measured span in a valid, finished trace.
fn outer_wall_time(doc: &TraceDocument, health: &TraceHealth) -> (CapabilityLevel, String) {
    use CapabilityLevel::*;
    let (valid, failed, cov) = (
        health.structurally_valid,
        health.capture_failed,
        &health.coverage,
    );
    let closed_measured = doc
        .spans
        .iter()
        .filter(|s| s.measured && s.duration_ns.is_some())
        .count();
    if !valid {
        (Invalid, "trace is structurally invalid".into())
    } else if failed {
        (Unavailable, "the capture did not finish".into())
    } else if health.truncated {
        if closed_measured == 1 && cov.measured_spans == 1 {
            (
                Partial,
                "the measured span closed before the trace was cut short (from an incomplete capture)".into(),
            )
        } else {
            (
                Unavailable,
                "the trace was cut short before the measured span closed".into(),
            )
        }
    } else if closed_measured == 1 && cov.measured_spans == 1 {
        (Complete, "one closed measured span".into())
    } else {
        (
            Invalid,
            format!(
                "{} closed measured spans, expected exactly one",
                closed_measured
            ),
        )
    }
}

/// The nested host time: every closed span's time in a valid trace (open ones have none when
/// it was cut short).
fn nested_host_time(health: &TraceHealth) -> (CapabilityLevel, String) {
    use CapabilityLevel::*;
    let (valid, failed) = (health.structurally_valid, health.capture_failed);
    if !valid {
        (Invalid, "trace is structurally invalid".into())
    } else if failed {
        (Unavailable, "the capture did not finish".into())
    } else if health.truncated {
        (
            Partial,
            "closed spans keep their times; open ones have none (the trace was cut short: an incomplete capture)".into(),
        )
    } else {
        (Complete, "valid, finished trace".into())
    }
}

/// The gradients: the observed coverage, or, under an exact gradient contract, whether it
/// holds (with warnings or not).
fn gradients(contract: &CaptureContract, health: &TraceHealth) -> (CapabilityLevel, String) {
    use CapabilityLevel::*;
    let cov = &health.coverage;
    if contract.gradients != CoverageLevel::Complete {
        observed_coverage(contract.gradients, cov.gradients)
    } else {
        let errors = health
            .issues
            .iter()
            .any(|i| i.code.is_gradient_check() && i.severity == Severity::Error)
            || health.has(HealthCode::GradientContractInvalid)
            || health.has(HealthCode::GradientContractMissing);
        let warnings = health
            .issues
            .iter()
            .any(|i| i.code.is_gradient_check() && i.severity == Severity::Warning);
        if errors {
            (Invalid, "gradient contract violated".into())
        } else if cov.gradients == 0 {
            (Invalid, NOTHING_OBSERVED.into())
        } else if warnings {
            (Partial, "gradient contract holds with warnings".into())
        } else {
            (Complete, "exact gradient contract holds".into())
        }
    }
}

/// Lowers what the trace cannot back: nothing observed in a capture that ended early is "not
/// seen"; nothing is available in an invalid trace; nothing is complete in an incomplete
/// capture.
fn downgrade(rows: &mut [Capability], health: &TraceHealth) {
    use CapabilityLevel::*;
    let valid = health.structurally_valid;
    let ended_early = health.capture_failed || health.truncated;
    for c in rows.iter_mut() {
        // A capture that ended early never reached the point where the evidence would have
        // been written: nothing observed is then "not seen", not a broken promise.
        if ended_early
            && c.level == Invalid
            && c.observed == 0
            && c.reason.starts_with(NOTHING_OBSERVED)
        {
            c.level = Unavailable;
            c.reason = "declared, but the capture did not finish before any was recorded".into();
        }
        if !valid && c.level.is_available() {
            c.level = Invalid;
            c.reason = format!("{}; trace is structurally invalid", c.reason);
        }
        if !health.capture_complete && c.level == Complete {
            c.level = Partial;
            c.reason = format!("{}; capture incomplete, diagnostic only", c.reason);
        }
    }
}
