//! Exit codes and one-line messages for every kind of bad input; truncated traces are analysed.

use crate::util::{run, s, write, SMALL_TRACE};

/// Exit 2, nothing on stdout, exactly one stderr line containing `needle`.
fn assert_fails(args: &[&str], needle: &str) {
    let r = run(args);
    assert_eq!(r.code, 2, "{args:?}: stderr {}", r.stderr);
    assert!(r.stdout.is_empty(), "stdout must stay empty: {}", r.stdout);
    assert_eq!(r.stderr.lines().count(), 1, "one line: {}", r.stderr);
    assert!(r.stderr.contains(needle), "{:?} lacks {needle:?}", r.stderr);
}

#[test]
fn missing_file() {
    for cmd in ["summary", "memory", "check"] {
        assert_fails(
            &[cmd, "/nonexistent/trace.jsonl"],
            "cannot open /nonexistent/trace.jsonl",
        );
    }
    assert_fails(&["query", "/nonexistent", "--kind", "spans"], "cannot open");
}

#[test]
fn directory_without_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.jsonl"), "").unwrap();
    std::fs::write(dir.path().join("b.jsonl"), "").unwrap();
    assert_fails(
        &["summary", s(dir.path())],
        "holds no trace.jsonl (found a.jsonl, b.jsonl",
    );
    let empty = tempfile::tempdir().unwrap();
    assert_fails(&["summary", s(empty.path())], "holds no trace.jsonl");
}

#[test]
fn a_directory_named_trace_jsonl_is_not_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("trace.jsonl");
    std::fs::create_dir(&inner).unwrap();
    assert_fails(
        &["summary", s(dir.path())],
        "is a directory, not a trace file",
    );
    assert_fails(&["summary", s(&inner)], "is a directory, not a trace file");
}

#[test]
fn directory_with_a_trace_is_accepted() {
    let (dir, _) = write("trace.jsonl", SMALL_TRACE.as_bytes());
    let r = run(&["summary", s(dir.path())]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("tiny::train_step"));
}

#[test]
fn json_that_is_not_a_trace() {
    let (_d, p) = write(
        "x.jsonl",
        b"{\"name\":\"package.json\",\"version\":\"1\"}\n",
    );
    assert_fails(&["summary", s(&p)], "line 1");
    assert_fails(&["summary", s(&p)], "not a candle-graph trace");
}

#[test]
fn not_json_at_all() {
    let (_d, p) = write("x.jsonl", b"hello world\n");
    assert_fails(&["check", s(&p)], "malformed JSON");
}

#[test]
fn unknown_schema_version() {
    let text = SMALL_TRACE.replace("candle-graph/trace/11", "candle-graph/trace/99");
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    assert_fails(
        &["summary", s(&p)],
        "unsupported schema `candle-graph/trace/99`",
    );
}

#[test]
fn not_utf8() {
    let mut bytes = SMALL_TRACE.as_bytes().to_vec();
    bytes.splice(0..0, b"\xff\xfe\n".iter().copied());
    let (_d, p) = write("trace.jsonl", &bytes);
    assert_fails(&["summary", s(&p)], "not UTF-8");
}

