//! The exports for other viewers, re-exported for programs that depend on trace-views alone:
//! the Chrome Trace Event Format (with its `--window`), speedscope's file format and, with the
//! `parquet` feature, the Parquet tables. What each writes is documented where it is defined
//! (trace-report, trace-export).

pub use trace_report::chrome::{write_chrome, ChromeOptions, ExportStats};
pub use trace_report::speedscope::{write_speedscope, SpeedscopeError, SpeedscopeStats};
pub use trace_report::window::{Window, WindowError};

/// The Parquet tables of one or more traces (trace-export).
#[cfg(feature = "parquet")]
pub mod parquet {
    pub use trace_export::{
        export_partition, partition_value, ParquetExport, Staging, Written, PART_FILE,
    };
}

/// The findings of `analysis` as the exports and the report carry them (one text each).
pub fn finding_texts(analysis: &trace_graph::Analysis) -> Vec<trace_report::FindingText> {
    crate::summary::finding_texts(analysis)
}
