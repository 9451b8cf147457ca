//! The loaded trace: a compact, interned [`TraceDocument`] assembled by [`TraceBuilder`].
//!
//! The builder never fails: the original tool's semantic rules (duplicate span ids, unknown or
//! repeated `span_end`, terminal/reason rules, terminal before evidence, tensor_stats rules,
//! gradient state/norm, meta and contract validation) become [`SemanticIssue`]s kept in the
//! document, so a broken trace still gets a health report and a memory profile.

use std::collections::HashMap;

use serde::Serialize;

use crate::dtype::dense_bytes;
use crate::event::*;
use crate::intern::{Interner, ShapeId, ShapeTable, Sym};
use crate::meta::RunMeta;
use crate::parse::{FastEvent, MemoryRef, OpRef};
use crate::version::SchemaVersion;

/// A span, from its `span_start` and (if seen) its `span_end`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// Span id.
    pub id: Sym,
    /// Parent span id.
    pub parent: Option<Sym>,
    /// Name.
    pub name: Sym,
    /// Kind.
    pub kind: SpanKind,
    /// Start, ns since session start.
    pub start_ns: u64,
    /// Duration from `span_end`; `None` while the span is open (never closed in the file).
    pub duration_ns: Option<u64>,
    /// The single measured region.
    pub measured: bool,
    /// Training step.
    pub step: Option<ExecutionStep>,
    /// Module path (trace/11).
    pub module_path: Option<Sym>,
    /// Module instance key (trace/11).
    pub instance_key: Option<Sym>,
    /// 1-based line of the `span_start`.
    pub line: u32,
}

impl SpanRecord {
    /// End time (`start_ns + duration_ns`) for a closed span.
    pub fn end_ns(&self) -> Option<u64> {
        self.duration_ns.map(|d| self.start_ns.saturating_add(d))
    }
}

/// An operation.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRecord {
    /// Span the op ran in.
    pub span: Sym,
    /// Op name.
    pub op_name: Sym,
    /// Input tensor ids.
    pub inputs: Box<[Sym]>,
    /// Output tensor id.
    pub output: Option<Sym>,
    /// Output shape.
    pub shape: ShapeId,
    /// Output dtype.
    pub dtype: Sym,
    /// Output device.
    pub device: Sym,
    /// Duration, ns.
    pub duration_ns: u64,
    /// Start, ns.
    pub timestamp_ns: u64,
    /// Output dense bytes (filled from shape × dtype when absent and the dtype is known).
    pub output_dense_bytes: Option<u64>,
    /// Sum of the inputs' dense bytes.
    pub input_dense_bytes: u64,
}

/// A tensor fact.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRecord {
    /// Span.
    pub span: Sym,
    /// Tensor id.
    pub tensor_id: Sym,
    /// Caller label.
    pub label: Option<Sym>,
    /// Shape.
    pub shape: ShapeId,
    /// Dtype.
    pub dtype: Sym,
    /// Device.
    pub device: Sym,
    /// Tracks gradients.
    pub requires_grad: bool,
    /// Dense bytes of the view (filled from shape × dtype when absent and known).
    pub dense_bytes: Option<u64>,
    /// Bytes of the backing storage.
    pub storage_bytes: Option<u64>,
    /// Storage identity.
    pub storage_id: Option<Sym>,
    /// Category.
    pub category: MemoryCategory,
}

/// A memory event, compact: 64 bytes (checked by a unit test).
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecord {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Bytes (required on allocs; optional on frees).
    pub bytes: Option<u64>,
    /// Device.
    pub device: Sym,
    /// Storage identity (`None` in trace/6: identity is `(device, tensor)`).
    pub storage: Option<Sym>,
    /// Tensor id.
    pub tensor: Option<Sym>,
    /// Span.
    pub span: Option<Sym>,
    /// Allocating op name.
    pub op_name: Option<Sym>,
    /// Shape.
    pub shape: Option<ShapeId>,
    /// Dtype.
    pub dtype: Option<Sym>,
    /// Label.
    pub label: Option<Sym>,
    /// Alloc or free.
    pub action: MemoryAction,
    /// Category.
    pub category: MemoryCategory,
    /// Provenance of the category (`None`: declared by the caller).
    pub category_source: Option<CategorySource>,
    /// Observer (`None`: the caller).
    pub source: Option<MemorySource>,
    /// Existed before capture began.
    pub pre_existing: bool,
}

