//! Logical memory checks. Unpaired frees, size mismatches and retained storages come from the
//! memory profile (`trace_memory`, computed once); the only replay here detects
//! `duplicate_allocation` (the same tensor allocating a live storage again), which the profile
//! folds into aliases. Events apply in `(timestamp_ns, file order)`, keyed by
//! `(device, storage_id)` (trace/6: `(device, tensor_id)`). O(n log n).

use std::collections::HashMap;

use trace_format::{at, bytes as human_bytes};
use trace_memory::{LogicalMemoryProfile, MemoryProfile, StorageLifetime};
use trace_schema::{MemoryAction, MemoryCategory, Sym, TraceDocument};

use super::{HealthCode, IssueLocation, Issues};
use crate::gradients::GradientSummary;

/// Allocs (indices into `doc.memory`) by a tensor that already holds the live storage.
pub(crate) fn duplicate_allocations(doc: &TraceDocument) -> Vec<usize> {
    let mut order: Vec<u32> = (0..doc.memory.len() as u32).collect();
    order.sort_by_key(|&i| doc.memory[i as usize].timestamp_ns);
    let mut live: HashMap<(Sym, Sym), Vec<Option<Sym>>> = HashMap::new();
    let mut out = Vec::new();
    for i in order {
        let i = i as usize;
        let m = &doc.memory[i];
        let Some(id) = m.storage.or(m.tensor) else {
            continue;
        };
        match m.action {
            MemoryAction::Alloc => match live.get_mut(&(m.device, id)) {
                Some(tensors) if tensors.contains(&m.tensor) => out.push(i),
                Some(tensors) => tensors.push(m.tensor),
                None => {
                    live.insert((m.device, id), vec![m.tensor]);
                }
            },
            MemoryAction::Free => {
                live.remove(&(m.device, id));
            }
        }
    }
    out.sort_unstable();
    out
}

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

/// `{device}:{storage}` (or the tensor id in trace/6) of a memory event.
pub(crate) fn storage_label(doc: &TraceDocument, i: usize) -> String {
    let m = &doc.memory[i];
    let id = m.storage.or(m.tensor).map_or("?", |s| doc.str(s));
    format!("{}:{id}", doc.str(m.device))
}

pub(super) fn report(
    doc: &TraceDocument,
    memory: &MemoryProfile,
    gradients: &GradientSummary,
    duplicates: &[usize],
    origin_ns: u64,
    issues: &mut Issues,
) {
    let logical = memory.logical.as_ref();
    for &i in duplicates {
        let s = storage_label(doc, i);
        let t = doc.memory[i].tensor.map_or("?", |t| doc.str(t));
        issues.error(
            HealthCode::DuplicateAllocation,
            format!("tensor {t} allocates storage {s} again while it is live"),
            IssueLocation::storage(s),
        );
    }
    if let Some(o) = &memory.logical_overflow {
        let s = storage_label(doc, o.event_index);
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
        let s = storage_label(doc, f.event_index);
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
