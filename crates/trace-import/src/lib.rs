//! # trace-import
//!
//! Reads PyTorch profiler traces — Kineto's Chrome-trace JSON, as written by
//! `torch.profiler.profile(...).export_chrome_trace(path)`, plain or gzipped — and turns them
//! into candle-graph trace events (`candle-graph/trace/11`), so every analysis of candle-graph
//! runs on a PyTorch run and a Candle port can be compared with its PyTorch original.
//!
//! ```
//! let kineto = br#"{"traceEvents": [
//!   {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
//!   {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 2, "dur": 3},
//!   {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3,
//!    "args": {"Addr": 4096, "Bytes": 64, "Total Allocated": 64, "Total Reserved": 0, "Device Type": 0, "Device Id": -1}}
//! ]}"#;
//! let imported = trace_import::import_bytes(kineto).unwrap();
//! let doc = imported.document();
//! assert_eq!(doc.spans.len(), 3); // the profiler window (measured root), the step, the op
//! assert_eq!(doc.memory.len(), 1);
//! assert_eq!(doc.str(doc.memory[0].span.unwrap()), "s3"); // attributed to aten::empty
//! let memory = imported.report.memory.as_ref().unwrap();
//! assert_eq!(memory.devices[0].replayed_peak_bytes, 64);
//! assert_eq!(memory.devices[0].total_allocated_max_bytes, Some(64));
//! ```
//!
//! What becomes what (the rules are documented on the modules that apply them):
//! - `X` events on host threads → spans nested by time per thread ([`tree`]'s rules): `cpu_op`
//!   and runtime calls are `op` spans, `user_annotation` (`ProfilerStep#N`, `record_function`
//!   ranges), `python_function` and other categories `function` spans (`nn.Module: …`:
//!   `module`); one measured root, the profiler window; one span per thread when there are
//!   several threads; training passes from annotations, `Optimizer.step#…` and autograd ops;
//! - `[memory]` instant events → `memory` alloc/free events and `device_memory` samples of
//!   PyTorch's counters (see the `memory` module docs);
//! - GPU kernels, copies and sets → `device_interval`s on the op that launched them;
//! - flows are checked for pairing; metadata names threads; the rest is counted in the
//!   [`ImportReport`] with the reason it was not imported.
//!
//! Bad input: a file that is not a Chrome trace, invalid JSON, or one with nothing importable
//! is an [`ImportError`] naming the problem; a file (or gzip stream) cut short keeps every whole
//! event before the cut, has no terminal event (so the loaded document is truncated) and says
//! so in [`ImportReport::cut_short`].

#![deny(missing_docs)]

mod assemble;
mod chrome;
mod collect;
pub mod detect;
mod error;
mod imported;
mod memory;
mod meta;
pub mod report;
pub mod side;
mod time;
pub mod tree;

use std::io;
use std::path::Path;

pub use detect::{content_kind, decode, ContentKind, Decoded, GzipInfo};
pub use error::ImportError;
pub use imported::Imported;
pub use meta::{SOURCE_KINETO, SOURCE_TAG};
pub use report::{DeviceMemoryImport, FlowCounts, ImportReport, MemoryImport, SpanCounts};

/// Imports a Kineto trace from its (decompressed) bytes with what [`decode`] learnt about the
/// gzip layer.
///
/// # Errors
/// See [`ImportError`].
pub fn import_decoded(decoded: &Decoded<'_>) -> Result<Imported, ImportError> {
    import_with_side(decoded, None)
}

/// [`import_decoded`] with a side file's metadata over the trace's own.
fn import_with_side(
    decoded: &Decoded<'_>,
    side: Option<chrome::ScriptMeta>,
) -> Result<Imported, ImportError> {
    let (mut raw, end) = chrome::read(&decoded.bytes);
    if let Some(side) = side {
        raw.header.candle_graph = Some(side::merged(raw.header.candle_graph.take(), side));
    }
    let mut report = ImportReport::default();
    let gzip_damage = decoded.gzip.as_ref().and_then(|g| g.damage.clone());
    let mut cut_short = None;
    match end {
        chrome::ReadEnd::Whole => {}
        chrome::ReadEnd::CutShort => {
            cut_short =
                Some(gzip_damage.clone().unwrap_or_else(|| {
                    "the file ends before the trace does (cut short)".to_string()
                }));
        }
        chrome::ReadEnd::TrailingData { line, column } => report.warn(format!(
            "text after the end of the trace at line {line}, column {column} was ignored"
        )),
        chrome::ReadEnd::DuplicateKey { line, column, key } => {
            return Err(ImportError::DuplicateKey { line, column, key });
        }
        chrome::ReadEnd::Malformed {
            line,
            column,
            message,
            wrong_shape,
        } => {
            let message = trace_format::escape(&message).into_owned();
            return Err(if wrong_shape {
                ImportError::NotATrace { found: message }
            } else {
                ImportError::Json {
                    line,
                    column,
                    message,
                }
            });
        }
    }
    if cut_short.is_none() {
        if let Some(damage) = gzip_damage {
            cut_short = Some(damage);
        }
    }
    if !raw.has_trace_events {
        let found = if raw.keys.is_empty() {
            "an empty JSON object".to_string()
        } else {
            format!(
                "a JSON object without `traceEvents` (keys: {})",
                trace_format::escape(&raw.keys.join(", "))
            )
        };
        return Err(ImportError::NotATrace { found });
    }
    assemble::assemble(&raw, decoded.gzip.is_some(), cut_short, report)
}

/// Imports a Kineto trace from the bytes of a `.json` or `.json.gz` file (gzip detected by its
/// magic bytes).
///
/// # Errors
/// See [`ImportError`].
pub fn import_bytes(bytes: &[u8]) -> Result<Imported, ImportError> {
    import_decoded(&decode(bytes)?)
}

/// Imports the Kineto trace at `path`, with its side file's metadata when one lies beside it
/// ([`side::side_file_path`]: `NAME.candle-graph.json`, any profiler schedule).
///
/// # Errors
/// See [`ImportError`]; a side file that exists but is not a JSON object is
/// [`ImportError::SideFile`] naming its line and column.
pub fn import_path(path: &Path) -> Result<Imported, ImportError> {
    let bytes = std::fs::read(path).map_err(|source| ImportError::Io {
        path: path.display().to_string(),
        source,
    })?;
    import_decoded_at(&decode(&bytes)?, path)
}

/// [`import_decoded`] of the trace read from `path`, with the metadata of its side file
/// ([`side::side_file_path`]) when one exists.
///
/// # Errors
/// See [`import_path`].
pub fn import_decoded_at(decoded: &Decoded<'_>, path: &Path) -> Result<Imported, ImportError> {
    let side_path = side::side_file_path(path);
    let side = match std::fs::read_to_string(&side_path) {
        Ok(text) => Some(side::parse(&side_path, &text)?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(ImportError::Io {
                path: side_path.display().to_string(),
                source: e,
            })
        }
    };
    import_with_side(decoded, side)
}
