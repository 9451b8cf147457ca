//! Why an import fails.

use std::io;

use crate::{detect, side};

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The trace's side file (`NAME.candle-graph.json`) could not be read or parsed.
    #[error(transparent)]
    SideFile(#[from] side::SideFileError),
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A gzip stream that yields nothing.
    #[error(transparent)]
    Gzip(#[from] detect::DecodeError),
    /// The text is not valid JSON where it stops being so.
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A top-level key the import reads appears twice (JSON readers disagree on which counts).
    #[error("line {line}, column {column}: the key `{key}` appears twice (JSON readers disagree on which one counts; keep one)")]
    DuplicateKey {
        /// 1-based line of the second occurrence.
        line: usize,
        /// 1-based column just after it.
        column: usize,
        /// The key.
        key: String,
    },
    /// Valid JSON, but not a Chrome trace.
    #[error("not a PyTorch profiler (Chrome) trace: {found}")]
    NotATrace {
        /// What the document is instead.
        found: String,
    },
    /// A Chrome trace with nothing the import can use.
    #[error(
        "the trace holds no span, memory or GPU event to import ({read} events read: {detail})"
    )]
    NoEvents {
        /// Events read.
        read: u64,
        /// What they were.
        detail: String,
    },
}
