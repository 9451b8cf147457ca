//! What the trace cannot say about its run, from where PyTorch keeps it or from a side file.
//!
//! 1. **The trace's own `candle_graph` metadata** (`prof.add_metadata_json("candle_graph",
//!    …)`): PyTorch keeps it only when the call is made while the profiler is initialised —
//!    with a schedule that starts with `wait` steps, a call before the first active step is
//!    dropped ("Profiler is not initialized").
//! 2. **A side file** beside the trace, any schedule: `NAME.candle-graph.json` for
//!    `NAME.json` or `NAME.json.gz` (the same object: `warmup_steps`, `capture_step`,
//!    `intra_op_threads`, `torch_version`, `host`); its fields win over the trace's.
//! 3. **The recorded step's number** (`ProfilerStep#N`): without a declared warm-up, the `N`
//!    profiler steps before the first recorded one are its warm-up, said in the tag
//!    `import.warmup_source` (steps run before the profiler was made are not seen).
//!
//! A warm-up none of them gives stays unknown: the diff notes it, it does not refuse op times.

use std::path::{Path, PathBuf};

use crate::chrome::ScriptMeta;

/// The side file's suffix.
pub const SIDE_FILE_SUFFIX: &str = ".candle-graph.json";

/// The side file of the trace at `trace`: `NAME.candle-graph.json` for `NAME.json[.gz]`.
pub fn side_file_path(trace: &Path) -> PathBuf {
    let name = trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".gz").unwrap_or(&name);
    let stem = stem.strip_suffix(".json").unwrap_or(stem);
    trace.with_file_name(format!("{stem}{SIDE_FILE_SUFFIX}"))
}

/// Why a side file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("side file {path}: {message}")]
pub struct SideFileError {
    /// The side file.
    pub path: String,
    /// What is wrong (serde's line and column for bad JSON).
    pub message: String,
}

/// Parses a side file's text (a JSON object; fields of the wrong type are ignored, as in the
/// trace's own metadata).
pub(crate) fn parse(path: &Path, text: &str) -> Result<ScriptMeta, SideFileError> {
    let err = |message: String| SideFileError {
        path: path.display().to_string(),
        message,
    };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        err(format!(
            "not valid JSON at line {}, column {}: {e}",
            e.line(),
            e.column()
        ))
    })?;
    if !v.is_object() {
        return Err(err("not a JSON object".to_string()));
    }
    serde_json::from_value(v).map_err(|e| err(e.to_string()))
}

/// `trace`'s metadata with the side file's fields over it.
pub(crate) fn merged(trace: Option<ScriptMeta>, side: ScriptMeta) -> ScriptMeta {
    let t = trace.unwrap_or_default();
    ScriptMeta {
        warmup_steps: side.warmup_steps.or(t.warmup_steps),
        capture_step: side.capture_step.or(t.capture_step),
        intra_op_threads: side.intra_op_threads.or(t.intra_op_threads),
        torch_version: side.torch_version.or(t.torch_version),
        host: side.host.or(t.host),
    }
}

/// The warm-up read from the first recorded `ProfilerStep#N`: `N` profiler steps ran before
/// it (PyTorch numbers steps from 0).
pub(crate) fn warmup_from_steps<'a>(steps: impl IntoIterator<Item = &'a str>) -> Option<u64> {
    steps
        .into_iter()
        .filter_map(|n| n.strip_prefix("ProfilerStep#")?.parse::<u64>().ok())
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_side_file_sits_beside_the_trace() {
        assert_eq!(
            side_file_path(Path::new("out/mlp.json.gz")),
            Path::new("out/mlp.candle-graph.json")
        );
        assert_eq!(
            side_file_path(Path::new("t.pt.trace.json")),
            Path::new("t.pt.trace.candle-graph.json")
        );
    }

    #[test]
    fn side_fields_win_and_bad_files_name_the_line() {
        let p = Path::new("x.candle-graph.json");
        let side = parse(p, "{\"warmup_steps\": 3,\n \"intra_op_threads\": \"one\"}").unwrap();
        assert_eq!(side.warmup_steps, Some(3));
        assert_eq!(side.intra_op_threads, None);
        let trace = ScriptMeta {
            warmup_steps: Some(1),
            intra_op_threads: Some(1),
            ..ScriptMeta::default()
        };
        let m = merged(Some(trace), side);
        assert_eq!((m.warmup_steps, m.intra_op_threads), (Some(3), Some(1)));
        let e = parse(p, "{\n\"warmup_steps\": }").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(parse(p, "[1]")
            .unwrap_err()
            .to_string()
            .contains("not a JSON object"));
    }

    #[test]
    fn the_warmup_is_the_first_recorded_step_number() {
        assert_eq!(
            warmup_from_steps(["ProfilerStep#3", "ProfilerStep#2"]),
            Some(2)
        );
        assert_eq!(warmup_from_steps(["ProfilerStep#x"]), None);
        assert_eq!(warmup_from_steps([]), None);
    }
}
