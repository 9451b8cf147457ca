//! Resolving and loading the trace a command reads.
//!
//! Accepted: a trace file (JSON Lines), or a directory that holds a `trace.jsonl`. Every failure
//! is an [`anyhow::Error`] whose chain reads as one line with `{:#}`, naming the path and, for
//! content errors, the line and field (from [`trace_schema::LoadError`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use trace_schema::TraceDocument;

/// File name of the trace inside a directory input.
pub const TRACE_FILE: &str = "trace.jsonl";

/// A loaded trace and where it came from.
pub struct LoadedTrace {
    /// The file read.
    pub path: PathBuf,
    /// The document.
    pub doc: TraceDocument,
}

/// The file a command should read: `input` itself, or `input/trace.jsonl` for a directory.
///
/// # Errors
/// A missing path; a directory without `trace.jsonl` (naming the other `.jsonl` files found).
pub fn resolve(input: &Path) -> Result<PathBuf> {
    let meta =
        std::fs::metadata(input).with_context(|| format!("cannot open {}", input.display()))?;
    if meta.is_dir() && input.file_name().is_some_and(|n| n == TRACE_FILE) {
        bail!("{} is a directory, not a trace file", input.display());
    }
    if !meta.is_dir() {
        return Ok(input.to_path_buf());
    }
    let candidate = input.join(TRACE_FILE);
    if candidate.is_file() {
        return Ok(candidate);
    }
    if candidate.is_dir() {
        bail!("{} is a directory, not a trace file", candidate.display());
    }
    let mut others: Vec<String> = std::fs::read_dir(input)
        .with_context(|| format!("cannot list directory {}", input.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl"))
        .collect();
    others.sort();
    if others.is_empty() {
        bail!(
            "directory {} holds no {TRACE_FILE} (pass a trace file or a directory with one {TRACE_FILE})",
            input.display()
        );
    }
    bail!(
        "directory {} holds no {TRACE_FILE} (found {}; pass the trace file itself)",
        input.display(),
        others.join(", ")
    )
}

/// Resolves `input` and loads the trace. A truncated trace loads (its document says so).
///
/// # Errors
/// See [`resolve`]; unreadable files; bytes that are not UTF-8 before the last line (a last line
/// cut inside a character is truncation, not an error); and every [`trace_schema::LoadError`]
/// (not JSON, not a trace, unsupported schema), prefixed with the path.
pub fn load(input: &Path) -> Result<LoadedTrace> {
    let path = resolve(input)?;
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    check_utf8(&bytes).with_context(|| format!("cannot load {}", path.display()))?;
    let doc = trace_schema::load_reader(bytes.as_slice())
        .map_err(|e| anyhow::anyhow!(not_a_trace_hint(&e)).context(e.to_string()))
        .with_context(|| format!("cannot load {}", path.display()))?;
    Ok(LoadedTrace { path, doc })
}

/// A short hint for errors that usually mean "this is not a candle-graph trace".
fn not_a_trace_hint(e: &trace_schema::LoadError) -> String {
    use trace_schema::LoadError;
    match e {
        LoadError::MissingMeta { .. }
        | LoadError::UnknownKind { line: 1, .. }
        | LoadError::Field { line: 1, .. } => {
            "not a candle-graph trace (the first line must be a `meta` event)".to_string()
        }
        LoadError::UnsupportedSchema { .. } => {
            "written by another candle-graph version; upgrade candle-graph or re-capture"
                .to_string()
        }
        LoadError::Malformed { .. } => "a trace is JSON Lines, one event per line".to_string(),
        _ => "the trace breaks the candle-graph trace format".to_string(),
    }
}

/// Rejects invalid UTF-8 except inside the final, unterminated line (a crash can cut a
/// multi-byte character; the loader then reports truncation).
fn check_utf8(bytes: &[u8]) -> Result<()> {
    let Err(e) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let at = e.valid_up_to();
    let in_last_unterminated_line = !bytes[at..].contains(&b'\n');
    if in_last_unterminated_line {
        return Ok(());
    }
    let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    bail!("not UTF-8 text: invalid byte at offset {at} (line {line}); a trace is UTF-8 JSON Lines")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_errors_name_the_line() {
        assert!(check_utf8(b"abc\n").is_ok());
        let err = check_utf8(b"ok\n\xff\xfe\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "not UTF-8 text: invalid byte at offset 3 (line 2); a trace is UTF-8 JSON Lines"
        );
        // a cut multi-byte character in the unterminated last line is truncation
        assert!(check_utf8(b"ok\n{\"a\":\"\xc3").is_ok());
    }
}
