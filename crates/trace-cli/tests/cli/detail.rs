//! The commands that stream (`summary`, `memory`, `check`: memory events spilled at load, summary
//! detail) print exactly what the full in-memory analysis prints (`CANDLE_GRAPH_DETAIL=full`),
//! text and JSON, on the golden fixtures, the hand-written traces and a generated trace with two
//! devices — also when another producer lays its lines out differently (keys sorted, spaces),
//! gzipped or imported from a PyTorch profiler trace.

use std::process::Command;

use crate::util::*;

fn run_with(args: &[&str], full: bool) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_candle-graph"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    if full {
        cmd.env("CANDLE_GRAPH_DETAIL", "full");
    } else {
        cmd.env_remove("CANDLE_GRAPH_DETAIL");
    }
    let out = cmd.output().expect("run candle-graph");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn same_both_ways(trace: &str, devices: &[&str]) {
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["summary", trace],
        vec!["summary", trace, "--json"],
        vec!["memory", trace],
        vec!["memory", trace, "--json", "--top", "3"],
        vec!["check", trace],
        vec!["check", trace, "--json"],
    ];
    for d in devices {
        commands.push(vec!["memory", trace, "--device", d]);
        commands.push(vec!["memory", trace, "--device", d, "--json"]);
    }
    for args in commands {
        let streamed = run_with(&args, false);
        let full = run_with(&args, true);
        assert_eq!(streamed.0, 0, "{args:?}: {}", streamed.2);
        assert!(
            streamed == full,
            "{args:?} differs:\n--- streamed\n{}\n--- full\n{}",
            streamed.1,
            full.1
        );
    }
}

/// The same events, keys sorted (so `kind` is not first) and spaces after `:` and `,`.
fn relayout(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let compact = serde_json::to_string(&value).unwrap();
        let (mut in_string, mut escaped) = (false, false);
        for c in compact.chars() {
            out.push(c);
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
            } else if c == '"' {
                in_string = true;
            } else if c == ':' || c == ',' {
                out.push(' ');
            }
        }
        out.push('\n');
    }
    out
}

#[test]
fn streamed_commands_print_what_the_full_analysis_prints() {
    same_both_ways("../../examples/fixtures/mlp", &["cpu"]);
    same_both_ways("../../examples/fixtures/llama", &[]);
    let (_d, small) = write("t.jsonl", SMALL_TRACE.as_bytes());
    same_both_ways(s(&small), &["cpu"]);

    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth.jsonl");
    let config = trace_synth::SynthConfig::mix(20_000);
    trace_synth::write_synth_trace(&synth, &config).unwrap();
    same_both_ways(s(&synth), &["cuda:0", "cpu"]);
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, relayout(&std::fs::read_to_string(&synth).unwrap())).unwrap();
    same_both_ways(s(&other), &["cpu"]);
    // ... and the other layout gives the same figures as the original.
    let a = run_with(&["summary", s(&synth), "--json"], false).1;
    let b = run_with(&["summary", s(&other), "--json"], false).1;
    let strip = |x: &str| x.replace(s(&synth), "P").replace(s(&other), "P");
    assert_eq!(strip(&a), strip(&b));

    // A gzipped trace (read whole, not streamed) and a PyTorch profiler trace (imported).
    let gz = dir.path().join("synth.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::Write::write_all(&mut enc, &std::fs::read(&synth).unwrap()).unwrap();
    enc.finish().unwrap();
    same_both_ways(s(&gz), &["cpu"]);
    let c = run_with(&["summary", s(&gz), "--json"], false).1;
    assert_eq!(strip(&a), c.replace(s(&gz), "P"));
    same_both_ways("../trace-import/tests/data/pytorch/mlp.json.gz", &[]);
}
