//! Issue 32: no depth or size breaks a command. A chain of nested spans and a huge span name,
//! through every command, with bounded time (a generous deadline that only a quadratic blowup
//! or a crash misses: no speed target here) and output linear in the input.
//!
//! In CI: 20,000 levels and a 5 MB name. `CANDLE_GRAPH_FULL_HOSTILE=1` runs the issue's full
//! sizes (100,000 levels, a 100 MB name); a release build is advised for those.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::s;

/// The full sizes, on request.
fn full() -> bool {
    std::env::var_os("CANDLE_GRAPH_FULL_HOSTILE").is_some_and(|v| v == "1")
}

/// What one run produced.
struct Out {
    code: i32,
    stdout_bytes: u64,
    stderr: String,
}

/// Runs the binary with `args`, killing it past `deadline` (a failure).
fn run_bounded(args: &[&str], deadline: Duration) -> Out {
    let mut child = Command::new(env!("CARGO_BIN_EXE_candle-graph"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run candle-graph");
    let mut stdout = child.stdout.take().unwrap();
    let counter = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        while let Ok(k) = stdout.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        n
    });
    let mut stderr = child.stderr.take().unwrap();
    let errs = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} ran past {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Out {
        code: status.code().unwrap_or(-1),
        stdout_bytes: counter.join().unwrap(),
        stderr: errs.join().unwrap(),
    }
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"hostile","phase":"train","timestamp":"2026-12-01T00:00:00.000Z","capture_contract":{"logical_memory":"complete"}}"#;

