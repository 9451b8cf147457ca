//! Memory events waiting for their time and span: the storage capture knows a storage's hook
//! times and threads; the session knows which span was open on which thread when. This module
//! joins the two — on the host clock directly, in deterministic mode by placing each event on
//! the logical clock after the span change that preceded it in real time.

use trace_wire::{
    CategorySource, ExecutionStep as Pass, MemoryAction, MemoryCategory, MemoryEvent, MemorySource,
};

use super::registry::StorageEntry;
use crate::category::inferred_category;

/// What the session tells the storage capture about time and spans.
pub trait Attribution {
    /// Converts a hook timestamp (ns since the process clock base) to session ns.
    fn session_ns(&self, hook_ns: u64) -> u64;
    /// The wire id and pass of the innermost span open on `thread` at session time `ts_ns`
    /// (the root span when none is open on that thread).
    fn span_at(&self, thread: u64, ts_ns: u64) -> (Option<String>, Option<Pass>);
    /// Whether the session is deterministic: drained events are then sorted by hook time, get
    /// logical timestamps from [`Self::locate`] and [`Self::next_in_slot`], and storage ids from
    /// [`Self::storage_wire_id`].
    fn deterministic(&self) -> bool {
        false
    }
    /// Deterministic mode: where a hook event of `thread` at real time `hook_ns` lands.
    fn locate(&self, thread: u64, hook_ns: u64) -> Located {
        let ts = self.session_ns(hook_ns);
        let (span, pass) = self.span_at(thread, ts);
        Located {
            slot: (thread, ts),
            base_ns: ts,
            span,
            pass,
        }
    }
    /// Deterministic mode: the next offset (1, 2, …) in `slot`.
    fn next_in_slot(&self, _slot: (u64, u64)) -> u64 {
        0
    }
    /// The storage id written for the capture's own id `raw` (deterministic mode: `st<n>`, a
    /// sequence number of first sight).
    fn storage_wire_id(&self, raw: &str) -> String {
        raw.to_string()
    }
}

/// Where a hook event lands on a deterministic session's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The span change (thread, index) that preceded it in real time.
    pub slot: (u64, u64),
    /// Logical session ns of that change.
    pub base_ns: u64,
    /// Wire id of the span it is attributed to.
    pub span: Option<String>,
    /// Pass of that span.
    pub pass: Option<Pass>,
}

/// A memory event waiting for attribution: its hook time and thread are known, its session
/// time and span not yet.
#[derive(Debug, Clone)]
pub(crate) struct PendingEvent {
    pub(crate) hook_ns: u64,
    pub(crate) thread: u64,
    /// Session ns already known (capture-start events).
    pub(crate) session_ns: Option<u64>,
    pub(crate) event: MemoryEvent,
    /// The category is inferred from the pass of the span the event lands in.
    pub(crate) infer_category: bool,
}

impl PendingEvent {
    /// The event at session time `ts` in span `span` (of pass `pass`).
    fn finish(self, ts: u64, span: Option<String>, pass: Option<Pass>) -> MemoryEvent {
        let mut e = self.event;
        e.timestamp_ns = ts;
        e.span_id = span;
        if self.infer_category {
            e.category = inferred_category(false, pass);
            e.category_source = Some(CategorySource::Inferred);
        }
        e
    }
}

/// Host-clock attribution: each event at its hook time, in the span open on its thread then.
pub(crate) fn attribute(pending: Vec<PendingEvent>, attr: &dyn Attribution) -> Vec<MemoryEvent> {
    if attr.deterministic() {
        return deterministic_events(pending, attr);
    }
    pending
        .into_iter()
        .map(|d| {
            let ts = d.session_ns.unwrap_or_else(|| attr.session_ns(d.hook_ns));
            let (span, pass) = attr.span_at(d.thread, ts);
            d.finish(ts, span, pass)
        })
        .collect()
}

