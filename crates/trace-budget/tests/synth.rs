//! Budgets and gates on synthetic traces (trace-synth: no Candle): a budget at exactly its
//! figure passes and one byte below fails; a budget file reads into the same checks as the
//! builder; gates on a trace compared with itself pass and on a larger one fail.

use trace_budget::{BudgetFile, Budgets, Figures, Gate, Outcome};
use trace_schema::{Pass, TraceDocument};
use trace_synth::{write_synth_trace, SynthConfig};

fn doc(config: &SynthConfig) -> TraceDocument {
    // one file per call: the tests of this binary run at once
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "trace-budget-synth-{}-{n}.jsonl",
        std::process::id()
    ));
    write_synth_trace(&path, config).expect("write the synthetic trace");
    let doc = trace_schema::load_path(&path).expect("a synthetic trace loads");
    let _ = std::fs::remove_file(&path);
    doc
}

fn small(steps: u64) -> SynthConfig {
    SynthConfig {
        memory_events: 2_000,
        spans: 200,
        ops: 500,
        steps,
        ..SynthConfig::default()
    }
}

#[test]
fn a_budget_at_its_figure_passes_and_one_byte_less_fails() {
    let figures = Figures::of(&doc(&small(1)));
    let peak = figures
        .peak_bytes()
        .expect("the synthetic trace has a peak");
    assert!(
        figures.memory_unavailable.is_none(),
        "{:?}",
        figures.memory_unavailable
    );
    let at = Budgets::new().peak_at_most(peak).evaluate(&figures);
    assert!(at.all_passed(), "{at}");
    let below = Budgets::new().peak_at_most(peak - 1).evaluate(&figures);
    assert_eq!(below.checked[0].outcome, Outcome::Fail, "{below}");
    let message = &below.checked[0].message;
    assert!(
        message.starts_with(&format!(
            "peak {} > budget {}",
            trace_format::bytes(peak),
            trace_format::bytes(peak - 1)
        )),
        "{message}"
    );
    for pass in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
        let bytes = figures.headline.pass_peak_bytes[&pass];
        // a pass's peak is the sum of its categories
        let by_category: u64 = figures.pass_peak_by_category[&pass].values().sum();
        assert_eq!(by_category, bytes, "{pass:?}");
        let b = Budgets::new().with(trace_budget::Budget::PassPeak {
            pass,
            max_bytes: bytes,
        });
        assert!(b.evaluate(&figures).all_passed());
        let b = Budgets::new().with(trace_budget::Budget::PassPeak {
            pass,
            max_bytes: bytes - 1,
        });
        assert_eq!(b.evaluate(&figures).counts(), (0, 1, 0));
    }
}

#[test]
fn a_budget_file_checks_what_the_builder_checks() {
    let figures = Figures::of(&doc(&small(1)));
    let peak = figures.peak_bytes().unwrap();
    let file =
        BudgetFile::parse(&format!("version = 1\n[memory]\npeak = {peak}\n"), "b.toml").unwrap();
    assert_eq!(file.budgets, Budgets::new().peak_at_most(peak));
    assert_eq!(
        file.budgets.evaluate(&figures),
        Budgets::new().peak_at_most(peak).evaluate(&figures)
    );
}

