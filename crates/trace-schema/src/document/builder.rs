//! [`TraceBuilder`]: assembles a [`TraceDocument`] event by event, never failing (broken rules
//! become [`SemanticIssue`]s, see [`super::semantic`]).

use rustc_hash::FxHashMap as HashMap;

use super::op_tensors::OpTensorLogWriter;
use super::records::*;
use super::semantic::{gradient_issue, meta_issues, terminal_reason_issue};
use super::spill::{MemoryItem, MemoryLogWriter};
use super::{SemanticCode, SemanticIssue, TraceDocument, Truncation};
use crate::chunk::{Item, LocalId, ParsedChunk};
use crate::dtype::dense_bytes;
use crate::event::*;
use crate::intern::{Interner, ShapeTable, Sym};
use crate::meta::RunMeta;
use crate::version::SchemaVersion;

/// Assembles a [`TraceDocument`] event by event. Never fails: see the module docs.
#[derive(Debug)]
pub struct TraceBuilder {
    doc: TraceDocument,
    span_end_seen: HashMap<Sym, u64>,
    latest_evidence_ns: u64,
    terminal_line: u64,
    /// Line of the (first) `sampler` event, for the samples' cross-check at the end.
    sampler_line: u64,
    /// Line of the (first) `alloc_sites` event, for the sites' cross-check at the end.
    alloc_sites_line: u64,
    /// The step indices seen so far, with their span's line, and the last one (a multi-step
    /// capture numbers its steps once each, in time order).
    step_lines: rustc_hash::FxHashMap<u32, u64>,
    last_step: Option<u32>,
    /// Memory events go here instead of `doc.memory` (a document with a spilled memory plane).
    memory_log: Option<MemoryLogWriter>,
    /// Ops' tensor ids go here instead of `doc.ops` (a spilled document).
    op_log: Option<OpTensorLogWriter>,
    /// First I/O error of the memory log (reported by [`TraceBuilder::finish_spilled`]).
    log_error: Option<std::io::Error>,
    /// Chunk-local string id → document symbol, for the chunk being pushed.
    local: Vec<Option<Sym>>,
}