/// An `alloc` of the registered storage `e` (time and span filled in later): heap bytes in
/// `bytes`, `len × element size` beside them in `logical_bytes` when read.
pub(crate) fn alloc_event(
    e: &StorageEntry,
    pre_existing: bool,
    source: MemorySource,
) -> MemoryEvent {
    MemoryEvent {
        timestamp_ns: 0,
        action: MemoryAction::Alloc,
        device: e.device.to_string(),
        storage_id: Some(e.storage_id.clone()),
        bytes: e.bytes,
        logical_bytes: e.logical_bytes,
        tensor_id: None,
        span_id: None,
        op_name: None,
        shape: (!e.shape.is_empty() || !e.dtype.is_empty()).then(|| e.shape.clone()),
        dtype: (!e.dtype.is_empty()).then(|| e.dtype.clone()),
        category: e.category,
        category_source: Some(e.category_source),
        source: Some(source),
        pre_existing,
        label: e.label.clone(),
        site: None,
        thread: None,
    }
}

/// The `alloc` of an unregistered storage recognised at its free (category inferred later).
pub(crate) fn anonymous_alloc(device: String, storage_id: String, bytes: u64) -> MemoryEvent {
    MemoryEvent {
        timestamp_ns: 0,
        action: MemoryAction::Alloc,
        device,
        storage_id: Some(storage_id),
        bytes: Some(bytes),
        logical_bytes: None,
        tensor_id: None,
        span_id: None,
        op_name: None,
        shape: None,
        dtype: None,
        category: MemoryCategory::Other,
        category_source: Some(CategorySource::Inferred),
        source: Some(MemorySource::Allocator),
        pre_existing: false,
        label: None,
        site: None,
        thread: None,
    }
}

