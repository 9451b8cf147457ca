//! Budgets in `cargo test` on the built-in models' real training steps: each step is captured
//! in memory (`trace_probe::testing`), its figures read by `trace_budget`, and the budgets
//! checked. Each budget passes on the model as it is and fails, with the message the README
//! shows, on a seeded regression: a loop keeping its losses (a leak), a doubled hidden size
//! (the peak), extra matmuls in the forward pass (an op's share of the pass).

use std::ops::RangeInclusive;

use candle_core::{DType, Device, Tensor};
use candle_graph_examples::{ModelKind, ModelSizes, Workload};
use candle_nn::{AdamW, Optimizer as _, ParamsAdamW, VarMap};
use trace_budget::{Budget, Budgets, Figures, Outcome, Report};
use trace_probe::{testing, Pass, ProbedOptimizer, ProfileRun};

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What a seeded regression changes in the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seeded {
    /// The loop as written.
    None,
    /// The loop keeps every step's loss tensor (and with it the step's autograd graph).
    KeptLoss,
    /// Eight extra products of the input batch in each forward pass (a slower `matmul`).
    SlowerMatmul,
}

/// Captures `steps` (after `steps.start() - 1` warm-up steps) of `kind` with `sizes`.
fn capture(
    kind: ModelKind,
    sizes: ModelSizes,
    steps: RangeInclusive<u64>,
    seeded: Seeded,
) -> Result<Figures> {
    let varmap = VarMap::new();
    let last = *steps.end();
    let run = ProfileRun::training(format!("{}::train_step", kind.as_str()), *steps.start())
        .capture_steps(steps)
        .varmap(&varmap)
        .sample_hz(10_000);
    let trace = testing::capture(run, |profiler| -> Result<()> {
        let work = Workload::with_varmap(kind, sizes, 7, &Device::Cpu, varmap)?;
        let mut opt =
            ProbedOptimizer::<AdamW>::new(work.varmap().all_vars(), ParamsAdamW::default())?;
        let extra = match seeded {
            Seeded::SlowerMatmul => {
                let features = work.batch(1)?.inputs.dim(1)?;
                Some(Tensor::ones(
                    (features, features),
                    DType::F32,
                    &Device::Cpu,
                )?)
            }
            _ => None,
        };
        let mut kept = Vec::new();
        for step in 1..=last {
            let _step = profiler.step(step);
            let batch = work.batch(step)?;
            if let Some(w) = &extra {
                for _ in 0..8 {
                    drop(batch.inputs.matmul(w)?);
                }
            }
            let loss = work.loss(&batch)?;
            opt.backward_step(&loss)?;
            if seeded == Seeded::KeptLoss {
                kept.push(loss);
            }
        }
        Ok(())
    })?;
    Ok(Figures::of(&trace.document()?))
}

fn mlp() -> ModelSizes {
    ModelSizes::default()
}

fn mlp_doubled() -> ModelSizes {
    let mut sizes = ModelSizes::default();
    sizes.mlp.hidden_size *= 2;
    sizes
}

fn llama_doubled() -> ModelSizes {
    let mut sizes = ModelSizes::default();
    sizes.llama.hidden_size *= 2;
    sizes.llama.intermediate_size *= 2;
    sizes
}

/// The one failure of a report, its message.
fn failure(report: &Report) -> &str {
    let failed: Vec<_> = report.not_passed().collect();
    assert_eq!(failed.len(), 1, "{report}");
    assert_eq!(failed[0].outcome, Outcome::Fail, "{report}");
    &failed[0].message
}

/// The MLP step's budgets: its peak (33.31 MiB, in the optimizer pass), the optimizer state at
/// the peak (5.11 MiB) and the exact calls of `matmul.backward` (3: one execution of the arm per
/// layer, each computing both operands' gradients).
fn mlp_budgets() -> Budgets {
    Budgets::new()
        .peak_at_most(36 << 20)
        .category_at_most(trace_schema::MemoryCategory::Optimizer, 6 << 20)
        .op_calls("matmul.backward", 3)
}

