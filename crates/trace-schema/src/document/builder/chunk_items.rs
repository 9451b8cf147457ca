//! [`TraceBuilder::push_item`]: the loader's parsed chunk items (the fast path's memory, op and
//! span records, with chunk-local strings) added to the document.

use super::{OpIn, TraceBuilder};
use crate::chunk::{Item, LocalId, ParsedChunk};
use crate::document::records::{step_index_of, SpanRecord};
use crate::document::spill::MemoryItem;
use crate::intern::Sym;

impl TraceBuilder {
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
                let step_index = step_index_of(e.step_index);
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
}
