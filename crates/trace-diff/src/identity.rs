//! Identity first: what each run is, and why timing may not be compared between them.
//!
//! Timing conclusions are refused, with a typed reason each ([`RefusalCode`]), when any two runs
//! (of either side) differ in timing mode, device, the passes their spans declare, their capture
//! contract (measurement scope and the declared coverage of every kind of evidence; the gradient
//! manifest is the model's parameter list and is compared in the gradient section), their
//! warm-up, or their comparison-identity conditions; when a run's capture is invalid, failed or
//! incomplete; when a run has no timing (no closed measured region, or the execution graph was
//! refused); and when nested span times on an accelerator are host launch times. Memory and
//! gradients are compared anyway, labelled.
//!
//! The rules follow the original candle-graph's comparison eligibility
//! (`capture_semantics_mismatch`, `incomplete_capture`, `identity_conditions_differ`,
//! `unsynchronized_device_region`), applied to every timing figure rather than to the outer
//! wall time only.

use std::collections::BTreeSet;

use serde::Serialize;
use trace_schema::{ContractField, Device, Pass, TimingMode, TraceDocument};

use crate::run::Run;

/// Why timing may not be compared.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RefusalCode {
    /// A run is structurally invalid, or its capture failed.
    InvalidCapture,
    /// A run was cut short or dropped events: its times are from an incomplete capture.
    IncompleteCapture,
    /// A run has no timing: no single closed measured region, or no execution graph.
    TimingUnavailable,
    /// Runs differ in `timing_mode` (host vs device-synchronized).
    TimingModeDiffers,
    /// Runs ran on different devices.
    DeviceDiffers,
    /// Runs' spans declare different passes (forward / backward / optimizer).
    PassesDiffer,
    /// Runs' capture contracts declare a different scope or coverage.
    CaptureContractDiffers,
    /// Runs differ in warm-up steps before the captured step.
    WarmupDiffers,
    /// Runs captured a different number of steps: their pass and op times are sums over the
    /// captured steps ([`captured_steps`]), so they would compare N steps against M.
    StepsDiffer,
    /// Runs' comparison identities name different conditions (workload, model, config, data,
    /// seed policy, batch, accumulation, precision, device state).
    IdentityConditionsDiffer,
    /// Nested span times on an accelerator measured host launch time (timing mode `host`).
    UnsynchronizedDeviceTiming,
}

/// One reason to refuse timing conclusions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimingRefusal {
    /// Which rule.
    pub code: RefusalCode,
    /// What differs or is wrong, naming the runs or values (trace text: escape before display).
    pub message: String,
}

/// What one run is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunIdentity {
    /// The caller's label of the run (e.g. its path).
    pub label: String,
    /// Run id.
    pub run_id: String,
    /// Entrypoint.
    pub entrypoint: String,
    /// `train` or `infer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<&'static str>,
    /// Device label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Timing mode (absent in traces that predate it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_mode: Option<TimingMode>,
    /// Captured step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_step: Option<u64>,
    /// Samples per step on the device, from the comparison identity (absent when the trace
    /// does not declare one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_batch: Option<u64>,
    /// Warm-up steps before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_steps: Option<u64>,
    /// Passes declared by the run's spans, in pass order.
    pub passes: Vec<Pass>,
    /// Candle version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candle_version: Option<String>,
    /// The producer named in the `source` tag (e.g. an imported PyTorch profiler trace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Structurally valid.
    pub structurally_valid: bool,
    /// Finished, not cut short, nothing dropped.
    pub capture_complete: bool,
}

impl RunIdentity {
    pub(crate) fn of(run: &Run<'_>) -> Self {
        let m = &run.doc.meta;
        let passes: BTreeSet<Pass> = run.doc.spans.iter().filter_map(|s| s.pass).collect();
        Self {
            label: run.label.to_string(),
            run_id: m.run_id.clone(),
            entrypoint: m.entrypoint.clone(),
            phase: m.phase.map(|p| p.as_str()),
            device: m.device.clone(),
            timing_mode: m.timing_mode,
            capture_step: m.capture_step,
            physical_batch: m.comparison_identity.as_ref().map(|i| i.physical_batch),
            warmup_steps: m.warmup_steps,
            passes: passes.into_iter().collect(),
            candle_version: m.candle_version.clone(),
            source: m.tags.get("source").cloned(),
            structurally_valid: run.analysis.health.structurally_valid,
            capture_complete: run.analysis.health.capture_complete,
        }
    }
}

/// Identity of every run and the verdict on timing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentityDiff {
    /// Baseline runs, in the order given.
    pub baseline: Vec<RunIdentity>,
    /// Candidate runs.
    pub candidate: Vec<RunIdentity>,
    /// True when no refusal applies: time deltas are drawn.
    pub timing_comparable: bool,
    /// Every reason timing is not compared, in [`RefusalCode`] order.
    pub refusals: Vec<TimingRefusal>,
}

