//! `candle-graph demo [--out DIR] [--model llama|mlp] [--steps N] [--capture-steps N] [--device D]
//! [--drop-loss-before-step | --detach-parameter-gradients] [--backward-spans] [--sample-hz N]`: trains a built-in Candle model on CPU (or `cuda[:N]` /
//! `metal[:N]` when built with that feature), captures steps 2..=17 after one warm-up step with the
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
pub fn run(args: &DemoArgs, progress: bool) -> Result<(TrainReport, StepTimes)> {
    if args.every.is_none() {
        check_steps(args)?;
    }
    if args.every.is_none() && (args.capture_step < 2 || args.capture_step > args.steps) {
        bail!(
            "--capture-step {} must be within 2..={} (--steps): the steps before it are the warm-up",
            args.capture_step,
            args.steps
        );
    }
    let model = match args.model {
        ModelArg::Llama => ModelKind::Llama,
        ModelArg::Mlp => ModelKind::Mlp,
    };
    let mut config = TrainConfig::new(model, &args.out);
    config.steps = args.steps;
    config.capture_step = args.capture_step;
    config.capture_steps = captured_steps(args);
    if args.rank_worker {
        let (rank, world) = worker_rank()?;
        config.seed = RANK_SEED_BASE + u64::from(rank);
        if rank + 1 == world && world > 1 {
            // the last rank gets four times the batch: the straggler of the demo
            config.sizes.llama.batch_size *= RANK_BATCH_SKEW;
            config.sizes.mlp.batch_size *= RANK_BATCH_SKEW;
        }
        // `config.rank` stays `None`: the probe reads RANK / LOCAL_RANK / WORLD_SIZE itself
    }
    config.device = args.device;
    if args.drop_loss_before_step {
        config.update = UpdateStyle::DropLossBeforeStep;
    }
    if args.detach_parameter_gradients {
        config.update = UpdateStyle::DetachedParameterGradients;
    }
    config.backward_spans = args.backward_spans;
    config.every = args.every;
    config.keep_last = args.keep_last.and_then(|k| usize::try_from(k).ok());
    config.seeds = candle_graph_examples::Seeds {
        leak_every: args.seed_leak_every,
        slowdown_after: args.seed_slowdown_after,
    };
    if let Some(every) = args.every {
        // the first capture is step `every`: a run that ends before it captures nothing
        if every > args.steps {
            bail!(
                "--every {every} first captures step {every}, after the run's last step ({}): nothing would be captured; give --steps {every} or more",
                args.steps
            );
        }
        // a run directory is written anew: the demo's own earlier run there goes first
        clear_run_dir(&args.out)?;
        // each bundle as `candle-graph bundle` writes it (`verify --semantic` re-derives them)
        config.bundle_outputs = Some(trace_probe::BundleOutputs(std::sync::Arc::new(
            |doc: &trace_views::load::TraceDocument, analysis: &trace_views::load::Analysis| {
                trace_views::bundle::derive(doc, analysis).unwrap_or_default()
            },
        )));
    }
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
    // Wall and CPU time of each update (the first includes building the model: a warm-up).
    let mut times = StepTimes::default();
    let mut last = (std::time::Instant::now(), process_cpu_ns());
    let report = train_with_progress(&config, |_, _| {
        let now = (std::time::Instant::now(), process_cpu_ns());
        let wall = now.0.duration_since(last.0).as_nanos();
        times.wall_ns.push(u64::try_from(wall).unwrap_or(u64::MAX));
        if let (Some(a), Some(b)) = (last.1, now.1) {
            times.cpu_ns.push(b.saturating_sub(a));
        }
        last = now;
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    })
    .with_context(|| format!("demo: training the {model} model"))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok((report, times))
}

/// Each update's time, in ns: index `i` is update `i + 1`'s.
#[derive(Debug, Default, Clone)]
pub struct StepTimes {
    /// Wall time.
    pub wall_ns: Vec<u64>,
    /// CPU time of the whole process (every thread: the model's, the probe's writer and
    /// helper); empty where the process clock cannot be read.
    pub cpu_ns: Vec<u64>,
}

