//! The wire types of the `candle-graph/trace/13` JSONL format: one [`TraceEvent`] per line,
//! tagged by `kind` (snake_case). The kinds are declared once, in the `trace_events!` table
//! below; the table here documents them (its "since" column is the table's `since`, with the
//! first supported version, trace/6, standing for trace/4).
//!
//! # Stream shape
//! The first non-empty line is the single `meta` event carrying `schema`; the last line is the
//! single `terminal` event. Blank lines are ignored. All timestamps are monotonic nanoseconds
//! since the session started (`_ns`); all sizes are bytes (`_bytes`).
//!
//! | kind | type | since |
//! |---|---|---|
//! | `meta` | [`MetaEvent`] | trace/4 |
//! | `span_start` / `span_end` | [`SpanStartEvent`] / [`SpanEndEvent`] | trace/4 |
//! | `op` | [`OpEvent`] | trace/4 |
//! | `tensor` | [`TensorEvent`] | trace/4 |
//! | `tensor_stats` | [`TensorStatsEvent`] | trace/10 |
//! | `memory` | [`MemoryEvent`] | trace/4 |
//! | `device_memory` | [`DeviceMemoryEvent`] | trace/4 |
//! | `device_interval` | [`DeviceIntervalEvent`] | trace/7 |
//! | `gradient` | [`GradientEvent`] | trace/4 |
//! | `edge` | [`EdgeEvent`] | trace/4 |
//! | `dropped_events` | [`DroppedEventsEvent`] | trace/11 |
//! | `frame` / `stack` / `sample` / `sampler` | [`FrameEvent`] / [`StackEvent`] / [`SampleEvent`] / [`SamplerEvent`] (see [`crate::sampling`]) | trace/12 |
//! | `site` / `alloc_sites` | [`SiteEvent`] / [`AllocSitesEvent`] (see [`crate::sites`]) | trace/13 |
//! | `terminal` | [`TerminalEvent`] | trace/7 |
//!
//! # Example (a complete trace/11 document)
//! ```text
//! {"kind":"meta","schema":"candle-graph/trace/11","run_id":"run-1","correlation_id":"mlp/update-2","entrypoint":"mlp","phase":"train","timestamp":"2026-11-29T08:00:00.000Z","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","capture_contract":{"logical_memory":"complete"}}
//! {"kind":"span_start","id":"s1","name":"mlp","start_ns":0,"span_kind":"function","measured":true}
//! {"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":10,"span_kind":"function","step":"forward"}
//! {"kind":"memory","timestamp_ns":20,"action":"alloc","device":"cpu","storage_id":"st1","bytes":4096,"span_id":"s2","category":"activation","category_source":"inferred","source":"allocator"}
//! {"kind":"memory","timestamp_ns":30,"action":"free","device":"cpu","storage_id":"st1","span_id":"s2","source":"allocator"}
//! {"kind":"span_end","id":"s2","duration_ns":40}
//! {"kind":"span_end","id":"s1","duration_ns":60}
//! {"kind":"terminal","outcome":"complete","timestamp_ns":60}
//! ```

use serde::{Deserialize, Serialize};

use crate::meta::RunMeta;
pub use crate::sampling::{
    FrameEvent, SampleEvent, SampledThread, SamplerEvent, StackEvent, SymbolQuality,
};
pub use crate::sites::{AllocSitesEvent, SiteEvent};

/// What [`TraceEvent::visit_body`] calls with the body type of one kind.
pub trait BodyVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the body type `T` of `kind`.
    fn visit<T: serde::de::DeserializeOwned>(self, kind: &'static str) -> Self::Output;
}