/// The prefix of the spans PyTorch's profiler records for each `prof.step()`.
const PYTORCH_STEP_PREFIX: &str = "ProfilerStep#";

/// How many steps a trace captured: its step spans (a Candle capture of a `capture_steps`
/// range marks each with its `step_index`), else the `ProfilerStep#N` spans of an imported
/// PyTorch profiler trace, else one (a single-step capture, or a profile without steps).
pub fn captured_steps(doc: &TraceDocument) -> u64 {
    let marked = doc.spans.iter().filter(|s| s.step_index.is_some()).count();
    let steps = if marked > 0 {
        marked
    } else {
        doc.spans
            .iter()
            .filter(|s| doc.str(s.name).starts_with(PYTORCH_STEP_PREFIX))
            .count()
    };
    u64::try_from(steps.max(1)).unwrap_or(u64::MAX)
}

fn join(values: &[String]) -> String {
    values.join(" / ")
}

/// The distinct values of a field per side; a refusal (`what: baseline …, candidate …`) when
/// more than one value occurs overall.
fn differs(
    what: &str,
    code: RefusalCode,
    baseline: &[Run<'_>],
    candidate: &[Run<'_>],
    value: impl Fn(&Run<'_>) -> String,
    out: &mut Vec<TimingRefusal>,
) {
    let distinct = |runs: &[Run<'_>]| {
        let mut v: Vec<String> = Vec::new();
        for r in runs {
            let x = value(r);
            if !v.contains(&x) {
                v.push(x);
            }
        }
        v
    };
    let (b, c) = (distinct(baseline), distinct(candidate));
    let mut all = b.clone();
    for x in &c {
        if !all.contains(x) {
            all.push(x.clone());
        }
    }
    if all.len() > 1 {
        out.push(TimingRefusal {
            code,
            message: format!("{what}: baseline {}, candidate {}", join(&b), join(&c)),
        });
    }
}

fn or_unknown(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "unknown".to_string(), |x| x.to_string())
}

/// The capture contract's scope and coverage levels as `(field, level)` pairs.
fn contract_levels(run: &Run<'_>) -> Vec<(&'static str, &'static str)> {
    let c = run.doc.meta.capture_contract.clone().unwrap_or_default();
    let mut levels = vec![("measurement_scope", c.measurement_scope.as_str())];
    for f in [
        ContractField::Operations,
        ContractField::Tensors,
        ContractField::Gradients,
        ContractField::LogicalMemory,
        ContractField::PhysicalMemory,
        ContractField::DeviceTiming,
        ContractField::TensorStats,
    ] {
        levels.push((f.as_str(), c.level(f).as_str()));
    }
    levels
}

/// The contract fields whose level differs between any two runs, with each side's levels.
fn contract_difference(baseline: &[Run<'_>], candidate: &[Run<'_>]) -> Option<String> {
    let b: Vec<_> = baseline.iter().map(contract_levels).collect();
    let c: Vec<_> = candidate.iter().map(contract_levels).collect();
    let first = b.first().or(c.first())?;
    let mut fields = Vec::new();
    for (i, (name, _)) in first.iter().enumerate() {
        let distinct = |runs: &[Vec<(&str, &str)>]| {
            let mut v: Vec<String> = Vec::new();
            for r in runs {
                let level = r[i].1.to_string();
                if !v.contains(&level) {
                    v.push(level);
                }
            }
            v
        };
        let (bl, cl) = (distinct(&b), distinct(&c));
        if bl.len() > 1 || cl.len() > 1 || bl != cl {
            fields.push(format!(
                "{name} baseline {} candidate {}",
                join(&bl),
                join(&cl)
            ));
        }
    }
    (!fields.is_empty()).then(|| format!("capture contract differs: {}", fields.join("; ")))
}

fn identity_conditions(run: &Run<'_>) -> Option<String> {
    run.doc.meta.comparison_identity.as_ref().map(|i| {
        format!(
            "workload {}, model {}, config {}, data {}, seed {}, batch {}, accumulation {}, precision {}, device state {}",
            i.workload_id,
            i.model_id,
            i.config_id,
            i.data_id,
            i.seed_policy,
            i.physical_batch,
            i.accumulation_steps,
            i.precision,
            i.device_state
        )
    })
}

/// Refusals from the runs' health: an invalid or failed capture, an incomplete one, no timing.
fn health_refusals(sides: [(&str, &[Run<'_>]); 2], refusals: &mut Vec<TimingRefusal>) {
    for (side, runs) in sides {
        for run in runs {
            let h = &run.analysis.health;
            if !h.structurally_valid || h.capture_failed {
                refusals.push(TimingRefusal {
                    code: RefusalCode::InvalidCapture,
                    message: format!(
                        "{side} {}: {}",
                        run.label,
                        if h.capture_failed {
                            "the capture failed".to_string()
                        } else {
                            format!("structurally invalid ({} errors)", h.error_count)
                        }
                    ),
                });
            } else if !h.capture_complete {
                refusals.push(TimingRefusal {
                    code: RefusalCode::IncompleteCapture,
                    message: format!(
                        "{side} {}: {}",
                        run.label,
                        if h.truncated {
                            "the trace was cut short"
                        } else {
                            "the capture dropped events"
                        }
                    ),
                });
            }
        }
    }
    for (side, runs) in sides {
        for run in runs {
            let h = &run.analysis.health;
            if !h.structurally_valid || h.capture_failed {
                continue; // already refused as an invalid capture
            }
            let has_wall_time = run
                .analysis
                .graph
                .as_ref()
                .is_some_and(|g| g.outer_wall_time_ns.is_some());
            if !has_wall_time {
                refusals.push(TimingRefusal {
                    code: RefusalCode::TimingUnavailable,
                    message: format!(
                        "{side} {}: {}",
                        run.label,
                        match &run.analysis.graph_refusal {
                            Some(r) => format!("no timing ({})", r.reasons.join("; ")),
                            None => "no closed measured region".to_string(),
                        }
                    ),
                });
            }
        }
    }
}

/// Checks every rule over all runs of both sides.
pub(crate) fn compare_identity(baseline: &[Run<'_>], candidate: &[Run<'_>]) -> IdentityDiff {
    let mut refusals = Vec::new();
    let sides = [("baseline", baseline), ("candidate", candidate)];
    health_refusals(sides, &mut refusals);
    differs(
        "timing mode differs",
        RefusalCode::TimingModeDiffers,
        baseline,
        candidate,
        |r| or_unknown(r.doc.meta.timing_mode.map(|m| m.as_str())),
        &mut refusals,
    );
    differs(
        "device differs",
        RefusalCode::DeviceDiffers,
        baseline,
        candidate,
        |r| or_unknown(r.doc.meta.device.clone()),
        &mut refusals,
    );
    differs(
        "passes differ",
        RefusalCode::PassesDiffer,
        baseline,
        candidate,
        |r| {
            let p = RunIdentity::of(r).passes;
            if p.is_empty() {
                "none".to_string()
            } else {
                p.iter().map(|x| x.as_str()).collect::<Vec<_>>().join("+")
            }
        },
        &mut refusals,
    );
    if let Some(message) = contract_difference(baseline, candidate) {
        refusals.push(TimingRefusal {
            code: RefusalCode::CaptureContractDiffers,
            message,
        });
    }
    differs(
        "warm-up steps differ",
        RefusalCode::WarmupDiffers,
        baseline,
        candidate,
        |r| or_unknown(r.doc.meta.warmup_steps),
        &mut refusals,
    );
    differs(
        "captured steps differ (pass and op times are sums over the captured steps: capture as many steps on both sides)",
        RefusalCode::StepsDiffer,
        baseline,
        candidate,
        |r| captured_steps(r.doc).to_string(),
        &mut refusals,
    );
    let all_identified = baseline
        .iter()
        .chain(candidate)
        .all(|r| r.doc.meta.comparison_identity.is_some());
    if all_identified {
        differs(
            "comparison identity differs",
            RefusalCode::IdentityConditionsDiffer,
            baseline,
            candidate,
            |r| identity_conditions(r).unwrap_or_default(),
            &mut refusals,
        );
    }
    for (side, runs) in sides {
        for run in runs {
            let m = &run.doc.meta;
            let Some(device) = m.device.as_deref() else {
                continue;
            };
            if !Device::parse(device).is_host()
                && m.timing_mode != Some(TimingMode::DeviceSynchronized)
            {
                refusals.push(TimingRefusal {
                    code: RefusalCode::UnsynchronizedDeviceTiming,
                    message: format!(
                        "{side} {}: span times on {device} are host launch times (timing mode {})",
                        run.label,
                        or_unknown(m.timing_mode.map(|t| t.as_str()))
                    ),
                });
            }
        }
    }
    refusals.sort_by_key(|r| r.code);
    IdentityDiff {
        baseline: baseline.iter().map(RunIdentity::of).collect(),
        candidate: candidate.iter().map(RunIdentity::of).collect(),
        timing_comparable: refusals.is_empty(),
        refusals,
    }
}

trace_schema::wire_names!(RefusalCode);
