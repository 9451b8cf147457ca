//! The lazy event stream: its state, the step through the phases of a trace (meta, the root
//! span, the passes or steps, the gradient facts, the end) and the iterator over it.

mod flow;
mod memory;
mod spans;

use std::collections::VecDeque;

use trace_schema::*;

use crate::{share, Rng, SynthConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Forward,
    Backward,
    Optimizer,
    Finish,
    Done,
}

impl Phase {
    fn index(self) -> usize {
        match self {
            Phase::Forward => 0,
            Phase::Backward => 1,
            _ => 2,
        }
    }

    fn step(self) -> Pass {
        match self {
            Phase::Forward => Pass::Forward,
            Phase::Backward => Pass::Backward,
            _ => Pass::Optimizer,
        }
    }
}

/// A live storage the generator may free later.
#[derive(Debug, Clone, Copy)]
struct Live {
    device: u8,
    slot: u32,
    generation: u32,
    bytes: u64,
    tensor: u64,
    category: MemoryCategory,
    allocator_only: bool,
}

/// What a generated span is besides its place in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpanRole {
    /// The measured root.
    Root,
    /// A step span of a multi-step capture, with its `step_index`.
    Step(u64),
    /// Any other span.
    Inner,
}

#[derive(Debug, Clone, Copy)]
struct OpenSpan {
    id: u64,
    depth: u32,
    start_ns: u64,
}

/// Template of module spans: `(depth below the step span, name, kind)`; `{}` is the block index.
const FORWARD_BLOCK: &[(u32, &str)] = &[
    (1, "layers.{}"),
    (2, "attn"),
    (3, "q_proj"),
    (3, "k_proj"),
    (3, "v_proj"),
    (3, "o_proj"),
    (2, "mlp"),
    (3, "fc1"),
    (3, "fc2"),
];
const BACKWARD_BLOCK: &[(u32, &str)] = &[
    (1, "layers.{}.backward"),
    (2, "mlp.backward"),
    (2, "attn.backward"),
];
const OPTIMIZER_BLOCK: &[(u32, &str)] = &[(1, "adamw.group {}"), (2, "update")];

const FORWARD_OPS: &[&str] = &["matmul", "add", "gelu", "softmax", "layer_norm", "reshape"];
const BACKWARD_OPS: &[&str] = &["matmul_backward", "add_backward", "gelu_backward", "sum"];
const OPTIMIZER_OPS: &[&str] = &["mul", "add", "sqrt", "div", "sub"];
const SHAPES: &[&[u64]] = &[
    &[8, 128, 256],
    &[8, 128, 1024],
    &[256, 256],
    &[1024, 256],
    &[8, 128],
];
const DTYPES: &[&str] = &["f32", "f32", "f32", "bf16"];
const HOST_OVERHEAD_BYTES: u64 = 64 << 20;
const CAPACITY_BYTES: u64 = 80 << 30;

/// The lazy event stream of one [`SynthConfig`]; see the module docs.
#[derive(Debug, Clone)]
pub struct SynthEvents {
    config: SynthConfig,
    devices: Vec<String>,
    rng: Rng,
    queue: VecDeque<TraceEvent>,
    phase: Phase,
    now_ns: u64,
    // Budgets per pass of the whole trace: module spans, ops, memory events.
    total_module_spans: [u64; 3],
    total_ops: [u64; 3],
    total_memory: [u64; 3],
    // The same for the current step (the totals shared evenly among the steps).
    module_spans: [u64; 3],
    ops: [u64; 3],
    memory: [u64; 3],
    // The current step (0-based) and the memory events its current pass has left to emit.
    step_no: u64,
    pass_memory_left: u64,
    // Cursor inside the current phase.
    visit: u64,
    stack: Vec<OpenSpan>,
    block: u64,
    next_span: u64,
    next_tensor: u64,
    next_instance: u64,
    // Device samples: spread over all span starts.
    span_starts: u64,
    samples_emitted: u64,
    last_output: Option<(u64, &'static str, usize, usize)>,
    current_device: u8,
    // Memory state.
    live_bytes: Vec<u64>,
    next_slot: Vec<u32>,
    free_slots: Vec<VecDeque<(u32, u32)>>,
    activations: Vec<Live>,
    temporaries: VecDeque<Live>,
    gradients: VecDeque<Live>,
    optimizer_states: u64,
}

impl SynthEvents {
    pub(crate) fn new(config: SynthConfig) -> Self {
        let devices = config.device_names();
        let module = config.spans_generated() - config.min_spans();
        let params = config.parameters.min(config.memory_events);
        let body_memory = config.memory_events - params;
        let split = |total: u64, w: [u64; 3]| -> [u64; 3] {
            let a = total * w[0] / 100;
            let b = total * w[1] / 100;
            [a, b, total - a - b]
        };
        let n = devices.len();
        let total_module_spans = split(module, [50, 30, 20]);
        let total_ops = split(config.ops, [50, 40, 10]);
        // A multi-step capture gives the optimizer a larger share (backward 35%, optimizer 20%),
        // so that its pass can free what its step left live.
        let memory_weights = if config.steps > 1 {
            [45, 35, 20]
        } else {
            [45, 40, 15]
        };
        let total_memory = split(body_memory, memory_weights);
        Self {
            rng: Rng::new(config.seed),
            total_module_spans,
            total_ops,
            total_memory,
            module_spans: total_module_spans,
            ops: total_ops,
            memory: total_memory,
            step_no: 0,
            pass_memory_left: 0,
            config,
            devices,
            queue: VecDeque::new(),
            phase: Phase::Start,
            now_ns: 1_000,
            visit: 0,
            stack: Vec::new(),
            block: 0,
            next_span: 1,
            next_tensor: 1,
            next_instance: 1,
            span_starts: 0,
            samples_emitted: 0,
            last_output: None,
            current_device: 0,
            live_bytes: vec![0; n],
            next_slot: vec![0; n],
            free_slots: vec![VecDeque::new(); n],
            activations: Vec::new(),
            temporaries: VecDeque::new(),
            gradients: VecDeque::new(),
            optimizer_states: 0,
        }
    }

    fn tick(&mut self, max: u64) -> u64 {
        self.now_ns += 1 + self.rng.below(max);
        self.now_ns
    }

    fn accelerators(&self) -> u64 {
        if self.devices.len() == 1 {
            1
        } else {
            self.devices.len() as u64 - 1
        }
    }

    fn param_name(&self, p: u64) -> String {
        const KINDS: [&str; 4] = [
            "attn.q_proj.weight",
            "attn.o_proj.weight",
            "mlp.fc1.weight",
            "mlp.fc2.bias",
        ];
        format!("layers.{}.{}", p / 4, KINDS[(p % 4) as usize])
    }

    fn storage_id(&self, live: &Live) -> String {
        let base: u64 = 0x7f00_0000_0000 - (live.device as u64) * 0x0100_0000_0000;
        format!(
            "{:x}.{}",
            base + (live.slot as u64) * 0x1000,
            live.generation
        )
    }

    fn new_tensor(&mut self) -> u64 {
        let t = self.next_tensor;
        self.next_tensor += 1;
        t
    }

    // ---- spans -------------------------------------------------------------------------
}

impl Iterator for SynthEvents {
    type Item = TraceEvent;

    fn next(&mut self) -> Option<TraceEvent> {
        while self.queue.is_empty() {
            if self.phase == Phase::Done {
                return None;
            }
            self.step();
        }
        self.queue.pop_front()
    }
}
