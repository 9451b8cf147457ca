//! [`TraceBuilder`]: assembles a [`TraceDocument`] event by event, never failing (broken rules
//! become [`SemanticIssue`]s, see [`super::semantic`]).

use std::collections::HashMap;

use super::records::*;
use super::semantic::{gradient_issue, meta_issues, terminal_reason_issue};
use super::{SemanticCode, SemanticIssue, TraceDocument, Truncation};
use crate::dtype::dense_bytes;
use crate::event::*;
use crate::intern::{Interner, ShapeTable, Sym};
use crate::meta::RunMeta;
use crate::parse::{FastEvent, MemoryRef, OpRef};
use crate::version::SchemaVersion;

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
                for (code, message) in meta_issues(&self.doc.meta) {
                    self.issue(code, line, message);
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
                    pass: e.step,
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
                let problem = gradient_issue(&e);
                doc.gradients.push(e);
                if let Some((code, message)) = problem {
                    self.issue(code, line, message);
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
                if let Some((code, message)) = terminal_reason_issue(&e) {
                    self.issue(code, line, message);
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
