//! `candle-graph demo` end to end: the binary (with the tracking allocator installed) trains
//! the MLP on CPU, writes the trace and prints a summary whose memory peak and gradient verdicts
//! come from the real step; the trace then works with every other command.

use crate::util::{run, s};

#[test]
fn demo_trains_profiles_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let r = run(&["demo", "--model", "mlp", "--out", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("trained mlp model"), "{}", r.stderr);
    assert!(r.stdout.contains("memory peak"), "{}", r.stdout);
    assert!(r.stdout.contains("held at the peak"), "{}", r.stdout);
    assert!(
        r.stdout.contains("6 of 6 parameters present"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("no memory events"), "{}", r.stdout);
    // backward spans are opt-in: a plain demo has none
    assert!(
        !r.stdout.contains("Candle's processing order"),
        "{}",
        r.stdout
    );
    // the written trace feeds every command
    for args in [
        vec!["summary", s(&out)],
        vec!["memory", s(&out), "--device", "cpu"],
        vec!["check", s(&out), "--require-valid"],
        vec!["query", s(&out), "--kind", "heaviest"],
        vec![
            "query",
            s(&out),
            "--kind",
            "tensors",
            "--label-prefix",
            "batch.",
        ],
    ] {
        let r = run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    }
    let q = run(&["query", s(&out), "--kind", "gradients"]);
    let v: serde_json::Value = serde_json::from_str(&q.stdout).unwrap();
    assert_eq!(v["result"]["counts"]["present"], 6);
}

#[test]
fn demo_json_has_no_progress_and_rejects_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let r = run(&["demo", "--model", "mlp", "--out", s(&out), "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["schema"], "candle-graph/summary/1");
    assert!(v["memory_peak"]["live_bytes"].as_u64().unwrap() > 0);
    assert_eq!(v["memory_peak"]["pass"], "optimizer");
    // too few steps names --steps (not --capture-step, which is right as given)
    for steps in ["0", "1"] {
        let bad = run(&["demo", "--steps", steps, "--out", s(&out)]);
        assert_eq!(bad.code, 2);
        assert!(
            bad.stderr.contains(&format!(
                "--steps {steps}: the demo trains at least 2 steps"
            )),
            "{}",
            bad.stderr
        );
        assert!(
            !bad.stderr.contains("--capture-step 2 must"),
            "{}",
            bad.stderr
        );
    }
    let bad = run(&[
        "demo",
        "--steps",
        "4",
        "--capture-step",
        "9",
        "--out",
        s(&out),
    ]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr
            .contains("--capture-step 9 must be within 2..=4 (--steps)"),
        "{}",
        bad.stderr
    );
}

#[test]
fn demo_backward_spans_lists_the_backward_module_spans() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    // One captured step: the counts below are one step's.
    let r = run(&[
        "demo",
        "--backward-spans",
        "--steps",
        "3",
        "--capture-steps",
        "1",
        "--out",
        s(&out),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("trained llama model"), "{}", r.stderr);
    assert!(
        r.stdout.contains(
            "backward     21 module spans in Candle's processing order (0 inferred: extent not observed exactly)"
        ),
        "{}",
        r.stdout
    );
    // the section's rows name `backward/<VarBuilder path>` spans
    let section = r
        .stdout
        .split("backward     21 module spans")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap();
    let rows: Vec<&str> = section
        .lines()
        .filter(|l| l.contains("  backward/"))
        .collect();
    assert_eq!(rows.len(), 5, "{section}");
    assert!(
        rows.iter()
            .all(|l| l.contains("backward/model.") || l.contains("backward/lm_head")),
        "{section}"
    );
    // the JSON summary carries every figure
    let q = run(&["summary", s(&out), "--json"]);
    assert_eq!(q.code, 0, "{}", q.stderr);
    let v: serde_json::Value = serde_json::from_str(&q.stdout).unwrap();
    let b = &v["backward_modules"];
    assert_eq!(b["spans"], 21, "{b}");
    assert_eq!(b["inferred"], 0, "{b}");
    let slowest = b["slowest"].as_array().unwrap();
    assert_eq!(slowest.len(), 5);
    for row in slowest {
        let path = row["path"].as_str().unwrap();
        assert!(path.starts_with("llama::train_step/backward/"), "{path}");
        assert!(row["forward_span_id"].as_str().unwrap().starts_with('s'));
        assert!(row["direct_allocated_bytes"].as_u64().unwrap() > 0, "{row}");
    }
}

#[test]
fn demo_inference_prints_prefill_decode_and_the_kv_cache() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("infer");
    let r = run(&["demo", "--inference", "--out", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("generated 16 tokens"), "{}", r.stderr);
    assert!(r.stdout.contains("  prefill  "), "{}", r.stdout);
    assert!(r.stdout.contains("decode        15 calls"), "{}", r.stdout);
    // llama2_c tiny: 2 layers × keys and values × 2 kv heads × 16 dims × 4 B per position;
    // 19 positions cached (4 prompt + 15 fed back) + the 16 B prefill mask.
    let cache = 2 * 2 * 2 * 16 * 4 * 19 + 16;
    assert!(
        r.stdout.contains(&format!(
            "live at end   {} in 5 storages",
            trace_format::bytes(cache)
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("growth        512 B per decoded token"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("llama2_c::generate/forward/decode"),
        "{}",
        r.stdout
    );
    // the summary of the trace says the same, once; and its JSON has the figures
    let sum = run(&["summary", s(&out)]);
    assert_eq!(sum.code, 0, "{}", sum.stderr);
    assert_eq!(
        sum.stdout.matches("inference (from the trace)").count(),
        1,
        "{}",
        sum.stdout
    );
    assert!(
        sum.stdout.contains("decode        15 calls"),
        "{}",
        sum.stdout
    );
    assert_eq!(
        r.stdout.matches("inference (from the trace)").count(),
        1,
        "{}",
        r.stdout
    );
    let q = run(&["summary", s(&out), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&q.stdout).unwrap();
    let i = &v["inference"];
    assert_eq!(i["decode_calls"], 15, "{i}");
    assert_eq!(i["live_at_end_bytes"], cache, "{i}");
    assert_eq!(i["live_at_end_storages"], 5, "{i}");
    assert_eq!(i["growth_per_token_bytes"], 512, "{i}");
    assert!(i["prefill_ns"].as_u64().unwrap() > 0, "{i}");
    // an inference run holds parameters only: the split names no gradients or optimizer state
    assert!(
        !sum.stdout.contains("gradients, optimizer state"),
        "{}",
        sum.stdout
    );
    // the report page states them too, with the figures for scripts
    let html = dir.path().join("infer.html");
    let p = run(&["report", s(&out), "-o", s(&html)]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("data-decode-calls=\"15\""),
        "the inference fact"
    );
    assert!(page.contains(&format!("data-live-at-end-bytes=\"{cache}\"")));
    assert!(page.contains("decode 15 calls,"));
    let bad = run(&["demo", "--inference", "--backward-spans", "--out", s(&out)]);
    assert_eq!(
        bad.code, 2,
        "--inference conflicts with the training flags: {}",
        bad.stderr
    );
}

/// README's table of commands names every flag of `demo --help` in its `demo` rows (the row
/// lacked `--every`). The ones left to the README's prose are listed here.
#[test]
fn the_readme_demo_rows_name_every_demo_flag() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let rows: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("| `demo"))
        .collect();
    assert!(!rows.is_empty(), "no demo row in README.md");
    let help = run(&["demo", "--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    let in_prose = [
        "--help",
        "--json",
        "--inference",
        "--detach-parameter-gradients",
    ];
    let flags: Vec<&str> = help
        .stdout
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split([' ', '=']).find(|w| w.starts_with("--")))
        .filter(|f| !in_prose.contains(f))
        .collect();
    assert!(flags.contains(&"--every"), "{flags:?}");
    for flag in flags {
        assert!(
            rows.iter()
                .any(|r| r.contains(&format!("{flag} ")) || r.contains(&format!("{flag}]"))),
            "README.md's demo rows do not name {flag}"
        );
    }
    let main = rows[0];
    assert!(main.contains("[--every N]"), "{main}");
    assert!(
        main.contains("`--every N` captures one step in N"),
        "{main}"
    );
}
