//! `peak-vs-device`: the logical live bytes against the device's own used bytes at every
//! sampled span boundary, and the logical peak against the next boundary's.

use trace_format::{bytes, duration};
use trace_schema::TraceDocument;

/// The device's used bytes in one sample and where the figure comes from: `used_bytes` when
/// the producer wrote it, else `capacity − free` (CUDA's `cuMemGetInfo`), else RSS (CPU).
fn used_of(s: &trace_memory::PhysicalSample) -> Option<(u64, &'static str)> {
    // On CUDA `used_bytes` is the memory pool's live allocations (`storages-complete`
    // compares it with the trace); the device's own figure is `total − free`.
    if let (Some(c), Some(f)) = (s.capacity_bytes, s.free_bytes) {
        return c.checked_sub(f).map(|u| (u, "total − free (cuMemGetInfo)"));
    }
    if let Some(u) = s.used_bytes {
        return Some((u, "used bytes"));
    }
    if let (Some(c), Some(f)) = (s.capacity_bytes, s.free_bytes) {
        return c.checked_sub(f).map(|u| (u, "total − free (cuMemGetInfo)"));
    }
    s.resident_bytes.map(|r| (r, "RSS"))
}

pub(super) fn check_peak(doc: &TraceDocument, device: &str) -> (bool, String) {
    let profile = trace_memory::analyze_memory(doc);
    let Some(peak) = profile
        .logical
        .as_ref()
        .and_then(|l| l.device(device).ok())
        .and_then(|d| d.peak.clone())
    else {
        return (false, format!("no logical memory on {device} in the trace"));
    };
    let Some(physical) = profile
        .physical
        .as_ref()
        .and_then(|p| p.by_device.iter().find(|d| d.device == device))
    else {
        return (
            false,
            format!(
                "logical peak {} but no device memory samples on {device}",
                bytes(peak.live_bytes)
            ),
        );
    };
    let samples = &physical.samples;
    let mut compared = 0usize;
    let mut violations = 0usize;
    let mut largest_gap: Option<i128> = None;
    for s in samples {
        if let (Some(logical), Some((used, _))) = (s.logical_live_bytes, used_of(s)) {
            compared += 1;
            if logical > used {
                violations += 1;
            }
            let gap = i128::from(used) - i128::from(logical);
            largest_gap = Some(largest_gap.map_or(gap, |g| g.max(gap)));
        }
    }
    let next = samples
        .iter()
        .find(|s| s.timestamp_ns >= peak.timestamp_ns && used_of(s).is_some());
    let Some((next_sample, (used, source))) = next.and_then(|s| used_of(s).map(|u| (s, u))) else {
        return (
            false,
            format!(
                "logical peak {} at {}: no device sample with used bytes at or after it",
                bytes(peak.live_bytes),
                duration(peak.timestamp_ns)
            ),
        );
    };
    let gap = i128::from(used) - i128::from(peak.live_bytes);
    // A GPU allocator keeps freed memory reserved (cudarc's stream-ordered pool; Metal's buffer
    // pool), so the used figure at the boundary after the peak still covers the peak. On CPU
    // freed heap memory goes back to the allocator or the OS at once: there only the
    // per-boundary comparison is a rule, the peak's is reported.
    let pooled = device != "cpu";
    let passed = (gap >= 0 || !pooled) && violations == 0 && compared > 0;
    let gap_text = if gap >= 0 {
        bytes(gap as u64)
    } else {
        format!("-{}", bytes(gap.unsigned_abs() as u64))
    };
    let figures = format!(
        "logical peak {} at {} {} used {} ({source}) at the next span boundary ({} later): gap {gap_text}{}; logical ≤ used at {}/{} sampled boundaries{}",
        bytes(peak.live_bytes),
        duration(peak.timestamp_ns),
        if gap >= 0 { "≤" } else { ">" },
        bytes(used),
        duration(next_sample.timestamp_ns - peak.timestamp_ns),
        if pooled {
            ""
        } else {
            " (CPU: memory freed before the boundary is no longer counted, so this is not a rule here)"
        },
        compared - violations,
        compared,
        largest_gap
            .filter(|g| *g >= 0)
            .map(|g| format!(", largest gap {}", bytes(g as u64)))
            .unwrap_or_default()
    );
    (passed, figures)
}
