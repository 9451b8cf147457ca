//! Running the binary and writing small traces into temp dirs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Exit code, stdout and stderr of one run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `candle-graph` with `args` in the crate directory.
pub fn run(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_candle-graph"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run candle-graph");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A valid, complete trace/11: root `train_step` (measured) with forward/backward/optimizer
/// spans, one parameter, an activation freed in backward, a gradient, a tensor stat.
pub const SMALL_TRACE: &str = concat!(
    r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"run-1","correlation_id":"c","entrypoint":"tiny::train_step","phase":"train","timestamp":"2026-11-29T08:00:00.000Z","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","capture_contract":{"logical_memory":"complete"}}"#,
    "\n",
    r#"{"kind":"span_start","id":"s1","name":"train_step","start_ns":0,"span_kind":"function","measured":true}"#,
    "\n",
    r#"{"kind":"memory","timestamp_ns":0,"action":"alloc","device":"cpu","storage_id":"st1","bytes":4096,"category":"parameter","label":"fc.weight","pre_existing":true,"source":"registry"}"#,
    "\n",
    r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":10,"span_kind":"function","step":"forward"}"#,
    "\n",
    r#"{"kind":"memory","timestamp_ns":20,"action":"alloc","device":"cpu","storage_id":"st2","bytes":2048,"span_id":"s2","shape":[8,64],"dtype":"f32","category":"activation","category_source":"inferred","source":"allocator"}"#,
    "\n",
    r#"{"kind":"tensor_stats","span_id":"s2","label":"loss","shape":[],"dtype":"f32","elements":1,"non_finite":0,"rms":2.5,"abs_max":2.5,"mean":2.5,"min":2.5,"max":2.5}"#,
    "\n",
    r#"{"kind":"span_end","id":"s2","duration_ns":40}"#,
    "\n",
    r#"{"kind":"span_start","id":"s3","parent_id":"s1","name":"backward","start_ns":50,"span_kind":"function","step":"backward"}"#,
    "\n",
    r#"{"kind":"memory","timestamp_ns":60,"action":"alloc","device":"cpu","storage_id":"st3","bytes":4096,"span_id":"s3","category":"gradient","category_source":"inferred","source":"allocator"}"#,
    "\n",
    r#"{"kind":"memory","timestamp_ns":70,"action":"free","device":"cpu","storage_id":"st2","span_id":"s3","source":"allocator"}"#,
    "\n",
    r#"{"kind":"gradient","event_id":"gradient-1","root":"model","key":"fc.weight","state":"present","norm":0.5}"#,
    "\n",
    r#"{"kind":"span_end","id":"s3","duration_ns":30}"#,
    "\n",
    r#"{"kind":"span_start","id":"s4","parent_id":"s1","name":"optimizer","start_ns":90,"span_kind":"function","step":"optimizer"}"#,
    "\n",
    r#"{"kind":"memory","timestamp_ns":95,"action":"free","device":"cpu","storage_id":"st3","span_id":"s4","source":"allocator"}"#,
    "\n",
    r#"{"kind":"span_end","id":"s4","duration_ns":10}"#,
    "\n",
    r#"{"kind":"span_end","id":"s1","duration_ns":100}"#,
    "\n",
    r#"{"kind":"terminal","outcome":"complete","timestamp_ns":100}"#,
    "\n",
);

/// A temp dir holding `name` with `contents`; returns the dir guard and the file path.
pub fn write(name: &str, contents: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}

/// `p` as a `&str`.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Asserts that the run's stderr contains `text`, showing the whole stderr when it does not.
#[track_caller]
pub fn assert_stderr_has(r: &Run, text: &str) {
    assert!(
        r.stderr.contains(text),
        "stderr lacks {text:?}:\n{}",
        r.stderr
    );
}

/// Asserts that the run's stdout contains `text`, showing the whole stdout when it does not.
#[track_caller]
pub fn assert_stdout_has(r: &Run, text: &str) {
    assert!(
        r.stdout.contains(text),
        "stdout lacks {text:?}:\n{}",
        r.stdout
    );
}