#[test]
fn truncated_trace_is_still_analysed() {
    // cut in the middle of the backward span's free event
    let cut = SMALL_TRACE
        .find(r#"{"kind":"memory","timestamp_ns":70"#)
        .unwrap()
        + 20;
    let (_d, p) = write("trace.jsonl", &SMALL_TRACE.as_bytes()[..cut]);
    let r = run(&["summary", s(&p)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("is truncated"), "{}", r.stderr);
    assert!(r.stdout.contains("memory peak"), "{}", r.stdout);
    assert!(r.stdout.contains("incomplete"), "{}", r.stdout);
    let m = run(&["memory", s(&p)]);
    assert_eq!(m.code, 0);
    assert!(
        m.stdout.contains("live when the trace ended"),
        "{}",
        m.stdout
    );
    // check --require-valid: printed, then exit 1
    let c = run(&["check", s(&p), "--require-valid"]);
    assert_eq!(c.code, 1, "{}", c.stderr);
    assert!(c.stdout.contains("capabilities"));
}

#[test]
fn require_valid_passes_on_a_complete_trace() {
    let (_d, p) = write("trace.jsonl", SMALL_TRACE.as_bytes());
    let r = run(&["check", s(&p), "--require-valid"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

#[test]
fn json_envelopes_are_versioned() {
    let (_d, p) = write("trace.jsonl", SMALL_TRACE.as_bytes());
    for (args, schema) in [
        (vec!["summary", s(&p), "--json"], "candle-graph/summary/1"),
        (vec!["memory", s(&p), "--json"], "candle-graph/memory/1"),
        (vec!["check", s(&p), "--json"], "candle-graph/check/1"),
        (
            vec!["query", s(&p), "--kind", "gradients"],
            "candle-graph/query/1",
        ),
    ] {
        let r = run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v["schema"], schema);
        assert_eq!(v["tool"]["name"], "candle-graph");
        assert_eq!(v["input"]["trace_schema"], "candle-graph/trace/11");
    }
}

#[test]
fn memory_figures_of_the_small_trace() {
    let (_d, p) = write("trace.jsonl", SMALL_TRACE.as_bytes());
    let r = run(&["memory", s(&p), "--json", "--top", "1"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    // parameter 4096 + gradient 4096 live at t=60 (the activation is freed at 70)
    assert_eq!(v["memory_peak"]["live_bytes"], 4096 + 2048 + 4096);
    assert_eq!(v["memory_peak"]["held"].as_array().unwrap().len(), 1);
    assert_eq!(v["memory_peak"]["held_more_count"], 2);
    assert_eq!(v["memory_peak"]["held_more_bytes"], 4096 + 2048);
    let text = run(&["memory", s(&p), "--top", "1"]).stdout;
    assert!(text.contains("2 more = 6.00 KiB"), "{text}");
    assert!(text.contains("10.00 KiB"), "{text}");
}

#[test]
fn unknown_device_is_an_error() {
    let (_d, p) = write("trace.jsonl", SMALL_TRACE.as_bytes());
    assert_fails(&["memory", s(&p), "--device", "cuda:7"], "cuda:7");
}

#[test]
fn query_filters() {
    let (_d, p) = write("trace.jsonl", SMALL_TRACE.as_bytes());
    let r = run(&["query", s(&p), "--kind", "tensor-stats", "--label", "loss"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"]["matched"], 1);
    let r = run(&[
        "query",
        s(&p),
        "--kind",
        "gradients",
        "--label",
        "model/fc.weight",
    ]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"]["matched"], 1);
    let r = run(&["query", s(&p), "--kind", "spans", "--label-prefix", "for"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"]["matched"], 1, "{}", r.stdout);
    assert_fails(
        &["query", s(&p), "--kind", "capabilities", "--label", "x"],
        "apply to spans, tensors, tensor-stats and gradients",
    );
}

/// Issue 32: a directory holding only `trace.jsonl.gz` is read.
#[test]
fn a_directory_with_only_a_gzipped_trace_is_read() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(dir.path().join("trace.jsonl.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(SMALL_TRACE.as_bytes()).unwrap();
    gz.finish().unwrap();
    let r = run(&["summary", s(dir.path())]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("trace.jsonl.gz"), "{}", r.stdout);
    assert!(r.stdout.contains("tiny::train_step"), "{}", r.stdout);
}

/// Issue 32: a byte order mark first loads; CR-only line endings are named; an empty file's
/// line is 1, not 0.
#[test]
fn bom_cr_only_and_empty_files() {
    let (_d, p) = write("trace.jsonl", format!("\u{feff}{SMALL_TRACE}").as_bytes());
    let r = run(&["summary", s(&p)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("tiny::train_step"), "{}", r.stdout);
    let (_d, p) = write("trace.jsonl", SMALL_TRACE.replace('\n', "\r").as_bytes());
    assert_fails(
        &["summary", s(&p)],
        "line 1: malformed JSON: lines end in a carriage return only",
    );
    let (_d, p) = write("trace.jsonl", b"");
    assert_fails(&["summary", s(&p)], "line 1: missing meta");
}

/// A load error quotes trace text (an unknown kind, an enum value): it reaches the terminal
/// escaped, never as raw control characters (a terminal-title or clear-screen sequence).
#[test]
fn load_errors_escape_the_trace_text_they_quote() {
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}"#;
    for (line, quoted) in [
        (r#"{"kind":"bogus\u001b[31m"}"#, r"bogus\x1b[31m"),
        (
            r#"{"kind":"memory","timestamp_ns":1,"action":"x\u001b]0;pwned\u0007","device":"cpu","storage_id":"a","bytes":8,"category":"activation"}"#,
            r"x\x1b]0;pwned\x07",
        ),
    ] {
        let (_dir, path) = write("t.jsonl", format!("{meta}\n{line}\n").as_bytes());
        let r = run(&["summary", s(&path)]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            !r.stderr.contains(['\u{1b}', '\u{7}']),
            "raw control characters: {:?}",
            r.stderr
        );
        assert!(r.stderr.contains(quoted), "{:?} lacks {quoted:?}", r.stderr);
    }
}