/// A device memory sample (physical plane).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceMemoryRecord {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Device.
    pub device: Sym,
    /// Used bytes.
    pub used_bytes: Option<u64>,
    /// Free bytes.
    pub free_bytes: Option<u64>,
    /// Reserved bytes.
    pub reserved_bytes: Option<u64>,
    /// Capacity bytes.
    pub capacity_bytes: Option<u64>,
    /// Process RSS bytes.
    pub resident_bytes: Option<u64>,
}

/// An explicit edge.
#[derive(Debug, Clone, PartialEq)]
pub enum EdgeRecord {
    /// Call edge between spans.
    Call {
        /// Caller span.
        from_span: Sym,
        /// Callee span.
        to_span: Sym,
        /// Host duration, ns.
        host_duration_ns: u64,
    },
    /// Data edge between tensors.
    Data {
        /// Source tensor.
        from_tensor: Sym,
        /// Destination tensor.
        to_tensor: Sym,
    },
}

/// Codes of the semantic rules the loader keeps for the health check (snake_case on output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SemanticCode {
    /// A `span_start` id repeats (the first one is kept).
    DuplicateSpanId,
    /// A `span_end` names no started span.
    UnknownSpanEnd,
    /// A `span_end` closes a span twice.
    RepeatedSpanEnd,
    /// A `complete` terminal carries a reason.
    CompleteWithFailureReason,
    /// A `failed` terminal has no (or an empty) reason.
    FailedWithoutReason,
    /// The terminal timestamp is earlier than the latest host evidence.
    TerminalPrecedesEvidence,
    /// A `tensor_stats` event breaks its rules.
    InvalidTensorStats,
    /// A gradient's norm does not fit its state.
    GradientStateNormInconsistent,
    /// The meta fails validation.
    InvalidMeta,
    /// The capture contract fails validation.
    InvalidCaptureContract,
}

impl SemanticCode {
    /// The snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DuplicateSpanId => "duplicate_span_id",
            Self::UnknownSpanEnd => "unknown_span_end",
            Self::RepeatedSpanEnd => "repeated_span_end",
            Self::CompleteWithFailureReason => "complete_with_failure_reason",
            Self::FailedWithoutReason => "failed_without_reason",
            Self::TerminalPrecedesEvidence => "terminal_precedes_evidence",
            Self::InvalidTensorStats => "invalid_tensor_stats",
            Self::GradientStateNormInconsistent => "gradient_state_norm_inconsistent",
            Self::InvalidMeta => "invalid_meta",
            Self::InvalidCaptureContract => "invalid_capture_contract",
        }
    }
}

/// A semantic rule broken by the trace; the load still succeeds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SemanticIssue {
    /// Which rule.
    pub code: SemanticCode,
    /// 1-based line of the offending event (0 when about the whole document).
    pub line: u64,
    /// Human-readable explanation.
    pub message: String,
}

/// How a trace was cut short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Truncation {
    /// A final line without `\n` that did not parse was dropped: its 1-based line number.
    pub partial_line: Option<u64>,
    /// Bytes of that partial line.
    pub dropped_bytes: u64,
    /// The version has a terminal event but none was found.
    pub terminal_missing: bool,
}

