//! Who holds the activations still live when the optimizer pass starts: the evidence behind the
//! advice of the `activations_retained_into_optimizer` finding, read from storage lifetimes only.
//!
//! Every definition below uses what a trace has — memory events in the replay order
//! `(timestamp_ns, file order)`, their categories, and span start and end times:
//!
//! - **Retained**: the activation storages live after every memory event strictly before the
//!   first optimizer span's start (the rule `trace_memory` counts them with).
//! - **Gradient storage**: a storage whose alloc has category `gradient` (the probe registers
//!   every tensor of the `GradStore` handed to the optimizer step under it).
//! - **Free run**: a maximal sequence of consecutive memory events that are all frees, with no
//!   span starting or ending between two of them (a span boundary at `b` lies between events at
//!   `t1 <= t2` when `t1 < b <= t2`; at equal times nothing lies between). Dropping one Rust
//!   value frees everything only it held without allocating in between, so one drop is one free
//!   run unless a span boundary cuts it. Two drops back to back with nothing in between (the
//!   gradient store, then the loss, at the end of a step) are one run too: the trace cannot
//!   split them, and the finding says so.
//! - **Gradient release**: a free run with at least one free of a gradient storage — the
//!   instant the gradient store (or a gradient taken out of it) was dropped. A retained storage
//!   freed in a gradient release is **freed with the gradients**: together with them, at that
//!   instant.
//! - **The loss's storage**: of the storages the probe registered as autograd-graph nodes when
//!   backward started (category `activation` with category source `registry`, not
//!   pre-existing), the one allocated last before the optimizer starts. The loss is computed from
//!   every other node of its graph, so its storage is allocated after theirs. Freed before the
//!   optimizer starts: the loss (every tensor on that storage) was dropped before the step and
//!   holds nothing any more. Live then: the loss still holds its graph. No such storage: the
//!   probe did not see the loss (backward ran outside `ProbedOptimizer::backward_step` and
//!   `Profiler::backward`), and the trace cannot tell whether it was dropped.
//!
//! One pass over the memory events (O(n log n) for the replay order; a hash map of the live
//! storages), run only when the finding fires.

use std::collections::HashMap;
use std::sync::Arc;

use trace_memory::{StorageKey, StorageMap, StorageRef};
use trace_schema::{
    CategorySource, MemoryAction, MemoryCategory, MemoryOrder, ShapeId, Sym, TraceDocument,
};

/// What the trace says about the loss at the first optimizer span's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LossState {
    /// No storage registered as an autograd-graph node: the probe did not see the loss.
    Unknown,
    /// The loss's storage is live when the optimizer starts; `free_ns`: when it is freed.
    Live { free_ns: Option<u64> },
    /// The loss's storage was freed before the optimizer started, at `free_ns`.
    Dropped { free_ns: u64 },
}

/// A retained storage, with what a summary names it by.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// File index of its alloc event among the memory events.
    pub index: u32,
    pub device: Sym,
    pub id: Box<str>,
    pub bytes: u64,
    pub start_ns: u64,
    pub span: Option<Sym>,
    pub op_name: Option<Sym>,
    pub label: Option<Sym>,
    pub shape: Option<ShapeId>,
    pub dtype: Option<Sym>,
    pub category_source: Option<CategorySource>,
    pub pre_existing: bool,
    /// Free run of its free; `None` while live at the end.
    run: Option<u64>,
}

impl Member {
    /// `{device}:{storage_id}`, as evidence names storages.
    pub fn label(&self, doc: &TraceDocument) -> String {
        format!("{}:{}", doc.str(self.device), self.id)
    }

    /// Freed in the trace.
    pub fn freed(&self) -> bool {
        self.run.is_some()
    }

    /// Registered as an autograd-graph node by the probe.
    pub fn graph_node(&self) -> bool {
        self.category_source == Some(CategorySource::Registry)
    }