/// The process's CPU time so far (`CLOCK_PROCESS_CPUTIME_ID`), ns; `None` where it cannot be read.
fn process_cpu_ns() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid, writable timespec for the call's duration.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
        if rc != 0 {
            return None;
        }
        let secs = u64::try_from(t.tv_sec).ok()?;
        let nanos = u64::try_from(t.tv_nsec).ok()?;
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// `--steps` below 2 is refused naming `--steps` (step 1 is the warm-up, so nothing could be
/// captured), before `--capture-step` is checked against it: the flag to change is `--steps`.
fn check_steps(args: &DemoArgs) -> Result<()> {
    if args.steps < 2 {
        bail!(
            "--steps {}: the demo trains at least 2 steps (step 1 is the warm-up, the steps from \
             --capture-step on are captured)",
            args.steps
        );
    }
    Ok(())
}

/// The median of the captured steps' times and of the uncaptured ones' after the capture
/// (`None` when either set is empty), in ns, with their counts: `step_ns[i]` is update `i + 1`'s.
pub fn step_medians(args: &DemoArgs, step_ns: &[u64]) -> Option<(u64, usize, u64, usize)> {
    let first = args.capture_step;
    let last = first + captured_steps(args) - 1;
    let median = |mut v: Vec<u64>| -> Option<(u64, usize)> {
        v.sort_unstable();
        Some((*v.get(v.len() / 2)?, v.len()))
    };
    let pick = |captured: bool| -> Vec<u64> {
        (1u64..)
            .zip(step_ns)
            .filter(|&(n, _)| n >= first && (n <= last) == captured)
            .map(|(_, &ns)| ns)
            .collect()
    };
    let (c, cn) = median(pick(true))?;
    let (u, un) = median(pick(false))?;
    Some((c, cn, u, un))
}

/// The stderr line's step times: the captured steps' median against the uncaptured ones',
/// wall time and the process's CPU time, and the ratio of each; empty when either set is empty.
pub fn describe_times(args: &DemoArgs, times: &StepTimes) -> String {
    let Some((c, cn, u, un)) = step_medians(args, &times.wall_ns) else {
        return String::new();
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    let ratio = |a: u64, b: u64| {
        if b == 0 {
            String::from("-")
        } else {
            format!("{:.2}×", a as f64 / b as f64)
        }
    };
    let cpu = match step_medians(args, &times.cpu_ns) {
        Some((cc, _, uc, _)) => format!(
            "; CPU of the process, median: captured {:.2} ms, not captured {:.2} ms ({})",
            ms(cc),
            ms(uc),
            ratio(cc, uc)
        ),
        None => String::new(),
    };
    format!(
        "; step wall time, median: captured {:.2} ms ({cn} steps), not captured {:.2} ms ({un} after the capture) ({}){cpu}",
        ms(c),
        ms(u),
        ratio(c, u)
    )
}

/// How many steps the demo captures: `--capture-steps`, cut at `--steps`.
pub fn captured_steps(args: &DemoArgs) -> u64 {
    args.capture_steps
        .min(args.steps.saturating_sub(args.capture_step) + 1)
        .max(1)
}

/// Removes the run directory `dir` of an earlier scheduled run, so that the demo can write it
/// again — only when it is one: its `run.json` a run log and nothing beside it but what a run
/// directory holds (`step-*` bundles, `.captures/`, a publish's hidden temporaries). A
/// directory with anything else (a user's files) is refused, never removed; a directory
/// without `run.json` is left to the probe (which refuses one that holds bundles).
///
/// # Errors
/// A `run.json` that is not a run log, an entry a run directory does not hold, or I/O.
fn clear_run_dir(dir: &std::path::Path) -> Result<()> {
    if !dir.join(trace_views::bundle::RUN_FILE).is_file() {
        return Ok(());
    }
    let earlier = trace_views::bundle::read_run_log(dir).with_context(|| {
        format!(
            "{} has a run.json that is not a run log: not removed; give an empty or new --out",
            dir.display()
        )
    })?;
    let mut strangers = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let known = name == trace_views::bundle::RUN_FILE
            || name.starts_with(".run.json.tmp-")
            || (is_dir && (name.starts_with("step-") || name.starts_with(".step-")))
            || (is_dir && name == ".captures");
        if !known {
            strangers.push(trace_views::format::escape(&name).into_owned());
        }
    }
    if !strangers.is_empty() {
        strangers.sort();
        let shown = strangers.len().min(5);
        bail!(
            "{} holds a run.json but also {} a run directory does not ({}{}): not removed; give an empty or new --out",
            dir.display(),
            if strangers.len() == 1 { "an entry" } else { "entries" },
            strangers[..shown].join(", "),
            if strangers.len() > shown { ", …" } else { "" }
        );
    }
    let (captures, kept) = earlier.as_ref().map_or((0, 0), |log| {
        let kept = log.captures.iter().filter(|c| c.bundle.is_some()).count();
        (log.captures.len(), kept)
    });
    std::fs::remove_dir_all(dir)
        .with_context(|| format!("removing the earlier run directory {}", dir.display()))?;
    // said, not silent: the earlier run is gone
    eprintln!(
        "candle-graph: removed the earlier run in {} ({} recorded, {} kept): this run replaces it",
        dir.display(),
        crate::output::count(captures as u64, "capture"),
        crate::output::count(kept as u64, "bundle")
    );
    Ok(())
}