/// A loaded trace, compact in memory (interned strings and shapes; raw lines are never kept).
#[derive(Debug, Clone)]
pub struct TraceDocument {
    /// Schema version read.
    pub version: SchemaVersion,
    /// Run metadata.
    pub meta: RunMeta,
    /// Interned strings; resolve a [`Sym`] with [`TraceDocument::str`].
    pub strings: Interner,
    /// Interned shapes; resolve with [`TraceDocument::shape`].
    pub shapes: ShapeTable,
    /// Spans in `span_start` file order (duplicates dropped).
    pub spans: Vec<SpanRecord>,
    /// Operations in file order.
    pub ops: Vec<OpRecord>,
    /// Tensor facts in file order.
    pub tensors: Vec<TensorRecord>,
    /// Tensor statistics in file order.
    pub tensor_stats: Vec<TensorStatsEvent>,
    /// Memory events in file order.
    pub memory: Vec<MemoryRecord>,
    /// Device memory samples in file order.
    pub device_memory: Vec<DeviceMemoryRecord>,
    /// Device intervals in file order.
    pub device_intervals: Vec<DeviceIntervalEvent>,
    /// Gradient facts in file order.
    pub gradients: Vec<GradientEvent>,
    /// Explicit edges in file order.
    pub edges: Vec<EdgeRecord>,
    /// Highest running `dropped_events` count seen (body events or terminal); `None` when the
    /// trace never reported one.
    pub dropped_events: Option<u64>,
    /// The terminal event.
    pub terminal: Option<TerminalEvent>,
    /// Set when the trace was cut short.
    pub truncation: Option<Truncation>,
    /// Semantic rules the trace breaks.
    pub semantic_issues: Vec<SemanticIssue>,
    /// Number of events read (meta and terminal included).
    pub event_count: u64,
    span_index: HashMap<Sym, u32>,
    /// Time of the body `dropped_events` report that set `dropped_events` (if any).
    dropped_events_ns: Option<u64>,
}

impl TraceDocument {
    /// The string of a handle.
    pub fn str(&self, sym: Sym) -> &str {
        self.strings.resolve(sym)
    }

    /// The handle of a string, if the document contains it.
    pub fn sym(&self, s: &str) -> Option<Sym> {
        self.strings.get(s)
    }

    /// The dimensions of a shape handle.
    pub fn shape(&self, id: ShapeId) -> &[u64] {
        self.shapes.resolve(id)
    }

    /// Index into `spans` of a span id.
    pub fn span_index(&self, id: Sym) -> Option<usize> {
        self.span_index.get(&id).map(|&i| i as usize)
    }

    /// The span with this id.
    pub fn span(&self, id: Sym) -> Option<&SpanRecord> {
        self.span_index(id).map(|i| &self.spans[i])
    }

    /// True when the trace was cut short (partial last line, or no terminal in a version that
    /// has one).
    pub fn is_truncated(&self) -> bool {
        self.truncation.is_some()
    }

    /// Assembles a document from events (no line numbers: events are numbered from 1).
    pub fn from_events(events: impl IntoIterator<Item = TraceEvent>) -> Self {
        let mut builder = TraceBuilder::new(SchemaVersion::V11);
        for (i, event) in events.into_iter().enumerate() {
            builder.push(i as u64 + 1, event);
        }
        builder.finish(None)
    }

