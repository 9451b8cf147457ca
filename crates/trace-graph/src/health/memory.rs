//! Logical memory checks, all from the memory profile (`trace_memory`, computed once): unpaired
//! frees, size mismatches, retained storages and `duplicate_allocation` (the same tensor
//! allocating a live storage again, which the profile folds into aliases and lists).

use trace_format::{at, bytes as human_bytes};
use trace_memory::{LogicalMemoryProfile, MemoryProfile, StorageLifetime};
use trace_schema::MemoryCategory;

use super::issues::{HealthCode, IssueLocation, Issues};
use crate::gradients::GradientSummary;

/// Storages allocated inside the window still live at the end: not pre-existing, not
/// parameters or optimizer state.
pub(crate) fn retained(logical: &LogicalMemoryProfile) -> impl Iterator<Item = &StorageLifetime> {
    logical.live_at_end_lifetimes().filter(|l| {
        !l.pre_existing
            && !matches!(
                l.category,
                MemoryCategory::Parameter | MemoryCategory::Optimizer
            )
    })
}

/// `{device}:{storage_id}` of a lifetime (the first tensor id in trace/6).
pub(crate) fn lifetime_label(l: &StorageLifetime) -> String {
    let id = l
        .storage_id
        .as_deref()
        .or(l.tensor_ids.first().map(|t| &**t))
        .unwrap_or("?");
    format!("{}:{id}", l.device)
}

pub(super) fn report(
    memory: &MemoryProfile,
    gradients: &GradientSummary,
    origin_ns: u64,
    issues: &mut Issues,
) {
    let logical = memory.logical.as_ref();
    for d in &memory.duplicate_allocations {
        let s = format!("{}:{}", d.device, d.storage_id);
        let t = d.tensor_id.as_deref().unwrap_or("?");
        issues.error(
            HealthCode::DuplicateAllocation,
            format!("tensor {t} allocates storage {s} again while it is live"),
            IssueLocation::storage(s),
        );
    }
    if let Some(o) = &memory.logical_overflow {
        let s = format!("{}:{}", o.device, o.storage_id.as_deref().unwrap_or("?"));
        issues.error(
            HealthCode::MemoryBytesOverflow,
            format!("allocations add up past 2^64 bytes at storage {s} ({} bytes): these byte counts cannot be real, so no logical memory figure of this trace is computed", o.bytes),
            IssueLocation::storage(s),
        );
    }
    if gradients.non_parameter_bytes_overflowed {
        issues.error(
            HealthCode::MemoryBytesOverflow,
            "the bytes of the non-parameter gradients add up past 2^64: these byte counts cannot be real, so their total is not shown".to_string(),
            IssueLocation::document(),
        );
    }
    let Some(logical) = logical else {
        return;
    };
    for m in &logical.size_mismatches {
        let s = format!("{}:{}", m.device, m.storage_id.as_deref().unwrap_or("?"));
        issues.warning(
            HealthCode::AllocationSizeMismatch,
            format!(
                "storage {s} was allocated with {} but its free at {} states {} (memory from before the capture or a mislabelled storage)",
                human_bytes(m.alloc_bytes), at(m.free_timestamp_ns, origin_ns), human_bytes(m.free_bytes)
            ),
            IssueLocation::storage(s),
        );
    }
    for f in &logical.unmatched_frees {
        let id = f
            .storage_id
            .as_deref()
            .or(f.tensor_id.as_deref())
            .unwrap_or("?");
        let s = format!("{}:{id}", f.device);
        issues.warning(
            HealthCode::UnpairedFree,
            format!("storage {s} is freed at {} but was not allocated inside the capture (memory from before the capture)", at(f.timestamp_ns, origin_ns)),
            IssueLocation::storage(s),
        );
    }
    let (mut count, mut first) = (0u64, None);
    for l in retained(logical) {
        count += 1;
        first.get_or_insert_with(|| lifetime_label(l));
    }
    let bytes = trace_memory::sum_bytes(retained(logical).map(|l| l.bytes));
    if let Some(first) = first {
        issues.warning(
            HealthCode::RetainedAllocations,
            format!(
                "{count} storage(s) ({}) allocated inside the capture are still live at its end (parameters, optimizer state and pre-existing storages excluded), e.g. {first}",
                trace_format::checked_bytes(bytes)
            ),
            IssueLocation::storage(first),
        );
    }
    if let Some(share) = peak_categorized_share(logical).filter(|&s| s < 0.5) {
        issues.warning(
            HealthCode::MemoryUncategorised,
            format!(
                "only {:.1}% of the bytes live at the logical memory peak have a category other than `other`: the memory breakdown is mostly uncategorised",
                share * 100.0
            ),
            IssueLocation::document(),
        );
    }
}

/// Share (0..=1) of the bytes live at the logical peak whose category is not `other`.
pub(crate) fn peak_categorized_share(logical: &LogicalMemoryProfile) -> Option<f64> {
    let peak = logical.peak.as_ref().filter(|p| p.live_bytes > 0)?;
    let other = peak
        .by_category
        .get(&MemoryCategory::Other)
        .copied()
        .unwrap_or(0);
    Some(peak.live_bytes.saturating_sub(other) as f64 / peak.live_bytes as f64)
}
