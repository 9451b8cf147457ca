//! The run metadata and the capture contract of an imported trace: what the PyTorch profiler
//! (Kineto) covers, and what it does not, declared per kind of evidence with its reason.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use trace_schema::{
    CaptureContract, ContractField, CoverageLevel, ExecutionPhase, MeasurementScope, ReasonKey,
    RunMeta, TimingMode,
};

use crate::chrome::Header;

/// Tag naming the producer of an imported trace.
pub const SOURCE_TAG: &str = "source";
/// Its value.
pub const SOURCE_KINETO: &str = "pytorch-profiler (kineto chrome trace)";

/// What the contract needs to know about the import.
pub(crate) struct Observed {
    pub memory_events: bool,
    pub device_samples: bool,
    pub gpu_intervals: bool,
    pub train: bool,
    /// Every device seen (memory and GPU), sorted.
    pub devices: Vec<String>,
    /// Absolute time of the window start, ns on the trace clock.
    pub origin_ns: i128,
    pub tags: BTreeMap<String, String>,
    /// The warm-up the first recorded `ProfilerStep#N` gives (`N`), when the trace has one.
    pub step_warmup: Option<u64>,
}

fn reasons(pairs: &[(ContractField, &str)]) -> BTreeMap<ReasonKey, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), v.to_string()))
        .collect()
}

/// The capture contract of a Kineto trace.
pub(crate) fn contract(header: &Header, seen: &Observed) -> CaptureContract {
    let level = |b: bool| {
        if b {
            CoverageLevel::Partial
        } else {
            CoverageLevel::None
        }
    };
    let memory_reason = if seen.memory_events {
        "PyTorch's allocators report every allocation and free made while the profiler was active (profile_memory=True); memory allocated before the window is seen only when freed inside it (CUDA) or not at all (CPU), so storages live across the whole window are missing; Kineto names no tensor, shape or category for a block, so every storage is `other`"
    } else if header.profile_memory == Some(true) {
        "profile_memory was on but the trace holds no [memory] events"
    } else {
        "the trace holds no [memory] events (profile the step with profile_memory=True)"
    };
    let physical_reason = if seen.device_samples {
        "PyTorch's own Total Allocated (used) after each [memory] event, and Total Reserved on accelerators; no free or capacity figures, and nothing between allocator events"
    } else {
        "no [memory] event carries Total Allocated"
    };
    let device_reason = if seen.gpu_intervals {
        "GPU kernels, copies and sets as Kineto records them (CUPTI), on the host clock after Kineto's conversion"
    } else {
        "no GPU activity in the trace"
    };
    CaptureContract {
        measurement_scope: MeasurementScope::ProfiledWork,
        operations: CoverageLevel::None,
        tensors: CoverageLevel::None,
        gradients: CoverageLevel::None,
        logical_memory: level(seen.memory_events),
        physical_memory: level(seen.device_samples),
        device_timing: level(seen.gpu_intervals),
        tensor_stats: CoverageLevel::None,
        gradient_contract: None,
        required_semantic_labels: Vec::new(),
        reasons: reasons(&[
            (ContractField::Operations, "Kineto cpu_op events are imported as spans of kind `op`; their outputs are not recorded, so there are no op events"),
            (ContractField::Tensors, "the PyTorch profiler records no tensor identities (record_shapes gives input shapes only)"),
            (ContractField::Gradients, "the PyTorch profiler records no gradient facts"),
            (ContractField::LogicalMemory, memory_reason),
            (ContractField::PhysicalMemory, physical_reason),
            (ContractField::DeviceTiming, device_reason),
            (ContractField::TensorStats, "the PyTorch profiler records no tensor statistics"),
        ]),
    }
}

/// ISO-8601 UTC with milliseconds of the window start, when the trace gives
/// `baseTimeNanoseconds` (Kineto: Unix time = base + ts × 1000 ns).
fn timestamp(header: &Header, origin_ns: i128) -> Option<String> {
    let unix = i128::from(header.base_time_ns?).checked_add(origin_ns)?;
    let unix = u64::try_from(unix).ok()?;
    let t = UNIX_EPOCH.checked_add(Duration::from_nanos(unix))?;
    Some(humantime::format_rfc3339_millis(t).to_string())
}

