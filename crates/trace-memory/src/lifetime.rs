//! The output form of a storage lifetime, and the ranking of live sets.

use std::cmp::Ordering;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{
    CategorySource, MemoryCategory, MemorySource, SharedStrings, Sym, TraceDocument,
};

use crate::replay::{Done, OPEN};

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
    /// Index of the alloc event among the document's memory events
    /// ([`trace_schema::MemoryItem::index`]): the key of its allocation site
    /// ([`trace_schema::document::SiteTable::of_memory`]); `None` when not known (not serialized).
    #[serde(skip)]
    pub alloc_event: Option<u32>,
}

impl StorageLifetime {
    /// True when no free was seen.
    pub fn is_live_at_end(&self) -> bool {
        self.end_ns.is_none()
    }
}

/// The output form of a lifetime.
pub(crate) fn to_lifetime(
    d: &Done,
    devices: &[Sym],
    res: &mut SharedStrings<'_>,
) -> StorageLifetime {
    StorageLifetime {
        device: res.get(devices[d.device as usize]),
        storage_id: d.storage.clone(),
        tensor_ids: d.tensors.clone(),
        span_id: res.opt(d.desc.span),
        op_name: res.opt(d.desc.op_name),
        label: res.opt(d.desc.label),
        bytes: d.bytes,
        shape: d.desc.shape.map(|s| res.shape(s)),
        dtype: res.opt(d.desc.dtype),
        category: d.desc.category,
        category_source: d.desc.category_source,
        source: d.desc.source,
        pre_existing: d.desc.pre_existing,
        start_ns: d.start_ns,
        end_ns: (d.end_ns != OPEN).then_some(d.end_ns),
        alloc_event: Some(d.event),
    }
}

/// Ranking order of a live set: bytes descending, then alloc time, device, storage id, and
/// finally file order of the alloc event — a total order, so displays are deterministic.
pub(crate) fn rank_cmp(doc: &TraceDocument, devices: &[Sym], a: &Done, b: &Done) -> Ordering {
    b.bytes
        .cmp(&a.bytes)
        .then(a.start_ns.cmp(&b.start_ns))
        .then_with(|| {
            doc.str(devices[a.device as usize])
                .cmp(doc.str(devices[b.device as usize]))
                .then_with(|| a.storage.as_deref().cmp(&b.storage.as_deref()))
        })
        .then(a.event.cmp(&b.event))
}

/// `set` ranked with [`rank_cmp`]. O(k log k).
pub(crate) fn ranked<'a>(
    doc: &TraceDocument,
    devices: &[Sym],
    mut set: Vec<&'a Done>,
) -> Vec<&'a Done> {
    set.sort_by(|a, b| rank_cmp(doc, devices, a, b));
    set
}

/// The first `n` of `set` in rank order, found by selection: O(k + n log n).
pub(crate) fn top<'a>(
    doc: &TraceDocument,
    devices: &[Sym],
    mut set: Vec<&'a Done>,
    n: usize,
) -> Vec<&'a Done> {
    let cmp = |a: &&Done, b: &&Done| rank_cmp(doc, devices, a, b);
    if set.len() > n && n > 0 {
        set.select_nth_unstable_by(n - 1, cmp);
    }
    set.truncate(n);
    set.sort_by(cmp);
    set
}
