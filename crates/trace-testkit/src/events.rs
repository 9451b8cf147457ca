//! One constructor or builder per event kind.

use trace_wire::*;

/// The `meta` event, at [`WRITE_VERSION`].
#[derive(Debug, Clone)]
#[must_use = "call .ev() for the event"]
pub struct Meta(MetaEvent);

/// A minimal valid meta: run `r`, entrypoint `test`, timestamp `2026-01-01T00:00:00.000Z`,
/// everything else absent.
pub fn meta() -> Meta {
    Meta(MetaEvent {
        schema: WRITE_VERSION.as_str().to_string(),
        run: RunMeta {
            run_id: "r".into(),
            entrypoint: "test".into(),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            ..RunMeta::default()
        },
    })
}

/// The meta the probe writes for a one-step capture: run `run-1` (correlation
/// `mlp/update-2`), entrypoint `mlp::train_step`, `phase`, timestamp
/// `2026-11-29T08:00:00.000Z`, capture step 2 after 1 warm-up step, device `cpu`, host timing,
/// and `contract`.
pub fn step_meta(phase: ExecutionPhase, contract: Option<CaptureContract>) -> TraceEvent {
    let mut m = meta();
    m.0.run = RunMeta {
        run_id: "run-1".into(),
        correlation_id: Some("mlp/update-2".into()),
        entrypoint: "mlp::train_step".into(),
        phase: Some(phase),
        timestamp: "2026-11-29T08:00:00.000Z".into(),
        capture_step: Some(2),
        warmup_steps: Some(1),
        device: Some("cpu".into()),
        timing_mode: Some(TimingMode::Host),
        capture_contract: contract,
        ..RunMeta::default()
    };
    m.ev()
}

impl Meta {
    /// A contract declaring only `logical_memory` at `level` (absent: no contract).
    pub fn logical_memory(mut self, level: Option<CoverageLevel>) -> Self {
        self.0.run.capture_contract = level.map(|level| CaptureContract {
            logical_memory: level,
            ..CaptureContract::default()
        });
        self
    }

    /// The captured phase.
    pub fn phase(mut self, phase: ExecutionPhase) -> Self {
        self.0.run.phase = Some(phase);
        self
    }

    /// Another schema string (an old-version or unsupported-version test).
    pub fn schema(mut self, schema: &str) -> Self {
        self.0.schema = schema.into();
        self
    }

    /// Changes the run metadata.
    pub fn run(mut self, f: impl FnOnce(&mut RunMeta)) -> Self {
        f(&mut self.0.run);
        self
    }

    /// The event.
    pub fn ev(self) -> TraceEvent {
        TraceEvent::Meta(self.0)
    }
}

/// A contract with complete operations, tensors, logical memory and gradients, and a gradient
/// contract expecting a present gradient for each of `params` under root `model`.
pub fn complete_contract(params: &[&str]) -> CaptureContract {
    CaptureContract {
        operations: CoverageLevel::Complete,
        tensors: CoverageLevel::Complete,
        logical_memory: CoverageLevel::Complete,
        gradients: CoverageLevel::Complete,
        gradient_contract: Some(GradientContract::all_active(
            params.iter().map(|k| ("model".to_string(), k.to_string())),
        )),
        ..CaptureContract::default()
    }
}

/// A `span_start`.
#[derive(Debug, Clone)]
#[must_use = "call .ev() for the event"]
pub struct SpanStart(SpanStartEvent);

impl SpanStart {
    /// A function span `id` named `id`, starting at `start_ns`: no parent, not measured, no pass.
    pub fn new(id: &str, start_ns: u64) -> Self {
        Self(SpanStartEvent {
            id: id.into(),
            parent_id: None,
            name: id.into(),
            start_ns,
            span_kind: SpanKind::Function,
            measured: false,
            step: None,
            module_path: None,
            instance_key: None,
            module_kind: None,
            forward_span_id: None,
            step_index: None,
        })
    }

    /// The enclosing span.
    pub fn parent(self, parent: &str) -> Self {
        self.parent_opt(Some(parent))
    }

    /// The enclosing span, if any.
    pub fn parent_opt(mut self, parent: Option<&str>) -> Self {
        self.0.parent_id = parent.map(Into::into);
        self
    }

    /// The display name.
    pub fn name(mut self, name: &str) -> Self {
        self.0.name = name.into();
        self
    }

    /// The span kind.
    pub fn kind(mut self, kind: SpanKind) -> Self {
        self.0.span_kind = kind;
        self
    }