    /// Writes the document back as events: meta, spans (start then end, by start line), ops,
    /// tensors, tensor_stats, memory, device_memory, device_intervals, gradients, edges, a
    /// `dropped_events` report when a body event set the count and the terminal does not repeat
    /// it, terminal. O(n).
    pub fn to_events(&self) -> Vec<TraceEvent> {
        let s = |sym: Sym| self.str(sym).to_string();
        let o = |sym: Option<Sym>| sym.map(|x| self.str(x).to_string());
        let mut out = Vec::with_capacity(self.event_count as usize + 1);
        out.push(TraceEvent::Meta(MetaEvent {
            schema: crate::version::WRITE_VERSION.as_str().to_string(),
            run: self.meta.clone(),
        }));
        for span in &self.spans {
            out.push(TraceEvent::SpanStart(SpanStartEvent {
                id: s(span.id),
                parent_id: o(span.parent),
                name: s(span.name),
                start_ns: span.start_ns,
                span_kind: span.kind,
                measured: span.measured,
                step: span.step,
                module_path: o(span.module_path),
                instance_key: o(span.instance_key),
            }));
            if let Some(duration_ns) = span.duration_ns {
                out.push(TraceEvent::SpanEnd(SpanEndEvent {
                    id: s(span.id),
                    duration_ns,
                }));
            }
        }
        for op in &self.ops {
            out.push(TraceEvent::Op(OpEvent {
                span_id: s(op.span),
                op_name: s(op.op_name),
                inputs: op.inputs.iter().map(|&x| s(x)).collect(),
                output: o(op.output),
                shape: self.shape(op.shape).to_vec(),
                dtype: s(op.dtype),
                device: s(op.device),
                duration_ns: op.duration_ns,
                timestamp_ns: op.timestamp_ns,
                output_dense_bytes: op.output_dense_bytes,
                input_dense_bytes: op.input_dense_bytes,
            }));
        }
        for t in &self.tensors {
            out.push(TraceEvent::Tensor(TensorEvent {
                span_id: s(t.span),
                tensor_id: s(t.tensor_id),
                label: o(t.label),
                shape: self.shape(t.shape).to_vec(),
                dtype: s(t.dtype),
                device: s(t.device),
                requires_grad: t.requires_grad,
                dense_bytes: t.dense_bytes,
                storage_bytes: t.storage_bytes,
                storage_id: o(t.storage_id),
                category: t.category,
            }));
        }
        out.extend(
            self.tensor_stats
                .iter()
                .cloned()
                .map(TraceEvent::TensorStats),
        );
        for m in &self.memory {
            out.push(TraceEvent::Memory(MemoryEvent {
                timestamp_ns: m.timestamp_ns,
                action: m.action,
                device: s(m.device),
                storage_id: o(m.storage),
                bytes: m.bytes,
                tensor_id: o(m.tensor),
                span_id: o(m.span),
                op_name: o(m.op_name),
                shape: m.shape.map(|id| self.shape(id).to_vec()),
                dtype: o(m.dtype),
                category: m.category,
                category_source: m.category_source,
                source: m.source,
                pre_existing: m.pre_existing,
                label: o(m.label),
            }));
        }
        for d in &self.device_memory {
            out.push(TraceEvent::DeviceMemory(DeviceMemoryEvent {
                timestamp_ns: d.timestamp_ns,
                device: s(d.device),
                used_bytes: d.used_bytes,
                free_bytes: d.free_bytes,
                reserved_bytes: d.reserved_bytes,
                capacity_bytes: d.capacity_bytes,
                resident_bytes: d.resident_bytes,
            }));
        }
        out.extend(
            self.device_intervals
                .iter()
                .cloned()
                .map(TraceEvent::DeviceInterval),
        );
        out.extend(self.gradients.iter().cloned().map(TraceEvent::Gradient));
        for e in &self.edges {
            out.push(TraceEvent::Edge(match *e {
                EdgeRecord::Call {
                    from_span,
                    to_span,
                    host_duration_ns,
                } => EdgeEvent::Call {
                    from_span: s(from_span),
                    to_span: s(to_span),
                    host_duration_ns,
                },
                EdgeRecord::Data {
                    from_tensor,
                    to_tensor,
                } => EdgeEvent::Data {
                    from_tensor: s(from_tensor),
                    to_tensor: s(to_tensor),
                },
            }));
        }
        // The running count, unless the terminal repeats it.
        let terminal_count = self.terminal.as_ref().and_then(|t| t.dropped_events);
        if let (Some(dropped_events), Some(timestamp_ns)) =
            (self.dropped_events, self.dropped_events_ns)
        {
            if terminal_count != Some(dropped_events) {
                out.push(TraceEvent::DroppedEvents(DroppedEventsEvent {
                    timestamp_ns,
                    dropped_events,
                }));
            }
        }
        if let Some(terminal) = &self.terminal {
            out.push(TraceEvent::Terminal(terminal.clone()));
        }
        out
    }
}

/// Assembles a [`TraceDocument`] event by event. Never fails: see the module docs.
#[derive(Debug)]
pub struct TraceBuilder {
    doc: TraceDocument,
    span_end_seen: HashMap<Sym, u64>,
    latest_evidence_ns: u64,
    terminal_line: u64,
}