trace_events! {
    /// One JSONL record of a trace stream, tagged by `kind`.
    ///
    /// This table is the single declaration of the event kinds: each row gives the variant, its
    /// body type, its wire `kind` and the first schema version it exists in. The enum's serde
    /// tags, [`TraceEvent::kind_name`], [`EVENT_KINDS`] and [`EVENT_KIND_SINCE`] are generated
    /// from it (`trace_events!` in `macros.rs`), so they cannot drift apart.
    // `Meta` is much larger than the body events, but there is one per trace and the loaded
    // document keeps compact records, not `TraceEvent`s; boxing it would break the public API.
    #[allow(clippy::large_enum_variant)]
    pub enum TraceEvent {
        /// Schema and run metadata (exactly one, first).
        Meta(MetaEvent) = "meta", since V6;
        /// A span opens.
        SpanStart(SpanStartEvent) = "span_start", since V6;
        /// A span closes.
        SpanEnd(SpanEndEvent) = "span_end", since V6;
        /// A timed operation.
        Op(OpEvent) = "op", since V6;
        /// A tensor fact.
        Tensor(TensorEvent) = "tensor", since V6;
        /// A labelled numerical summary of a tensor.
        TensorStats(TensorStatsEvent) = "tensor_stats", since V10;
        /// A storage alloc or free (logical memory plane).
        Memory(MemoryEvent) = "memory", since V6;
        /// A device memory sample (physical memory plane).
        DeviceMemory(DeviceMemoryEvent) = "device_memory", since V6;
        /// A device-clock interval.
        DeviceInterval(DeviceIntervalEvent) = "device_interval", since V7;
        /// A gradient fact.
        Gradient(GradientEvent) = "gradient", since V6;
        /// An explicit call or data edge.
        Edge(EdgeEvent) = "edge", since V6;
        /// The running count of events lost to a full buffer.
        DroppedEvents(DroppedEventsEvent) = "dropped_events", since V11;
        /// A symbol-table entry of sampled stacks (trace/12).
        Frame(FrameEvent) = "frame", since V12;
        /// A distinct sampled call stack (trace/12).
        Stack(StackEvent) = "stack", since V12;
        /// A wall-clock stack sample (trace/12).
        Sample(SampleEvent) = "sample", since V12;
        /// The sampler's account of itself (trace/12).
        Sampler(SamplerEvent) = "sampler", since V12;
        /// An allocation site: a stack at which storages were allocated (trace/13).
        Site(SiteEvent) = "site", since V13;
        /// The allocation-site capture's account of itself (trace/13).
        AllocSites(AllocSitesEvent) = "alloc_sites", since V13;
        /// How the capture ended (exactly one, last).
        Terminal(TerminalEvent) = "terminal", since V7;
    }
}

/// The `meta` event: `schema` plus the flattened [`RunMeta`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaEvent {
    /// Format version, e.g. `candle-graph/trace/11`.
    pub schema: String,
    /// Run metadata.
    #[serde(flatten)]
    pub run: RunMeta,
}

wire_enum! {
    /// Kind of a span (`span_kind` on the wire, since `kind` tags the event).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum SpanKind {
        /// A function or region of user code.
        Function = "function",
        /// An operation-sized span.
        Op = "op",
        /// A model module (e.g. from a `tracing` span or a probed `Module`).
        Module = "module",
    }
}

wire_enum! {
    /// A pass of a training step (PyTorch's forward / backward / optimizer phases); decides
    /// inferred memory categories. Written in a span's `step` field on the wire.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Pass {
        /// Forward pass.
        Forward = "forward",
        /// Backward pass (`loss.backward()`).
        Backward = "backward",
        /// Optimizer update (`optimizer.step(&grads)`).
        Optimizer = "optimizer",
    }
}

/// Opens a span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanStartEvent {
    /// Unique span id (the probe writes `s<n>`; the root is `s1`).
    pub id: String,
    /// Enclosing span; absent on the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Display name.
    pub name: String,
    /// Start time, ns since session start.
    pub start_ns: u64,
    /// Span kind.
    #[serde(rename = "span_kind")]
    pub span_kind: SpanKind,
    /// True only on the single measured region.
    #[serde(default)]
    pub measured: bool,
    /// Pass (forward / backward / optimizer) this span declares; the wire name is `step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Pass>,
    /// Module path, names joined by `/` (e.g. `model/encoder/layer/attn`) (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_path: Option<String>,
    /// Stable key of the module instance (e.g. the `tracing` span id) (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_key: Option<String>,
    /// What kind of layer the module is (e.g. `linear`, `conv2d`, `rms-norm`), when the name is
    /// the instance's (e.g. `fc1`, from the `VarBuilder` prefix) (trace/11, optional: readers that predate it ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_kind: Option<String>,
    /// On a backward module span: the forward module span (one call of the module) whose
    /// backward it is (trace/11, optional: readers that predate it ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_span_id: Option<String>,
    /// On a step span of a capture of several consecutive steps: the one-based training step
    /// (or inference call) it is, as counted by the loop (`session.step(n)`) (trace/13,
    /// optional: readers that predate it ignore it). Absent on every other span, and on a
    /// single-step capture, whose step is the measured region itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_index: Option<u64>,
}

