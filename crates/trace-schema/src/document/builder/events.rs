//! [`TraceBuilder::push`]'s arms: one function per event kind, each turning the wire event into
//! the document's record (strings interned or bounded) and its semantic issues.

use super::{bound, OpIn, TraceBuilder};
use crate::document::records::{
    step_index_of, DeviceMemoryRecord, EdgeRecord, SpanRecord, TensorRecord,
};
use crate::document::semantic::{gradient_issue, meta_issues, terminal_reason_issue};
use crate::document::spill::MemoryItem;
use crate::document::SemanticCode;
use crate::dtype::dense_bytes;
use crate::event::*;
use crate::version::SchemaVersion;

impl TraceBuilder {
    pub(super) fn push_meta(&mut self, line: u64, meta: MetaEvent) {
        let doc = &mut self.doc;
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

    pub(super) fn push_span_start(&mut self, line: u64, e: SpanStartEvent) {
        let id = self.doc.strings.intern(&e.id);
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
            step_index: step_index_of(e.step_index),
            inferred: false,
            inferred_reason: None,
            line: line.min(u32::MAX as u64) as u32,
        };
        self.check_step_index(e.step_index, record.step_index, line);
        self.add_span_start(record);
    }

    pub(super) fn push_op(&mut self, e: OpEvent) {
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

    pub(super) fn push_tensor(&mut self, e: TensorEvent) {
        let doc = &mut self.doc;
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

    pub(super) fn push_tensor_stats(&mut self, line: u64, mut e: TensorStatsEvent) {
        bound(&mut [&mut e.span_id, &mut e.label, &mut e.dtype]);
        let problems = e.validate();
        self.doc.tensor_stats.push(e);
        for p in problems {
            self.issue(SemanticCode::InvalidTensorStats, line, p);
        }
    }

    pub(super) fn push_memory(&mut self, line: u64, e: MemoryEvent) {
        let doc = &mut self.doc;
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

    pub(super) fn push_device_memory(&mut self, e: DeviceMemoryEvent) {
        let doc = &mut self.doc;
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

    pub(super) fn push_device_interval(&mut self, mut e: DeviceIntervalEvent) {
        bound(&mut [
            &mut e.span_id,
            &mut e.device,
            &mut e.stream_id,
            &mut e.clock_id,
            &mut e.backend,
        ]);
        self.doc.device_intervals.push(e)
    }

    pub(super) fn push_gradient(&mut self, line: u64, mut e: GradientEvent) {
        bound(&mut [&mut e.event_id, &mut e.root, &mut e.key]);
        if let Some(t) = e.tensor_id.as_mut() {
            bound(&mut [t]);
        }
        let problem = gradient_issue(&e);
        self.doc.gradients.push(e);
        if let Some((code, message)) = problem {
            self.issue(code, line, message);
        }
    }

    pub(super) fn push_edge(&mut self, e: EdgeEvent) {
        let doc = &mut self.doc;
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

    pub(super) fn push_dropped_events(&mut self, e: DroppedEventsEvent) {
        let doc = &mut self.doc;
        if doc.dropped_events.is_none_or(|d| e.dropped_events >= d) {
            doc.dropped_events = Some(e.dropped_events);
            doc.dropped_events_ns = Some(e.timestamp_ns);
        }
    }

    pub(super) fn push_frame(&mut self, line: u64, mut e: FrameEvent) {
        crate::document::samples::blank_is_unnamed(&mut e);
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
        if let Err(problem) = self.doc.samples.push_frame(e) {
            self.issue(SemanticCode::InvalidSamples, line, problem);
        }
    }

    pub(super) fn push_stack(&mut self, line: u64, e: StackEvent) {
        if let Err(problem) = self.doc.samples.push_stack(e) {
            self.issue(SemanticCode::InvalidSamples, line, problem);
        }
    }

    pub(super) fn push_sample(&mut self, line: u64, e: SampleEvent) {
        let doc = &mut self.doc;
        let span = e.span_id.as_deref().map(|x| doc.strings.intern(x));
        if let Err(problem) = doc.samples.push_sample(&e, span) {
            doc.samples.dropped_sample_lines.push(line);
            self.issue(SemanticCode::InvalidSamples, line, problem);
        }
    }

    pub(super) fn push_site(&mut self, line: u64, e: SiteEvent) {
        let doc = &mut self.doc;
        let samples = &doc.samples;
        if let Err(problem) = doc.sites.push_site(e, |id| samples.stack_position(id)) {
            self.issue(SemanticCode::InvalidSites, line, problem);
        }
    }

    pub(super) fn push_alloc_sites(&mut self, line: u64, e: AllocSitesEvent) {
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

    pub(super) fn push_sampler(&mut self, line: u64, e: SamplerEvent) {
        for problem in e.validate() {
            self.issue(SemanticCode::InvalidSamples, line, problem);
        }
        if self.doc.samples.sampler.is_none() {
            self.sampler_line = line;
        }
        if let Err(problem) = self.doc.samples.set_sampler(e) {
            self.issue(SemanticCode::InvalidSamples, line, problem);
        }
    }

    pub(super) fn push_terminal(&mut self, line: u64, mut e: TerminalEvent) {
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
