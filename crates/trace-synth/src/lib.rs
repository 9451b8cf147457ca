//! Deterministic generator of realistic candle-graph event streams (the schema version this
//! workspace writes, `trace_schema::WRITE_VERSION`: trace/13), for tests and
//! benchmarks of every analysis crate (a dev crate: nothing ships it).
//!
//! The stream is produced lazily by [`SynthEvents`], an iterator of [`TraceEvent`], so a trace
//! of 10^7 memory events is written without holding it in memory. The same [`SynthConfig`]
//! (including `seed`) always yields the same events; the generator uses its own xorshift PRNG and
//! no clock, no environment, no hash-map iteration order.
//!
//! # What a generated trace looks like
//! One training step, in this order:
//! - `meta` (a capture contract declaring complete operations and logical memory,
//!   partial physical memory, complete gradients with an exact gradient contract over the
//!   generated parameters, host info, `tracking_allocator_installed: true`);
//! - the single measured root span `s1` (`train_step`), then `parameters` pre-existing parameter
//!   allocs (`pre_existing: true`, category `parameter`, source `registry`) at the root's start;
//! - three pass spans, `forward`, `backward`, `optimizer` (with `step` set), each holding its
//!   share of module spans nested up to three levels below it (forward:
//!   `layers.N` → `attn` → `q_proj`/`k_proj`/`v_proj`/`o_proj`, `mlp` → `fc1`/`fc2`, with
//!   `module_path` and `instance_key`; backward: `layers.N.backward` → `attn.backward`,
//!   `mlp.backward`, layers in reverse order; optimizer: `adamw.group N` → `update`). Intervals are
//!   well nested, start times increase, every span is closed;
//! - inside each span, its share of `op` events (timestamps increasing, durations within the
//!   span) interleaved with `memory` events:
//!   - forward: activations allocated (freed in reverse order during backward), temporaries
//!     allocated and freed soon after, and **aliases**: a second `alloc` of a live storage from
//!     another tensor id (a view);
//!   - backward: activations freed, gradients allocated (category `gradient`), temporaries;
//!   - optimizer: optimizer state allocated once per parameter (two moments, live at the end),
//!     gradients freed, temporaries;
//!   - storage ids are `<address hex>.<generation>` as the probe writes them. A freed address is
//!     reused immediately by the next alloc on that device (same address, next generation, so a
//!     new lifetime), and in about 1 in 8 reuses the very **same storage id string** is
//!     allocated again after its free (a new lifetime with a reused id);
//!   - about 1 in 10 allocs is seen only by the allocator (`source: allocator`, no tensor id,
//!     shape, dtype or op name); about 1 in 4 frees has no `bytes`;
//! - `device_memory` samples spread over the span starts, one per sample on a rotating device,
//!   with used (logical live bytes on that device plus a fixed overhead), reserved, capacity and,
//!   on the host, resident bytes;
//! - one `gradient` fact per parameter at the end of backward (mostly `present`, some `zero`
//!   and `missing`, as a real run may show), a `tensor_stats` summary of the loss, and a final
//!   `terminal` (`complete`) no earlier than any evidence.
//!
//! # Several steps
//! With `steps` above one the trace is a multi-step capture: the meta names the steps
//! (`capture_step` 2, `last_capture_step` 1 + `steps`), the root holds one `step <n>` span per
//! step (with its `step_index`, n from 2), and each step span holds its own forward, backward and
//! optimizer pass with the layout above; the spans, ops and memory events are shared evenly
//! among the steps (at least `1 + 4 × steps` spans), the memory events 45/35/20% among the
//! passes (one step: 45/40/15%). The optimizer state is allocated once, in the first steps'
//! optimizer passes, and each optimizer pass ends by freeing what its step left live
//! (activations, gradients, temporaries; at most one storage stays, a temporary the pass's last
//! event may allocate after the others are freed, and the next step frees it), so each step
//! begins with the parameters and the optimizer state: the steps are alike and the live set does
//! not grow with the number of steps. Gradient facts come once, in the last step's backward.
//!
//! Counts are **exact**: the loaded document has [`SynthConfig::spans_generated`] spans (`spans`,
//! or the layout's minimum when that is more), `ops` op events and
//! `memory_events` memory events (of which `min(parameters, memory_events)` are the pre-existing
//! parameter allocs). `device_memory_samples`, `parameters` gradient facts, one `tensor_stats`,
//! meta and terminal come on top.
//!
//! ```
//! use trace_synth::{SynthConfig, synth_events};
//! use trace_schema::TraceDocument;
//! let config = SynthConfig { memory_events: 1_000, spans: 100, ops: 500, ..SynthConfig::default() };
//! let doc = TraceDocument::from_events(synth_events(&config));
//! assert_eq!(doc.memory.len(), 1_000);
//! assert_eq!(doc.spans.len(), 100);
//! assert_eq!(doc.ops.len(), 500);
//! assert!(doc.semantic_issues.is_empty());
//! ```

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