/// Closes a span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanEndEvent {
    /// Id of the span being closed.
    pub id: String,
    /// Wall duration in ns (0 in old traces meant "not recorded").
    #[serde(default)]
    pub duration_ns: u64,
    /// The span's extent was inferred, not observed exactly: e.g. a backward module span whose
    /// boundaries come from Candle's processing order, which interleaved another module's
    /// backward with this one (trace/11, optional: readers that predate it ignore it). Memory and time attributed to it are approximate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
    /// Why the extent is inferred (present only with `inferred`) (trace/11, optional: readers that predate it ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred_reason: Option<String>,
}

/// A timed operation inside a span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpEvent {
    /// Span the operation ran in.
    pub span_id: String,
    /// Operation name, e.g. `matmul`.
    pub op_name: String,
    /// Input tensor ids.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// Output tensor id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Output shape.
    #[serde(default)]
    pub shape: Vec<u64>,
    /// Output dtype label.
    pub dtype: String,
    /// Output device label.
    pub device: String,
    /// Duration in ns, measured by the caller.
    pub duration_ns: u64,
    /// Start time in ns since session start.
    #[serde(default)]
    pub timestamp_ns: u64,
    /// Output element count × dtype size (trace/6: `storage_bytes`); filled from shape × dtype at
    /// load when absent and the dtype is known.
    #[serde(
        default,
        alias = "storage_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_dense_bytes: Option<u64>,
    /// Sum of the inputs' dense bytes (trace/6: `input_storage_bytes`).
    #[serde(default, alias = "input_storage_bytes")]
    pub input_dense_bytes: u64,
}

wire_enum! {
    /// Memory category (PyTorch memory-timeline / TensorFlow Memory Profile categories).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum MemoryCategory {
        /// Model parameters.
        Parameter = "parameter",
        /// Forward activations.
        Activation = "activation",
        /// Gradients.
        Gradient = "gradient",
        /// Optimizer state (e.g. AdamW moments) and optimizer temporaries.
        Optimizer = "optimizer",
        /// Anything else, or unknown.
        #[default]
        Other = "other",
    }
}

/// A tensor fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorEvent {
    /// Span in which the fact was recorded.
    pub span_id: String,
    /// Backend tensor identity (joins and deduplication).
    pub tensor_id: String,
    /// Caller-chosen name; never an identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Tensor (view) shape.
    #[serde(default)]
    pub shape: Vec<u64>,
    /// Dtype label.
    pub dtype: String,
    /// Device label.
    pub device: String,
    /// Whether the tensor tracks gradients (a `Var`).
    #[serde(default)]
    pub requires_grad: bool,
    /// Dense bytes of the view (element count × dtype size); filled from shape × dtype at load
    /// when absent and the dtype is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_bytes: Option<u64>,
    /// Bytes of the backing storage, taken from the storage itself (trace/11). In trace/6 this
    /// field held the dense bytes; the loader moves it to `dense_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_bytes: Option<u64>,
    /// Storage identity shared with `memory` events (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_id: Option<String>,
    /// Memory category.
    #[serde(default)]
    pub category: MemoryCategory,
}

/// A labelled numerical summary of a tensor (trace/10; min/max and optional fields trace/11).
///
/// Statistics are computed over the finite elements only and are absent when there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorStatsEvent {
    /// Span in which it was recorded.
    pub span_id: String,
    /// Non-empty caller label.
    pub label: String,
    /// Shape; its product must equal `elements`.
    #[serde(default)]
    pub shape: Vec<u64>,
    /// Dtype label.
    pub dtype: String,
    /// Element count.
    pub elements: u64,
    /// Count of NaN and ±inf elements (≤ `elements`).
    pub non_finite: u64,
    /// Root mean square of the finite elements (finite, ≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rms: Option<f64>,
    /// Largest absolute finite value (finite, ≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abs_max: Option<f64>,
    /// Mean of the finite elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// Minimum finite element (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Maximum finite element (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

impl TensorStatsEvent {
    /// The original's parser rules (shape product = elements, non_finite ≤ elements, rms and
    /// abs_max finite and ≥ 0, mean finite) plus min ≤ max; returns every violation.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.label.trim().is_empty() {
            problems.push("tensor_stats label is empty".to_string());
        }
        match crate::dtype::element_count(&self.shape) {
            Some(n) if n == self.elements => {}
            Some(n) => problems.push(format!(
                "tensor_stats {}: shape has {n} elements but elements is {}",
                self.label, self.elements
            )),
            None => problems.push(format!("tensor_stats {}: shape overflows", self.label)),
        }
        if self.non_finite > self.elements {
            problems.push(format!(
                "tensor_stats {}: non_finite {} exceeds elements {}",
                self.label, self.non_finite, self.elements
            ));
        }
        for (name, value, non_negative) in [
            ("rms", self.rms, true),
            ("abs_max", self.abs_max, true),
            ("mean", self.mean, false),
            ("min", self.min, false),
            ("max", self.max, false),
        ] {
            if let Some(v) = value {
                if !v.is_finite() || (non_negative && v < 0.0) {
                    problems.push(format!(
                        "tensor_stats {}: {name} {v} is invalid",
                        self.label
                    ));
                }
            }
        }
        if let (Some(min), Some(max)) = (self.min, self.max) {
            if min > max {
                problems.push(format!("tensor_stats {}: min exceeds max", self.label));
            }
        }
        problems
    }
}

