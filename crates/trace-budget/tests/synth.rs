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