#[test]
fn gates_read_the_diff() {
    let (a, b) = (
        doc(&small(1)),
        doc(&SynthConfig {
            memory_events: 4_000,
            ..small(1)
        }),
    );
    let (aa, ab) = (trace_views::analyze(&a), trace_views::analyze(&b));
    let run = |doc, analysis, label| trace_diff::Run {
        doc,
        analysis,
        label,
    };
    let options = trace_diff::DiffOptions::default();
    let same = trace_diff::compare(&[run(&a, &aa, "a")], &[run(&a, &aa, "a")], &options).unwrap();
    let gates: Vec<Gate> = ["peak>+0%", "pass.backward.allocated>+0%"]
        .iter()
        .map(|g| g.parse().unwrap())
        .collect();
    assert!(trace_budget::check_all(&gates, &same).all_passed());
    let grown = trace_diff::compare(&[run(&a, &aa, "a")], &[run(&b, &ab, "b")], &options).unwrap();
    let before = Figures::from_analysis(&a, &aa).peak_bytes().unwrap();
    let after = Figures::from_analysis(&b, &ab).peak_bytes().unwrap();
    let report = trace_budget::check_all(&gates[..1], &grown);
    // the gate fails exactly when the peak grew
    assert_eq!(
        report.checked[0].outcome == Outcome::Fail,
        after > before,
        "{report} {before} {after}"
    );
    // a time gate with one run a side is unknown, never a pass
    let time: Gate = "wall>+50%".parse().unwrap();
    assert!(
        matches!(time.check(&same).outcome, Outcome::Unknown(ref why) if why.contains("spread is unknown"))
    );
}

/// A leak budget built in code with a warm-up of u64::MAX (a hostile number the file reader
/// refuses): checked on a one-step trace it is unknown, saying the step numbers overflow,
/// never a panic on `warmup + steps`.
#[test]
fn a_leak_budget_whose_step_numbers_overflow_is_unknown_not_a_panic() {
    let figures = Figures::of(&doc(&small(1)));
    let r = Budgets::new().no_growth(2, u64::MAX).evaluate(&figures);
    let c = &r.checked[0];
    assert!(matches!(c.outcome, Outcome::Unknown(_)), "{r}");
    assert!(
        c.message
            .ends_with("(warmup 18446744073709551615 + steps 2 overflows a step number)"),
        "{}",
        c.message
    );
}

/// Steps 1, 5 and 9 captured, 4,096 B kept in each (issue 46): the leak budget's figure is per
/// step number — 8,192 B from step 1's end to step 9's over 8 step numbers = 1.00 KiB a step —
/// and each growth names the steps it covers.
#[test]
fn a_leak_budget_over_steps_captured_apart_reads_per_step_number() {
    let mut lines = vec![
        r#"{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e::train_step","phase":"train","timestamp":"2026-01-01T00:00:00.000Z","capture_step":1,"last_capture_step":9,"warmup_steps":0,"tracking_allocator_installed":true,"capture_contract":{"logical_memory":"complete"}}"#.to_string(),
        r#"{"kind":"span_start","id":"s1","name":"e::train_step","start_ns":0,"span_kind":"function","measured":true}"#.into(),
    ];
    for (k, step) in [1u64, 5, 9].into_iter().enumerate() {
        let t = 10 + 20 * k as u64;
        lines.push(format!(r#"{{"kind":"span_start","id":"t{step}","parent_id":"s1","name":"step {step}","start_ns":{t},"span_kind":"function","step_index":{step}}}"#));
        lines.push(format!(r#"{{"kind":"memory","timestamp_ns":{},"action":"alloc","device":"cpu","storage_id":"K{step}","bytes":4096,"span_id":"t{step}","source":"allocator"}}"#, t + 2));
        lines.push(format!(
            r#"{{"kind":"span_end","id":"t{step}","duration_ns":10}}"#
        ));
    }
    lines.push(r#"{"kind":"span_end","id":"s1","duration_ns":100}"#.into());
    lines.push(r#"{"kind":"terminal","outcome":"complete","timestamp_ns":100}"#.into());
    let doc = trace_schema::load_str(&(lines.join("\n") + "\n")).unwrap();
    let r = Budgets::new().no_growth(3, 0).evaluate(&Figures::of(&doc));
    let c = &r.checked[0];
    assert_eq!(c.outcome, Outcome::Fail, "{r}");
    assert_eq!(c.figure, "+1.00 KiB a step");
    assert!(
        c.message
            .contains("per step: +4.00 KiB (step 1), +4.00 KiB (steps 1→5), +4.00 KiB (steps 5→9)"),
        "{}",
        c.message
    );
}