wire_enum! {
    /// Alloc or free of a storage.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MemoryAction {
        /// The storage was allocated (or, with `pre_existing`, found live at capture start).
        Alloc = "alloc",
        /// The storage was freed.
        Free = "free",
    }
}

wire_enum! {
    /// Who observed a memory event (trace/11).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MemorySource {
        /// An allocator's own report, at exact times: the probe's tracking global allocator, or
        /// an imported one (PyTorch's `[memory]` profiler events, see `trace-import`).
        Allocator = "allocator",
        /// The probe's storage registry (registration time).
        Registry = "registry",
        /// Written by the caller by hand.
        Caller = "caller",
    }
}

wire_enum! {
    /// Where a memory event's category came from (trace/11).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum CategorySource {
        /// Declared by the caller.
        Declared = "declared",
        /// From the registry (a VarMap parameter, a gradient in the GradStore, optimizer state).
        Registry = "registry",
        /// Inferred from the pass (forward / backward / optimizer) the storage was created in.
        Inferred = "inferred",
    }
}

/// A storage alloc or free: the logical memory plane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEvent {
    /// Event time in ns since session start.
    pub timestamp_ns: u64,
    /// Alloc or free.
    pub action: MemoryAction,
    /// Device label; storage identity is scoped by device.
    pub device: String,
    /// Storage identity, unique per lifetime even when an address is reused (the probe writes
    /// `<address hex>.<generation>`, or `st<n>` in deterministic mode). Absent in trace/6, where
    /// identity is `(device, tensor_id)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_id: Option<String>,
    /// Storage bytes; required on an alloc, optional on a free. The probe writes the heap bytes
    /// the allocator handed out for the storage's data (what occupies memory; on CPU the data
    /// `Vec`'s capacity × element size), the one size every analysis uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Logical bytes of the storage (`len × element size`), beside [`Self::bytes`] when the
    /// producer read them; may be smaller than `bytes` (a `Vec` with spare capacity). Absent: not
    /// read (e.g. a storage recognised only at its free, whose length is gone). Informational:
    /// no analysis sums it (trace/11, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_bytes: Option<u64>,
    /// Tensor that owns or views the storage, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_id: Option<String>,
    /// Span in which the event happened; absent when outside every span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// Operation that allocated the storage, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_name: Option<String>,
    /// Shape of the storage's tensor, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    /// Dtype label, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Memory category.
    #[serde(default)]
    pub category: MemoryCategory,
    /// Provenance of `category` (absent: declared) (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category_source: Option<CategorySource>,
    /// Who observed the event (absent: caller) (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<MemorySource>,
    /// The storage existed before capture began; written as an alloc at capture start
    /// (trace/11). Counts toward live bytes, not toward allocation counts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pre_existing: bool,
    /// Free-form label (e.g. the parameter name) (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Where the storage's data was allocated: a [`SiteEvent`] id (trace/13, alloc events
    /// only; absent when no stack was captured: below the threshold, before the capture, or
    /// lost). The site is defined later in the stream (see [`crate::sites`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<u32>,
    /// The allocating thread: the key samples use ([`SampleEvent::thread`]) (trace/13, alloc
    /// events with a site; absent when not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u64>,
}

/// A device memory sample: the physical plane. Each field only when really observed; capacity
/// is measured, never derived from used + free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemoryEvent {
    /// Sample time in ns since session start.
    pub timestamp_ns: u64,
    /// Device label.
    pub device: String,
    /// Bytes in use (CPU: heap bytes through the tracking allocator, less the probe's symbol
    /// cache and what its bundler's threads hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// Free bytes reported by the device (CUDA `mem_get_info`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    /// Bytes held by a caching allocator (PyTorch `memory_reserved`; Metal
    /// `current_allocated_size`, which includes Candle's buffer pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    /// Device capacity in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// Process resident set size in bytes (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
}