/// The run metadata. `run_id` is Kineto's `trace_id` when present; `entrypoint` the file name
/// of `traceName`; the timestamp `unknown` without `baseTimeNanoseconds`; `phase` train when a
/// backward or optimizer pass was found (else unknown, never a guessed inference); `device`
/// when exactly one device was seen. `host_name` is never copied.
pub(crate) fn run_meta(header: &Header, seen: Observed) -> RunMeta {
    let trace_name = header
        .trace_name
        .as_deref()
        .map(|n| n.rsplit(['/', '\\']).next().unwrap_or(n).to_string())
        .filter(|n| !n.trim().is_empty());
    let run_id = match (&header.trace_id, &trace_name) {
        (Some(id), _) if !id.trim().is_empty() => format!("kineto-{id}"),
        (_, Some(n)) => format!("kineto-{n}"),
        _ => "kineto-import".to_string(),
    };
    let mut tags = seen.tags.clone();
    tags.insert(SOURCE_TAG.to_string(), SOURCE_KINETO.to_string());
    let script = header.candle_graph.clone().unwrap_or_default();
    let warmup_steps = match (script.warmup_steps, seen.step_warmup) {
        (Some(w), _) => {
            tags.insert(
                "import.warmup_source".to_string(),
                "declared (candle_graph metadata or side file)".to_string(),
            );
            Some(w)
        }
        (None, Some(n)) => {
            tags.insert(
                "import.warmup_source".to_string(),
                format!("ProfilerStep#{n}: {n} profiler step(s) before the recorded one (steps before the profiler was made are not seen; declare warmup_steps to say otherwise)"),
            );
            Some(n)
        }
        (None, None) => None,
    };
    if let Some(n) = script.intra_op_threads {
        tags.insert("torch.intra_op_threads".to_string(), n.to_string());
    }
    if let Some(v) = &script.torch_version {
        tags.insert("torch.version".to_string(), v.clone());
    }
    if let Some(v) = &header.schema_version {
        tags.insert("kineto.schema_version".to_string(), v.clone());
    }
    for (name, flag) in [
        ("profile_memory", header.profile_memory),
        ("record_shapes", header.record_shapes),
        ("with_stack", header.with_stack),
    ] {
        if let Some(f) = flag {
            tags.insert(format!("kineto.{name}"), f.to_string());
        }
    }
    RunMeta {
        run_id,
        correlation_id: None,
        entrypoint: trace_name.unwrap_or_else(|| "pytorch-profiler".to_string()),
        phase: seen.train.then_some(ExecutionPhase::Train),
        timestamp: timestamp(header, seen.origin_ns).unwrap_or_else(|| "unknown".to_string()),
        capture_step: script.capture_step,
        warmup_steps,
        device: match seen.devices.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        },
        measured_region_device_synchronized: false,
        timing_mode: Some(TimingMode::Host),
        capture_contract: Some(contract(header, &seen)),
        comparison_identity: None,
        tags,
        candle_version: None,
        probe_version: None,
        tracking_allocator_installed: None,
        host: script.host.map(|h| trace_schema::HostInfo {
            os: h.os,
            arch: h.arch,
            cpu_count: h.cpu_count,
            memory_bytes: h.memory_bytes,
        }),
        rank: None,
        local_rank: None,
        world_size: None,
        last_capture_step: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_from_base_time() {
        let header = Header {
            base_time_ns: Some(1_790_857_026_000_000_000),
            ..Header::default()
        };
        // ts 5192767996771.242 µs after the base
        let t = timestamp(&header, 5_192_767_996_771_242).unwrap();
        assert_eq!(t, "2026-11-30T14:43:13.996Z");
        assert_eq!(timestamp(&Header::default(), 0), None);
    }
}
