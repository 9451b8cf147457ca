//! Logical memory pairing: alloc/free events replayed in timestamp order (file order within a
//! timestamp), keyed by `(device, storage_id)` (trace/6: `(device, tensor_id)`). O(n log n).

use std::collections::HashMap;

use trace_schema::{MemoryAction, MemoryCategory, Sym, TraceDocument};

use super::{HealthCode, IssueLocation, Issues};

/// What the pairing replay found; indices are into `doc.memory`.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryPairing {
    /// `(free or alias alloc, bytes live, bytes claimed)`.
    pub size_mismatches: Vec<(usize, u64, u64)>,
    /// The same tensor allocated a live storage again.
    pub duplicate_allocations: Vec<usize>,
    /// Frees of storages that were not live.
    pub unpaired_frees: Vec<usize>,
    /// Allocs inside the window (not pre-existing, not parameter or optimizer state) still live
    /// at the end, in replay order.
    pub retained: Vec<usize>,
    /// Bytes of `retained`.
    pub retained_bytes: u64,
}

struct Live {
    alloc: usize,
    bytes: u64,
    tensors: Vec<Option<Sym>>,
}

impl MemoryPairing {
    pub fn replay(doc: &TraceDocument) -> Self {
        let mut order: Vec<u32> = (0..doc.memory.len() as u32).collect();
        order.sort_by_key(|&i| doc.memory[i as usize].timestamp_ns);
        let mut live: HashMap<(Sym, Sym), Live> = HashMap::new();
        let mut out = Self::default();
        for i in order {
            let i = i as usize;
            let m = &doc.memory[i];
            let Some(id) = m.storage.or(m.tensor) else {
                if m.action == MemoryAction::Free {
                    out.unpaired_frees.push(i);
                }
                continue;
            };
            let key = (m.device, id);
            match m.action {
                MemoryAction::Alloc => match live.get_mut(&key) {
                    Some(l) => {
                        if l.tensors.contains(&m.tensor) {
                            out.duplicate_allocations.push(i);
                        } else {
                            l.tensors.push(m.tensor);
                        }
                        if let Some(b) = m.bytes.filter(|&b| b != l.bytes) {
                            out.size_mismatches.push((i, l.bytes, b));
                        }
                    }
                    None => {
                        live.insert(
                            key,
                            Live {
                                alloc: i,
                                bytes: m.bytes.unwrap_or(0),
                                tensors: vec![m.tensor],
                            },
                        );
                    }
                },
                MemoryAction::Free => match live.remove(&key) {
                    Some(l) => {
                        if let Some(b) = m.bytes.filter(|&b| b != l.bytes) {
                            out.size_mismatches.push((i, l.bytes, b));
                        }
                    }
                    None => out.unpaired_frees.push(i),
                },
            }
        }
        let mut retained: Vec<usize> = live
            .into_values()
            .map(|l| l.alloc)
            .filter(|&a| {
                let m = &doc.memory[a];
                !m.pre_existing
                    && !matches!(
                        m.category,
                        MemoryCategory::Parameter | MemoryCategory::Optimizer
                    )
            })
            .collect();
        retained.sort_unstable();
        out.retained_bytes = retained
            .iter()
            .map(|&a| doc.memory[a].bytes.unwrap_or(0))
            .sum();
        out.retained = retained;
        out
    }
}

/// `{device}:{storage}` (or the tensor id in trace/6) of a memory event.
pub(crate) fn storage_label(doc: &TraceDocument, i: usize) -> String {
    let m = &doc.memory[i];
    let id = m.storage.or(m.tensor).map_or("?", |s| doc.str(s));
    format!("{}:{id}", doc.str(m.device))
}

pub(super) fn report(
    doc: &TraceDocument,
    pairing: &MemoryPairing,
    peak_categorized_share: Option<f64>,
    issues: &mut Issues,
) {
    for &(i, live, claimed) in &pairing.size_mismatches {
        let s = storage_label(doc, i);
        issues.warning(
            HealthCode::AllocationSizeMismatch,
            format!("storage {s} was allocated with {live} bytes but a later event claims {claimed} bytes"),
            IssueLocation::storage(s),
        );
    }
    for &i in &pairing.duplicate_allocations {
        let s = storage_label(doc, i);
        let t = doc.memory[i].tensor.map_or("?", |t| doc.str(t));
        issues.error(
            HealthCode::DuplicateAllocation,
            format!("tensor {t} allocates storage {s} again while it is live"),
            IssueLocation::storage(s),
        );
    }
    for &i in &pairing.unpaired_frees {
        let s = storage_label(doc, i);
        issues.warning(
            HealthCode::UnpairedFree,
            format!("storage {s} is freed at {} ns but was not allocated inside the capture (memory from before the capture)", doc.memory[i].timestamp_ns),
            IssueLocation::storage(s),
        );
    }
    if let Some(&first) = pairing.retained.first() {
        issues.warning(
            HealthCode::RetainedAllocations,
            format!(
                "{} storage(s) ({} bytes, {}) allocated inside the capture are still live at its end (parameters, optimizer state and pre-existing storages excluded), e.g. {}",
                pairing.retained.len(),
                pairing.retained_bytes,
                crate::findings::human_bytes(pairing.retained_bytes),
                storage_label(doc, first)
            ),
            IssueLocation::storage(storage_label(doc, first)),
        );
    }
    if let Some(share) = peak_categorized_share.filter(|&s| s < 0.5) {
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
