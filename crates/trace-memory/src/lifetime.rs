//! The output form of a storage lifetime, and the ranking of live sets.

use std::cmp::Ordering;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{
    CategorySource, MemoryCategory, MemorySource, SharedStrings, Sym, TraceDocument,
};

use crate::replay::{Life, Replay, OPEN};

/// One backend storage from its alloc to its free (or to the end of the trace). Tensor aliases
/// are metadata of the storage, never extra allocations.
///
/// Strings are `Arc<str>` shared across lifetimes (serialized as plain strings); compare with
/// `&*lifetime.device == "cpu"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageLifetime {
    /// Device label; identity is scoped by device.
    pub device: Arc<str>,
    /// Storage identity; `None` in trace/6 traces, whose identity is `(device, tensor id)`.
    pub storage_id: Option<Arc<str>>,
    /// Every tensor id seen on the storage (alloc, aliases, free), sorted, deduplicated
    /// (shared between clones of the lifetime).
    pub tensor_ids: Arc<[Arc<str>]>,
    /// Span of the alloc event.
    pub span_id: Option<Arc<str>>,
    /// Allocating operation.
    pub op_name: Option<Arc<str>>,
    /// Caller label (e.g. parameter name).
    pub label: Option<Arc<str>>,
    /// Storage bytes (from the alloc event; a free stating another size does not change it).
    pub bytes: u64,
    /// Shape of the allocating tensor.
    pub shape: Option<Arc<[u64]>>,
    /// Dtype label.
    pub dtype: Option<Arc<str>>,
    /// Category (from the alloc event).
    pub category: MemoryCategory,
    /// Provenance of the category (`None`: declared by the caller).
    pub category_source: Option<CategorySource>,
    /// Observer of the alloc (`None`: the caller).
    pub source: Option<MemorySource>,
    /// Existed before capture began: counts toward live bytes and peaks, not toward allocation
    /// counts or total allocated bytes.
    pub pre_existing: bool,
    /// Alloc time, ns.
    pub start_ns: u64,
    /// Free time, ns; `None` when still live at the end of the trace.
    pub end_ns: Option<u64>,
}

impl StorageLifetime {
    /// True when no free was seen.
    pub fn is_live_at_end(&self) -> bool {
        self.end_ns.is_none()
    }
}

/// Builds the output lifetimes, in replay order (by alloc time, then file order).
pub(crate) fn build_lifetimes(
    doc: &TraceDocument,
    replay: &Replay,
    res: &mut SharedStrings<'_>,
) -> Vec<StorageLifetime> {
    let mut extra = replay.extra_tensors.clone();
    extra.sort_by_key(|&(li, _)| li);
    let mut e = 0usize;
    let mut out = Vec::with_capacity(replay.lives.len());
    let mut tensors: Vec<Sym> = Vec::new();
    for (li, life) in replay.lives.iter().enumerate() {
        let ev = &doc.memory[life.event as usize];
        tensors.clear();
        tensors.extend(ev.tensor);
        while e < extra.len() && extra[e].0 as usize == li {
            tensors.push(extra[e].1);
            e += 1;
        }
        if tensors.len() > 1 {
            tensors.sort_unstable_by(|&a, &b| doc.str(a).cmp(doc.str(b)));
            tensors.dedup();
        }
        let tensor_ids: Arc<[Arc<str>]> = tensors.iter().map(|&t| res.fresh(t)).collect();
        out.push(StorageLifetime {
            device: res.get(ev.device),
            storage_id: ev.storage.map(|x| res.fresh(x)),
            tensor_ids,
            span_id: res.opt(ev.span),
            op_name: res.opt(ev.op_name),
            label: res.opt(ev.label),
            bytes: life.bytes,
            shape: ev.shape.map(|s| res.shape(s)),
            dtype: res.opt(ev.dtype),
            category: ev.category,
            category_source: ev.category_source,
            source: ev.source,
            pre_existing: ev.pre_existing,
            start_ns: life.start_ns,
            end_ns: (life.end_ns != OPEN).then_some(life.end_ns),
        });
    }
    out
}

/// Ranking order of a live set: bytes descending, then alloc time, device, storage id, and
/// finally file order of the alloc event — a total order, so displays are deterministic.
pub(crate) fn rank_cmp(doc: &TraceDocument, a: &Life, b: &Life) -> Ordering {
    // The alloc events (cold memory) are only read on a tie of bytes and start time.
    b.bytes
        .cmp(&a.bytes)
        .then(a.start_ns.cmp(&b.start_ns))
        .then_with(|| {
            let (ea, eb) = (&doc.memory[a.event as usize], &doc.memory[b.event as usize]);
            let s = |x: Option<Sym>| x.map(|x| doc.str(x));
            doc.str(ea.device)
                .cmp(doc.str(eb.device))
                .then_with(|| s(ea.storage).cmp(&s(eb.storage)))
        })
        .then(a.event.cmp(&b.event))
}

/// Indices of the lifetimes satisfying `live`, ranked with [`rank_cmp`]. O(L + k log k).
pub(crate) fn ranked_live(
    doc: &TraceDocument,
    lives: &[Life],
    live: impl Fn(&Life) -> bool,
) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..lives.len() as u32)
        .filter(|&i| live(&lives[i as usize]))
        .collect();
    idx.sort_by(|&a, &b| rank_cmp(doc, &lives[a as usize], &lives[b as usize]));
    idx
}

/// Indices of the lifetimes satisfying `live`, and the first `n` of them in rank order
/// ([`rank_cmp`]) found by selection: O(L + k + n log n).
pub(crate) fn top_live(
    doc: &TraceDocument,
    lives: &[Life],
    n: usize,
    live: impl Fn(&Life) -> bool,
) -> (Vec<u32>, Vec<u32>) {
    let all: Vec<u32> = (0..lives.len() as u32)
        .filter(|&i| live(&lives[i as usize]))
        .collect();
    let mut top = all.clone();
    let cmp = |a: &u32, b: &u32| rank_cmp(doc, &lives[*a as usize], &lives[*b as usize]);
    if top.len() > n && n > 0 {
        top.select_nth_unstable_by(n - 1, cmp);
    }
    top.truncate(n);
    top.sort_by(cmp);
    (all, top)
}
