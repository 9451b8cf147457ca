//! Budgets in a test binary without the tracking allocator: the memory budgets are unknown
//! with a sentence saying they need it (and how to install it), never a pass on missing
//! figures; the sampled op share is still checked.

use candle_core::Device;
use candle_graph_examples::{ModelKind, ModelSizes, Workload};
use candle_nn::{AdamW, Optimizer as _, ParamsAdamW, VarMap};
use trace_budget::{Budgets, Figures, Outcome};
use trace_probe::{testing, Pass, ProbedOptimizer, ProfileRun};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[test]
fn memory_budgets_without_the_tracking_allocator_say_they_need_it() -> Result<()> {
    let varmap = VarMap::new();
    let run = ProfileRun::training("mlp::train_step", 2).varmap(&varmap);
    let trace = testing::capture(run, |profiler| -> Result<()> {
        let work = Workload::with_varmap(
            ModelKind::Mlp,
            ModelSizes::default(),
            7,
            &Device::Cpu,
            varmap,
        )?;
        let mut opt =
            ProbedOptimizer::<AdamW>::new(work.varmap().all_vars(), ParamsAdamW::default())?;
        for step in 1..=2u64 {
            let _step = profiler.step(step);
            let loss = work.loss(&work.batch(step)?)?;
            opt.backward_step(&loss)?;
        }
        Ok(())
    })?;
    let figures = Figures::of(&trace.document()?);
    let report = Budgets::new()
        .peak_at_most(36 << 20)
        .no_growth(5, 1)
        .op_calls("matmul.backward", 3)
        .op_share_at_most("matmul.backward", Pass::Backward, 1.0)
        .evaluate(&figures);
    for (i, budget) in [
        "peak ≤ 36.00 MiB",
        "no growth across 5 steps after 1 warm-up",
    ]
    .iter()
    .enumerate()
    {
        let Outcome::Unknown(why) = &report.checked[i].outcome else {
            panic!("{report}");
        };
        assert!(
            why.starts_with(&format!("{budget} needs the tracking allocator: ")),
            "{why}"
        );
        assert!(why.contains("#[global_allocator]"), "{why}");
    }
    // exact calls come from the allocation sites, which the allocator records
    assert!(
        matches!(&report.checked[2].outcome, Outcome::Unknown(why) if why.contains("needs allocation sites")),
        "{report}"
    );
    // a share's upper bound of 100% always holds: the samples are there
    assert_eq!(report.checked[3].outcome, Outcome::Pass, "{report}");
    assert!(!report.all_passed());
    Ok(())
}
