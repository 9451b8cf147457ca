//! The compact records a [`super::TraceDocument`] keeps per event (interned strings and shapes).

use crate::event::*;
use crate::intern::{ShapeId, Sym};

/// A span, from its `span_start` and (if seen) its `span_end`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// Span id.
    pub id: Sym,
    /// Parent span id.
    pub parent: Option<Sym>,
    /// Name.
    pub name: Sym,
    /// Kind.
    pub kind: SpanKind,
    /// Start, ns since session start.
    pub start_ns: u64,
    /// Duration from `span_end`; `None` while the span is open (never closed in the file).
    pub duration_ns: Option<u64>,
    /// The single measured region.
    pub measured: bool,
    /// Pass (forward / backward / optimizer) the span declares (wire field `step`).
    pub pass: Option<Pass>,
    /// Module path (trace/11).
    pub module_path: Option<Sym>,
    /// Module instance key (trace/11).
    pub instance_key: Option<Sym>,
    /// Module kind, e.g. `linear` (trace/11, optional).
    pub module_kind: Option<Sym>,
    /// On a backward module span, the forward module span it mirrors (trace/11, optional).
    pub forward_span: Option<Sym>,
    /// On a step span of a multi-step capture, the one-based step (or call) number
    /// (trace/13, optional; 4 bytes to keep the record compact: a `step_index` of 0 or past
    /// `u32::MAX` names no step and is dropped, see [`step_index_of`]).
    pub step_index: Option<std::num::NonZeroU32>,
    /// The extent is inferred, not observed exactly (from `span_end`, trace/11, optional).
    pub inferred: bool,
    /// Why (trace/11, optional).
    pub inferred_reason: Option<Sym>,
    /// 1-based line of the `span_start`.
    pub line: u32,
}

/// The record's form of a wire `step_index`: `None` for 0 (steps are one-based) and for a
/// number past `u32::MAX`.
pub fn step_index_of(wire: Option<u64>) -> Option<std::num::NonZeroU32> {
    wire.and_then(|n| u32::try_from(n).ok())
        .and_then(std::num::NonZeroU32::new)
}

impl SpanRecord {
    /// End time (`start_ns + duration_ns`) for a closed span.
    pub fn end_ns(&self) -> Option<u64> {
        self.duration_ns.map(|d| self.start_ns.saturating_add(d))
    }
}

/// An operation.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRecord {
    /// Span the op ran in.
    pub span: Sym,
    /// Op name.
    pub op_name: Sym,
    /// Input tensor ids.
    pub inputs: Box<[Sym]>,
    /// Output tensor id.
    pub output: Option<Sym>,
    /// Output shape.
    pub shape: ShapeId,
    /// Output dtype.
    pub dtype: Sym,
    /// Output device.
    pub device: Sym,
    /// Duration, ns.
    pub duration_ns: u64,
    /// Start, ns.
    pub timestamp_ns: u64,
    /// Output dense bytes (filled from shape × dtype when absent and the dtype is known).
    pub output_dense_bytes: Option<u64>,
    /// Sum of the inputs' dense bytes.
    pub input_dense_bytes: u64,
}

/// A tensor fact.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRecord {
    /// Span.
    pub span: Sym,
    /// Tensor id.
    pub tensor_id: Sym,
    /// Caller label.
    pub label: Option<Sym>,
    /// Shape.
    pub shape: ShapeId,
    /// Dtype.
    pub dtype: Sym,
    /// Device.
    pub device: Sym,
    /// Tracks gradients.
    pub requires_grad: bool,
    /// Dense bytes of the view (filled from shape × dtype when absent and known).
    pub dense_bytes: Option<u64>,
    /// Bytes of the backing storage.
    pub storage_bytes: Option<u64>,
    /// Storage identity.
    pub storage_id: Option<Sym>,
    /// Category.
    pub category: MemoryCategory,
}

/// A memory event, compact: 64 bytes (checked by a unit test).
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecord {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Bytes (required on allocs; optional on frees).
    pub bytes: Option<u64>,
    /// Device.
    pub device: Sym,
    /// Storage identity (`None` in trace/6: identity is `(device, tensor)`).
    pub storage: Option<Sym>,
    /// Tensor id.
    pub tensor: Option<Sym>,
    /// Span.
    pub span: Option<Sym>,
    /// Allocating op name.
    pub op_name: Option<Sym>,
    /// Shape.
    pub shape: Option<ShapeId>,
    /// Dtype.
    pub dtype: Option<Sym>,
    /// Label.
    pub label: Option<Sym>,
    /// Alloc or free.
    pub action: MemoryAction,
    /// Category.
    pub category: MemoryCategory,
    /// Provenance of the category (`None`: declared by the caller).
    pub category_source: Option<CategorySource>,
    /// Observer (`None`: the caller).
    pub source: Option<MemorySource>,
    /// Existed before capture began.
    pub pre_existing: bool,
}

/// A device memory sample (physical plane).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceMemoryRecord {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Device.
    pub device: Sym,
    /// Used bytes.
    pub used_bytes: Option<u64>,
    /// Free bytes.
    pub free_bytes: Option<u64>,
    /// Reserved bytes.
    pub reserved_bytes: Option<u64>,
    /// Capacity bytes.
    pub capacity_bytes: Option<u64>,
    /// Process RSS bytes.
    pub resident_bytes: Option<u64>,
}

/// An explicit edge.
#[derive(Debug, Clone, PartialEq)]
pub enum EdgeRecord {
    /// Call edge between spans.
    Call {
        /// Caller span.
        from_span: Sym,
        /// Callee span.
        to_span: Sym,
        /// Host duration, ns.
        host_duration_ns: u64,
    },
    /// Data edge between tensors.
    Data {
        /// Source tensor.
        from_tensor: Sym,
        /// Destination tensor.
        to_tensor: Sym,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_stay_compact() {
        // Resident size per event is a target (well under 100 bytes/event at 10^7 events).
        assert_eq!(std::mem::size_of::<MemoryRecord>(), 64);
        assert!(std::mem::size_of::<OpRecord>() <= 80);
        // A span is one per module call / pass, far fewer than memory and op events; the
        // backward-span fields (module kind, forward span, inferred + reason) take it to 64,
        // the step index of a multi-step capture's step spans (4 bytes, aligned) to 72.
        assert!(std::mem::size_of::<SpanRecord>() <= 72);
    }
}
