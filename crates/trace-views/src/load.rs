//! Loading and analysing a trace for a program that depends on trace-views alone (the CLI):
//! the loader's entry points and options (trace-schema), the recognition, decoding and import
//! of PyTorch profiler traces (trace-import) and the analysis at a detail (trace-graph),
//! re-exported as they are. What each does and the errors it returns are documented where it
//! is defined.

pub use trace_graph::{analyze_with_graph, Analysis, Detail};
pub use trace_import::{
    content_kind, decode, import_decoded_at, import_path, ContentKind, ImportError, ImportReport,
};
pub use trace_memory::SUMMARY_TOP;
pub use trace_schema::{load_path, load_reader_with, LoadError, LoadOptions, TraceDocument};

/// Whether a summary analysis listed fewer storages than some device held at its peak
/// (more than [`SUMMARY_TOP`] live): the views that merge or group every storage live at the
/// peak (`memory`'s merged rows, the op coverage of allocation sites) then need the trace read
/// again at [`Detail::Full`].
pub fn peak_beyond_summary(analysis: &Analysis) -> bool {
    analysis.memory.logical.as_ref().is_some_and(|l| {
        l.by_device.iter().any(|d| {
            d.peak
                .as_ref()
                .is_some_and(|p| p.live_allocation_count > SUMMARY_TOP as u64)
        })
    })
}