    /// The output form, for naming it in a summary.
    pub fn lifetime(&self, doc: &TraceDocument) -> trace_memory::StorageLifetime {
        let s = |sym: Option<Sym>| sym.map(|x| Arc::<str>::from(doc.str(x)));
        trace_memory::StorageLifetime {
            device: Arc::from(doc.str(self.device)),
            storage_id: Some(Arc::from(&*self.id)),
            tensor_ids: Arc::from(Vec::new()),
            span_id: s(self.span),
            op_name: s(self.op_name),
            label: s(self.label),
            bytes: self.bytes,
            shape: self.shape.map(|id| Arc::from(doc.shape(id))),
            dtype: s(self.dtype),
            category: MemoryCategory::Activation,
            category_source: self.category_source,
            source: None,
            pre_existing: self.pre_existing,
            start_ns: self.start_ns,
            end_ns: None,
            alloc_event: None,
        }
    }
}

/// Retained storages sharing a holder, largest first (bytes descending, then alloc time,
/// device, storage id).
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    pub members: Vec<Member>,
}

impl Group {
    fn rank(&mut self, doc: &TraceDocument) {
        self.members.sort_by(|a, b| rank_cmp(doc, a, b));
    }
}

fn rank_cmp(doc: &TraceDocument, a: &Member, b: &Member) -> std::cmp::Ordering {
    b.bytes
        .cmp(&a.bytes)
        .then(a.start_ns.cmp(&b.start_ns))
        .then_with(|| doc.str(a.device).cmp(doc.str(b.device)))
        .then_with(|| a.id.cmp(&b.id))
}

/// `members` largest first, in the order of a [`Group`].
pub(crate) fn ranked<'a>(doc: &TraceDocument, mut members: Vec<&'a Member>) -> Vec<&'a Member> {
    members.sort_by(|a, b| rank_cmp(doc, a, b));
    members
}

/// The gradient release that freed retained storages first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Release {
    /// Time of the run's first free, ns.
    pub timestamp_ns: u64,
    /// Span of that free.
    pub span: Option<Sym>,
}

/// Who holds the retained activations, as far as the trace shows.
#[derive(Debug, Clone)]
pub(crate) struct Retention {
    /// The loss at the optimizer's start.
    pub loss: LossState,
    /// Retained storages freed with the gradients.
    pub with_gradients: Group,
    /// The first gradient release freeing retained storages.
    pub release: Option<Release>,
    /// Retained storages freed in no gradient release, or never.
    pub apart: Group,
    /// The loss's own storage is freed in a gradient release (the loss and the gradient store
    /// were dropped back to back: the trace cannot tell which of them held what).
    pub loss_freed_with_gradients: bool,
}

#[derive(Debug, Clone, Copy)]
struct Live {
    category: MemoryCategory,
}

#[derive(Debug, Clone, Copy)]
struct Run {
    first_ns: u64,
    span: Option<Sym>,
    gradient: bool,
}

/// At the optimizer's start: the live activations become the retained members, and the loss
/// candidate tells the loss's state (with its key while it is live).
fn cross(
    described: &mut StorageMap<Member>,
    members: &mut Vec<Member>,
    retained: &mut StorageMap<usize>,
    loss: &Option<(StorageKey, Option<u64>)>,
) -> (LossState, Option<StorageKey>) {
    for (k, m) in described.drain() {
        retained.insert(k.as_ref(), members.len());
        members.push(m);
    }
    match loss {
        None => (LossState::Unknown, None),
        Some((_, Some(t))) => (LossState::Dropped { free_ns: *t }, None),
        Some((k, None)) => (LossState::Live { free_ns: None }, Some(k.clone())),
    }
}