use trace_schema::*;

/// What to generate. Every count is exact (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConfig {
    /// Memory events in total (pre-existing parameter allocs included).
    pub memory_events: u64,
    /// Spans in total, the root, the pass spans and any step spans included (at least
    /// [`SynthConfig::min_spans`] are generated).
    pub spans: u64,
    /// Op events.
    pub ops: u64,
    /// Number of devices (at least 1). One device: `cpu`. More: `cuda:0` … `cuda:{n-2}` plus
    /// `cpu` (host staging buffers); layers are spread over the accelerators.
    pub devices: u32,
    /// PRNG seed.
    pub seed: u64,
    /// Parameters (pre-existing allocs, gradient facts, gradient contract entries).
    pub parameters: u64,
    /// `device_memory` samples.
    pub device_memory_samples: u64,
    /// At most this many forward activations are kept live for backward; beyond it, forward
    /// allocs are temporaries (bounds the generator's own memory).
    pub max_live_activations: usize,
    /// Training steps (0 is taken as 1). One: the layout of the module docs. More: a multi-step
    /// capture (see *Several steps* in the module docs): each step a `step <n>` span under the
    /// root with its own forward, backward and optimizer, every step alike.
    pub steps: u64,
}

impl Default for SynthConfig {
    /// 10^4 memory events, 10^3 spans, 10^4 ops, one device, seed 1, 64 parameters, 100 samples.
    fn default() -> Self {
        Self {
            memory_events: 10_000,
            spans: 1_000,
            ops: 10_000,
            devices: 1,
            seed: 1,
            parameters: 64,
            device_memory_samples: 100,
            max_live_activations: 100_000,
            steps: 1,
        }
    }
}

impl SynthConfig {
    /// The benchmark mix for `n` events in total: 60% memory, 30% ops, 10% spans (a span is
    /// two events, start and end), two devices, 256 parameters, `n / 1000` device samples.
    pub fn mix(n: u64) -> Self {
        Self {
            memory_events: n * 6 / 10,
            spans: (n / 20).max(4),
            ops: n * 3 / 10,
            devices: 2,
            parameters: 256,
            device_memory_samples: n / 1000,
            ..Self::default()
        }
    }

    /// The benchmark mix of [`mix`](Self::mix) as a multi-step capture of steps of about 10^5
    /// events each (`n / 100_000` steps, at least one): every step alike, so the trace grows in
    /// length and not in shape. A scaling benchmark needs that; the one-step mix's single step
    /// grows its live set with its size (its backward allocates more gradients than its
    /// optimizer frees).
    pub fn steady(n: u64) -> Self {
        Self {
            steps: (n / 100_000).max(1),
            ..Self::mix(n)
        }
    }

    /// The fewest spans the layout has: the root and the three pass spans; in a multi-step
    /// capture the root and, per step, its step span and three pass spans (`1 + 4 × steps`,
    /// saturating).
    pub fn min_spans(&self) -> u64 {
        if self.steps > 1 {
            self.steps.saturating_mul(4).saturating_add(1)
        } else {
            4
        }
    }

    /// Spans generated: `spans`, or [`min_spans`](Self::min_spans) when that is more.
    pub fn spans_generated(&self) -> u64 {
        self.spans.max(self.min_spans())
    }

    /// Device labels, in index order.
    pub fn device_names(&self) -> Vec<String> {
        let n = self.devices.max(1);
        if n == 1 {
            return vec!["cpu".to_string()];
        }
        let mut names: Vec<String> = (0..n - 1).map(|i| format!("cuda:{i}")).collect();
        names.push("cpu".to_string());
        names
    }

    /// Number of events the stream yields in total.
    pub fn total_events(&self) -> u64 {
        2 + 2 * self.spans_generated()
            + self.ops
            + self.memory_events
            + self.device_memory_samples
            + self.parameters
            + 1
    }
}

/// Generates the stream described by `config` (see the module docs).
pub fn synth_events(config: &SynthConfig) -> SynthEvents {
    SynthEvents::new(config.clone())
}

/// Writes the stream described by `config` to `path` (one JSON line per event); returns the
/// number of events written.
///
/// # Errors
/// I/O errors creating or writing the file.
pub fn write_synth_trace(path: impl AsRef<Path>, config: &SynthConfig) -> io::Result<u64> {
    let file = File::create(path)?;
    let mut writer = TraceWriter::new(BufWriter::with_capacity(1 << 20, file));
    for event in synth_events(config) {
        writer.write_event(&event)?;
    }
    writer.flush()?;
    Ok(writer.events_written())
}

