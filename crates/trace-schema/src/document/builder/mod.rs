//! [`TraceBuilder`]: assembles a [`TraceDocument`] event by event, never failing (broken rules
//! become [`SemanticIssue`]s, see [`super::semantic`]).

use rustc_hash::FxHashMap as HashMap;

mod chunk_items;
mod events;

use super::op_tensors::OpTensorLogWriter;
use super::records::*;
use super::spill::{MemoryItem, MemoryLogWriter};
use super::{SemanticCode, SemanticIssue, TraceDocument, Truncation};
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
                replay_order: Default::default(),
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

    /// Adds one event read from 1-based `line` (each kind's record and issues: `events.rs`).
    pub fn push(&mut self, line: u64, event: TraceEvent) {
        self.doc.event_count += 1;
        match event {
            TraceEvent::Meta(e) => self.push_meta(line, e),
            TraceEvent::SpanStart(e) => self.push_span_start(line, e),
            TraceEvent::SpanEnd(e) => self.add_span_end(
                line,
                &e.id,
                e.duration_ns,
                e.inferred,
                e.inferred_reason.as_deref(),
            ),
            TraceEvent::Op(e) => self.push_op(e),
            TraceEvent::Tensor(e) => self.push_tensor(e),
            TraceEvent::TensorStats(e) => self.push_tensor_stats(line, e),
            TraceEvent::Memory(e) => self.push_memory(line, e),
            TraceEvent::DeviceMemory(e) => self.push_device_memory(e),
            TraceEvent::DeviceInterval(e) => self.push_device_interval(e),
            TraceEvent::Gradient(e) => self.push_gradient(line, e),
            TraceEvent::Edge(e) => self.push_edge(e),
            TraceEvent::DroppedEvents(e) => self.push_dropped_events(e),
            TraceEvent::Frame(e) => self.push_frame(line, e),
            TraceEvent::Stack(e) => self.push_stack(line, e),
            TraceEvent::Sample(e) => self.push_sample(line, e),
            TraceEvent::Site(e) => self.push_site(line, e),
            TraceEvent::AllocSites(e) => self.push_alloc_sites(line, e),
            TraceEvent::Sampler(e) => self.push_sampler(line, e),
            TraceEvent::Terminal(e) => self.push_terminal(line, e),
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