/// A chain of `depth` nested spans, a 64 B block allocated and freed in the innermost one.
fn deep_trace(depth: usize) -> String {
    let mut t = String::with_capacity(depth * 170);
    t.push_str(META);
    t.push('\n');
    for i in 1..=depth {
        let parent = if i > 1 {
            format!(r#","parent_id":"s{}""#, i - 1)
        } else {
            r#","measured":true"#.to_string()
        };
        t.push_str(&format!(
            r#"{{"kind":"span_start","id":"s{i}"{parent},"name":"level{i}","start_ns":{i},"span_kind":"function"}}"#
        ));
        t.push('\n');
    }
    let n = depth;
    t.push_str(&format!(
        r#"{{"kind":"memory","timestamp_ns":{},"action":"alloc","device":"cpu","storage_id":"a","bytes":64,"span_id":"s{n}"}}"#,
        n + 1
    ));
    t.push('\n');
    t.push_str(&format!(
        r#"{{"kind":"memory","timestamp_ns":{},"action":"free","device":"cpu","storage_id":"a","span_id":"s{n}"}}"#,
        n + 2
    ));
    t.push('\n');
    for i in (1..=depth).rev() {
        t.push_str(&format!(
            r#"{{"kind":"span_end","id":"s{i}","duration_ns":{}}}"#,
            2 * (n + 3) - 2 * i
        ));
        t.push('\n');
    }
    t.push_str(&format!(
        r#"{{"kind":"terminal","outcome":"complete","timestamp_ns":{}}}"#,
        2 * n + 10
    ));
    t.push('\n');
    t
}

/// A Kineto trace of `depth` nested `cpu_op`s (autograd work: a backward pass, so the phase is
/// `train`) with a `[memory]` alloc and free in the innermost.
fn deep_kineto(depth: usize) -> String {
    let mut ev = Vec::with_capacity(depth + 2);
    for i in 0..depth {
        ev.push(format!(
            r#"{{"ph":"X","cat":"cpu_op","name":"MmBackward{i}","pid":1,"tid":1,"ts":{i},"dur":{}}}"#,
            2 * (depth - i) + 4
        ));
    }
    for (k, bytes) in [(depth + 1, 64i64), (depth + 2, -64)] {
        ev.push(format!(
            r#"{{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":{k},"args":{{"Addr":4096,"Bytes":{bytes},"Total Allocated":{},"Total Reserved":0,"Device Type":0,"Device Id":-1}}}}"#,
            if bytes > 0 { 64 } else { 0 }
        ));
    }
    format!("{{\"traceEvents\": [\n{}\n]}}", ev.join(",\n"))
}

/// Every command on `trace` (a candle-graph trace): exit 0 and output at most `per_byte` times
/// the input's size plus `slack` bytes (linear), within `deadline` each.
fn every_command(trace: &Path, per_byte: u64, slack: u64, deadline: Duration) {
    let dir = trace.parent().unwrap();
    let input = file_len(trace);
    let bound = per_byte * input + slack;
    let t = s(trace);
    let (export, report, html) = (dir.join("e.json"), dir.join("r.html"), dir.join("d.html"));
    let commands: Vec<Vec<&str>> = vec![
        vec!["summary", t],
        vec!["summary", t, "--json"],
        vec!["memory", t],
        vec!["memory", t, "--json"],
        vec!["memory", t, "--group-by", "span"],
        vec!["check", t],
        vec!["check", t, "--json"],
        vec!["query", t, "--kind", "spans"],
        vec!["query", t, "--kind", "slowest"],
        vec!["query", t, "--kind", "heaviest"],
        vec!["query", t, "--kind", "memory"],
        vec!["query", t, "--kind", "gradients"],
        vec!["query", t, "--kind", "findings"],
        vec!["export", t, "--format", "chrome", "-o", s(&export)],
        vec!["report", t, "-o", s(&report)],
        vec!["diff", t, t],
        vec!["diff", t, t, "--json", "--html", s(&html)],
    ];
    for args in commands {
        let out = run_bounded(&args, deadline);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(
            out.stdout_bytes <= bound,
            "{args:?}: {} bytes of stdout for {input} of input",
            out.stdout_bytes
        );
        assert!(
            out.stderr.len() < 4096,
            "{args:?}: {} bytes of stderr",
            out.stderr.len()
        );
    }
    for f in [&export, &report, &html] {
        assert!(
            file_len(f) > 0 && file_len(f) <= bound,
            "{}: {} bytes for {input}",
            f.display(),
            file_len(f)
        );
    }
}

#[test]
fn a_deep_chain_of_spans_works_in_every_command() {
    let depth = if full() { 100_000 } else { 20_000 };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("deep.jsonl");
    std::fs::write(&trace, deep_trace(depth)).unwrap();
    // Paths are capped at 32 names: a row costs a bounded amount, whatever the depth.
    every_command(
        &trace,
        12,
        1 << 20,
        Duration::from_secs(if full() { 600 } else { 120 }),
    );
    // the deepest span's path states the full depth
    let out = Command::new(env!("CARGO_BIN_EXE_candle-graph"))
        .args(["query", s(&trace), "--kind", "slowest"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let marker = format!("…({} of {depth} levels left out)…", depth - 32);
    assert!(text.contains(&marker), "no {marker}");
}

#[test]
fn a_deep_chain_of_pytorch_ops_imports_and_analyses() {
    let depth = if full() { 100_000 } else { 20_000 };
    let dir = tempfile::tempdir().unwrap();
    let kineto = dir.path().join("deep.json");
    std::fs::write(&kineto, deep_kineto(depth)).unwrap();
    let deadline = Duration::from_secs(if full() { 600 } else { 120 });
    let converted = dir.path().join("imported.jsonl");
    let out = run_bounded(&["import", s(&kineto), "-o", s(&converted)], deadline);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(file_len(&converted) <= 4 * file_len(&kineto) + (1 << 20));
    for cmd in ["summary", "memory", "check"] {
        let out = run_bounded(&[cmd, s(&kineto)], deadline);
        assert_eq!(out.code, 0, "{cmd}: {}", out.stderr);
    }
    every_command(&converted, 12, 1 << 20, deadline);
}

#[test]
fn a_huge_name_is_elided_everywhere() {
    let size = if full() { 100 << 20 } else { 5 << 20 };
    let name = "N".repeat(size);
    let lines = [
        META.to_string(),
        r#"{"kind":"span_start","id":"s1","name":"root","start_ns":0,"span_kind":"function","measured":true}"#.to_string(),
        format!(r#"{{"kind":"span_start","id":"s2","parent_id":"s1","name":"{name}","start_ns":1,"span_kind":"function","step":"forward"}}"#),
        format!(r#"{{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"a","bytes":64,"span_id":"s2","label":"{name}","op_name":"{name}"}}"#),
        format!(r#"{{"kind":"op","span_id":"s2","op_name":"{name}","inputs":[],"shape":[2],"dtype":"f32","device":"cpu","duration_ns":1,"timestamp_ns":2}}"#),
        r#"{"kind":"memory","timestamp_ns":3,"action":"free","device":"cpu","storage_id":"a","span_id":"s2"}"#.to_string(),
        format!(r#"{{"kind":"gradient","event_id":"g","root":"m","key":"{name}","state":"missing"}}"#),
        r#"{"kind":"span_end","id":"s2","duration_ns":5}"#.to_string(),
        r#"{"kind":"span_end","id":"s1","duration_ns":10}"#.to_string(),
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10}"#.to_string(),
    ];
    drop(name);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("huge.jsonl");
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    drop(lines);
    // Output does not grow with the name: every command's output is under 1 MiB.
    every_command(
        &trace,
        0,
        1 << 20,
        Duration::from_secs(if full() { 600 } else { 120 }),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_candle-graph"))
        .args(["query", s(&trace), "--kind", "spans"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("[{size} bytes, fnv ")),
        "the full length is stated"
    );
}