    /// Whether it is the measured region.
    pub fn measured(mut self, measured: bool) -> Self {
        self.0.measured = measured;
        self
    }

    /// The pass it declares (`step` on the wire).
    pub fn pass(self, pass: Pass) -> Self {
        self.pass_opt(Some(pass))
    }

    /// The pass it declares, if any.
    pub fn pass_opt(mut self, pass: Option<Pass>) -> Self {
        self.0.step = pass;
        self
    }

    /// Changes any other field.
    pub fn with(mut self, f: impl FnOnce(&mut SpanStartEvent)) -> Self {
        f(&mut self.0);
        self
    }

    /// The event.
    pub fn ev(self) -> TraceEvent {
        TraceEvent::SpanStart(self.0)
    }
}

/// A function span `id` (named `id`) starting at `start_ns` under `parent`, measured when it has
/// no parent, declaring `pass`.
pub fn span_start(id: &str, parent: Option<&str>, start_ns: u64, pass: Option<Pass>) -> TraceEvent {
    SpanStart::new(id, start_ns)
        .parent_opt(parent)
        .measured(parent.is_none())
        .pass_opt(pass)
        .ev()
}

/// A `span_end` of `id` after `duration_ns`, not inferred.
pub fn span_end(id: &str, duration_ns: u64) -> TraceEvent {
    TraceEvent::SpanEnd(SpanEndEvent {
        id: id.into(),
        duration_ns,
        inferred: false,
        inferred_reason: None,
    })
}

/// A closed span: [`span_start`] at `start_ns` and [`span_end`] at `end_ns` (≥ `start_ns`).
pub fn span(
    id: &str,
    parent: Option<&str>,
    start_ns: u64,
    end_ns: u64,
    pass: Option<Pass>,
) -> [TraceEvent; 2] {
    [
        span_start(id, parent, start_ns, pass),
        span_end(id, end_ns - start_ns),
    ]
}

/// An `op` event.
#[derive(Debug, Clone)]
#[must_use = "call .ev() for the event"]
pub struct Op(OpEvent);

/// An op `name` in `span` at `timestamp_ns` for `duration_ns`: no inputs, no output, shape `[4]`,
/// `f32` on `cpu`, dense bytes left to the loader.
pub fn op(span: &str, name: &str, timestamp_ns: u64, duration_ns: u64) -> Op {
    Op(OpEvent {
        span_id: span.into(),
        op_name: name.into(),
        inputs: vec![],
        output: None,
        shape: vec![4],
        dtype: "f32".into(),
        device: "cpu".into(),
        duration_ns,
        timestamp_ns,
        output_dense_bytes: None,
        input_dense_bytes: 0,
    })
}

impl Op {
    /// The input tensor ids.
    pub fn inputs(mut self, inputs: &[&str]) -> Self {
        self.0.inputs = inputs.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The output tensor id.
    pub fn output(self, output: &str) -> Self {
        self.output_opt(Some(output))
    }

    /// The output tensor id, if any.
    pub fn output_opt(mut self, output: Option<&str>) -> Self {
        self.0.output = output.map(Into::into);
        self
    }

    /// The output shape.
    pub fn shape(mut self, shape: &[u64]) -> Self {
        self.0.shape = shape.to_vec();
        self
    }

    /// The event.
    pub fn ev(self) -> TraceEvent {
        TraceEvent::Op(self.0)
    }
}

/// A `tensor` fact: `id` in `span`, shape `[4, 8]` `f32` on `cpu`, 128 storage bytes, no
/// storage id.
pub fn tensor(
    span: &str,
    id: &str,
    label: Option<&str>,
    category: MemoryCategory,
    requires_grad: bool,
) -> TraceEvent {
    TraceEvent::Tensor(TensorEvent {
        span_id: span.into(),
        tensor_id: id.into(),
        label: label.map(Into::into),
        shape: vec![4, 8],
        dtype: "f32".into(),
        device: "cpu".into(),
        requires_grad,
        dense_bytes: None,
        storage_bytes: Some(128),
        storage_id: None,
        category,
    })
}

/// A `memory` event.
#[derive(Debug, Clone)]
#[must_use = "call .ev() for the event"]
pub struct Memory(MemoryEvent);

/// A memory event at `timestamp_ns` of `storage` on `device`: an activation of tensor
/// `t-<storage>`, outside every span, with no source, label, site or thread.
pub fn mem(
    timestamp_ns: u64,
    action: MemoryAction,
    device: &str,
    storage: &str,
    bytes: Option<u64>,
) -> Memory {
    Memory(MemoryEvent {
        timestamp_ns,
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
    })
}

/// The body's fields, read and written in place (`m.pre_existing = true`).
impl std::ops::Deref for Memory {
    type Target = MemoryEvent;

