//! The loaded trace: a compact, interned [`TraceDocument`] assembled by [`TraceBuilder`].
//!
//! The builder never fails: the original tool's semantic rules (duplicate span ids, unknown or
//! repeated `span_end`, terminal/reason rules, terminal before evidence, tensor_stats rules,
//! gradient state/norm, meta and contract validation) become [`SemanticIssue`]s kept in the
//! document, so a broken trace still gets a health report and a memory profile.
//!
//! Modules: [`records`] (the compact per-event records), [`semantic`] (rule codes and checks),
//! [`builder`] (assembly).

pub mod builder;
pub mod op_tensors;
mod pipeline;
pub use pipeline::PIPELINE_MIN_EVENTS;
pub mod records;
pub mod samples;
pub mod semantic;
pub mod sites;
pub mod spill;

pub use builder::TraceBuilder;
pub use op_tensors::OpTensorLog;
pub use records::*;
pub use samples::{SampleRecord, SampleTable, StackRecord};
pub use semantic::{SemanticCode, SemanticIssue, Truncation};
pub use sites::{SiteRecord, SiteTable, StorageSite};
pub use spill::{MemoryItem, MemoryLog, MemoryOrder};

use crate::event::*;
use crate::intern::{Interner, ShapeId, ShapeTable, Sym};
use crate::meta::RunMeta;
use crate::version::SchemaVersion;

/// Each span id's position in [`TraceDocument::spans`], in a table indexed by the id's
/// [`Sym::index`] (a lookup per memory event reads one slot, where a hash map of 10^6 spans
/// missed the cache on every event); `u32::MAX` marks a string that is no span's id. O(number of
/// strings up to the last span id) memory, 4 bytes each.
#[derive(Debug, Clone, Default)]
pub(crate) struct SpanSlots(Vec<u32>);

impl SpanSlots {
    const NONE: u32 = u32::MAX;

    pub(crate) fn get(&self, id: Sym) -> Option<u32> {
        self.0.get(id.index()).copied().filter(|&i| i != Self::NONE)
    }

    pub(crate) fn contains(&self, id: Sym) -> bool {
        self.get(id).is_some()
    }

    /// Sets `id`'s position (a position of `u32::MAX` or more is not kept: no trace has that many
    /// spans in memory).
    pub(crate) fn insert(&mut self, id: Sym, position: u32) {
        let at = id.index();
        if self.0.len() <= at {
            self.0.resize(at + 1, Self::NONE);
        }
        self.0[at] = position;
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }
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
    /// Operations in file order. In a spilled document ([`crate::LoadOptions::spill_memory`])
    /// their `inputs` are empty and `output` is `None`: the tensor ids are in an
    /// [`OpTensorLog`]; read them with [`TraceDocument::for_each_op_tensors`] (both kinds).
    pub ops: Vec<OpRecord>,
    /// Tensor facts in file order.
    pub tensors: Vec<TensorRecord>,
    /// Tensor statistics in file order.
    pub tensor_stats: Vec<TensorStatsEvent>,
    /// Memory events in file order; empty when the document keeps them in a [`MemoryLog`]
    /// instead (loaded with [`crate::LoadOptions::spill_memory`]): read them with
    /// [`TraceDocument::for_each_memory`] and count them with [`TraceDocument::memory_len`],
    /// which serve both.
    pub memory: Vec<MemoryRecord>,
    /// Device memory samples in file order.
    pub device_memory: Vec<DeviceMemoryRecord>,
    /// Device intervals in file order.
    pub device_intervals: Vec<DeviceIntervalEvent>,
    /// Gradient facts in file order.
    pub gradients: Vec<GradientEvent>,
    /// Explicit edges in file order.
    pub edges: Vec<EdgeRecord>,
    /// Sampled call stacks (trace/12): symbol table, stacks, samples, the sampler's account.
    pub samples: SampleTable,
    /// Allocation sites (trace/13): the site table (stacks in [`Self::samples`]), the
    /// capture's account and each alloc event's site.
    pub sites: SiteTable,
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
    span_index: SpanSlots,
    /// Time of the body `dropped_events` report that set `dropped_events` (if any).
    dropped_events_ns: Option<u64>,
    /// The memory events, when kept out of `memory`.
    memory_log: Option<std::sync::Arc<MemoryLog>>,
    /// The ops' tensor ids, when kept out of `ops`.
    op_tensor_log: Option<std::sync::Arc<OpTensorLog>>,
    /// The replay order of `memory` when it is not its file order, sorted by the first pass
    /// in replay order and read by the later ones (an analysis makes several).
    replay_order: ReplayOrder,
}