impl TraceBuilder {
    /// A builder for a document of `version`.
    pub fn new(version: SchemaVersion) -> Self {
        Self {
            doc: TraceDocument {
                version,
                meta: RunMeta::default(),
                strings: Interner::default(),
                shapes: ShapeTable::default(),
                spans: Vec::new(),
                ops: Vec::new(),
                tensors: Vec::new(),
                tensor_stats: Vec::new(),
                memory: Vec::new(),
                device_memory: Vec::new(),
                device_intervals: Vec::new(),
                gradients: Vec::new(),
                edges: Vec::new(),
                dropped_events: None,
                terminal: None,
                truncation: None,
                semantic_issues: Vec::new(),
                event_count: 0,
                span_index: HashMap::new(),
                dropped_events_ns: None,
            },
            span_end_seen: HashMap::new(),
            latest_evidence_ns: 0,
            terminal_line: 0,
        }
    }

    fn issue(&mut self, code: SemanticCode, line: u64, message: String) {
        self.doc.semantic_issues.push(SemanticIssue {
            code,
            line,
            message,
        });
    }

    fn evidence(&mut self, ns: u64) {
        self.latest_evidence_ns = self.latest_evidence_ns.max(ns);
    }

    /// Adds one event read from 1-based `line`.
    pub fn push(&mut self, line: u64, event: TraceEvent) {
        self.doc.event_count += 1;
        let doc = &mut self.doc;
        match event {
            TraceEvent::Meta(meta) => {
                if let Some(version) = SchemaVersion::parse(&meta.schema) {
                    doc.version = version;
                }
                doc.meta = meta.run;
                let mut problems = Vec::new();
                let mut contract_problems = Vec::new();
                if let Some(contract) = &doc.meta.capture_contract {
                    contract_problems = contract.validate();
                }
                let meta_only = RunMeta {
                    capture_contract: None,
                    ..doc.meta.clone()
                };
                problems.extend(meta_only.validate());
                for p in problems {
                    self.issue(SemanticCode::InvalidMeta, line, p);
                }
                for p in contract_problems {
                    self.issue(SemanticCode::InvalidCaptureContract, line, p);
                }
            }
            TraceEvent::SpanStart(e) => {
                let id = doc.strings.intern(&e.id);
                if doc.span_index.contains_key(&id) {
                    self.issue(
                        SemanticCode::DuplicateSpanId,
                        line,
                        format!("span id {} is started twice; the first is kept", e.id),
                    );
                    return;
                }
                let record = SpanRecord {
                    id,
                    parent: e.parent_id.as_deref().map(|p| doc.strings.intern(p)),
                    name: doc.strings.intern(&e.name),
                    kind: e.span_kind,
                    start_ns: e.start_ns,
                    duration_ns: None,
                    measured: e.measured,
                    step: e.step,
                    module_path: e.module_path.as_deref().map(|p| doc.strings.intern(p)),
                    instance_key: e.instance_key.as_deref().map(|p| doc.strings.intern(p)),
                    line: line.min(u32::MAX as u64) as u32,
                };
                doc.span_index.insert(id, doc.spans.len() as u32);
                doc.spans.push(record);
                self.evidence(e.start_ns);
            }
            TraceEvent::SpanEnd(e) => {
                let Some(id) = doc.strings.get(&e.id) else {
                    self.issue(
                        SemanticCode::UnknownSpanEnd,
                        line,
                        format!("span_end for unknown span {}", e.id),
                    );
                    return;
                };
                let Some(&index) = doc.span_index.get(&id) else {
                    self.issue(
                        SemanticCode::UnknownSpanEnd,
                        line,
                        format!("span_end for unknown span {}", e.id),
                    );
                    return;
                };
                if let Some(first) = self.span_end_seen.get(&id) {
                    let message = format!("span {} is closed twice (first on line {first})", e.id);
                    self.issue(SemanticCode::RepeatedSpanEnd, line, message);
                    return;
                }
                self.span_end_seen.insert(id, line);
                let span = &mut self.doc.spans[index as usize];
                span.duration_ns = Some(e.duration_ns);
                let end = span.start_ns.saturating_add(e.duration_ns);
                self.evidence(end);
            }
            TraceEvent::Op(e) => self.add_op(&OpRef::from(&e), &e.shape),
            TraceEvent::Tensor(e) => {
                let dense = e.dense_bytes.or_else(|| dense_bytes(&e.shape, &e.dtype));
                let record = TensorRecord {
                    span: doc.strings.intern(&e.span_id),
                    tensor_id: doc.strings.intern(&e.tensor_id),
                    label: e.label.as_deref().map(|x| doc.strings.intern(x)),
                    shape: doc.shapes.intern(&e.shape),
                    dtype: doc.strings.intern(&e.dtype),
                    device: doc.strings.intern(&e.device),
                    requires_grad: e.requires_grad,
                    dense_bytes: dense,
                    storage_bytes: e.storage_bytes,
                    storage_id: e.storage_id.as_deref().map(|x| doc.strings.intern(x)),
                    category: e.category,
                };
                doc.tensors.push(record);
            }
            TraceEvent::TensorStats(e) => {
                let problems = e.validate();
                doc.tensor_stats.push(e);
                for p in problems {
                    self.issue(SemanticCode::InvalidTensorStats, line, p);
                }
            }
            TraceEvent::Memory(e) => {
                self.add_memory(&MemoryRef::from(&e), e.shape.as_deref());
            }
            TraceEvent::DeviceMemory(e) => {
                let record = DeviceMemoryRecord {
                    timestamp_ns: e.timestamp_ns,
                    device: doc.strings.intern(&e.device),
                    used_bytes: e.used_bytes,
                    free_bytes: e.free_bytes,
                    reserved_bytes: e.reserved_bytes,
                    capacity_bytes: e.capacity_bytes,
                    resident_bytes: e.resident_bytes,
                };
                doc.device_memory.push(record);
                self.evidence(e.timestamp_ns);
            }
            TraceEvent::DeviceInterval(e) => doc.device_intervals.push(e),
            TraceEvent::Gradient(e) => {
                let consistent = e.state_norm_consistent();
                let message = format!(
                    "gradient {}/{}: state {:?} does not fit norm {:?}",
                    e.root, e.key, e.state, e.norm
                );
                doc.gradients.push(e);
                if !consistent {
                    self.issue(SemanticCode::GradientStateNormInconsistent, line, message);
                }
            }
            TraceEvent::Edge(e) => {
                let record = match e {
                    EdgeEvent::Call {
                        from_span,
                        to_span,
                        host_duration_ns,
                    } => EdgeRecord::Call {
                        from_span: doc.strings.intern(&from_span),
                        to_span: doc.strings.intern(&to_span),
                        host_duration_ns,
                    },
                    EdgeEvent::Data {
                        from_tensor,
                        to_tensor,
                    } => EdgeRecord::Data {
                        from_tensor: doc.strings.intern(&from_tensor),
                        to_tensor: doc.strings.intern(&to_tensor),
                    },
                };
                doc.edges.push(record);
            }
            TraceEvent::DroppedEvents(e) => {
                if doc.dropped_events.is_none_or(|d| e.dropped_events >= d) {
                    doc.dropped_events = Some(e.dropped_events);
                    doc.dropped_events_ns = Some(e.timestamp_ns);
                }
            }
            TraceEvent::Terminal(e) => {
                match (e.outcome, e.reason.as_deref()) {
                    (TerminalOutcome::Complete, Some(reason)) => self.issue(
                        SemanticCode::CompleteWithFailureReason,
                        line,
                        format!("complete terminal carries a failure reason: {reason}"),
                    ),
                    (TerminalOutcome::Failed, None) => self.issue(
                        SemanticCode::FailedWithoutReason,
                        line,
                        "failed terminal has no reason".to_string(),
                    ),
                    (TerminalOutcome::Failed, Some(r)) if r.trim().is_empty() => self.issue(
                        SemanticCode::FailedWithoutReason,
                        line,
                        "failed terminal has an empty reason".to_string(),
                    ),
                    _ => {}
                }
                if let Some(dropped) = e.dropped_events {
                    let doc = &mut self.doc;
                    doc.dropped_events = Some(doc.dropped_events.unwrap_or(0).max(dropped));
                }
                self.terminal_line = line;
                self.doc.terminal = Some(e);
            }
        }
    }