    fn deref(&self) -> &MemoryEvent {
        &self.0
    }
}

impl std::ops::DerefMut for Memory {
    fn deref_mut(&mut self) -> &mut MemoryEvent {
        &mut self.0
    }
}

/// [`mem`]: an alloc of `bytes` on `cpu`.
pub fn alloc(timestamp_ns: u64, storage: &str, bytes: u64) -> Memory {
    mem(
        timestamp_ns,
        MemoryAction::Alloc,
        "cpu",
        storage,
        Some(bytes),
    )
}

/// [`mem`]: a free on `cpu`, size not stated.
pub fn free(timestamp_ns: u64, storage: &str) -> Memory {
    mem(timestamp_ns, MemoryAction::Free, "cpu", storage, None)
}

impl Memory {
    /// The category.
    pub fn cat(mut self, category: MemoryCategory) -> Self {
        self.0.category = category;
        self
    }

    /// The span it happened in.
    pub fn span(self, span: &str) -> Self {
        self.span_opt(Some(span))
    }

    /// The span it happened in, if any.
    pub fn span_opt(mut self, span: Option<&str>) -> Self {
        self.0.span_id = span.map(Into::into);
        self
    }

    /// The device label.
    pub fn dev(mut self, device: &str) -> Self {
        self.0.device = device.into();
        self
    }

    /// The owning tensor's id.
    pub fn tensor(mut self, tensor: &str) -> Self {
        self.0.tensor_id = Some(tensor.into());
        self
    }

    /// No owning tensor (an allocator-only event).
    pub fn no_tensor(mut self) -> Self {
        self.0.tensor_id = None;
        self
    }

    /// The allocating op.
    pub fn op(mut self, op: &str) -> Self {
        self.0.op_name = Some(op.into());
        self
    }

    /// Live before capture began (`pre_existing`).
    pub fn pre(mut self) -> Self {
        self.0.pre_existing = true;
        self
    }

    /// No storage id (trace/6-style identity by tensor).
    pub fn no_storage(mut self) -> Self {
        self.0.storage_id = None;
        self
    }

    /// Changes any other field.
    pub fn with(mut self, f: impl FnOnce(&mut MemoryEvent)) -> Self {
        f(&mut self.0);
        self
    }

    /// The event body.
    pub fn body(self) -> MemoryEvent {
        self.0
    }

    /// The event.
    pub fn ev(self) -> TraceEvent {
        TraceEvent::Memory(self.0)
    }
}

/// A `device_memory` sample at `timestamp_ns` on `device` with the given observed fields
/// (resident bytes not observed).
pub fn device_memory(
    timestamp_ns: u64,
    device: &str,
    used_bytes: Option<u64>,
    free_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    capacity_bytes: Option<u64>,
) -> TraceEvent {
    TraceEvent::DeviceMemory(DeviceMemoryEvent {
        timestamp_ns,
        device: device.into(),
        used_bytes,
        free_bytes,
        reserved_bytes,
        capacity_bytes,
        resident_bytes: None,
    })
}

/// A `gradient` fact `gradient-<n>` of parameter `model`/`key`.
pub fn gradient(n: u64, key: &str, state: GradientState, norm: Option<f64>) -> TraceEvent {
    TraceEvent::Gradient(GradientEvent {
        event_id: format!("gradient-{n}"),
        root: "model".into(),
        key: key.into(),
        state,
        norm,
        parameter: true,
        tensor_id: None,
        bytes: None,
        non_finite_elements: None,
    })
}

/// A complete `terminal` at `timestamp_ns`.
pub fn terminal(timestamp_ns: u64) -> TraceEvent {
    TraceEvent::Terminal(TerminalEvent {
        coverage_lost: Default::default(),
        outcome: TerminalOutcome::Complete,
        timestamp_ns,
        reason: None,
        dropped_events: None,
    })
}

/// A failed `terminal` at `timestamp_ns` with `reason`.
pub fn failed(timestamp_ns: u64, reason: &str) -> TraceEvent {
    TraceEvent::Terminal(TerminalEvent {
        coverage_lost: Default::default(),
        outcome: TerminalOutcome::Failed,
        timestamp_ns,
        reason: Some(reason.into()),
        dropped_events: None,
    })
}