/// The replay order of an in-memory document's memory events (indices into `memory`, stably
/// sorted by timestamp), with the timestamps it was sorted from: a document whose `memory` was
/// changed since (its fields are public) sorts again.
#[derive(Debug, Clone, Default)]
struct ReplayOrder(std::sync::Arc<std::sync::Mutex<Option<ReplayPermutation>>>);

#[derive(Debug)]
struct ReplayPermutation {
    order: std::sync::Arc<[u32]>,
    timestamps: Vec<u64>,
}

impl ReplayOrder {
    /// The replay order of `memory`, `None` when it is the file order.
    fn of(&self, memory: &[MemoryRecord]) -> Option<std::sync::Arc<[u32]>> {
        let same = |p: &ReplayPermutation| {
            p.timestamps.len() == memory.len()
                && p.timestamps
                    .iter()
                    .zip(memory)
                    .all(|(&t, m)| t == m.timestamp_ns)
        };
        if let Ok(cached) = self.0.lock() {
            if let Some(p) = cached.as_ref().filter(|p| same(p)) {
                return Some(p.order.clone());
            }
        }
        if memory
            .windows(2)
            .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns)
        {
            return None;
        }
        let mut order: Vec<u32> = (0..memory.len() as u32).collect();
        order.sort_by_key(|&i| memory[i as usize].timestamp_ns);
        let order: std::sync::Arc<[u32]> = order.into();
        if let Ok(mut cached) = self.0.lock() {
            *cached = Some(ReplayPermutation {
                order: order.clone(),
                timestamps: memory.iter().map(|m| m.timestamp_ns).collect(),
            });
        }
        Some(order)
    }
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
        self.span_index.get(id).map(|i| i as usize)
    }

    /// The span with this id.
    pub fn span(&self, id: Sym) -> Option<&SpanRecord> {
        self.span_index(id).map(|i| &self.spans[i])
    }

    /// Number of memory events (in `memory` or in the memory log).
    pub fn memory_len(&self) -> usize {
        match &self.memory_log {
            Some(log) => log.len(),
            None => self.memory.len(),
        }
    }

    /// True when the memory events are kept in a [`MemoryLog`] rather than in `memory`.
    pub fn memory_spilled(&self) -> bool {
        self.memory_log.is_some()
    }

    /// The memory log of a spilled document.
    pub fn memory_log(&self) -> Option<&MemoryLog> {
        self.memory_log.as_deref()
    }

    /// Calls `f` on every memory event in `order`, whether the document holds them in `memory`
    /// or in a memory log. [`MemoryOrder::Replay`] sorts (stably) by timestamp: O(n log n) for
    /// an in-memory document, O(n) passes over the log's sorted runs for a spilled one.
    ///
    /// # Errors
    /// I/O errors reading a spilled log back (never for an in-memory document).
    pub fn try_for_each_memory(
        &self,
        order: MemoryOrder,
        mut f: impl FnMut(&MemoryItem<'_>),
    ) -> std::io::Result<()> {
        if let Some(log) = &self.memory_log {
            return log.for_each(order, f);
        }
        let item = |i: usize| {
            let m = &self.memory[i];
            MemoryItem {
                index: i as u32,
                timestamp_ns: m.timestamp_ns,
                bytes: m.bytes,
                device: m.device,
                storage: m.storage.map(|s| self.str(s)),
                tensor: m.tensor.map(|s| self.str(s)),
                span: m.span,
                op_name: m.op_name,
                shape: m.shape,
                dtype: m.dtype,
                label: m.label,
                action: m.action,
                category: m.category,
                category_source: m.category_source,
                source: m.source,
                pre_existing: m.pre_existing,
            }
        };
        let replay = match order {
            MemoryOrder::File => None,
            MemoryOrder::Replay => self.replay_order.of(&self.memory),
        };
        match replay {
            None => (0..self.memory.len()).for_each(|i| f(&item(i))),
            Some(order) => order.iter().for_each(|&i| f(&item(i as usize))),
        }
        Ok(())
    }

    /// [`Self::try_for_each_memory`] for analyses, which cannot fail: an I/O error reading a
    /// spilled log back (the temporary file vanished or the disk failed) panics with its cause.
    pub fn for_each_memory(&self, order: MemoryOrder, f: impl FnMut(&MemoryItem<'_>)) {
        if let Err(e) = self.try_for_each_memory(order, f) {
            panic!("cannot read the spilled memory events back: {e}");
        }
    }

    /// [`Self::for_each_memory`] for one long pass: a spilled log of at least
    /// [`PIPELINE_MIN_EVENTS`] events is read and decoded on a second thread while `f` runs on
    /// this one, when the machine has more than one core. `f` sees the same events in the same
    /// order either way.
    ///
    /// # Panics
    /// As [`Self::for_each_memory`].
    pub fn for_each_memory_pipelined(&self, order: MemoryOrder, f: impl FnMut(&MemoryItem<'_>)) {
        let spare_core = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        let result = match &self.memory_log {
            Some(log) if spare_core && log.len() >= PIPELINE_MIN_EVENTS => {
                pipeline::for_each_pipelined(log, order, f)
            }
            _ => self.try_for_each_memory(order, f),
        };
        if let Err(e) = result {
            panic!("cannot read the spilled memory events back: {e}");
        }
    }

    /// True when the ops' tensor ids are kept in an [`OpTensorLog`] rather than in `ops`.
    pub fn op_tensors_spilled(&self) -> bool {
        self.op_tensor_log.is_some()
    }

    /// Calls `f(op index, inputs, output)` for every op in file order, whether the tensor ids
    /// are in `ops` or in the op tensor log.
    ///
    /// # Panics
    /// When a spilled log cannot be read back (the temporary file vanished or the disk failed).
    pub fn for_each_op_tensors(&self, mut f: impl FnMut(usize, &[&str], Option<&str>)) {
        if let Some(log) = &self.op_tensor_log {
            if let Err(e) = log.for_each(f) {
                panic!("cannot read the spilled op tensor ids back: {e}");
            }
            return;
        }
        let mut inputs: Vec<&str> = Vec::new();
        for (i, op) in self.ops.iter().enumerate() {
            inputs.clear();
            inputs.extend(op.inputs.iter().map(|&s| self.str(s)));
            f(i, &inputs, op.output.map(|s| self.str(s)));
        }
    }

    /// This document with its ops' tensor ids back in `ops` (interned): itself when they are
    /// there already.
    pub fn with_op_tensors(&self) -> std::borrow::Cow<'_, TraceDocument> {
        if self.op_tensor_log.is_none() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut doc = self.clone();
        doc.op_tensor_log = None;
        self.for_each_op_tensors(|i, inputs, output| {
            let op = &mut doc.ops[i];
            op.inputs = inputs.iter().map(|s| doc.strings.intern(s)).collect();
            op.output = output.map(|s| doc.strings.intern(s));
        });
        std::borrow::Cow::Owned(doc)
    }

    /// Time of the earliest memory event.
    pub fn first_memory_ns(&self) -> Option<u64> {
        let mut first: Option<u64> = None;
        self.for_each_memory(MemoryOrder::File, |m| {
            first = Some(first.map_or(m.timestamp_ns, |f| f.min(m.timestamp_ns)));
        });
        first
    }

    /// True when the trace was cut short (partial last line, or no terminal in a version that
    /// has one).
    pub fn is_truncated(&self) -> bool {
        self.truncation.is_some()
    }

    /// The capture contract as it stands at the end of the capture: the meta's contract with
    /// every field the terminal's `coverage_lost` names lowered to at most `partial`, the
    /// terminal's reason appended to the field's reason. `None` without a contract in the meta.
    pub fn effective_contract(&self) -> Option<crate::meta::CaptureContract> {
        let mut contract = self.meta.capture_contract.clone()?;
        let Some(terminal) = &self.terminal else {
            return Some(contract);
        };
        for (key, why) in &terminal.coverage_lost {
            if let Some(field) = key.field() {
                contract.lower_to_partial(field);
            }
            let reason = match contract.reasons.get(key) {
                Some(declared) => format!("{declared}; {why}"),
                None => why.clone(),
            };
            contract.reasons.insert(key.clone(), reason);
        }
        Some(contract)
    }

    /// Assembles a document from events (no line numbers: events are numbered from 1).
    pub fn from_events(events: impl IntoIterator<Item = TraceEvent>) -> Self {
        let mut builder = TraceBuilder::new(crate::version::WRITE_VERSION);
        for (i, event) in events.into_iter().enumerate() {
            builder.push(i as u64 + 1, event);
        }
        builder.finish(None)
    }

    /// The schema [`Self::to_events`] writes: [`crate::version::WRITE_VERSION`], or trace/13
    /// when the document holds allocation sites (their events need it).
    pub fn write_version(&self) -> SchemaVersion {
        let v = crate::version::WRITE_VERSION;
        if self.sites.is_empty() {
            v
        } else {
            v.max(SchemaVersion::V13)
        }
    }
}

// ---- writing the document back as events -------------------------------------------------

impl TraceDocument {
    /// Writes the document back as events (schema [`Self::write_version`]): meta, spans (start
    /// then end, by start line), ops, tensors, tensor_stats, memory (with their sites),
    /// device_memory, device_intervals, gradients, edges, frames, stacks, sites, the
    /// `alloc_sites` account, samples, the sampler, a
    /// `dropped_events` report when a body event set the count and the terminal does not repeat
    /// it, terminal. O(n).
    pub fn to_events(&self) -> Vec<TraceEvent> {
        let mut out = Vec::with_capacity(self.event_count as usize + 1);
        out.push(TraceEvent::Meta(MetaEvent {
            schema: self.write_version().as_str().to_string(),
            run: self.meta.clone(),
        }));
        self.spans_to_events(&mut out);
        self.ops_to_events(&mut out);
        self.tensors_to_events(&mut out);
        self.memory_to_events(&mut out);
        self.edges_to_events(&mut out);
        self.samples_to_events(&mut out);
        self.end_to_events(&mut out);
        out
    }

    /// [`TraceDocument::to_events`]: spans (start then end, by start line).
    fn spans_to_events(&self, out: &mut Vec<TraceEvent>) {
        let s = |sym: Sym| self.str(sym).to_string();
        let o = |sym: Option<Sym>| sym.map(|x| self.str(x).to_string());
        for span in &self.spans {
            out.push(TraceEvent::SpanStart(SpanStartEvent {
                id: s(span.id),
                parent_id: o(span.parent),
                name: s(span.name),
                start_ns: span.start_ns,
                span_kind: span.kind,
                measured: span.measured,
                step: span.pass,
                module_path: o(span.module_path),
                instance_key: o(span.instance_key),
                module_kind: o(span.module_kind),
                forward_span_id: o(span.forward_span),
                step_index: span.step_index.map(|n| u64::from(n.get())),
            }));
            if let Some(duration_ns) = span.duration_ns {
                out.push(TraceEvent::SpanEnd(SpanEndEvent {
                    id: s(span.id),
                    duration_ns,
                    inferred: span.inferred,
                    inferred_reason: o(span.inferred_reason),
                }));
            }
        }
    }

    /// [`TraceDocument::to_events`]: ops, with their tensor ids.
    fn ops_to_events(&self, out: &mut Vec<TraceEvent>) {
        let s = |sym: Sym| self.str(sym).to_string();
        let mut tensors: Vec<(Vec<String>, Option<String>)> = Vec::with_capacity(self.ops.len());
        self.for_each_op_tensors(|_, inputs, output| {
            tensors.push((
                inputs.iter().map(|x| x.to_string()).collect(),
                output.map(str::to_string),
            ));
        });
        for (op, (inputs, output)) in self.ops.iter().zip(tensors) {
            out.push(TraceEvent::Op(OpEvent {
                span_id: s(op.span),
                op_name: s(op.op_name),
                inputs,
                output,
                shape: self.shape(op.shape).to_vec(),
                dtype: s(op.dtype),
                device: s(op.device),
                duration_ns: op.duration_ns,
                timestamp_ns: op.timestamp_ns,
                output_dense_bytes: op.output_dense_bytes,
                input_dense_bytes: op.input_dense_bytes,
            }));
        }
    }

    /// [`TraceDocument::to_events`]: tensors and tensor_stats.
    fn tensors_to_events(&self, out: &mut Vec<TraceEvent>) {
        let s = |sym: Sym| self.str(sym).to_string();
        let o = |sym: Option<Sym>| sym.map(|x| self.str(x).to_string());
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
    }

    /// [`TraceDocument::to_events`]: memory (with their sites), device_memory, device_intervals, gradients.
    fn memory_to_events(&self, out: &mut Vec<TraceEvent>) {
        let s = |sym: Sym| self.str(sym).to_string();
        let o = |sym: Option<Sym>| sym.map(|x| self.str(x).to_string());
        self.for_each_memory(MemoryOrder::File, |m| {
            out.push(TraceEvent::Memory(MemoryEvent {
                timestamp_ns: m.timestamp_ns,
                action: m.action,
                device: s(m.device),
                storage_id: m.storage.map(str::to_string),
                bytes: m.bytes,
                logical_bytes: None,
                tensor_id: m.tensor.map(str::to_string),
                span_id: o(m.span),
                op_name: o(m.op_name),
                shape: m.shape.map(|id| self.shape(id).to_vec()),
                dtype: o(m.dtype),
                category: m.category,
                category_source: m.category_source,
                source: m.source,
                pre_existing: m.pre_existing,
                label: o(m.label),
                site: self
                    .sites
                    .of_memory(m.index)
                    .map(|x| self.sites.sites[x.site as usize].id),
                thread: self.sites.of_memory(m.index).and_then(|x| x.thread),
            }));
        });
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
    }

    /// [`TraceDocument::to_events`]: edges.
    fn edges_to_events(&self, out: &mut Vec<TraceEvent>) {
        let s = |sym: Sym| self.str(sym).to_string();
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
    }

    /// [`TraceDocument::to_events`]: frames, stacks, sites, the `alloc_sites` account, samples, the sampler.
    fn samples_to_events(&self, out: &mut Vec<TraceEvent>) {
        let o = |sym: Option<Sym>| sym.map(|x| self.str(x).to_string());
        let t = &self.samples;
        for f in &t.frames {
            out.push(TraceEvent::Frame(f.clone()));
        }
        for stack in &t.stacks {
            out.push(TraceEvent::Stack(StackEvent {
                id: stack.id,
                frames: stack
                    .frames
                    .iter()
                    .map(|&i| t.frames[i as usize].id)
                    .collect(),
            }));
        }
        for site in &self.sites.sites {
            out.push(TraceEvent::Site(SiteEvent {
                id: site.id,
                stack_id: t.stacks[site.stack as usize].id,
            }));
        }
        if let Some(account) = &self.sites.account {
            out.push(TraceEvent::AllocSites(account.clone()));
        }
        for sample in &t.samples {
            out.push(TraceEvent::Sample(SampleEvent {
                timestamp_ns: sample.timestamp_ns,
                thread: sample.thread,
                stack_id: t.stacks[sample.stack as usize].id,
                span_id: o(sample.span),
            }));
        }
        if let Some(sampler) = &t.sampler {
            out.push(TraceEvent::Sampler(sampler.clone()));
        }
    }

    /// [`TraceDocument::to_events`]: a `dropped_events` report when a body event set the count and the terminal does not
    /// repeat it, then the terminal.
    fn end_to_events(&self, out: &mut Vec<TraceEvent>) {
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
    }
}

#[cfg(test)]
mod tests {
    use crate::{load_str, MemoryOrder};

    const OUT_OF_ORDER: &str = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}
{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"A","bytes":1}
{"kind":"memory","timestamp_ns":3,"action":"alloc","device":"cpu","storage_id":"B","bytes":2}
{"kind":"memory","timestamp_ns":5,"action":"free","device":"cpu","storage_id":"B"}
{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"C","bytes":3}
{"kind":"terminal","outcome":"complete","timestamp_ns":9}
"#;

    fn replay(doc: &super::TraceDocument) -> Vec<u32> {
        let mut out = Vec::new();
        doc.for_each_memory(MemoryOrder::Replay, |m| out.push(m.index));
        out
    }

    #[test]
    fn the_replay_order_is_sorted_once_and_follows_changes() {
        let mut doc = load_str(OUT_OF_ORDER).unwrap();
        assert!(!doc.memory_spilled());
        assert_eq!(replay(&doc), [3, 1, 0, 2]);
        // the second pass reads the kept order
        assert_eq!(replay(&doc), [3, 1, 0, 2]);
        // a clone shares it; a changed timestamp sorts again
        let clone = doc.clone();
        doc.memory[3].timestamp_ns = 7;
        assert_eq!(replay(&doc), [1, 0, 2, 3]);
        assert_eq!(replay(&clone), [3, 1, 0, 2]);
        // in time order: the file order
        doc.memory[0].timestamp_ns = 2;
        doc.memory[1].timestamp_ns = 3;
        assert_eq!(replay(&doc), [0, 1, 2, 3]);
        let mut file = Vec::new();
        doc.for_each_memory(MemoryOrder::File, |m| file.push(m.index));
        assert_eq!(file, [0, 1, 2, 3]);
    }
}
