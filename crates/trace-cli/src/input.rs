//! Resolving and loading the trace a command reads.
//!
//! Accepted: a trace file (JSON Lines), or a directory that holds a `trace.jsonl`; a PyTorch
//! profiler trace (Kineto Chrome-trace JSON) is recognised by its content and imported
//! ([`trace_import`]); either may be gzipped (recognised by the gzip magic bytes). Every failure
//! is an [`anyhow::Error`] whose chain reads as one line with `{:#}`, naming the path and, for
//! content errors, the line and field (from [`trace_schema::LoadError`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use trace_import::{ContentKind, ImportReport};
use trace_schema::TraceDocument;

/// File name of the trace inside a directory input.
pub const TRACE_FILE: &str = "trace.jsonl";

/// A loaded trace and where it came from.
pub struct LoadedTrace {
    /// The file read.
    pub path: PathBuf,
    /// The document.
    pub doc: TraceDocument,
    /// Set when the file was a PyTorch profiler trace: the account of its import.
    pub import: Option<ImportReport>,
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

/// Resolves `input` and loads the trace. A truncated trace loads (its document says so); a
/// PyTorch profiler trace is imported (a cut-short one too, truncated).
///
/// # Errors
/// See [`resolve`]; unreadable files; a gzip stream that yields nothing; bytes that are not
/// UTF-8 before the last line (a last line cut inside a character is truncation, not an error);
/// every [`trace_schema::LoadError`] (not JSON, not a trace, unsupported schema) and
/// [`trace_import::ImportError`], prefixed with the path.
pub fn load(input: &Path) -> Result<LoadedTrace> {
    let path = resolve(input)?;
    let raw = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let decoded =
        trace_import::decode(&raw).with_context(|| format!("cannot load {}", path.display()))?;
    if trace_import::content_kind(&decoded.bytes) == ContentKind::ChromeTrace {
        let imported = trace_import::import_decoded(&decoded)
            .with_context(|| format!("cannot import {}", path.display()))?;
        let doc = imported.document();
        return Ok(LoadedTrace {
            path,
            doc,
            import: Some(imported.report),
        });
    }
    let bytes = decoded.bytes.as_ref();
    check_utf8(bytes).with_context(|| format!("cannot load {}", path.display()))?;
    let doc = trace_schema::load_reader(bytes)
        .map_err(|e| anyhow::anyhow!(not_a_trace_hint(&e)).context(e.to_string()))
        .with_context(|| format!("cannot load {}", path.display()))?;
    Ok(LoadedTrace {
        path,
        doc,
        import: None,
    })
}

/// Prints an imported trace's warnings to stderr, one line each.
pub fn warn_import(trace: &LoadedTrace) {
    if let Some(report) = &trace.import {
        for w in &report.warnings {
            eprintln!(
                "candle-graph: warning: {} (PyTorch profiler trace): {w}",
                trace.path.display()
            );
        }
    }
}

/// A short hint for errors that usually mean "this is not a candle-graph trace".
fn not_a_trace_hint(e: &trace_schema::LoadError) -> String {
    use trace_schema::LoadError;
    match e {
        LoadError::MissingMeta { .. }
        | LoadError::UnknownKind { line: 1, .. }
        | LoadError::Field { line: 1, .. } => {
            "not a candle-graph trace (the first line must be a `meta` event) nor a PyTorch profiler trace (no `traceEvents`)".to_string()
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