/// xorshift64* (Vigna); deterministic, no dependency.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that 0 and nearby seeds are fine.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// True with probability `per_mille / 1000`.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// `total` split over `parts` as evenly as possible: the share of part `i`.
fn share(total: u64, parts: u64, i: u64) -> u64 {
    if parts == 0 {
        return 0;
    }
    let t = total as u128;
    let p = parts as u128;
    let i = i as u128;
    ((t * (i + 1) / p) - (t * i / p)) as u64
}

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
    fn new(config: SynthConfig) -> Self {
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

    fn open_span(
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

    fn close_span(&mut self) {
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

    fn current_span(&self) -> String {
        format!("s{}", self.stack.last().map_or(1, |s| s.id))
    }

    /// Emits the device sample(s) due after this span start (spread over all span starts).
    fn after_span_start(&mut self) {
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

    fn alloc(&mut self, category: MemoryCategory, allocator_only: bool) -> Live {
        // With accelerators, 1 in 20 storages is a host staging buffer on `cpu`.
        let host = self.devices.len() > 1 && self.rng.chance(50);
        let device = if host {
            (self.devices.len() - 1) as u8
        } else {
            self.current_device
        };
        let d = device as usize;
        let (slot, generation) = match self.free_slots[d].pop_back() {
            // Immediate address reuse: same address, next generation (a new lifetime); now and
            // then the very same id string again.
            Some((slot, generation)) if self.rng.chance(125) => (slot, generation),
            Some((slot, generation)) => (slot, generation + 1),
            None => {
                let slot = self.next_slot[d];
                self.next_slot[d] += 1;
                (slot, 0)
            }
        };
        let (shape_i, dtype_i) = match self.last_output {
            Some((_, _, s, t)) => (s, t),
            None => (self.rng.below(SHAPES.len() as u64) as usize, 0),
        };
        let bytes = trace_schema::dense_bytes(SHAPES[shape_i], DTYPES[dtype_i]).unwrap_or(4);
        let tensor = match self.last_output.take() {
            Some((t, _, _, _)) => t,
            None => self.new_tensor(),
        };
        let live = Live {
            device,
            slot,
            generation,
            bytes,
            tensor,
            category,
            allocator_only,
        };
        self.emit_alloc(&live, shape_i, dtype_i, None, false);
        live
    }

    fn emit_alloc(
        &mut self,
        live: &Live,
        shape_i: usize,
        dtype_i: usize,
        label: Option<String>,
        pre_existing: bool,
    ) {
        self.live_bytes[live.device as usize] += live.bytes;
        let timestamp_ns = if pre_existing {
            self.now_ns
        } else {
            self.tick(100)
        };
        let (source, category_source) = match live.category {
            MemoryCategory::Parameter | MemoryCategory::Optimizer => {
                (MemorySource::Registry, CategorySource::Registry)
            }
            _ if live.allocator_only => (MemorySource::Allocator, CategorySource::Inferred),
            MemoryCategory::Gradient => (MemorySource::Registry, CategorySource::Registry),
            _ => (MemorySource::Allocator, CategorySource::Inferred),
        };
        let named = !live.allocator_only;
        let op_name = match (named, pre_existing, self.phase) {
            (true, false, Phase::Forward) => Some(FORWARD_OPS[(live.tensor % 5) as usize]),
            (true, false, Phase::Backward) => Some(BACKWARD_OPS[(live.tensor % 4) as usize]),
            (true, false, _) => Some(OPTIMIZER_OPS[(live.tensor % 5) as usize]),
            _ => None,
        };
        let event = MemoryEvent {
            timestamp_ns,
            action: MemoryAction::Alloc,
            device: self.devices[live.device as usize].clone(),
            storage_id: Some(self.storage_id(live)),
            bytes: Some(live.bytes),
            logical_bytes: None,
            tensor_id: named.then(|| format!("t{}", live.tensor)),
            span_id: Some(self.current_span()),
            op_name: op_name.map(str::to_string),
            shape: named.then(|| SHAPES[shape_i].to_vec()),
            dtype: named.then(|| DTYPES[dtype_i].to_string()),
            category: live.category,
            category_source: Some(category_source),
            source: Some(source),
            pre_existing,
            label,
            site: None,
            thread: None,
        };
        self.queue.push_back(TraceEvent::Memory(event));
    }

    fn free(&mut self, live: Live) {
        let d = live.device as usize;
        self.live_bytes[d] = self.live_bytes[d].saturating_sub(live.bytes);
        let free_slots = &mut self.free_slots[d];
        free_slots.push_back((live.slot, live.generation));
        if free_slots.len() > 1024 {
            free_slots.pop_front();
        }
        let timestamp_ns = self.tick(100);
        let with_bytes = !self.rng.chance(250);
        self.queue.push_back(TraceEvent::Memory(MemoryEvent {
            timestamp_ns,
            action: MemoryAction::Free,
            device: self.devices[d].clone(),
            storage_id: Some(self.storage_id(&live)),
            bytes: with_bytes.then_some(live.bytes),
            logical_bytes: None,
            tensor_id: (!live.allocator_only).then(|| format!("t{}", live.tensor)),
            span_id: Some(self.current_span()),
            op_name: None,
            shape: None,
            dtype: None,
            category: live.category,
            category_source: None,
            source: Some(if live.allocator_only {
                MemorySource::Allocator
            } else {
                MemorySource::Registry
            }),
            pre_existing: false,
            label: None,
            site: None,
            thread: None,
        }));
    }

    /// A second alloc of a live storage from another tensor id (a view).
    fn alias(&mut self) -> bool {
        let Some(&target) = self.activations.last() else {
            return false;
        };
        if target.allocator_only {
            return false;
        }
        let view = self.new_tensor();
        let timestamp_ns = self.tick(100);
        self.queue.push_back(TraceEvent::Memory(MemoryEvent {
            timestamp_ns,
            action: MemoryAction::Alloc,
            device: self.devices[target.device as usize].clone(),
            storage_id: Some(self.storage_id(&target)),
            bytes: Some(target.bytes),
            logical_bytes: None,
            tensor_id: Some(format!("t{view}")),
            span_id: Some(self.current_span()),
            op_name: Some("reshape".to_string()),
            shape: None,
            dtype: None,
            category: target.category,
            category_source: Some(CategorySource::Inferred),
            source: Some(MemorySource::Registry),
            pre_existing: false,
            label: None,
            site: None,
            thread: None,
        }));
        true
    }

    /// Emits exactly one memory event fitting the current phase.
    fn memory_event(&mut self) {
        let left = self.pass_memory_left;
        self.pass_memory_left = left.saturating_sub(1);
        if self.multi_step() && self.phase == Phase::Optimizer && self.drain_step(left) {
            return;
        }
        let allocator_only = self.rng.chance(100);
        let roll = self.rng.below(100);
        match self.phase {
            Phase::Forward => {
                if roll < 3 && self.alias() {
                    return;
                }
                if roll < 40 && self.activations.len() < self.config.max_live_activations {
                    let live = self.alloc(MemoryCategory::Activation, allocator_only);
                    self.activations.push(live);
                    return;
                }
            }
            Phase::Backward => {
                if roll < 50 {
                    if let Some(live) = self.activations.pop() {
                        self.free(live);
                        return;
                    }
                }
                if roll < 75 {
                    let live = self.alloc(MemoryCategory::Gradient, false);
                    self.gradients.push_back(live);
                    return;
                }
            }
            _ => {
                if roll < 20 && self.optimizer_states < 2 * self.config.parameters {
                    self.optimizer_states += 1;
                    // Optimizer state lives past the end of the step: never freed.
                    self.alloc(MemoryCategory::Optimizer, false);
                    return;
                }
                if roll < 50 {
                    if let Some(live) = self.gradients.pop_front() {
                        self.free(live);
                        return;
                    }
                }
            }
        }
        // Temporaries: alloc, or free one allocated shortly before.
        if self.temporaries.len() > 4 || (!self.temporaries.is_empty() && self.rng.chance(500)) {
            let live = self.temporaries.pop_front().expect("non-empty");
            self.free(live);
        } else {
            let category = match self.phase {
                Phase::Forward => MemoryCategory::Activation,
                Phase::Backward => MemoryCategory::Gradient,
                _ => MemoryCategory::Optimizer,
            };
            let live = self.alloc(category, allocator_only);
            self.temporaries.push_back(live);
        }
    }

    /// In a multi-step capture, once the optimizer pass has no more memory events `left`
    /// (this one included) than one more than the storages its step has live (activations,
    /// gradients, temporaries), frees one of them: each step ends with only the parameters, the
    /// optimizer state and at most one storage of its own live (a temporary its last event
    /// allocated when the others were freed one event early), or more only where its budget was
    /// short from the start.
    fn drain_step(&mut self, left: u64) -> bool {
        let live = self.temporaries.len() + self.gradients.len() + self.activations.len();
        if live == 0 || left > live as u64 + 1 {
            return false;
        }
        let next = self
            .temporaries
            .pop_front()
            .or_else(|| self.gradients.pop_front())
            .or_else(|| self.activations.pop());
        if let Some(storage) = next {
            self.free(storage);
        }
        true
    }

    fn op_event(&mut self) {
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
    fn work(&mut self, ops: u64, memory: u64) {
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

    fn start(&mut self) {
        let params: Vec<(String, String)> = (0..self.config.parameters)
            .map(|p| ("model".to_string(), self.param_name(p)))
            .collect();
        let gradient_contract =
            (!params.is_empty()).then(|| GradientContract::all_active(params.clone()));
        let contract = CaptureContract {
            measurement_scope: MeasurementScope::ProfiledWork,
            operations: CoverageLevel::Complete,
            tensors: CoverageLevel::None,
            gradients: if gradient_contract.is_some() {
                CoverageLevel::Complete
            } else {
                CoverageLevel::None
            },
            logical_memory: CoverageLevel::Complete,
            physical_memory: CoverageLevel::Partial,
            device_timing: CoverageLevel::None,
            tensor_stats: CoverageLevel::Partial,
            gradient_contract,
            required_semantic_labels: vec![
                "forward".to_string(),
                "backward".to_string(),
                "optimizer".to_string(),
            ],
            reasons: [(
                ContractField::PhysicalMemory.into(),
                "sampled at span starts only".to_string(),
            )]
            .into_iter()
            .collect(),
        };
        let run = RunMeta {
            run_id: format!("synth-{}", self.config.seed),
            correlation_id: Some("synth/update-2".to_string()),
            entrypoint: "synth::train_step".to_string(),
            phase: Some(ExecutionPhase::Train),
            timestamp: "2026-01-01T00:00:00.000Z".to_string(),
            capture_step: Some(2),
            warmup_steps: Some(1),
            device: Some(self.devices[0].clone()),
            measured_region_device_synchronized: self.devices.len() > 1,
            timing_mode: Some(TimingMode::Host),
            capture_contract: Some(contract),
            comparison_identity: None,
            tags: [("generator".to_string(), "trace_synth".to_string())]
                .into_iter()
                .collect(),
            candle_version: Some("0.11.1".to_string()),
            probe_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            tracking_allocator_installed: Some(true),
            host: Some(HostInfo {
                os: Some("linux".to_string()),
                arch: Some("x86_64".to_string()),
                cpu_count: Some(16),
                memory_bytes: Some(64 << 30),
            }),
            rank: None,
            local_rank: None,
            world_size: None,
            last_capture_step: self
                .multi_step()
                .then(|| self.config.steps.saturating_add(1)),
        };
        self.queue.push_back(TraceEvent::Meta(MetaEvent {
            schema: WRITE_VERSION.as_str().to_string(),
            run,
        }));
        self.open_span(
            "train_step".to_string(),
            SpanKind::Function,
            0,
            None,
            None,
            SpanRole::Root,
        );
        let params = self.config.parameters.min(self.config.memory_events);
        let accelerators = self.accelerators();
        for p in 0..params {
            self.current_device = (p * accelerators / params.max(1)) as u8;
            let live = Live {
                device: self.current_device,
                slot: self.next_slot[self.current_device as usize],
                generation: 0,
                bytes: trace_schema::dense_bytes(SHAPES[2 + (p % 2) as usize], "f32").unwrap_or(4),
                tensor: self.new_tensor(),
                category: MemoryCategory::Parameter,
                allocator_only: false,
            };
            self.next_slot[self.current_device as usize] += 1;
            let label = Some(format!("model/{}", self.param_name(p)));
            self.emit_alloc(&live, 2 + (p % 2) as usize, 0, label, true);
        }
        self.current_device = 0;
    }

    fn begin_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.visit = 0;
        self.block = 0;
        let name = match phase {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            _ => "optimizer",
        };
        self.open_span(
            name.to_string(),
            SpanKind::Function,
            1,
            Some(phase.step()),
            None,
            SpanRole::Inner,
        );
        let i = phase.index();
        self.pass_memory_left = self.memory[i];
        if self.module_spans[i] == 0 {
            // No module spans: the step span holds the phase's work.
            self.work(self.ops[i], self.memory[i]);
        }
    }

    /// Opens the next module span of the phase (closing finished siblings), does its work.
    fn module_visit(&mut self) {
        let i = self.phase.index();
        let (template, kind): (&[(u32, &str)], SpanKind) = match self.phase {
            Phase::Forward => (FORWARD_BLOCK, SpanKind::Module),
            Phase::Backward => (BACKWARD_BLOCK, SpanKind::Function),
            _ => (OPTIMIZER_BLOCK, SpanKind::Function),
        };
        let pos = (self.visit % template.len() as u64) as usize;
        if pos == 0 && self.visit > 0 {
            self.block += 1;
        }
        let (rel_depth, pattern) = template[pos];
        let depth = 1 + rel_depth;
        while self.stack.last().is_some_and(|s| s.depth >= depth) {
            self.close_span();
        }
        let blocks = self.module_spans[i].div_ceil(template.len() as u64).max(1);
        let layer = match self.phase {
            Phase::Backward => blocks - 1 - self.block,
            _ => self.block,
        };
        self.current_device = (layer % self.accelerators()) as u8;
        let name = pattern.replace("{}", &layer.to_string());
        let module_path = (self.phase == Phase::Forward).then(|| {
            let mut path = String::from("model");
            // Reconstruct the path from the template: the enclosing entries at lower depths.
            let mut want = rel_depth;
            let mut parts = vec![name.clone()];
            for &(d, p) in template[..pos].iter().rev() {
                if d < want {
                    parts.push(p.replace("{}", &layer.to_string()));
                    want = d;
                }
            }
            for part in parts.iter().rev() {
                path.push('/');
                path.push_str(part);
            }
            path
        });
        self.open_span(
            name,
            kind,
            depth,
            Some(self.phase.step()),
            module_path,
            SpanRole::Inner,
        );
        let ops = share(self.ops[i], self.module_spans[i], self.visit);
        let memory = share(self.memory[i], self.module_spans[i], self.visit);
        self.work(ops, memory);
        self.visit += 1;
    }

    fn multi_step(&self) -> bool {
        self.config.steps > 1
    }

    fn last_step(&self) -> bool {
        self.step_no + 1 >= self.config.steps
    }

    /// Sets the current step's budgets and, in a multi-step capture, opens its `step <n>` span
    /// (n from 2, as a capture from step 2 numbers them).
    fn begin_step(&mut self) {
        let steps = self.config.steps.max(1);
        for i in 0..3 {
            self.module_spans[i] = share(self.total_module_spans[i], steps, self.step_no);
            self.ops[i] = share(self.total_ops[i], steps, self.step_no);
            self.memory[i] = share(self.total_memory[i], steps, self.step_no);
        }
        if self.multi_step() {
            let n = 2 + self.step_no;
            self.open_span(
                format!("step {n}"),
                SpanKind::Function,
                1,
                None,
                None,
                SpanRole::Step(n),
            );
        }
    }

    fn end_phase(&mut self) {
        let pass_depth = if self.multi_step() { 3 } else { 2 };
        while self.stack.len() > pass_depth {
            self.close_span();
        }
        if self.phase == Phase::Backward && self.last_step() {
            self.gradient_facts();
        }
        self.close_span();
        self.phase = match self.phase {
            Phase::Forward => Phase::Backward,
            Phase::Backward => Phase::Optimizer,
            _ if self.multi_step() => {
                self.close_span();
                if self.last_step() {
                    Phase::Finish
                } else {
                    self.step_no += 1;
                    self.begin_step();
                    Phase::Forward
                }
            }
            _ => Phase::Finish,
        };
    }

    fn gradient_facts(&mut self) {
        for p in 0..self.config.parameters {
            let roll = self.rng.below(100);
            let (state, norm) = match roll {
                0..=1 => (GradientState::Missing, None),
                2 => (GradientState::Zero, Some(0.0)),
                _ => (
                    GradientState::Present,
                    Some(0.001 + (self.rng.below(1_000_000) as f64) / 1e5),
                ),
            };
            self.queue.push_back(TraceEvent::Gradient(GradientEvent {
                event_id: format!("gradient-{}", p + 1),
                root: "model".to_string(),
                key: self.param_name(p),
                state,
                norm,
                parameter: true,
                tensor_id: None,
                bytes: None,
                non_finite_elements: (state != GradientState::Missing).then_some(0),
            }));
        }
    }

    fn finish(&mut self) {
        self.queue
            .push_back(TraceEvent::TensorStats(TensorStatsEvent {
                span_id: "s1".to_string(),
                label: "loss".to_string(),
                shape: vec![],
                dtype: "f32".to_string(),
                elements: 1,
                non_finite: 0,
                rms: Some(2.5),
                abs_max: Some(2.5),
                mean: Some(2.5),
                min: Some(2.5),
                max: Some(2.5),
            }));
        self.close_span();
        let timestamp_ns = self.tick(10);
        self.queue.push_back(TraceEvent::Terminal(TerminalEvent {
            coverage_lost: Default::default(),
            outcome: TerminalOutcome::Complete,
            timestamp_ns,
            reason: None,
            dropped_events: Some(0),
        }));
    }

    /// Advances the state machine by one step, filling the queue.
    fn step(&mut self) {
        match self.phase {
            Phase::Start => {
                self.start();
                self.begin_step();
                self.begin_phase(Phase::Forward);
            }
            Phase::Forward | Phase::Backward | Phase::Optimizer => {
                let i = self.phase.index();
                if self.visit < self.module_spans[i] {
                    self.module_visit();
                } else {
                    self.end_phase();
                    if self.phase != Phase::Finish {
                        self.begin_phase(self.phase);
                    }
                }
            }
            Phase::Finish => {
                self.finish();
                self.phase = Phase::Done;
            }
            Phase::Done => {}
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceDocument;
    use std::collections::{HashMap, HashSet};

    fn small() -> SynthConfig {
        SynthConfig {
            memory_events: 5_000,
            spans: 300,
            ops: 2_000,
            devices: 3,
            parameters: 32,
            device_memory_samples: 50,
            ..SynthConfig::default()
        }
    }

    #[test]
    fn counts_are_exact_and_document_is_clean() {
        let config = small();
        let events: Vec<TraceEvent> = synth_events(&config).collect();
        assert_eq!(events.len() as u64, config.total_events());
        let doc = TraceDocument::from_events(events);
        assert_eq!(doc.memory.len(), 5_000);
        assert_eq!(doc.spans.len(), 300);
        assert_eq!(doc.ops.len(), 2_000);
        assert_eq!(doc.device_memory.len(), 50);
        assert_eq!(doc.gradients.len(), 32);
        assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
        assert!(!doc.is_truncated());
        assert_eq!(doc.memory.iter().filter(|m| m.pre_existing).count(), 32);
    }

    #[test]
    fn deterministic_per_seed() {
        let a: Vec<TraceEvent> = synth_events(&small()).collect();
        let b: Vec<TraceEvent> = synth_events(&small()).collect();
        assert_eq!(a, b);
        let c: Vec<TraceEvent> = synth_events(&SynthConfig { seed: 2, ..small() }).collect();
        assert_ne!(a, c);
    }

    #[test]
    fn tiny_configs_still_make_a_valid_trace() {
        for (memory_events, spans, ops) in [(0, 0, 0), (1, 1, 1), (3, 5, 0), (0, 13, 7)] {
            let config = SynthConfig {
                memory_events,
                spans,
                ops,
                parameters: 2,
                device_memory_samples: 3,
                ..SynthConfig::default()
            };
            let doc = TraceDocument::from_events(synth_events(&config));
            assert_eq!(doc.memory.len() as u64, memory_events);
            assert_eq!(doc.spans.len() as u64, spans.max(4));
            assert_eq!(doc.ops.len() as u64, ops);
            assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
        }
    }

    #[test]
    fn spans_nest_ops_lie_inside_and_time_increases() {
        let doc = TraceDocument::from_events(synth_events(&small()));
        let roots: Vec<_> = doc.spans.iter().filter(|s| s.parent.is_none()).collect();
        assert_eq!(roots.len(), 1);
        assert!(roots[0].measured);
        assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);
        let mut depth_max = 0;
        for span in &doc.spans {
            let end = span.end_ns().expect("closed");
            let mut depth = 0;
            let mut cur = span;
            while let Some(parent) = cur.parent {
                let p = doc.span(parent).expect("parent exists");
                assert!(p.start_ns <= cur.start_ns && cur.end_ns().unwrap() <= p.end_ns().unwrap());
                cur = p;
                depth += 1;
            }
            depth_max = depth_max.max(depth);
            assert!(span.start_ns < end);
        }
        assert_eq!(depth_max, 4, "root > step > layer > block > projection");
        for op in &doc.ops {
            let span = doc.span(op.span).expect("op span exists");
            assert!(span.start_ns <= op.timestamp_ns);
            assert!(op.timestamp_ns + op.duration_ns <= span.end_ns().unwrap());
        }
        assert!(doc
            .ops
            .windows(2)
            .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns));
        assert!(doc
            .memory
            .windows(2)
            .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns));
        let steps: HashSet<_> = doc.spans.iter().filter_map(|s| s.pass).collect();
        assert_eq!(steps.len(), 3);
    }

    #[test]
    fn multi_step_capture_has_alike_steps_and_a_bounded_live_set() {
        let config = SynthConfig {
            steps: 5,
            memory_events: 20_000,
            spans: 400,
            ops: 5_000,
            devices: 2,
            parameters: 16,
            device_memory_samples: 40,
            ..SynthConfig::default()
        };
        let events: Vec<TraceEvent> = synth_events(&config).collect();
        assert_eq!(events.len() as u64, config.total_events());
        let doc = TraceDocument::from_events(events);
        assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
        assert_eq!(
            (doc.memory.len(), doc.spans.len(), doc.ops.len()),
            (20_000, 400, 5_000)
        );
        assert_eq!(doc.gradients.len(), 16, "gradient facts once");
        assert_eq!(doc.meta.last_capture_step, Some(6));
        let root = doc
            .spans
            .iter()
            .find(|s| s.measured)
            .expect("measured root");
        let steps: Vec<_> = doc
            .spans
            .iter()
            .filter(|s| s.step_index.is_some())
            .collect();
        let indices: Vec<u32> = steps.iter().map(|s| s.step_index.unwrap().get()).collect();
        assert_eq!(indices, vec![2, 3, 4, 5, 6]);
        for step in &steps {
            assert_eq!(step.parent, Some(root.id));
            assert_eq!(
                doc.str(step.name),
                format!("step {}", step.step_index.unwrap())
            );
            let passes: Vec<_> = doc
                .spans
                .iter()
                .filter(|s| s.parent == Some(step.id))
                .map(|s| s.pass)
                .collect();
            assert_eq!(
                passes,
                vec![
                    Some(Pass::Forward),
                    Some(Pass::Backward),
                    Some(Pass::Optimizer)
                ]
            );
        }
        // Replay: the storages live at each step's end are the parameters, the optimizer state
        // (two per parameter) and at most one of the step's own.
        let mut live = HashSet::new();
        let mut at_ends = Vec::new();
        let mut events = doc.memory.iter().peekable();
        for step in &steps {
            let end = step.start_ns + step.duration_ns.expect("closed");
            while let Some(m) = events.next_if(|m| m.timestamp_ns <= end) {
                let key = (m.device, m.storage.expect("storage ids"));
                match m.action {
                    MemoryAction::Alloc => live.insert(key),
                    MemoryAction::Free => live.remove(&key),
                };
            }
            at_ends.push(live.len());
        }
        assert!(
            at_ends.iter().all(|&n| n == 48 || n == 49),
            "live storages at each step's end: {at_ends:?}"
        );
    }

    #[test]
    fn one_step_is_unchanged_by_the_steps_field() {
        let one: Vec<TraceEvent> = synth_events(&SynthConfig {
            steps: 1,
            ..small()
        })
        .collect();
        let zero: Vec<TraceEvent> = synth_events(&SynthConfig {
            steps: 0,
            ..small()
        })
        .collect();
        assert_eq!(one, zero);
        let doc = TraceDocument::from_events(one);
        assert!(doc.spans.iter().all(|s| s.step_index.is_none()));
        assert_eq!(doc.meta.last_capture_step, None);
    }

    #[test]
    fn memory_has_aliases_reuse_and_balanced_frees() {
        let doc = TraceDocument::from_events(synth_events(&small()));
        // Replay: (device, storage) -> live bytes; frees only of live storages.
        let mut live: HashMap<_, u64> = HashMap::new();
        let mut aliases = 0;
        let mut id_reuse = 0;
        let mut freed = HashSet::new();
        let mut address_reuse = 0;
        let mut freed_addresses = HashSet::new();
        let mut devices = HashSet::new();
        for m in &doc.memory {
            let storage = m.storage.expect("trace/11 has storage ids");
            let key = (m.device, storage);
            devices.insert(m.device);
            let address = doc.str(storage).split('.').next().unwrap().to_string();
            match m.action {
                MemoryAction::Alloc => {
                    assert!(m.bytes.is_some());
                    if let std::collections::hash_map::Entry::Vacant(slot) = live.entry(key) {
                        if freed.contains(&key) {
                            id_reuse += 1;
                        }
                        if freed_addresses.contains(&(m.device, address.clone())) {
                            address_reuse += 1;
                        }
                        slot.insert(m.bytes.unwrap());
                    } else {
                        aliases += 1;
                        assert!(m.tensor.is_some());
                    }
                }
                MemoryAction::Free => {
                    let bytes = live.remove(&key).expect("free of a live storage");
                    if let Some(b) = m.bytes {
                        assert_eq!(b, bytes);
                    }
                    freed.insert(key);
                    freed_addresses.insert((m.device, address));
                }
            }
        }
        assert!(aliases > 10, "aliases {aliases}");
        assert!(id_reuse > 5, "same id reused {id_reuse}");
        assert!(address_reuse > 100, "address reuse {address_reuse}");
        assert_eq!(devices.len(), 3);
        let categories: HashSet<_> = doc.memory.iter().map(|m| m.category).collect();
        assert_eq!(categories.len(), 4, "{categories:?}");
        assert!(doc.memory.iter().any(|m| m.tensor.is_none()));
        assert!(doc.memory.iter().any(|m| m.bytes.is_none()));
    }

    #[test]
    fn mix_counts_add_up() {
        let c = SynthConfig::mix(1_000_000);
        let extra = c.total_events() - 1_000_000;
        assert!(extra < 2_000, "{extra}");
    }
}
