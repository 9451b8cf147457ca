//! `device-check`'s `storages-complete` line (CUDA): the trace's storages against the driver's
//! own count. The device's default memory pool (the one `cuMemAllocAsync` draws from) reports
//! the bytes of its allocations not yet freed (`USED_MEM_CURRENT`), written into each device
//! sample's `used_bytes`. When the trace holds every storage of the device, its logical live
//! bytes at each sampled span boundary equal that figure (up to what others allocate from the
//! pool, and the pool's rounding); registration alone would leave the temporaries, backward
//! intermediates and optimizer state out. The figures also compare the step's allocations with
//! the CPU reference run (same model and seed).

use trace_format::bytes;
use trace_schema::{CoverageLevel, MemoryAction, TraceDocument};

/// The tolerance at a boundary: 1% of the pool's figure, at least 1 MiB (stated in the line).
fn tolerance(pool_used: u64) -> u64 {
    (pool_used / 100).max(1 << 20)
}

/// Allocations of the captured step (not `pre_existing`) on `device`: (count, bytes).
fn step_allocations(doc: &TraceDocument, device: &str) -> (u64, u64) {
    let Some(sym) = doc.sym(device) else {
        return (0, 0);
    };
    doc.memory
        .iter()
        .filter(|m| m.device == sym && m.action == MemoryAction::Alloc && !m.pre_existing)
        .fold((0u64, 0u64), |(n, b), m| {
            (n + 1, b.saturating_add(m.bytes.unwrap_or(0)))
        })
}

/// The `storages-complete` check of `device_doc` (a CUDA run) beside its CPU reference.
pub fn check_storages_complete(
    device_doc: &TraceDocument,
    cpu_doc: &TraceDocument,
    device: &str,
) -> (bool, String) {
    let coverage = device_doc
        .meta
        .capture_contract
        .as_ref()
        .map(|c| c.logical_memory)
        .unwrap_or_default();
    let profile = trace_memory::analyze_memory(device_doc);
    let samples = profile
        .physical
        .as_ref()
        .and_then(|p| p.by_device.iter().find(|d| d.device == device))
        .map(|d| d.samples.as_slice())
        .unwrap_or_default();
    let (mut compared, mut within, mut exact) = (0u64, 0u64, 0u64);
    let mut largest: Option<(i128, u64, u64)> = None;
    for s in samples {
        let (Some(logical), Some(pool)) = (s.logical_live_bytes, s.used_bytes) else {
            continue;
        };
        compared += 1;
        let diff = i128::from(pool) - i128::from(logical);
        if diff == 0 {
            exact += 1;
        }
        if diff.unsigned_abs() <= u128::from(tolerance(pool)) {
            within += 1;
        }
        if largest.is_none_or(|(d, _, _)| diff.abs() > d.abs()) {
            largest = Some((diff, logical, pool));
        }
    }
    let (dev_n, dev_b) = step_allocations(device_doc, device);
    let (cpu_n, cpu_b) = step_allocations(cpu_doc, "cpu");
    let peak = profile
        .logical
        .as_ref()
        .and_then(|l| l.device(device).ok())
        .and_then(|d| d.peak.clone())
        .map(|p| p.live_bytes);
    let passed = coverage == CoverageLevel::Complete && compared > 0 && within == compared;
    let largest_text = match largest {
        Some((d, logical, pool)) => format!(
            "; largest difference {}{} (trace {} against pool {})",
            if d < 0 { "-" } else { "+" },
            bytes(d.unsigned_abs() as u64),
            bytes(logical),
            bytes(pool)
        ),
        None => String::new(),
    };
    let reason = device_doc
        .meta
        .capture_contract
        .as_ref()
        .and_then(|c| c.reasons.get("logical_memory"))
        .map(|r| format!("; reason: {}", trace_format::escape(r)))
        .unwrap_or_default();
    let figures = format!(
        "logical memory {coverage:?}{reason}; trace live bytes = the driver pool's used bytes at {exact}/{compared} sampled boundaries, within max(1%, 1 MiB) at {within}/{compared}{largest_text}; logical peak {}; the step allocated {dev_n} storages ({}) on {device} against {cpu_n} ({}) on the CPU reference",
        peak.map(bytes).unwrap_or_else(|| "unknown".into()),
        bytes(dev_b),
        bytes(cpu_b),
    );
    (passed, figures)
}
