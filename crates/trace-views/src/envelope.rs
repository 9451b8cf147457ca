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

use trace_schema::TraceDocument;

/// Name and version of the tool that wrote the output.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    /// Always `candle-graph`.
    pub name: &'static str,
    /// Crate version.
    pub version: &'static str,
}

/// The `candle-graph` [`Tool`] record (every crate of the workspace shares one version).
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
    /// The record of `doc` read from `path`; `imported` when it was a PyTorch profiler trace
    /// imported on the fly.
    pub fn new(path: &std::path::Path, doc: &TraceDocument, imported: bool) -> Self {
        Self {
            path: path.display().to_string(),
            trace_schema: doc.version.as_str(),
            truncated: doc.is_truncated(),
            imported_from: imported.then_some("pytorch-profiler"),
        }
    }
}

/// An envelope around a command's payload.
#[derive(Debug, Serialize)]
pub struct Envelope<'a, T: Serialize> {
    /// `candle-graph/<command>/1`.
    pub schema: String,
    /// The tool ([`TOOL`]).
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
    crate::safe_json::to_writer_pretty(&mut *w, &envelope)?;
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
    let mut out = Vec::new();
    crate::safe_json::to_writer_pretty(&mut out, &envelope)?;
    // The serializer writes only UTF-8 (strings from `&str`, escapes in ASCII).
    let mut s = String::from_utf8(out).unwrap_or_default();
    s.push('\n');
    Ok(s)
}