/// The llama step's budgets: its peak (5.72 MiB), the 19 calls of `matmul.backward` (9 matmuls
/// per block, two blocks, the head), and the backward pass's share of it: about 35% on a quiet
/// machine, a 95% interval of about ±6 points at 10 kHz, but 60.7% (53.8–67.2%) seen in CI's
/// parallel tests — the samples are wall-clock, and a matmul waits longer for gemm's worker
/// threads on a loaded machine — so the budget is 75%.
fn llama_budgets() -> Budgets {
    Budgets::new()
        .peak_at_most(6 << 20)
        .op_calls("matmul.backward", 19)
        .op_share_at_most("matmul.backward", Pass::Backward, 0.75)
}

#[test]
fn the_mlp_step_is_within_its_budgets_and_a_doubled_hidden_size_is_not() -> Result<()> {
    let figures = capture(ModelKind::Mlp, mlp(), 2..=2, Seeded::None)?;
    let report = mlp_budgets().check(&figures)?;
    assert_eq!(report.counts(), (3, 0, 0));
    // the figures as typed values: the peak and where it is
    let peak = figures.peak.as_ref().ok_or("no peak")?;
    assert_eq!(peak.pass, Some(Pass::Optimizer));
    assert_eq!(figures.peak_bytes(), Some(peak.live_bytes));
    assert!(peak.live_bytes > 30 << 20, "{}", peak.live_bytes);

    let doubled = capture(ModelKind::Mlp, mlp_doubled(), 2..=2, Seeded::None)?;
    let report = mlp_budgets().evaluate(&doubled);
    // the peak and the optimizer state grow; the calls do not
    assert_eq!(report.counts(), (1, 2, 0), "{report}");
    let message = &report.checked[0].message;
    eprintln!("{message}");
    assert!(message.starts_with("peak "), "{message}");
    assert!(message.contains("> budget 36.00 MiB"), "{message}");
    assert!(
        message.contains("in the optimizer pass (mlp::train_step/optimizer)"),
        "{message}"
    );
    assert!(
        message.contains("held at the peak (op · module · pass, merged rows):"),
        "{message}"
    );
    assert!(
        message.contains("update of fc2.weight (by size) · optimizer"),
        "{message}"
    );
    Ok(())
}

#[test]
fn the_llama_step_is_within_its_budgets_and_a_doubled_hidden_size_is_not() -> Result<()> {
    let figures = capture(ModelKind::Llama, ModelSizes::default(), 2..=2, Seeded::None)?;
    llama_budgets().check(&figures)?;
    let doubled = capture(ModelKind::Llama, llama_doubled(), 2..=2, Seeded::None)?;
    let report = llama_budgets().evaluate(&doubled);
    // the peak fails; matmul.backward's share is not asserted (with matmuls 4× the work it
    // rises, by more on a loaded machine: 55% [51%, 60%] once), only the peak's failure
    assert_eq!(report.checked[0].outcome, Outcome::Fail, "{report}");
    let message = &report.checked[0].message;
    eprintln!("{message}");
    assert!(message.starts_with("peak "), "{message}");
    assert!(message.contains("> budget 6.00 MiB"), "{message}");
    assert!(message.contains("held at the peak"), "{message}");
    // the doubled model makes the same calls
    assert_eq!(report.checked[1].outcome, Outcome::Pass, "{report}");
    Ok(())
}

