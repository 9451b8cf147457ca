//! `check TRACE --budget FILE` and `diff BASELINE CANDIDATE --fail-on GATE` on the small
//! hand-written trace (peak 10.00 KiB in the backward pass): pass, fail, unknown, bad budget
//! files and gates, the Markdown and JUnit outputs, and a tampered baseline bundle.

use std::path::{Path, PathBuf};

use crate::util::{run, s, write, SMALL_TRACE};

/// The small trace and a budget file beside it.
fn trace_and_budget(budget: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, trace) = write("trace.jsonl", SMALL_TRACE.as_bytes());
    let file = dir.path().join("budget.toml");
    std::fs::write(&file, budget).unwrap();
    (dir, trace, file)
}

#[test]
fn a_budget_within_its_limit_passes_with_exit_0() {
    let (_d, trace, budget) = trace_and_budget(
        "version = 1\n[memory]\npeak = \"1 MiB\"\n[memory.pass]\nbackward = \"10 KiB\"\n",
    );
    let r = run(&["check", s(&trace), "--budget", s(&budget)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("2 of 2 budgets passed, 0 failed, 0 unknown"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("peak ≤ 1.00 MiB"), "{}", r.stdout);
    assert!(r.stdout.contains("10.00 KiB"), "{}", r.stdout);
}

#[test]
fn require_valid_still_applies_beside_budgets() {
    let cut = SMALL_TRACE
        .lines()
        .filter(|l| !l.contains("\"kind\":\"terminal\""))
        .collect::<Vec<_>>()
        .join("\n");
    let (_d, trace) = write("trace.jsonl", cut.as_bytes());
    let budget = trace.with_file_name("budget.toml");
    std::fs::write(&budget, "version = 1\n[memory]\npeak = \"1 MiB\"\n").unwrap();
    let r = run(&["check", s(&trace), "--budget", s(&budget)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.starts_with("1 of 1 budgets passed"),
        "{}",
        r.stdout
    );
    let r = run(&[
        "check",
        s(&trace),
        "--budget",
        s(&budget),
        "--require-valid",
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
}

#[test]
fn a_budget_over_its_limit_exits_1_with_the_figure_against_the_limit() {
    let (_d, trace, budget) = trace_and_budget(
        "version = 1\n[memory]\npeak = \"8 KiB\"\n[memory.category]\ngradient = \"1 MiB\"\n",
    );
    let r = run(&["check", s(&trace), "--budget", s(&budget)]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("1 of 2 budgets passed, 1 failed, 0 unknown"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "FAIL peak ≤ 8.00 KiB: peak 10.00 KiB > budget 8.00 KiB (+25.0%), in the backward pass (train_step/backward)"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("by category: parameter 4.00 KiB · activation 2.00 KiB · gradient 4.00 KiB"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_budget_the_trace_cannot_decide_is_unknown_and_exits_1() {
    let (_d, trace, budget) = trace_and_budget(
        "version = 1\n[leaks]\nsteps = 5\n\n[[ops]]\nop = \"matmul\"\ncalls = 2\n",
    );
    let r = run(&["check", s(&trace), "--budget", s(&budget)]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("0 of 2 budgets passed, 0 failed, 2 unknown"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("needs 5 captured steps; the trace has 0"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("calls of matmul == 2 needs allocation sites"),
        "{}",
        r.stdout
    );
}

#[test]
fn bad_budget_files_exit_2_naming_the_line() {
    for (text, says) in [
        ("version = 1\n[memory]\npeek = \"6 MiB\"\n", "budget.toml line 3: unknown field `peek`"),
        ("version = 1\n\n[memory]\npeak = \"6 MiX\"\n", "budget.toml line 4: \"6 MiX\" has an unknown unit \"MiX\""),
        ("version = 3\n", "budget.toml line 1: version 3 is not supported"),
        ("version = 1\n[[ops]]\nop = \"matmul\"\n", "budget.toml line 2: [[ops]] \"matmul\" needs exactly one of calls, max_calls, max_share"),
        ("version = 1\n[memory\n", "budget.toml line 2:"),
    ] {
        let (_d, trace, budget) = trace_and_budget(text);
        let r = run(&["check", s(&trace), "--budget", s(&budget)]);
        assert_eq!(r.code, 2, "{text}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(says), "{text}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    }
    let (_d, trace, _) = trace_and_budget("");
    let r = run(&["check", s(&trace), "--budget", "/nonexistent/budget.toml"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("/nonexistent/budget.toml: cannot read it"),
        "{}",
        r.stderr
    );
}

/// Runs `args` with `--format format`: exit `code`, stdout starting with `starts` and
/// holding each of `holds` (one block for every format of `check --budget` and `diff`).
fn formatted(args: &[&str], format: &str, code: i32, starts: &str, holds: &[&str]) {
    let mut all = args.to_vec();
    all.extend(["--format", format]);
    let r = run(&all);
    assert_eq!(r.code, code, "{all:?}: {}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with(starts), "{all:?}: {}", r.stdout);
    for h in holds {
        assert!(r.stdout.contains(h), "{all:?}: no {h:?} in {}", r.stdout);
    }
}

#[test]
fn budgets_print_as_markdown_and_junit_for_ci() {
    let (_d, trace, budget) = trace_and_budget("version = 1\n[memory]\npeak = \"8 KiB\"\n");
    let args = ["check", s(&trace), "--budget", s(&budget)];
    formatted(
        &args,
        "markdown",
        1,
        "### candle-graph check ",
        &["| peak ≤ 8.00 KiB | 10.00 KiB | ❌ FAIL |"],
    );
    formatted(
        &args,
        "junit",
        1,
        "<?xml version=\"1.0\"",
        &[
            "tests=\"1\" failures=\"1\" skipped=\"0\"",
            "<failure message=\"peak 10.00 KiB &gt; budget 8.00 KiB",
        ],
    );
    let r = run(&["check", s(&trace), "--budget", s(&budget), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["schema"], "candle-graph/budget/1");
    assert_eq!(v["checked"][0]["outcome"]["outcome"], "fail", "{v}");
}

/// The small trace with its backward gradient `grad_bytes` instead of 4096.
fn bigger(grad_bytes: u64) -> String {
    let old = r#""storage_id":"st3","bytes":4096"#;
    assert!(SMALL_TRACE.contains(old));
    SMALL_TRACE.replace(old, &format!(r#""storage_id":"st3","bytes":{grad_bytes}"#))
}

fn two_traces(candidate: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, base) = write("base.jsonl", SMALL_TRACE.as_bytes());
    let cand = dir.path().join("cand.jsonl");
    std::fs::write(&cand, candidate).unwrap();
    (dir, base, cand)
}

#[test]
fn diff_gates_pass_fail_and_say_when_one_run_a_side_cannot_decide_a_time() {
    let (_d, base, cand) = two_traces(&bigger(8192));
    let r = run(&["diff", s(&base), s(&base), "--fail-on", "peak>+5%"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("1 of 1 gates passed"), "{}", r.stdout);

    let r = run(&[
        "diff",
        s(&base),
        s(&cand),
        "--fail-on",
        "peak>+5%",
        "--fail-on",
        "pass.backward.peak>+50%",
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    // 10 KiB → 14 KiB
    assert!(
        r.stdout
            .contains("FAIL peak > +5.0%: peak grew +40.0%: 10.00 KiB → 14.00 KiB > gate +5.0%"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("1 of 2 gates passed, 1 failed, 0 unknown"),
        "{}",
        r.stdout
    );

    let r = run(&[
        "diff",
        s(&base),
        s(&cand),
        "--fail-on",
        "pass.backward>+10%",
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("unknown pass.backward > +10.0%: pass.backward: 1 baseline run(s) and 1 candidate run(s): with one run on a side the run-to-run spread is unknown"), "{}", r.stdout);
}

#[test]
fn diff_time_gates_use_the_spread_of_several_runs() {
    // the same trace three times a side: the medians are equal, the gate passes
    let (_d, base, _) = two_traces(SMALL_TRACE);
    let b = s(&base);
    let r = run(&[
        "diff",
        "--baseline",
        b,
        b,
        "--candidate",
        b,
        b,
        "--fail-on",
        "pass.backward>+10%",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("1 of 1 gates passed"), "{}", r.stdout);
    // a backward pass twice as long in both candidate runs, outside the baseline's range
    let slow = SMALL_TRACE.replace(
        r#"{"kind":"span_end","id":"s3","duration_ns":30}"#,
        r#"{"kind":"span_end","id":"s3","duration_ns":38}"#,
    );
    let (_d2, _, c) = two_traces(&slow);
    let r = run(&[
        "diff",
        "--baseline",
        b,
        b,
        "--candidate",
        s(&c),
        s(&c),
        "--fail-on",
        "pass.backward>+10%",
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("pass.backward grew +26.7%, outside the runs' spread"),
        "{}",
        r.stdout
    );
}

#[test]
fn bad_gates_exit_2_naming_the_gate() {
    let (_d, base, _) = two_traces(SMALL_TRACE);
    let r = run(&["diff", s(&base), s(&base), "--fail-on", "pek>+5%"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("unknown figure \"pek\""), "{}", r.stderr);
    let r = run(&["diff", s(&base), s(&base), "--fail-on", "peak>5"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is not a percentage"), "{}", r.stderr);
}

#[test]
fn diff_prints_markdown_and_junit_for_ci() {
    let (_d, base, cand) = two_traces(&bigger(8192));
    let args = ["diff", s(&base), s(&cand), "--fail-on", "peak>+5%"];
    formatted(
        &args,
        "markdown",
        1,
        "### candle-graph diff\n",
        &[
            "(one run on a side: the run-to-run spread is unknown)",
            "| peak &gt; +5.0% | +40.0% | ❌ FAIL |",
            "| peak | 10.00 KiB | 14.00 KiB | +40.0% | increased |",
        ],
    );
    formatted(
        &args,
        "junit",
        1,
        "<?xml version=\"1.0\"",
        &["<testsuite name=\"candle-graph diff\" tests=\"1\" failures=\"1\""],
    );
    // --json: the diff's record with the gates beside it, only when gates were given
    let r = run(&[
        "diff",
        s(&base),
        s(&cand),
        "--fail-on",
        "peak>+5%",
        "--json",
    ]);
    assert_eq!(r.code, 1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["schema"], "candle-graph/diff/1");
    assert_eq!(
        v["gates"]["checked"][0]["outcome"]["outcome"], "fail",
        "{v}"
    );
    let r = run(&["diff", s(&base), s(&cand), "--json"]);
    assert_eq!(r.code, 0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v.get("gates").is_none(), "{v}");
}

fn tamper(bundle: &Path) {
    let trace = bundle.join("trace.jsonl");
    let mut text = std::fs::read_to_string(&trace).unwrap();
    text.push('\n');
    std::fs::write(&trace, text).unwrap();
}

#[test]
fn a_baseline_bundle_is_verified_before_it_is_compared() {
    let (d, base, _) = two_traces(SMALL_TRACE);
    let bundle = d.path().join("baseline");
    let r = run(&["bundle", s(&base), "-o", s(&bundle)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&["diff", s(&bundle), s(&base), "--fail-on", "peak>+5%"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    tamper(&bundle);
    let r = run(&["diff", s(&bundle), s(&base), "--fail-on", "peak>+5%"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("does not match its manifest, so it is not compared"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("trace.jsonl"), "{}", r.stderr);
    // One line, no escaped line breaks.
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    assert!(!r.stderr.contains("\\x0a"), "{}", r.stderr);
}