/// Deterministic mode: events in hook-time order (program order when single-threaded), storage
/// ids as sequence numbers, each run of consecutive frees (e.g. a `HashMap` of gradients
/// dropped in its random order) ordered by storage id, and logical timestamps: the `k`-th event
/// after a span change sits `k` ns after that change's logical reading.
pub(crate) fn deterministic_events(
    mut drafts: Vec<PendingEvent>,
    attr: &dyn Attribution,
) -> Vec<MemoryEvent> {
    // Capture-start events (session time known) first, then hook time; stable for ties.
    drafts.sort_by_key(|d| (d.session_ns.is_none(), d.hook_ns));
    struct Placed {
        draft: PendingEvent,
        located: Option<Located>,
        seq: (usize, String),
    }
    let mut placed: Vec<Placed> = drafts
        .into_iter()
        .map(|mut d| {
            if let Some(raw) = d.event.storage_id.take() {
                d.event.storage_id = Some(attr.storage_wire_id(&raw));
            }
            let located = d
                .session_ns
                .is_none()
                .then(|| attr.locate(d.thread, d.hook_ns));
            let id = d.event.storage_id.clone().unwrap_or_default();
            Placed {
                draft: d,
                located,
                seq: (id.len(), id),
            }
        })
        .collect();
    let is_free = |p: &Placed| p.draft.event.action == MemoryAction::Free && p.located.is_some();
    let mut i = 0;
    while i < placed.len() {
        if !is_free(&placed[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < placed.len() && is_free(&placed[j]) {
            j += 1;
        }
        placed[i..j].sort_by(|a, b| {
            let slot = |p: &Placed| p.located.as_ref().map(|l| l.slot);
            slot(a).cmp(&slot(b)).then_with(|| a.seq.cmp(&b.seq))
        });
        i = j;
    }
    placed
        .into_iter()
        .map(|p| {
            let d = p.draft;
            let (ts, span, pass) = match (d.session_ns, p.located) {
                (Some(_), _) | (None, None) => {
                    let ts = d.session_ns.unwrap_or(0);
                    let (span, pass) = attr.span_at(d.thread, ts);
                    (ts, span, pass)
                }
                (None, Some(l)) => (l.base_ns + attr.next_in_slot(l.slot), l.span, l.pass),
            };
            d.finish(ts, span, pass)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// Deterministic attribution over a fixed span-change log: changes at real times 100 and
    /// 200 (logical 1000 and 2000), spans s2 then s1.
    #[derive(Default)]
    struct Logical {
        ids: RefCell<HashMap<String, u64>>,
        slots: RefCell<HashMap<(u64, u64), u64>>,
    }

    impl Attribution for Logical {
        fn session_ns(&self, _hook_ns: u64) -> u64 {
            unreachable!("deterministic drains place events with locate")
        }
        fn span_at(&self, _thread: u64, _ts_ns: u64) -> (Option<String>, Option<Pass>) {
            (Some("s1".into()), None)
        }
        fn deterministic(&self) -> bool {
            true
        }
        fn locate(&self, thread: u64, hook_ns: u64) -> Located {
            let (index, base_ns, span, pass) = if hook_ns < 200 {
                (0, 1000, "s2", Some(Pass::Forward))
            } else {
                (1, 2000, "s1", None)
            };
            Located {
                slot: (thread, index),
                base_ns,
                span: Some(span.into()),
                pass,
            }
        }
        fn next_in_slot(&self, slot: (u64, u64)) -> u64 {
            let mut slots = self.slots.borrow_mut();
            let k = slots.entry(slot).or_insert(0);
            *k += 1;
            *k
        }
        fn storage_wire_id(&self, raw: &str) -> String {
            let mut ids = self.ids.borrow_mut();
            let next = ids.len() as u64 + 1;
            format!("st{}", ids.entry(raw.to_string()).or_insert(next))
        }
    }

    fn draft(hook_ns: u64, storage: &str, action: MemoryAction) -> PendingEvent {
        PendingEvent {
            hook_ns,
            thread: 1,
            session_ns: None,
            event: MemoryEvent {
                timestamp_ns: 0,
                action,
                device: "cpu".into(),
                storage_id: Some(storage.into()),
                bytes: Some(8),
                logical_bytes: None,
                tensor_id: None,
                span_id: None,
                op_name: None,
                shape: None,
                dtype: None,
                category: MemoryCategory::Other,
                category_source: Some(CategorySource::Inferred),
                source: Some(MemorySource::Allocator),
                pre_existing: false,
                label: None,
                site: None,
                thread: None,
            },
            infer_category: true,
        }
    }

    fn run(drafts: Vec<PendingEvent>) -> Vec<(u64, String, MemoryAction, String)> {
        deterministic_events(drafts, &Logical::default())
            .into_iter()
            .map(|e| {
                (
                    e.timestamp_ns,
                    e.storage_id.unwrap_or_default(),
                    e.action,
                    e.span_id.unwrap_or_default(),
                )
            })
            .collect()
    }

    #[test]
    fn deterministic_drain_orders_by_hook_time_and_numbers_storages() {
        use MemoryAction::{Alloc, Free};
        // Queued out of order (a late registration), frees of one drop in "random" order.
        let a = vec![
            draft(150, "0xb.0", Alloc),
            draft(110, "0xa.0", Alloc),
            draft(210, "0xb.0", Free),
            draft(211, "0xa.0", Free),
        ];
        let b = vec![
            draft(110, "0xa.0", Alloc),
            draft(150, "0xb.0", Alloc),
            draft(210, "0xa.0", Free),
            draft(211, "0xb.0", Free),
        ];
        let expected = vec![
            (1001, "st1".to_string(), Alloc, "s2".to_string()),
            (1002, "st2".to_string(), Alloc, "s2".to_string()),
            (2001, "st1".to_string(), Free, "s1".to_string()),
            (2002, "st2".to_string(), Free, "s1".to_string()),
        ];
        assert_eq!(run(a), expected);
        assert_eq!(run(b), expected);
    }

    #[test]
    fn deterministic_drain_infers_categories_from_the_located_pass() {
        let events = deterministic_events(
            vec![draft(120, "0xc.0", MemoryAction::Alloc)],
            &Logical::default(),
        );
        assert_eq!(events[0].category, MemoryCategory::Activation);
    }
}
