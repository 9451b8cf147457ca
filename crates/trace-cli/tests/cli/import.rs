//! PyTorch profiler traces: `import`, and the analysis commands reading a Kineto file directly
//! (detected by content, gzip by its magic bytes).

use crate::util::{run, s, write};

/// The real MLP trace of `cargo xtask pytorch-fixtures` (torch 2.15.0, CPU).
const MLP: &str = "../trace-import/tests/data/pytorch/mlp.json.gz";
/// Its largest `Total Allocated`, read from the raw JSON.
const MLP_PEAK_BYTES: u64 = 5_890_104;

const SMALL_KINETO: &str = r#"{
  "schemaVersion": 1,
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 1, "dur": 20},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2, "dur": 10},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3,
   "args": {"Addr": 16, "Bytes": 4096, "Total Allocated": 4096, "Total Reserved": 0, "Device Type": 0, "Device Id": -1}},
  {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1, "tid": 1, "ts": 30, "dur": 10},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 35,
   "args": {"Addr": 16, "Bytes": -4096, "Total Allocated": 0, "Total Reserved": 0, "Device Type": 0, "Device Id": -1}},
  {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "pid": 1, "tid": 1, "ts": 50, "dur": 10}
  ],
  "traceName": "small.json"
}"#;

#[test]
fn import_writes_a_trace_and_reports() {
    let (dir, src) = write("small.json", SMALL_KINETO.as_bytes());
    let out = dir.path().join("small.jsonl");
    let r = run(&["import", s(&src), "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("passes     forward 1, backward 1, optimizer 1"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "replayed peak 4.00 KiB, PyTorch Total Allocated max 4.00 KiB, before the window 0 B"
        ),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("wrote "), "{}", r.stdout);
    // the written file is a candle-graph trace the other commands read
    let summary = run(&["summary", s(&out)]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    assert!(
        summary.stdout.contains("memory peak  4.00 KiB"),
        "{}",
        summary.stdout
    );

    // without -o: the trace on stdout, the report on stderr
    let piped = run(&["import", s(&src)]);
    assert_eq!(piped.code, 0);
    assert!(piped
        .stdout
        .starts_with(r#"{"kind":"meta","schema":"candle-graph/trace/13""#));
    assert_eq!(piped.stdout, std::fs::read_to_string(&out).unwrap());
    assert!(piped.stderr.contains("imported "), "{}", piped.stderr);

    // --json: the report in an envelope
    let json = run(&["import", s(&src), "-o", s(&out), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["schema"], "candle-graph/import/1");
    assert_eq!(
        v["report"]["memory"]["devices"][0]["replayed_peak_bytes"],
        4096
    );
    assert_eq!(v["report"]["passes"]["backward"], 1);
    // --json needs -o (stdout holds the trace otherwise)
    assert_eq!(run(&["import", s(&src), "--json"]).code, 2);
}

#[test]
fn analysis_commands_read_a_kineto_file_directly() {
    let summary = run(&["summary", MLP]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    assert!(summary.stderr.is_empty(), "{}", summary.stderr);
    assert!(
        summary.stdout.contains("memory peak  5.62 MiB"),
        "{}",
        summary.stdout
    );
    for step in ["forward", "backward", "optimizer"] {
        assert!(
            summary.stdout.contains(&format!("    {step} ")),
            "{}",
            summary.stdout
        );
    }
    let memory = run(&["memory", MLP, "--json"]);
    assert_eq!(memory.code, 0, "{}", memory.stderr);
    let v: serde_json::Value = serde_json::from_str(&memory.stdout).unwrap();
    assert_eq!(v["input"]["imported_from"], "pytorch-profiler");
    assert_eq!(v["memory_peak"]["live_bytes"], MLP_PEAK_BYTES);
    let check = run(&["check", MLP, "--json"]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    let v: serde_json::Value = serde_json::from_str(&check.stdout).unwrap();
    assert_eq!(v["health"]["structurally_valid"], true, "{}", check.stdout);
    let query = run(&["query", MLP, "--kind", "spans", "--label", "backward"]);
    assert_eq!(query.code, 0, "{}", query.stderr);
    let v: serde_json::Value = serde_json::from_str(&query.stdout).unwrap();
    assert_eq!(v["result"]["matched"], 1, "{}", query.stdout);
}

#[test]
fn a_cut_short_gzip_is_analysed_with_a_warning() {
    let bytes = std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(MLP)).unwrap();
    let (_d, cut) = write("cut.json.gz", &bytes[..bytes.len() / 2]);
    let r = run(&["summary", s(&cut)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("(PyTorch profiler trace): the gzip stream is cut short: "),
        "{}",
        r.stderr
    );
    // the [memory] events come last in a Kineto file: half of it has none
    assert!(
        r.stderr.contains("no [memory] events before the cut"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("incomplete"), "{}", r.stdout);
    assert!(r.stdout.contains("slowest spans"), "{}", r.stdout);
    // cut near the end: some memory events, figures are lower bounds
    let (_d, cut) = write("cut.json.gz", &bytes[..bytes.len() * 19 / 20]);
    let r = run(&["memory", s(&cut)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stdout.contains("memory peak"), "{}", r.stdout);
}

#[test]
fn bad_kineto_input_fails_with_one_line() {
    let (_d, p) = write("t.json", br#"{"traceEvents": [{"ph": "X",, }]}"#);
    let r = run(&["summary", s(&p)]);
    assert_eq!(r.code, 2);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("cannot import"), "{}", r.stderr);
    assert!(
        r.stderr.contains("not valid JSON at line 1"),
        "{}",
        r.stderr
    );
    let (_d, p) = write("pkg.json", br#"{"name": "x", "version": "1"}"#);
    let r = run(&["import", s(&p)]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("not a PyTorch profiler (Chrome) trace: a JSON object without `traceEvents`"),
        "{}",
        r.stderr
    );
    let (_d, p) = write("none.json", br#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}"#);
    let r = run(&["memory", s(&p)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("the memory plane is absent, not empty"),
        "{}",
        r.stderr
    );
}

#[test]
fn ops_on_a_pytorch_trace_is_the_measured_table() {
    let r = run(&["ops", MLP, "--by", "op", "--json", "--top", "500"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["figures"], "measured");
    assert_eq!(v["calls"], 339);
    let rows = v["rows"].as_array().unwrap();
    let mm = rows.iter().find(|x| x["op"] == "aten::mm").unwrap();
    // `key_averages()` of the same step (tests/data/pytorch/mlp.key_averages.json): 5 calls,
    // 5,757.870 µs total, 5,754.855 µs self
    assert_eq!(mm["calls"], 5);
    assert_eq!(mm["total_ns"], 5_757_870);
    assert_eq!(mm["self_ns"], 5_754_855);
    let text = run(&["ops", MLP, "--pass", "optimizer"]);
    assert!(
        text.stdout.contains("measured by the producer"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("aten::lerp_"), "{}", text.stdout);
    assert!(
        !text.stdout.contains("aten::addmm "),
        "forward only: {}",
        text.stdout
    );
}

#[test]
fn the_report_of_a_pytorch_trace_tabulates_ops_and_has_no_empty_gradient_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    let r = run(&["report", MLP, "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("Operations (measured)"));
    assert!(html.contains("id=\"measured-ops\""));
    assert!(html.contains("Gradients: not in this trace"));
    assert!(!html.contains("0 of 0 parameters"));
    // one span row per op call is gone: the span table holds the annotations only
    assert!(html.contains("op spans (one per op call) are summarised"));
}