    /// Adds one event parsed by the loader's fast path (borrowed from the line).
    pub(crate) fn push_fast(&mut self, event: &FastEvent<'_>) {
        self.doc.event_count += 1;
        match event {
            FastEvent::Memory(e) => self.add_memory(e, e.shape.as_deref()),
            FastEvent::Op(e) => self.add_op(e, &e.shape),
        }
    }

    fn add_op(&mut self, e: &OpRef<'_>, shape: &[u64]) {
        let doc = &mut self.doc;
        let output_dense_bytes = e.output_dense_bytes.or_else(|| dense_bytes(shape, e.dtype));
        let record = OpRecord {
            span: doc.strings.intern(e.span_id),
            op_name: doc.strings.intern(e.op_name),
            inputs: e.inputs.iter().map(|i| doc.strings.intern(i)).collect(),
            output: e.output.map(|x| doc.strings.intern(x)),
            shape: doc.shapes.intern(shape),
            dtype: doc.strings.intern(e.dtype),
            device: doc.strings.intern(e.device),
            duration_ns: e.duration_ns,
            timestamp_ns: e.timestamp_ns,
            output_dense_bytes,
            input_dense_bytes: e.input_dense_bytes,
        };
        doc.ops.push(record);
        self.evidence(e.timestamp_ns.saturating_add(e.duration_ns));
    }

