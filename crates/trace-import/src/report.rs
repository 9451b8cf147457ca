//! What an import read, made and left out: counts, the memory cross-check against PyTorch's
//! own counter, and warnings worded for a person.

use std::collections::BTreeMap;

use serde::Serialize;

/// The account of one import.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportReport {
    /// The file was gzip.
    pub gzip: bool,
    /// Entries of `traceEvents` read (whole ones; a cut-short file loses its last).
    pub trace_events: u64,
    /// Set when the file ends before the trace does: what was cut. The import holds every
    /// whole event before the cut and has no terminal event (the document is truncated).
    pub cut_short: Option<String>,
    /// Spans made, by origin.
    pub spans: SpanCounts,
    /// Spans carrying each training pass (`forward` / `backward` / `optimizer`).
    pub passes: BTreeMap<String, u64>,
    /// The memory plane; `None` when the trace has no `[memory]` events.
    pub memory: Option<MemoryImport>,
    /// GPU events imported as `device_interval`s.
    pub device_intervals: u64,
    /// Flow events (`s`/`t`/`f`).
    pub flows: FlowCounts,
    /// Events not imported, by reason (e.g. ``phase `C` (counter)``, `instant events other than [memory]`).
    pub skipped: BTreeMap<String, u64>,
    /// Problems a person should know about, one sentence each.
    pub warnings: Vec<String>,
}

/// Spans made by the import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SpanCounts {
    /// All spans, the root included.
    pub total: u64,
    /// From `cpu_op` and runtime (`cuda_runtime`, …) events: `span_kind` `op`.
    pub ops: u64,
    /// From `user_annotation` (including `ProfilerStep#N`), `python_function` and other host
    /// `X` events: `function` spans (`nn.Module: …` Python functions: `module` spans).
    pub functions: u64,
    /// `backward` spans the import added around runs of autograd ops.
    pub derived_backward: u64,
    /// Host `X` events imported as spans, by category (`cpu_op`, `user_annotation`, …; empty
    /// for none).
    pub categories: BTreeMap<String, u64>,
    /// Host threads with spans or memory events.
    pub threads: u64,
    /// Spans that start inside an earlier span on their thread but end after it (nested under
    /// it; the health check warns that they outlive their parent).
    pub overlapping: u64,
}

/// The memory plane as imported, and how it compares with PyTorch's counter.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemoryImport {
    /// `[memory]` events imported.
    pub events: u64,
    /// Allocations (`Bytes` > 0).
    pub allocs: u64,
    /// Frees (`Bytes` < 0).
    pub frees: u64,
    /// Frees of an address never allocated in the window: memory from before the capture,
    /// imported as `pre_existing` storages.
    pub pre_existing: u64,
    /// Their bytes.
    pub pre_existing_bytes: u64,
    /// An address allocated again while live: its free is missing from the trace; the import
    /// ends the earlier lifetime at the new allocation (an inferred free).
    pub inferred_frees: u64,
    /// Frees of an address already freed in the window (kept as unmatched frees).
    pub repeated_frees: u64,
    /// Per device, sorted by label; when several processes wrote `[memory]` events, per
    /// (device, process), after each shared device's combined entry (`process` `None`).
    pub devices: Vec<DeviceMemoryImport>,
    /// Processes (`pid`s) that wrote `[memory]` events, when there are several (traces of
    /// several ranks merged into one file); empty for one.
    pub processes: Vec<String>,
}

/// One device's replay beside PyTorch's `Total Allocated`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceMemoryImport {
    /// Device label (`cpu`, `cuda:0`, …).
    pub device: String,
    /// The process (`pid`) of these figures when several processes wrote `[memory]` events;
    /// `None` for a single-process trace, and for the combined entry of a device several
    /// processes share (its replay is their sum; it has no PyTorch counter, which is per
    /// process).
    pub process: Option<String>,
    /// `[memory]` events on it.
    pub events: u64,
    /// Largest live bytes of the replay (pre-existing storages included), read after every
    /// event in (timestamp, file order).
    pub replayed_peak_bytes: u64,
    /// Largest `Total Allocated`; `None` when no event carried it.
    pub total_allocated_max_bytes: Option<u64>,
    /// `Total Allocated − replayed live bytes` after each event: the smallest value. On a
    /// complete record this is the same after every event: memory allocated before the window
    /// and not freed in it.
    pub gap_min_bytes: Option<i128>,
    /// The largest value of that difference.
    pub gap_max_bytes: Option<i128>,
    /// Largest `Total Reserved` (caching allocators; not read on the CPU, where PyTorch writes 0).
    pub total_reserved_max_bytes: Option<u64>,
}

impl DeviceMemoryImport {
    /// The memory from before the window when the difference is the same after every event.
    pub fn constant_gap_bytes(&self) -> Option<i128> {
        match (self.gap_min_bytes, self.gap_max_bytes) {
            (Some(a), Some(b)) if a == b => Some(a),
            _ => None,
        }
    }
}

/// Flow events (`s` start, `t` step, `f` finish), paired by (category, id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounts {
    /// Ids with both a start and a finish.
    pub paired: u64,
    /// Ids with a start and no finish.
    pub unpaired_starts: u64,
    /// Ids with a finish and no start.
    pub unpaired_finishes: u64,
}

impl ImportReport {
    pub(crate) fn skip(&mut self, reason: impl Into<String>) {
        *self.skipped.entry(reason.into()).or_default() += 1;
    }

    pub(crate) fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }
}