/// The last rank of `demo --ranks` trains on this many times the batch (the demo's straggler:
/// its step does that much more work, far beyond the noise of ranks sharing a few cores).
pub const RANK_BATCH_SKEW: usize = 4;

/// Seed of rank 0 of `demo --ranks` (rank N uses this + N); the single-process demo's seed.
pub const RANK_SEED_BASE: u64 = 42;

/// The rank and world size of a `--rank-worker` process, from its environment.
fn worker_rank() -> Result<(u32, u32)> {
    let read = |name: &str| -> Result<u32> {
        let v = std::env::var(name).with_context(|| format!("--rank-worker needs {name}"))?;
        v.parse()
            .with_context(|| format!("{name}={v:?} is not a non-negative integer"))
    };
    Ok((
        read(trace_probe::RANK_ENV)?,
        read(trace_probe::WORLD_SIZE_ENV)?,
    ))
}

/// What one rank process of `demo --ranks` did.
pub struct RankOutcome {
    /// The rank.
    pub rank: u32,
    /// Its exit status (`None`: killed by a signal).
    pub status: Option<i32>,
}

/// `demo --ranks N`: runs this executable N times at once, each with `--rank-worker` and
/// `RANK` / `LOCAL_RANK` / `WORLD_SIZE` set, and waits for all. A rank that fails is reported
/// in its outcome (the summary across ranks then says it is missing), not fatal.
///
/// # Errors
/// The executable cannot be found or a process cannot be started.
pub fn run_ranks(args: &DemoArgs, ranks: u32) -> Result<Vec<RankOutcome>> {
    check_steps(args)?;
    if args.capture_step < 2 || args.capture_step > args.steps {
        bail!(
            "--capture-step {} must be within 2..={} (--steps)",
            args.capture_step,
            args.steps
        );
    }
    let exe = std::env::current_exe().context("cannot find this executable to start the ranks")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let model = match args.model {
        ModelArg::Llama => "llama",
        ModelArg::Mlp => "mlp",
    };
    let mut children = Vec::new();
    for rank in 0..ranks {
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("demo")
            .arg("--rank-worker")
            .arg("--out")
            .arg(&args.out)
            .args(["--model", model])
            .args(["--steps", &args.steps.to_string()])
            .args(["--capture-step", &args.capture_step.to_string()])
            .args(["--capture-steps", &args.capture_steps.to_string()])
            .args(["--sample-hz", &args.sample_hz.to_string()])
            .args(["--device", &args.device.to_string()])
            .env(trace_probe::RANK_ENV, rank.to_string())
            .env(trace_probe::LOCAL_RANK_ENV, rank.to_string())
            .env(trace_probe::WORLD_SIZE_ENV, ranks.to_string())
            .stdout(std::process::Stdio::null());
        if args.backward_spans {
            cmd.arg("--backward-spans");
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start rank {rank} ({})", exe.display()))?;
        children.push((rank, child));
    }
    let mut outcomes = Vec::with_capacity(children.len());
    for (rank, mut child) in children {
        let status = child
            .wait()
            .with_context(|| format!("cannot wait for rank {rank}"))?;
        outcomes.push(RankOutcome {
            rank,
            status: status.code(),
        });
    }
    Ok(outcomes)
}

/// One stderr line describing what the demo did (with `times`, each update's wall and CPU time:
/// the captured steps' median against the uncaptured ones' after the capture, when there are
/// both; see [`describe_times`]).
pub fn describe(args: &DemoArgs, report: &TrainReport, times: &StepTimes) -> String {
    let losses: Vec<String> = report.losses.iter().map(|l| format!("{l:.4}")).collect();
    if let Some(n) = args.every {
        let (first, last) = (losses.first(), losses.last());
        return format!(
            "trained {:?} model ({} parameters in {} tensors) for {} steps on {}, loss {} → {}; captured every {n} steps into the run directory {}",
            args.model,
            report.parameter_count,
            report.parameter_tensors,
            report.losses.len(),
            report.device,
            first.map_or("-", String::as_str),
            last.map_or("-", String::as_str),
            report.trace_path.display()
        )
        .replace("Llama", "llama")
        .replace("Mlp", "mlp");
    }
    // Many steps: the first and the last loss.
    let losses = match losses.as_slice() {
        [first, .., last] if losses.len() > 4 => format!("{first} → … → {last}"),
        _ => losses.join(" → "),
    };
    let n = captured_steps(args);
    let captured = if n > 1 {
        format!("steps {}–{}", args.capture_step, args.capture_step + n - 1)
    } else {
        format!("step {}", args.capture_step)
    };
    let times = describe_times(args, times);
    format!(
        "trained {:?} model ({} parameters in {} tensors) for {} steps on {}, loss {}; captured {captured} into {}{times}",
        args.model,
        report.parameter_count,
        report.parameter_tensors,
        report.losses.len(),
        report.device,
        losses,
        report.trace_path.display()
    )
    .replace("Llama", "llama")
    .replace("Mlp", "mlp")
}

/// `demo --inference`: candle-transformers' `llama2_c` (tiny, seeded weights) generating
/// [`INFERENCE_TOKENS`] tokens after a [`INFERENCE_PROMPT`]-token prompt, the second
/// generation captured into `DIR/trace.jsonl`.
///
/// # Errors
/// Candle or probe failures with their cause.
pub fn run_inference(args: &DemoArgs) -> Result<candle_graph_examples::infer::InferReport> {
    candle_graph_examples::infer::generate(&args.out, INFERENCE_PROMPT, INFERENCE_TOKENS)
        .map_err(|e| anyhow::anyhow!("demo --inference: generating with llama2_c: {e}"))
}

/// Prompt tokens of `demo --inference`.
pub const INFERENCE_PROMPT: usize = 4;
/// Tokens `demo --inference` generates (one prefill call, then one decode call per token).
pub const INFERENCE_TOKENS: usize = 16;

/// One stderr line describing what `demo --inference` did.
pub fn describe_inference(report: &candle_graph_examples::infer::InferReport) -> String {
    format!(
        "generated {} tokens after a {}-token prompt with llama2_c ({} parameters in {} tensors, seeded, no download); captured generation 2 into {}",
        report.generated_tokens,
        report.prompt_tokens,
        report.parameter_count,
        report.parameter_tensors,
        report.trace_path.display()
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn demo_args(argv: &[&str]) -> DemoArgs {
        let cli = Cli::try_parse_from(["candle-graph", "demo"].iter().chain(argv)).unwrap();
        let Command::Demo(d) = cli.command else {
            panic!("not demo")
        };
        d
    }

    #[test]
    fn the_step_times_compare_the_captured_steps_with_the_later_ones_in_wall_and_cpu() {
        // steps 2–3 captured of 6: update 1 is the warm-up, 4–6 are not captured
        let args = demo_args(&["--steps", "6", "--capture-steps", "2"]);
        let ms = |v: &[u64]| v.iter().map(|m| m * 1_000_000).collect::<Vec<u64>>();
        let times = StepTimes {
            wall_ns: ms(&[50, 8, 9, 4, 5, 6]),
            cpu_ns: ms(&[60, 10, 12, 5, 5, 7]),
        };
        let line = describe_times(&args, &times);
        assert!(
            line.contains(
                "captured 9.00 ms (2 steps), not captured 5.00 ms (3 after the capture) (1.80×)"
            ),
            "{line}"
        );
        assert!(
            line.contains(
                "CPU of the process, median: captured 12.00 ms, not captured 5.00 ms (2.40×)"
            ),
            "{line}"
        );
        // no process clock: the wall times alone
        let wall_only = StepTimes {
            cpu_ns: Vec::new(),
            ..times
        };
        assert!(!describe_times(&args, &wall_only).contains("CPU"));
        // nothing after the captured steps: no comparison
        let args = demo_args(&["--steps", "3", "--capture-steps", "2"]);
        assert_eq!(describe_times(&args, &StepTimes::default()), "");
    }
}