    fn add_memory(&mut self, e: &MemoryRef<'_>, shape: Option<&[u64]>) {
        let doc = &mut self.doc;
        let mut intern = |x: Option<&str>| x.map(|x| doc.strings.intern(x));
        let storage = intern(e.storage_id);
        let tensor = intern(e.tensor_id);
        let span = intern(e.span_id);
        let op_name = intern(e.op_name);
        let dtype = intern(e.dtype);
        let label = intern(e.label);
        let record = MemoryRecord {
            timestamp_ns: e.timestamp_ns,
            bytes: e.bytes,
            device: doc.strings.intern(e.device),
            storage,
            tensor,
            span,
            op_name,
            shape: shape.map(|x| doc.shapes.intern(x)),
            dtype,
            label,
            action: e.action,
            category: e.category,
            category_source: e.category_source,
            source: e.source,
            pre_existing: e.pre_existing,
        };
        doc.memory.push(record);
        self.evidence(e.timestamp_ns);
    }

    /// Finishes the document. `partial_line` is `(line, bytes)` of a dropped partial last line.
    pub fn finish(mut self, partial_line: Option<(u64, u64)>) -> TraceDocument {
        if let Some(terminal) = &self.doc.terminal {
            if terminal.timestamp_ns < self.latest_evidence_ns {
                let message = format!(
                    "terminal at {} ns precedes the latest host evidence at {} ns",
                    terminal.timestamp_ns, self.latest_evidence_ns
                );
                let line = self.terminal_line;
                self.issue(SemanticCode::TerminalPrecedesEvidence, line, message);
            }
        }
        // Release the growth slack of every table (up to half of each Vec otherwise).
        let doc = &mut self.doc;
        doc.strings.shrink_to_fit();
        doc.spans.shrink_to_fit();
        doc.ops.shrink_to_fit();
        doc.tensors.shrink_to_fit();
        doc.tensor_stats.shrink_to_fit();
        doc.memory.shrink_to_fit();
        doc.device_memory.shrink_to_fit();
        doc.device_intervals.shrink_to_fit();
        doc.gradients.shrink_to_fit();
        doc.edges.shrink_to_fit();
        doc.semantic_issues.shrink_to_fit();
        doc.span_index.shrink_to_fit();
        let terminal_missing = self.doc.version.has_terminal() && self.doc.terminal.is_none();
        if partial_line.is_some() || terminal_missing {
            self.doc.truncation = Some(Truncation {
                partial_line: partial_line.map(|(line, _)| line),
                dropped_bytes: partial_line.map_or(0, |(_, bytes)| bytes),
                terminal_missing,
            });
        }
        self.doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_stay_compact() {
        // Resident size per event is a target (well under 100 bytes/event at 10^7 events).
        assert_eq!(std::mem::size_of::<MemoryRecord>(), 64);
        assert!(std::mem::size_of::<OpRecord>() <= 80);
        assert!(std::mem::size_of::<SpanRecord>() <= 56);
    }
}