/// An op event with the document's symbols.
struct OpIn<'a> {
    span: Sym,
    op_name: Sym,
    inputs: Box<[Sym]>,
    output: Option<Sym>,
    shape: &'a [u64],
    dtype: &'a str,
    dtype_sym: Sym,
    device: Sym,
    duration_ns: u64,
    timestamp_ns: u64,
    output_dense_bytes: Option<u64>,
    input_dense_bytes: u64,
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
                samples: Default::default(),
                sites: Default::default(),
                dropped_events: None,
                terminal: None,
                truncation: None,
                semantic_issues: Vec::new(),
                event_count: 0,
                span_index: super::SpanSlots::default(),
                dropped_events_ns: None,
                memory_log: None,
                op_tensor_log: None,
            },
            span_end_seen: HashMap::default(),
            latest_evidence_ns: 0,
            terminal_line: 0,
            sampler_line: 0,
            alloc_sites_line: 0,
            step_lines: Default::default(),
            last_step: None,
            memory_log: None,
            op_log: None,
            log_error: None,
            local: Vec::new(),
        }
    }

    /// A builder that keeps memory events out of resident memory, in a [`super::MemoryLog`]
    /// (see [`TraceDocument::memory_len`] and [`TraceDocument::for_each_memory`]).
    pub fn spilled(version: SchemaVersion) -> Self {
        Self {
            memory_log: Some(MemoryLogWriter::default()),
            op_log: Some(OpTensorLogWriter::default()),
            ..Self::new(version)
        }
    }

    /// A `step_index` on the wire that names no step (0, or past `u32::MAX`) is an issue; so is
    /// one that repeats an earlier step span's, or comes below the previous one's (spans start
    /// in time order, and steps are numbered up). The span is kept as written.
    fn check_step_index(
        &mut self,
        wire: Option<u64>,
        kept: Option<std::num::NonZeroU32>,
        line: u64,
    ) {
        if let (Some(n), None) = (wire, kept) {
            self.issue(
                SemanticCode::InvalidStepIndex,
                line,
                format!(
                    "step_index {n} names no step (1 to {}): the span is not counted as a step",
                    u32::MAX
                ),
            );
        }
        let Some(n) = kept.map(std::num::NonZeroU32::get) else {
            return;
        };
        if let Some(&first) = self.step_lines.get(&n) {
            let message = format!(
                "step_index {n} repeats the step span of line {first}: the per-step table shows two rows for step {n}"
            );
            self.issue(SemanticCode::InvalidStepIndex, line, message);
        } else {
            self.step_lines.insert(n, line);
            if let Some(last) = self.last_step.filter(|&last| n < last) {
                let message = format!(
                    "step_index {n} starts after step {last}: steps are numbered up in time order, so this capture's step order is in doubt"
                );
                self.issue(SemanticCode::InvalidStepIndex, line, message);
            }
        }
        self.last_step = Some(self.last_step.map_or(n, |last| last.max(n)));
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
                let m = &mut doc.meta;
                bound(&mut [&mut m.run_id, &mut m.entrypoint, &mut m.timestamp]);
                for o in [&mut m.correlation_id, &mut m.device] {
                    if let Some(x) = o.as_mut() {
                        bound(&mut [x]);
                    }
                }
                for (code, message) in meta_issues(&self.doc.meta) {
                    self.issue(code, line, message);
                }
            }
            TraceEvent::SpanStart(e) => {
                let id = doc.strings.intern(&e.id);
                if self.duplicate_span(line, id) {
                    return;
                }
                let doc = &mut self.doc;
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
                    module_kind: e.module_kind.as_deref().map(|p| doc.strings.intern(p)),
                    forward_span: e.forward_span_id.as_deref().map(|p| doc.strings.intern(p)),
                    step_index: super::records::step_index_of(e.step_index),
                    inferred: false,
                    inferred_reason: None,
                    line: line.min(u32::MAX as u64) as u32,
                };
                self.check_step_index(e.step_index, record.step_index, line);
                self.add_span_start(record);
            }
            TraceEvent::SpanEnd(e) => self.add_span_end(
                line,
                &e.id,
                e.duration_ns,
                e.inferred,
                e.inferred_reason.as_deref(),
            ),
            TraceEvent::Op(e) => {
                let spill = self.op_log.is_some();
                if let Some(log) = self.op_log.as_mut() {
                    let pushed = log.push(e.inputs.iter().map(String::as_str), e.output.as_deref());
                    if let Err(err) = pushed {
                        self.log_error.get_or_insert(err);
                    }
                }
                let doc = &mut self.doc;
                let (inputs, output) = if spill {
                    (Box::default(), None)
                } else {
                    (
                        e.inputs.iter().map(|i| doc.strings.intern(i)).collect(),
                        e.output.as_deref().map(|x| doc.strings.intern(x)),
                    )
                };
                let op = OpIn {
                    span: doc.strings.intern(&e.span_id),
                    op_name: doc.strings.intern(&e.op_name),
                    inputs,
                    output,
                    shape: &e.shape,
                    dtype: &e.dtype,
                    dtype_sym: doc.strings.intern(&e.dtype),
                    device: doc.strings.intern(&e.device),
                    duration_ns: e.duration_ns,
                    timestamp_ns: e.timestamp_ns,
                    output_dense_bytes: e.output_dense_bytes,
                    input_dense_bytes: e.input_dense_bytes,
                };
                self.add_op(op);
            }
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
            TraceEvent::TensorStats(mut e) => {
                bound(&mut [&mut e.span_id, &mut e.label, &mut e.dtype]);
                let problems = e.validate();
                doc.tensor_stats.push(e);
                for p in problems {
                    self.issue(SemanticCode::InvalidTensorStats, line, p);
                }
            }
            TraceEvent::Memory(e) => {
                let device = doc.strings.intern(&e.device);
                let mut sym = |x: &Option<String>| x.as_deref().map(|x| doc.strings.intern(x));
                let m = MemoryItem {
                    index: 0,
                    timestamp_ns: e.timestamp_ns,
                    bytes: e.bytes,
                    device,
                    storage: e.storage_id.as_deref(),
                    tensor: e.tensor_id.as_deref(),
                    span: sym(&e.span_id),
                    op_name: sym(&e.op_name),
                    shape: None,
                    dtype: sym(&e.dtype),
                    label: sym(&e.label),
                    action: e.action,
                    category: e.category,
                    category_source: e.category_source,
                    source: e.source,
                    pre_existing: e.pre_existing,
                };
                let shape = e.shape.as_deref().map(|x| doc.shapes.intern(x));
                let (action, site, thread) = (e.action, e.site, e.thread);
                self.add_memory(MemoryItem { shape, ..m });
                self.note_site(line, action, site, thread);
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
            TraceEvent::DeviceInterval(mut e) => {
                bound(&mut [
                    &mut e.span_id,
                    &mut e.device,
                    &mut e.stream_id,
                    &mut e.clock_id,
                    &mut e.backend,
                ]);
                doc.device_intervals.push(e)
            }
            TraceEvent::Gradient(mut e) => {
                bound(&mut [&mut e.event_id, &mut e.root, &mut e.key]);
                if let Some(t) = e.tensor_id.as_mut() {
                    bound(&mut [t]);
                }
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
            TraceEvent::Frame(mut e) => {
                super::samples::blank_is_unnamed(&mut e);
                let FrameEvent {
                    function,
                    file,
                    module,
                    address,
                    ..
                } = &mut e;
                let mut fields: Vec<&mut String> = [function, file, module, address]
                    .into_iter()
                    .filter_map(Option::as_mut)
                    .collect();
                bound(&mut fields);
                if let Err(problem) = doc.samples.push_frame(e) {
                    self.issue(SemanticCode::InvalidSamples, line, problem);
                }
            }
            TraceEvent::Stack(e) => {
                if let Err(problem) = doc.samples.push_stack(e) {
                    self.issue(SemanticCode::InvalidSamples, line, problem);
                }
            }
            TraceEvent::Sample(e) => {
                let span = e.span_id.as_deref().map(|x| doc.strings.intern(x));
                if let Err(problem) = doc.samples.push_sample(&e, span) {
                    doc.samples.dropped_sample_lines.push(line);
                    self.issue(SemanticCode::InvalidSamples, line, problem);
                }
            }
            TraceEvent::Site(e) => {
                let samples = &doc.samples;
                if let Err(problem) = doc.sites.push_site(e, |id| samples.stack_position(id)) {
                    self.issue(SemanticCode::InvalidSites, line, problem);
                }
            }
            TraceEvent::AllocSites(e) => {
                for problem in e.validate() {
                    self.issue(SemanticCode::InvalidSites, line, problem);
                }
                if self.doc.sites.account.is_none() {
                    self.alloc_sites_line = line;
                }
                if let Err(problem) = self.doc.sites.set_account(e) {
                    self.issue(SemanticCode::InvalidSites, line, problem);
                }
            }
            TraceEvent::Sampler(e) => {
                for problem in e.validate() {
                    self.issue(SemanticCode::InvalidSamples, line, problem);
                }
                if self.doc.samples.sampler.is_none() {
                    self.sampler_line = line;
                }
                let doc = &mut self.doc;
                if let Err(problem) = doc.samples.set_sampler(e) {
                    self.issue(SemanticCode::InvalidSamples, line, problem);
                }
            }
            TraceEvent::Terminal(mut e) => {
                if let Some(r) = e.reason.as_mut() {
                    bound(&mut [r]);
                }
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

    /// The document symbol of a chunk-local string.
    fn local(&mut self, chunk: &ParsedChunk, id: LocalId) -> Sym {
        let slot = &mut self.local[id as usize];
        match slot {
            Some(sym) => *sym,
            None => {
                let sym = self.doc.strings.intern(chunk.strings.get(id));
                *slot = Some(sym);
                sym
            }
        }
    }

    fn local_opt(&mut self, chunk: &ParsedChunk, id: Option<LocalId>) -> Option<Sym> {
        id.map(|id| self.local(chunk, id))
    }

    /// Starts pushing the items of `chunk` (resets the chunk-local symbol table).
    pub(crate) fn begin_chunk(&mut self, chunk: &ParsedChunk) {
        self.local.clear();
        self.local.resize(chunk.strings.len(), None);
    }

    /// Adds one item of `chunk` (after [`Self::begin_chunk`]) read from 1-based `line`.
    pub(crate) fn push_item(&mut self, line: u64, item: &Item, chunk: &ParsedChunk) {
        match item {
            Item::Event(e) => self.push(line, (**e).clone()),
            Item::Memory(m) => {
                self.doc.event_count += 1;
                let ids = |id: Option<LocalId>| id.map(|id| chunk.strings.get(id));
                let item = MemoryItem {
                    index: 0,
                    timestamp_ns: m.timestamp_ns,
                    bytes: m.bytes,
                    device: self.local(chunk, m.device),
                    storage: ids(m.storage),
                    tensor: ids(m.tensor),
                    span: self.local_opt(chunk, m.span),
                    op_name: self.local_opt(chunk, m.op_name),
                    shape: m.shape.map(|r| self.doc.shapes.intern(chunk.dims(r))),
                    dtype: self.local_opt(chunk, m.dtype),
                    label: self.local_opt(chunk, m.label),
                    action: m.action,
                    category: m.category,
                    category_source: m.category_source,
                    source: m.source,
                    pre_existing: m.pre_existing,
                };
                self.add_memory(item);
                self.note_site(line, m.action, m.site, m.thread);
            }
            Item::Op(o) => {
                self.doc.event_count += 1;
                let (inputs, output): (Box<[Sym]>, Option<Sym>) = match self.op_log.as_mut() {
                    Some(log) => {
                        let ids = chunk.ids(o.inputs).iter().map(|&id| chunk.strings.get(id));
                        let output = o.output.map(|id| chunk.strings.get(id));
                        if let Err(err) = log.push(ids, output) {
                            self.log_error.get_or_insert(err);
                        }
                        (Box::default(), None)
                    }
                    None => (
                        chunk
                            .ids(o.inputs)
                            .iter()
                            .map(|&id| self.local(chunk, id))
                            .collect(),
                        self.local_opt(chunk, o.output),
                    ),
                };
                let op = OpIn {
                    span: self.local(chunk, o.span),
                    op_name: self.local(chunk, o.op_name),
                    inputs,
                    output,
                    shape: chunk.dims(o.shape),
                    dtype: chunk.strings.get(o.dtype),
                    dtype_sym: self.local(chunk, o.dtype),
                    device: self.local(chunk, o.device),
                    duration_ns: o.duration_ns,
                    timestamp_ns: o.timestamp_ns,
                    output_dense_bytes: o.output_dense_bytes,
                    input_dense_bytes: o.input_dense_bytes,
                };
                self.add_op(op);
            }
            Item::SpanStart(e) => {
                self.doc.event_count += 1;
                let id = self.local(chunk, e.id);
                if self.duplicate_span(line, id) {
                    return;
                }
                let parent = self.local_opt(chunk, e.parent);
                let name = self.local(chunk, e.name);
                let module_path = self.local_opt(chunk, e.module_path);
                let instance_key = self.local_opt(chunk, e.instance_key);
                let module_kind = self.local_opt(chunk, e.module_kind);
                let forward_span = self.local_opt(chunk, e.forward_span);
                let step_index = super::records::step_index_of(e.step_index);
                self.check_step_index(e.step_index, step_index, line);
                self.add_span_start(SpanRecord {
                    id,
                    parent,
                    name,
                    kind: e.kind,
                    start_ns: e.start_ns,
                    duration_ns: None,
                    measured: e.measured,
                    pass: e.pass,
                    module_path,
                    instance_key,
                    module_kind,
                    forward_span,
                    step_index,
                    inferred: false,
                    inferred_reason: None,
                    line: line.min(u32::MAX as u64) as u32,
                });
            }
            Item::SpanEnd {
                id,
                duration_ns,
                inferred,
                inferred_reason,
            } => {
                self.doc.event_count += 1;
                let name = chunk.strings.get(*id);
                let reason = inferred_reason.map(|r| chunk.strings.get(r));
                self.add_span_end(line, name, *duration_ns, *inferred, reason);
            }
        }
    }

    /// Reports a second `span_start` of `id` (the first is kept); true when it is one.
    fn duplicate_span(&mut self, line: u64, id: Sym) -> bool {
        if !self.doc.span_index.contains(id) {
            return false;
        }
        let message = format!(
            "span id {} is started twice; the first is kept",
            self.doc.str(id)
        );
        self.issue(SemanticCode::DuplicateSpanId, line, message);
        true
    }

    fn add_span_start(&mut self, record: SpanRecord) {
        let doc = &mut self.doc;
        doc.span_index.insert(record.id, doc.spans.len() as u32);
        let start = record.start_ns;
        doc.spans.push(record);
        self.evidence(start);
    }

    /// Closes span `id_text` (its `span_end` on `line`): its duration and, when Candle's order
    /// made its extent uncertain, `inferred` with the reason.
    fn add_span_end(
        &mut self,
        line: u64,
        id_text: &str,
        duration_ns: u64,
        inferred: bool,
        inferred_reason: Option<&str>,
    ) {
        let doc = &self.doc;
        let Some((id, index)) = doc
            .strings
            .get(id_text)
            .and_then(|id| doc.span_index.get(id).map(|i| (id, i)))
        else {
            self.issue(
                SemanticCode::UnknownSpanEnd,
                line,
                format!("span_end for unknown span {id_text}"),
            );
            return;
        };
        if let Some(first) = self.span_end_seen.get(&id) {
            let message = format!("span {id_text} is closed twice (first on line {first})");
            self.issue(SemanticCode::RepeatedSpanEnd, line, message);
            return;
        }
        self.span_end_seen.insert(id, line);
        let reason = inferred_reason.map(|r| self.doc.strings.intern(r));
        let span = &mut self.doc.spans[index as usize];
        span.duration_ns = Some(duration_ns);
        span.inferred = inferred;
        span.inferred_reason = reason;
        let end = span.start_ns.saturating_add(duration_ns);
        self.evidence(end);
    }

    fn add_op(&mut self, e: OpIn<'_>) {
        let doc = &mut self.doc;
        let output_dense_bytes = e
            .output_dense_bytes
            .or_else(|| dense_bytes(e.shape, e.dtype));
        let record = OpRecord {
            span: e.span,
            op_name: e.op_name,
            inputs: e.inputs,
            output: e.output,
            shape: doc.shapes.intern(e.shape),
            dtype: e.dtype_sym,
            device: e.device,
            duration_ns: e.duration_ns,
            timestamp_ns: e.timestamp_ns,
            output_dense_bytes,
            input_dense_bytes: e.input_dense_bytes,
        };
        doc.ops.push(record);
        self.evidence(e.timestamp_ns.saturating_add(e.duration_ns));
    }

    /// Number of memory events added so far (the next one's index).
    fn memory_count(&self) -> usize {
        match &self.memory_log {
            Some(log) => log.len(),
            None => self.doc.memory.len(),
        }
    }

    /// After [`Self::add_memory`]: notes the event's site (trace/13) for resolution at the
    /// end; a site on a free event is an issue and is dropped.
    fn note_site(
        &mut self,
        line: u64,
        action: MemoryAction,
        site: Option<u32>,
        thread: Option<u64>,
    ) {
        let Some(site) = site else { return };
        if action == MemoryAction::Free {
            let message =
                format!("a free event names site {site}; sites belong to allocs (dropped)");
            self.issue(SemanticCode::InvalidSites, line, message);
            return;
        }
        if thread.is_none() {
            let message = format!(
                "an alloc names site {site} but no thread: its op is named, its call is not \
                 counted or clocked"
            );
            self.issue(SemanticCode::InvalidSites, line, message);
        }
        let Some(index) = self.memory_count().checked_sub(1) else {
            return;
        };
        let Ok(index) = u32::try_from(index) else {
            let message = "more than 2^32 memory events: the site is dropped".to_string();
            self.issue(SemanticCode::InvalidSites, line, message);
            return;
        };
        self.doc.sites.push_pending(index, site, thread, line);
    }

    /// Adds a memory event (`index` is ignored: events are numbered in the order added).
    fn add_memory(&mut self, e: MemoryItem<'_>) {
        self.evidence(e.timestamp_ns);
        if let Some(log) = self.memory_log.as_mut() {
            if self.log_error.is_none() {
                if let Err(err) = log.push(&e) {
                    self.log_error = Some(err);
                }
            }
            return;
        }
        let doc = &mut self.doc;
        let storage = e.storage.map(|x| doc.strings.intern(x));
        let tensor = e.tensor.map(|x| doc.strings.intern(x));
        let record = MemoryRecord {
            timestamp_ns: e.timestamp_ns,
            bytes: e.bytes,
            device: e.device,
            storage,
            tensor,
            span: e.span,
            op_name: e.op_name,
            shape: e.shape,
            dtype: e.dtype,
            label: e.label,
            action: e.action,
            category: e.category,
            category_source: e.category_source,
            source: e.source,
            pre_existing: e.pre_existing,
        };
        doc.memory.push(record);
    }

    /// Finishes the document. `partial_line` is `(line, bytes)` of a dropped partial last line.
    pub fn finish(self, partial_line: Option<(u64, u64)>) -> TraceDocument {
        // Only a spilled builder (crate-internal) can fail, and the loader calls `finish_io`.
        self.finish_io(partial_line)
            .expect("an in-memory document cannot fail to finish")
    }

    /// [`Self::finish`], reporting I/O errors of the memory log.
    pub(crate) fn finish_io(
        mut self,
        partial_line: Option<(u64, u64)>,
    ) -> std::io::Result<TraceDocument> {
        if let Some(err) = self.log_error.take() {
            return Err(err);
        }
        if let Some(log) = self.memory_log.take() {
            self.doc.memory_log = Some(std::sync::Arc::new(log.finish()?));
        }
        if let Some(log) = self.op_log.take() {
            self.doc.op_tensor_log = Some(std::sync::Arc::new(log.finish()?));
        }
        for problem in self.doc.samples.check_against_sampler() {
            let line = self.sampler_line;
            self.issue(SemanticCode::InvalidSamples, line, problem);
        }
        let account_line = self.alloc_sites_line;
        // Nothing below adds a terminal: the truncation at the end is known here already.
        let terminal_missing = self.doc.version.has_terminal() && self.doc.terminal.is_none();
        let cut_short = partial_line.is_some() || terminal_missing;
        for (line, problem) in self.doc.sites.resolve(account_line, cut_short) {
            self.issue(SemanticCode::InvalidSites, line, problem);
        }
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
        doc.samples.shrink_to_fit();
        doc.sites.shrink_to_fit();
        doc.semantic_issues.shrink_to_fit();
        doc.span_index.shrink_to_fit();
        if cut_short {
            self.doc.truncation = Some(Truncation {
                partial_line: partial_line.map(|(line, _)| line),
                dropped_bytes: partial_line.map_or(0, |(_, bytes)| bytes),
                terminal_missing,
            });
        }
        Ok(self.doc)
    }
}

/// The strings of an event the document keeps as written (not interned), held bounded as
/// interned ones are ([`crate::intern::bounded`]).
fn bound(fields: &mut [&mut String]) {
    for f in fields {
        if f.len() > crate::intern::MAX_STRING_BYTES {
            **f = crate::intern::bounded(f).into_owned();
        }
    }
}
