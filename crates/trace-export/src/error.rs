//! Why an export failed.

use std::path::PathBuf;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// An I/O error.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The Parquet writer failed.
    #[error("{}: {message}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The writer's message.
        message: String,
    },
    /// A row that does not fit its table (a bug in this crate).
    #[error("table {table}: a value of the wrong type or a null in column {column}")]
    Row {
        /// The table.
        table: &'static str,
        /// The column.
        column: &'static str,
    },
    /// A live-bytes change beyond `int64` (only a hostile trace has one).
    #[error("{trace}: memory event {event_index} changes live bytes by more than 2^63")]
    DeltaOverflow {
        /// The trace.
        trace: String,
        /// The event.
        event_index: usize,
    },
    /// The trace's memory events, spilled to a temporary log at load, could not be read back
    /// (the file vanished or the disk failed).
    #[error("{trace}: cannot read its memory events back from the spilled log: {source}")]
    SpilledLog {
        /// The trace.
        trace: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The trace was loaded without its per-event detail (`Detail::Summary`): the storages and
    /// the timeline are not all there.
    #[error("{0}: the analysis lacks per-event detail (analyse it with Detail::Full)")]
    SummaryDetail(String),
    /// A second trace with the run id and rank of one already exported: its rows would be
    /// counted twice by every query keyed by run and rank (the same file given twice, a copy).
    #[error("{trace}: run {run_id}{} is already exported from {first}; each run and rank is exported once", rank.map_or(String::new(), |r| format!(" rank {r}")))]
    DuplicateRun {
        /// The trace refused.
        trace: String,
        /// Its run id.
        run_id: String,
        /// Its rank, when it has one.
        rank: Option<u32>,
        /// The trace exported first with that key.
        first: String,
    },
}
