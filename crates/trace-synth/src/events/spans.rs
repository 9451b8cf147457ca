//! Opening and closing spans, the device samples at span starts and the ops inside them.

use trace_schema::*;

use super::*;

impl SynthEvents {
    pub(super) fn open_span(
        &mut self,
        name: String,
        kind: SpanKind,
        depth: u32,
        step: Option<Pass>,
        module_path: Option<String>,
        role: SpanRole,
    ) -> u64 {
        let id = self.next_span;
        self.next_span += 1;
        let start_ns = self.tick(200);
        let parent_id = self.stack.last().map(|s| format!("s{}", s.id));
        let instance_key = module_path.as_ref().map(|_| {
            let k = self.next_instance;
            self.next_instance += 1;
            format!("m{k}")
        });
        self.queue.push_back(TraceEvent::SpanStart(SpanStartEvent {
            id: format!("s{id}"),
            parent_id,
            name,
            start_ns,
            span_kind: kind,
            measured: role == SpanRole::Root,
            step,
            module_path,
            instance_key,
            module_kind: None,
            forward_span_id: None,
            step_index: match role {
                SpanRole::Step(n) => Some(n),
                _ => None,
            },
        }));
        self.stack.push(OpenSpan {
            id,
            depth,
            start_ns,
        });
        self.after_span_start();
        id
    }

    pub(super) fn close_span(&mut self) {
        if let Some(span) = self.stack.pop() {
            let end = self.tick(200);
            self.queue.push_back(TraceEvent::SpanEnd(SpanEndEvent {
                id: format!("s{}", span.id),
                duration_ns: end - span.start_ns,
                inferred: false,
                inferred_reason: None,
            }));
        }
    }

    pub(super) fn current_span(&self) -> String {
        format!("s{}", self.stack.last().map_or(1, |s| s.id))
    }

    /// Emits the device sample(s) due after this span start (spread over all span starts).
    pub(super) fn after_span_start(&mut self) {
        self.span_starts += 1;
        let total_spans = self.config.spans_generated();
        let due = if self.span_starts >= total_spans {
            self.config.device_memory_samples
        } else {
            (self.config.device_memory_samples as u128 * self.span_starts as u128
                / total_spans as u128) as u64
        };
        while self.samples_emitted < due {
            let d = (self.samples_emitted % self.devices.len() as u64) as usize;
            self.samples_emitted += 1;
            let used = self.live_bytes[d] + HOST_OVERHEAD_BYTES;
            let host = self.devices[d] == "cpu";
            let timestamp_ns = self.tick(50);
            self.queue
                .push_back(TraceEvent::DeviceMemory(DeviceMemoryEvent {
                    timestamp_ns,
                    device: self.devices[d].clone(),
                    used_bytes: Some(used),
                    free_bytes: (!host).then(|| CAPACITY_BYTES.saturating_sub(used)),
                    reserved_bytes: (!host).then(|| used.next_power_of_two()),
                    capacity_bytes: (!host).then_some(CAPACITY_BYTES),
                    resident_bytes: host.then(|| used + (32 << 20)),
                }));
        }
    }

    // ---- memory ------------------------------------------------------------------------

    pub(super) fn op_event(&mut self) {
        let names = match self.phase {
            Phase::Forward => FORWARD_OPS,
            Phase::Backward => BACKWARD_OPS,
            _ => OPTIMIZER_OPS,
        };
        let op_name = names[self.rng.below(names.len() as u64) as usize];
        let shape_i = self.rng.below(SHAPES.len() as u64) as usize;
        let dtype_i = self.rng.below(DTYPES.len() as u64) as usize;
        let output = self.new_tensor();
        let inputs: Vec<String> = (0..1 + self.rng.below(2))
            .map(|_| format!("t{}", 1 + self.rng.below(output)))
            .collect();
        let timestamp_ns = self.tick(100);
        let duration_ns = 100 + self.rng.below(5_000);
        self.now_ns += duration_ns;
        let input_dense_bytes = inputs.len() as u64
            * trace_schema::dense_bytes(SHAPES[shape_i], DTYPES[dtype_i]).unwrap_or(0);
        self.queue.push_back(TraceEvent::Op(OpEvent {
            span_id: self.current_span(),
            op_name: op_name.to_string(),
            inputs,
            output: Some(format!("t{output}")),
            shape: SHAPES[shape_i].to_vec(),
            dtype: DTYPES[dtype_i].to_string(),
            device: self.devices[self.current_device as usize].clone(),
            duration_ns,
            timestamp_ns,
            output_dense_bytes: None,
            input_dense_bytes,
        }));
        self.last_output = Some((output, op_name, shape_i, dtype_i));
    }

    /// Ops and memory events of one span visit, interleaved evenly.
    pub(super) fn work(&mut self, ops: u64, memory: u64) {
        let total = ops + memory;
        let mut done_ops = 0;
        for k in 0..total {
            // Bresenham: an op whenever the op share falls behind.
            let op_due = done_ops < ops && (done_ops * total <= k * ops || k - done_ops >= memory);
            if op_due {
                done_ops += 1;
                self.op_event();
            } else {
                self.memory_event();
            }
        }
        self.last_output = None;
    }

    // ---- phases ------------------------------------------------------------------------
}
