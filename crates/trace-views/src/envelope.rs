//! The `--json` envelope shared by every command.
//!
//! ```text
//! {
//!   "schema": "candle-graph/<command>/1",     // versioned per command
//!   "tool": {"name": "candle-graph", "version": "0.1.0"},
//!   "input": {"path": "out/demo/trace.jsonl", "trace_schema": "candle-graph/trace/11",
//!             "truncated": false},
//!   ...                                        // the command's fields, flattened
//! }
//! ```
//! A field is absent (or `null`) when the trace does not say; it is never a made-up 0. Byte
//! fields end in `_bytes`, times in `_ns`.

use serde::Serialize;

use crate::input::LoadedTrace;

/// Name and version of this binary.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    /// Always `candle-graph`.
    pub name: &'static str,
    /// Crate version.
    pub version: &'static str,
}

/// This binary's [`Tool`] record.
pub const TOOL: Tool = Tool {
    name: "candle-graph",
    version: env!("CARGO_PKG_VERSION"),
};

/// What was read.
#[derive(Debug, Clone, Serialize)]
pub struct InputRecord {
    /// Path of the trace file (a directory input is resolved to its `trace.jsonl`).
    pub path: String,
    /// The trace's `schema`.
    pub trace_schema: &'static str,
    /// Whether the trace was cut short (it is still analysed; figures are lower bounds).
    pub truncated: bool,
    /// `pytorch-profiler` when the file was a PyTorch profiler trace imported on the fly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<&'static str>,
}

impl InputRecord {
    /// The record of a loaded trace.
    pub fn of(trace: &LoadedTrace) -> Self {
        Self {
            path: trace.path.display().to_string(),
            trace_schema: trace.doc.version.as_str(),
            truncated: trace.doc.is_truncated(),
            imported_from: trace.import.as_ref().map(|_| "pytorch-profiler"),
        }
    }
}

/// An envelope around a command's payload.
#[derive(Debug, Serialize)]
pub struct Envelope<'a, T: Serialize> {
    /// `candle-graph/<command>/1`.
    pub schema: String,
    /// This binary.
    pub tool: Tool,
    /// The trace read; absent for commands without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<InputRecord>,
    /// The payload, flattened into the envelope.
    #[serde(flatten)]
    pub payload: &'a T,
}

/// Writes the pretty JSON of `payload` in the envelope of `command`, ending in a newline, as it
/// is produced (nothing of it held).
///
/// # Errors
/// Write errors (a closed pipe keeps its [`std::io::ErrorKind`]); serialization errors.
pub fn write_json<T: Serialize>(
    w: &mut dyn std::io::Write,
    command: &str,
    input: Option<InputRecord>,
    payload: &T,
) -> std::io::Result<()> {
    let envelope = Envelope {
        schema: format!("candle-graph/{command}/1"),
        tool: TOOL,
        input,
        payload,
    };
    serde_json::to_writer_pretty(&mut *w, &envelope)?;
    w.write_all(b"\n")
}

/// Pretty JSON of `payload` in the envelope of `command`, ending in a newline.
///
/// # Errors
/// Serialization errors (non-string map keys; never expected for our types).
pub fn to_json<T: Serialize>(
    command: &str,
    input: Option<InputRecord>,
    payload: &T,
) -> serde_json::Result<String> {
    let envelope = Envelope {
        schema: format!("candle-graph/{command}/1"),
        tool: TOOL,
        input,
        payload,
    };
    let mut s = serde_json::to_string_pretty(&envelope)?;
    s.push('\n');
    Ok(s)
}
