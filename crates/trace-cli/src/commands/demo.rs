//! `candle-graph demo [--out DIR] [--model llama|mlp] [--steps N] [--device D]
//! [--drop-loss-before-step | --detach-parameter-gradients] [--backward-spans] [--sample-hz N]`: trains a built-in Candle model on CPU (or `cuda[:N]` /
//! `metal[:N]` when built with that feature), captures step 2 after one warm-up step with the
//! probe and the tracking allocator (installed in `main.rs`), writes `DIR/trace.jsonl` and prints
//! its summary. `--drop-loss-before-step` runs backward, drops the loss, then steps (the advice
//! of the `activations_retained_into_optimizer` finding); `--detach-parameter-gradients` also
//! keeps only the parameters' gradients, detached, and drops the original gradient store before
//! the step (its advice when the gradient store holds activations); `--backward-spans` turns on
//! the probe's per-module backward spans (`backward/<module path>`, opt-in for their cost);
//! `--sample-hz N` sets the rate of the wall-clock stack samples of the captured step (0: off).

use anyhow::{bail, Context, Result};
use candle_graph_examples::{
    train_with_progress, ModelKind, TrainConfig, TrainReport, UpdateStyle,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{DemoArgs, ModelArg};

/// Trains and writes the trace; progress on stderr only when `progress` (a TTY, not `--json`).
///
/// # Errors
/// Fewer than 2 steps; training or profiling failures with their cause chain.
pub fn run(args: &DemoArgs, progress: bool) -> Result<TrainReport> {
    if args.steps < 2 {
        bail!(
            "--steps {} is too few: step 1 is the warm-up and step 2 is captured",
            args.steps
        );
    }
    let model = match args.model {
        ModelArg::Llama => ModelKind::Llama,
        ModelArg::Mlp => ModelKind::Mlp,
    };
    let mut config = TrainConfig::new(model, &args.out);
    config.steps = args.steps;
    config.device = args.device;
    if args.drop_loss_before_step {
        config.update = UpdateStyle::DropLossBeforeStep;
    }
    if args.detach_parameter_gradients {
        config.update = UpdateStyle::DetachedParameterGradients;
    }
    config.backward_spans = args.backward_spans;
    config.sample_hz = args.sample_hz;
    let bar = progress.then(|| {
        let bar = ProgressBar::new(args.steps);
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} steps ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(format!("training {model}"));
        bar
    });
    let report = train_with_progress(&config, |_, _| {
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    })
    .with_context(|| format!("demo: training the {model} model"))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(report)
}

/// One stderr line describing what the demo did.
pub fn describe(args: &DemoArgs, report: &TrainReport) -> String {
    let losses: Vec<String> = report.losses.iter().map(|l| format!("{l:.4}")).collect();
    format!(
        "trained {:?} model ({} parameters in {} tensors) for {} steps on {}, loss {}; captured step 2 into {}",
        args.model,
        report.parameter_count,
        report.parameter_tensors,
        report.losses.len(),
        report.device,
        losses.join(" → "),
        report.trace_path.display()
    )
    .replace("Llama", "llama")
    .replace("Mlp", "mlp")
}