#[test]
fn a_loop_keeping_its_losses_fails_the_leak_budget() -> Result<()> {
    let leak = Budgets::new().no_growth(5, 1);
    let steady = capture(ModelKind::Mlp, mlp(), 2..=6, Seeded::None)?;
    leak.check(&steady)?;
    let kept = capture(ModelKind::Mlp, mlp(), 2..=6, Seeded::KeptLoss)?;
    let report = leak.evaluate(&kept);
    let message = failure(&report);
    eprintln!("{message}");
    assert!(
        message.starts_with(
            "live memory grew in each of 5 captured steps after 1 warm-up: +977.76 KiB a step > budget 0 B"
        ),
        "{message}"
    );
    assert!(
        message.contains("per step: +977.76 KiB, +977.76 KiB"),
        "{message}"
    );
    assert!(
        message.contains("kept live by step 6 (19 storages, 977.76 KiB)"),
        "{message}"
    );
    assert!(
        message.contains("mlp::train_step/step 6/forward/mlp/fc1 · [64, 512] f32"),
        "{message}"
    );
    // the growth as a typed value
    let growth = kept.growth.as_ref().ok_or("no growth")?;
    assert_eq!((growth.steps, growth.bytes_per_step), (5, 1_001_224));
    // a budget needing more steps than were captured is unknown, not a pass
    let one = capture(ModelKind::Mlp, mlp(), 2..=2, Seeded::None)?;
    let report = leak.evaluate(&one);
    assert!(
        matches!(&report.checked[0].outcome, Outcome::Unknown(why) if why.contains("needs 5 captured steps; the trace has 0")),
        "{report}"
    );
    Ok(())
}

#[test]
fn extra_matmuls_fail_the_forward_share_budget_on_its_interval() -> Result<()> {
    let share = Budgets::new().op_share_at_most("matmul", Pass::Forward, 0.55);
    let plain = capture(ModelKind::Mlp, mlp(), 2..=2, Seeded::None)?;
    share.check(&plain)?;
    let slower = capture(ModelKind::Mlp, mlp(), 2..=2, Seeded::SlowerMatmul)?;
    let report = share.evaluate(&slower);
    let message = failure(&report);
    eprintln!("{message}");
    assert!(message.starts_with("matmul: "), "{message}");
    assert!(
        message.contains("of the forward pass (95% interval "),
        "{message}"
    );
    assert!(
        message.contains("> budget 55.0%: the interval's low end is above it"),
        "{message}"
    );
    Ok(())
}

#[test]
fn two_captures_on_two_threads_each_get_their_own_figures() -> Result<()> {
    let alone = (
        capture(ModelKind::Mlp, mlp(), 2..=2, Seeded::None)?.peak_bytes(),
        capture(ModelKind::Mlp, mlp_doubled(), 2..=2, Seeded::None)?.peak_bytes(),
    );
    let run = |sizes: fn() -> ModelSizes| {
        std::thread::spawn(move || {
            capture(ModelKind::Mlp, sizes(), 2..=2, Seeded::None)
                .map(|f| f.peak_bytes())
                .map_err(|e| e.to_string())
        })
    };
    let (a, b) = (run(mlp), run(mlp_doubled));
    let together = (
        a.join().map_err(|_| "thread panicked")??,
        b.join().map_err(|_| "thread panicked")??,
    );
    assert!(alone.0.is_some() && alone.0 != alone.1, "{alone:?}");
    assert_eq!(together, alone);
    Ok(())
}

#[test]
fn a_budget_outside_the_trace_names_what_it_needs() -> Result<()> {
    let figures = capture(ModelKind::Mlp, mlp(), 2..=2, Seeded::None)?;
    let report = Budgets::new()
        .with(Budget::PassPeak {
            pass: Pass::Backward,
            max_bytes: 1 << 40,
        })
        .op_calls("no_such_op", 1)
        .evaluate(&figures);
    assert_eq!(report.checked[0].outcome, Outcome::Pass, "{report}");
    let message = &report.checked[1].message;
    assert!(
        message.contains("calls of no_such_op: 0, budget == 1"),
        "{message}"
    );
    assert!(
        message.contains("no allocating call of no_such_op in the trace"),
        "{message}"
    );
    Ok(())
}