impl DeviceMemoryEvent {
    /// True when no field was observed (an `empty_device_memory_sample`).
    pub fn is_empty(&self) -> bool {
        self.used_bytes.is_none()
            && self.free_bytes.is_none()
            && self.reserved_bytes.is_none()
            && self.capacity_bytes.is_none()
            && self.resident_bytes.is_none()
    }
}

/// An interval on a device clock (not aligned with the host clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceIntervalEvent {
    /// Span the work belongs to.
    pub span_id: String,
    /// Device label.
    pub device: String,
    /// Stream id.
    pub stream_id: String,
    /// Device clock id.
    pub clock_id: String,
    /// Backend, e.g. `cuda_event`.
    pub backend: String,
    /// Start on the device clock, ns.
    pub start_ns: u64,
    /// Duration, ns (> 0).
    pub duration_ns: u64,
}

wire_enum! {
    /// State of one gradient.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum GradientState {
        /// A finite, non-zero gradient.
        Present = "present",
        /// No gradient in the store.
        Missing = "missing",
        /// A gradient whose every element is zero.
        Zero = "zero",
        /// A gradient with NaN or ±inf elements.
        NonFinite = "non_finite",
    }
}

/// A gradient fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradientEvent {
    /// Unique event id (`gradient-<n>`).
    pub event_id: String,
    /// Parameter root (e.g. `model`); for non-parameter gradients, the producer's grouping.
    pub root: String,
    /// Parameter key under the root; for non-parameter gradients a label or `tensor/<id>`.
    pub key: String,
    /// Gradient state.
    pub state: GradientState,
    /// L2 norm: finite and > 0 for `present`, exactly +0.0 for `zero`, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
    /// Whether the tensor is a parameter (trace/11; absent: true).
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub parameter: bool,
    /// Tensor id of the gradient's tensor (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_id: Option<String>,
    /// Storage bytes of the gradient (trace/11; for non-parameter gradients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Count of non-finite elements (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_finite_elements: Option<u64>,
}

fn default_true() -> bool {
    true
}

fn is_true(v: &bool) -> bool {
    *v
}

impl GradientEvent {
    /// Whether the norm fits the state (original rule: `present` needs a finite norm > 0,
    /// `zero` exactly +0.0, `missing`/`non_finite` no norm).
    pub fn state_norm_consistent(&self) -> bool {
        match (self.state, self.norm) {
            (GradientState::Present, Some(n)) => n.is_finite() && n > 0.0,
            (GradientState::Zero, Some(n)) => n == 0.0 && n.is_sign_positive(),
            (GradientState::Missing | GradientState::NonFinite, None) => true,
            _ => false,
        }
    }
}

/// An explicit edge, tagged by `edge_kind` (trace/6: untagged, a call edge with `duration_ns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "edge_kind", rename_all = "snake_case")]
pub enum EdgeEvent {
    /// Parent span called child span.
    Call {
        /// Caller span id.
        from_span: String,
        /// Callee span id.
        to_span: String,
        /// Host duration of the call in ns.
        host_duration_ns: u64,
    },
    /// A tensor flowed into another.
    Data {
        /// Source tensor id.
        from_tensor: String,
        /// Destination tensor id.
        to_tensor: String,
    },
}

/// Running count of events lost to a full buffer (trace/11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedEventsEvent {
    /// Time of the report, ns since session start.
    pub timestamp_ns: u64,
    /// Total events dropped since the session started (running count).
    pub dropped_events: u64,
}

wire_enum! {
    /// How a capture ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum TerminalOutcome {
        /// `finish()` was reached.
        Complete = "complete",
        /// The captured step failed (e.g. panicked).
        Failed = "failed",
    }
}

/// The last event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalEvent {
    /// Outcome.
    pub outcome: TerminalOutcome,
    /// Time in ns since session start; no earlier than the latest host evidence.
    pub timestamp_ns: u64,
    /// Why it failed; required for `failed`, forbidden for `complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Final count of dropped events (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_events: Option<u64>,
    /// Coverage the capture lost after `meta` was written: contract field (e.g.
    /// `logical_memory`) → why that evidence is at most `partial` (e.g. "2 storages allocated in
    /// the window were still live and unidentified at its end"). Analyzers read the field's
    /// declared level as at most `partial` (`trace_schema::TraceDocument::effective_contract`) and
    /// report each entry (trace/11; absent: nothing lost).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub coverage_lost: std::collections::BTreeMap<crate::meta::ReasonKey, String>,
}