/// Classifies the activations live at `optimizer_start_ns` (the first optimizer span's start)
/// by what frees them. See the module documentation for every definition.
pub(crate) fn retention(doc: &TraceDocument, optimizer_start_ns: u64) -> Retention {
    let mut bounds: Vec<u64> = doc
        .spans
        .iter()
        .flat_map(|s| std::iter::once(s.start_ns).chain(s.end_ns()))
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let boundary_between = |t1: u64, t2: u64| {
        let i = bounds.partition_point(|&b| b <= t1);
        bounds.get(i).is_some_and(|&b| b <= t2)
    };

    let mut live: StorageMap<Live> = StorageMap::new();
    // Retained storages by key (index into `members`), filled at the crossing.
    let mut retained: StorageMap<usize> = StorageMap::new();
    let mut members: Vec<Member> = Vec::new();
    // Descriptions of live activations, needed at the crossing only.
    let mut described: StorageMap<Member> = StorageMap::new();
    let mut loss: Option<(StorageKey, Option<u64>)> = None;
    let mut loss_state = LossState::Unknown;
    let mut loss_key: Option<StorageKey> = None;
    let mut loss_run: Option<u64> = None;
    let mut crossed = false;
    let mut runs: HashMap<u64, Run> = HashMap::new();
    let mut run = 0u64;
    let mut prev: Option<(u64, bool)> = None; // (time, was a free)
    let mut run_start: (u64, Option<Sym>) = (0, None); // the current run's first free

    doc.for_each_memory(MemoryOrder::Replay, |m| {
        if !crossed && m.timestamp_ns >= optimizer_start_ns {
            crossed = true;
            (loss_state, loss_key) = cross(&mut described, &mut members, &mut retained, &loss);
        }
        let free = m.action == MemoryAction::Free;
        let same_run = free
            && prev.is_some_and(|(t, was_free)| was_free && !boundary_between(t, m.timestamp_ns));
        if free && !same_run {
            run += 1;
            run_start = (m.timestamp_ns, m.span);
        }
        prev = Some((m.timestamp_ns, free));
        let Some(k) = StorageRef::of(m) else {
            return;
        };
        if !free {
            live.insert(
                k,
                Live {
                    category: m.category,
                },
            );
            if !crossed && m.category == MemoryCategory::Activation {
                if m.category_source == Some(CategorySource::Registry) && !m.pre_existing {
                    loss = Some((k.to_key(), None));
                }
                described.insert(
                    k,
                    Member {
                        index: m.index,
                        device: m.device,
                        id: Box::from(m.storage.or(m.tensor).unwrap_or_default()),
                        bytes: m.bytes.unwrap_or(0),
                        start_ns: m.timestamp_ns,
                        span: m.span,
                        op_name: m.op_name,
                        label: m.label,
                        shape: m.shape,
                        dtype: m.dtype,
                        category_source: m.category_source,
                        pre_existing: m.pre_existing,
                        run: None,
                    },
                );
            } else {
                described.remove(k);
            }
            return;
        }
        let category = live.remove(k).map_or(m.category, |l| l.category);
        if !crossed {
            described.remove(k);
            if let Some((lk, freed)) = loss.as_mut() {
                if lk.as_ref() == k && freed.is_none() {
                    *freed = Some(m.timestamp_ns);
                }
            }
            return;
        }
        let is_gradient = category == MemoryCategory::Gradient;
        let member = retained.remove(k);
        if is_gradient || member.is_some() {
            let r = runs.entry(run).or_insert(Run {
                first_ns: run_start.0,
                span: run_start.1,
                gradient: false,
            });
            r.gradient |= is_gradient;
        }
        if let Some(i) = member {
            members[i].run = Some(run);
            if loss_key.as_ref().is_some_and(|lk| lk.as_ref() == k) {
                loss_run = Some(run);
                if let LossState::Live { free_ns } = &mut loss_state {
                    *free_ns = Some(m.timestamp_ns);
                }
            }
        }
    });
    if !crossed {
        (loss_state, _) = cross(&mut described, &mut members, &mut retained, &loss);
    }

    let mut with_gradients = Group::default();
    let mut apart = Group::default();
    let mut release: Option<Release> = None;
    for m in members {
        match m.run.and_then(|r| runs.get(&r)).filter(|r| r.gradient) {
            Some(r) => {
                if release.is_none_or(|x| r.first_ns < x.timestamp_ns) {
                    release = Some(Release {
                        timestamp_ns: r.first_ns,
                        span: r.span,
                    });
                }
                with_gradients.members.push(m);
            }
            None => apart.members.push(m),
        }
    }
    with_gradients.rank(doc);
    apart.rank(doc);
    let loss_freed_with_gradients = loss_run
        .and_then(|r| runs.get(&r))
        .is_some_and(|r| r.gradient);
    Retention {
        loss: loss_state,
        with_gradients,
        release,
        apart,
        loss_freed_with_gradients,
    }
}
