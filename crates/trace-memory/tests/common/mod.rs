//! Small builders for hand-written traces.
#![allow(dead_code)]

use trace_schema::{
    CaptureContract, CoverageLevel, DeviceMemoryEvent, MemoryAction, MemoryCategory, MemoryEvent,
    MetaEvent, OpEvent, Pass, RunMeta, SpanEndEvent, SpanKind, SpanStartEvent, TerminalEvent,
    TerminalOutcome, TraceDocument, TraceEvent,
};

pub fn meta(logical_memory: Option<CoverageLevel>) -> TraceEvent {
    TraceEvent::Meta(MetaEvent {
        schema: "candle-graph/trace/11".into(),
        run: RunMeta {
            run_id: "r".into(),
            entrypoint: "test".into(),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            capture_contract: logical_memory.map(|level| CaptureContract {
                logical_memory: level,
                ..CaptureContract::default()
            }),
            ..RunMeta::default()
        },
    })
}

pub fn terminal(t: u64) -> TraceEvent {
    TraceEvent::Terminal(TerminalEvent {
        coverage_lost: Default::default(),
        outcome: TerminalOutcome::Complete,
        timestamp_ns: t,
        reason: None,
        dropped_events: None,
    })
}

pub fn mem(
    t: u64,
    action: MemoryAction,
    device: &str,
    storage: &str,
    bytes: Option<u64>,
) -> MemoryEvent {
    MemoryEvent {
        timestamp_ns: t,
        action,
        device: device.into(),
        storage_id: Some(storage.into()),
        bytes,
        logical_bytes: None,
        tensor_id: Some(format!("t-{storage}")),
        span_id: None,
        op_name: None,
        shape: None,
        dtype: None,
        category: MemoryCategory::Activation,
        category_source: None,
        source: None,
        pre_existing: false,
        label: None,
        site: None,
        thread: None,
    }
}

pub fn alloc(t: u64, storage: &str, bytes: u64) -> MemoryEvent {
    mem(t, MemoryAction::Alloc, "cpu", storage, Some(bytes))
}

pub fn free(t: u64, storage: &str) -> MemoryEvent {
    mem(t, MemoryAction::Free, "cpu", storage, None)
}

pub trait MemExt {
    fn cat(self, c: MemoryCategory) -> Self;
    fn span(self, s: &str) -> Self;
    fn dev(self, d: &str) -> Self;
    fn tensor(self, t: &str) -> Self;
    fn op(self, o: &str) -> Self;
    fn pre(self) -> Self;
    fn no_storage(self) -> Self;
    fn ev(self) -> TraceEvent;
}

impl MemExt for MemoryEvent {
    fn cat(mut self, c: MemoryCategory) -> Self {
        self.category = c;
        self
    }
    fn span(mut self, s: &str) -> Self {
        self.span_id = Some(s.into());
        self
    }
    fn dev(mut self, d: &str) -> Self {
        self.device = d.into();
        self
    }
    fn tensor(mut self, t: &str) -> Self {
        self.tensor_id = Some(t.into());
        self
    }
    fn op(mut self, o: &str) -> Self {
        self.op_name = Some(o.into());
        self
    }
    fn pre(mut self) -> Self {
        self.pre_existing = true;
        self
    }
    fn no_storage(mut self) -> Self {
        self.storage_id = None;
        self
    }
    fn ev(self) -> TraceEvent {
        TraceEvent::Memory(self)
    }
}

pub fn span_start(id: &str, parent: Option<&str>, start: u64, step: Option<Pass>) -> TraceEvent {
    TraceEvent::SpanStart(SpanStartEvent {
        id: id.into(),
        parent_id: parent.map(Into::into),
        name: id.into(),
        start_ns: start,
        span_kind: SpanKind::Function,
        measured: parent.is_none(),
        step,
        module_path: None,
        instance_key: None,
        module_kind: None,
        forward_span_id: None,
        step_index: None,
    })
}

pub fn span_end(id: &str, duration: u64) -> TraceEvent {
    TraceEvent::SpanEnd(SpanEndEvent {
        id: id.into(),
        duration_ns: duration,
        inferred: false,
        inferred_reason: None,
    })
}

/// A closed span: start and end events.
pub fn span(
    id: &str,
    parent: Option<&str>,
    start: u64,
    end: u64,
    step: Option<Pass>,
) -> [TraceEvent; 2] {
    [
        span_start(id, parent, start, step),
        span_end(id, end - start),
    ]
}

pub fn op(span: &str, name: &str, t: u64, dur: u64) -> TraceEvent {
    TraceEvent::Op(OpEvent {
        span_id: span.into(),
        op_name: name.into(),
        inputs: vec![],
        output: None,
        shape: vec![4],
        dtype: "f32".into(),
        device: "cpu".into(),
        duration_ns: dur,
        timestamp_ns: t,
        output_dense_bytes: None,
        input_dense_bytes: 0,
    })
}

pub fn sample(
    t: u64,
    device: &str,
    used: Option<u64>,
    free: Option<u64>,
    reserved: Option<u64>,
    capacity: Option<u64>,
) -> TraceEvent {
    TraceEvent::DeviceMemory(DeviceMemoryEvent {
        timestamp_ns: t,
        device: device.into(),
        used_bytes: used,
        free_bytes: free,
        reserved_bytes: reserved,
        capacity_bytes: capacity,
        resident_bytes: None,
    })
}

/// meta + events + terminal.
pub fn doc(events: impl IntoIterator<Item = TraceEvent>) -> TraceDocument {
    doc_with(None, events)
}

pub fn doc_with(
    coverage: Option<CoverageLevel>,
    events: impl IntoIterator<Item = TraceEvent>,
) -> TraceDocument {
    let mut all = vec![meta(coverage)];
    all.extend(events);
    all.push(terminal(1_000_000));
    TraceDocument::from_events(all)
}
