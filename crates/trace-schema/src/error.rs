//! Load errors. A load fails only for these; semantic problems are kept in the document as
//! [`crate::SemanticIssue`]s for the health check.

use std::path::PathBuf;

/// Why a trace could not be loaded. Every variant names the 1-based line (0 only for I/O
/// errors, which have no line; an empty file's is line 1).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A line ran past [`crate::load::MAX_LINE_BYTES`] without a line break (`/dev/zero`, a
    /// binary file, a JSON document on one huge line): refused before it fills memory.
    #[error("no line break in the {} MiB from byte {offset}: not a candle-graph trace (a JSONL line of the format is far shorter)", limit >> 20)]
    LineTooLong {
        /// Byte offset where the line starts.
        offset: u64,
        /// The limit, bytes.
        limit: u64,
    },
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path read.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `\n`-terminated line is not valid JSON (or not UTF-8).
    #[error("line {line}: malformed JSON: {message}")]
    Malformed {
        /// 1-based line number.
        line: u64,
        /// Parser message.
        message: String,
    },
    /// The `kind` tag names no known event.
    #[error("line {line}: unknown event kind `{kind}` (known: {known})", known = crate::event::EVENT_KINDS.join(", "))]
    UnknownKind {
        /// 1-based line number.
        line: u64,
        /// The unknown kind.
        kind: String,
    },
    /// A required field is missing or has the wrong type.
    #[error("line {line}: `{kind}` event field `{field}`: {message}")]
    Field {
        /// 1-based line number.
        line: u64,
        /// Event kind.
        kind: String,
        /// Field path (e.g. `bytes`, `capture_contract.gradients`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The first event is not `meta` (or the file has no event at all).
    #[error("line {line}: missing meta: the first event must be `meta`, found {found}")]
    MissingMeta {
        /// 1-based line number of the first event (1 when the file is empty).
        line: u64,
        /// What was found instead.
        found: String,
    },
    /// A second `meta` event.
    #[error("line {line}: second `meta` event (the first is on line {first_line})")]
    DuplicateMeta {
        /// 1-based line number.
        line: u64,
        /// Line of the first meta.
        first_line: u64,
    },
    /// An event after `terminal`.
    #[error("line {line}: `{kind}` event after the terminal event on line {terminal_line}")]
    EventAfterTerminal {
        /// 1-based line number.
        line: u64,
        /// Kind of the offending event.
        kind: String,
        /// Line of the terminal.
        terminal_line: u64,
    },
    /// A byte that is not UTF-8, outside the final line when that line has no `\n` (a crash can
    /// cut a multi-byte character; that is truncation). Only with
    /// [`crate::LoadOptions::require_utf8`].
    #[error("not UTF-8 text: invalid byte at offset {offset} (line {line}); a trace is UTF-8 JSON Lines")]
    NotUtf8 {
        /// 1-based line number.
        line: u64,
        /// Byte offset of the first invalid byte.
        offset: u64,
    },
    /// The `schema` is not supported, or the event kind does not exist in the document's
    /// version (e.g. `tensor_stats` in trace/9).
    #[error("line {line}: unsupported schema `{schema}`{detail} (supported: {supported})", supported = crate::version::SUPPORTED_SCHEMAS.join(", "))]
    UnsupportedSchema {
        /// 1-based line number.
        line: u64,
        /// The schema string.
        schema: String,
        /// Extra detail (e.g. "tensor_stats does not exist in this version").
        detail: String,
    },
}

impl LoadError {
    /// The 1-based line this error is about (0 for I/O errors, a line that never ends, and
    /// empty files).
    pub fn line(&self) -> u64 {
        match self {
            LoadError::Io { .. } | LoadError::LineTooLong { .. } => 0,
            LoadError::Malformed { line, .. }
            | LoadError::UnknownKind { line, .. }
            | LoadError::Field { line, .. }
            | LoadError::MissingMeta { line, .. }
            | LoadError::DuplicateMeta { line, .. }
            | LoadError::EventAfterTerminal { line, .. }
            | LoadError::NotUtf8 { line, .. }
            | LoadError::UnsupportedSchema { line, .. } => *line,
        }
    }

    /// The same error with its line moved by `by` (a chunk's line base).
    pub(crate) fn shifted(mut self, by: u64) -> Self {
        match &mut self {
            LoadError::Io { .. } | LoadError::LineTooLong { .. } => {}
            LoadError::Malformed { line, .. }
            | LoadError::UnknownKind { line, .. }
            | LoadError::Field { line, .. }
            | LoadError::MissingMeta { line, .. }
            | LoadError::DuplicateMeta { line, .. }
            | LoadError::EventAfterTerminal { line, .. }
            | LoadError::NotUtf8 { line, .. }
            | LoadError::UnsupportedSchema { line, .. } => *line += by,
        }
        self
    }
}
