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
    if args.capture_step < 2 || args.capture_step > args.steps {
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

/// One stderr line describing what the demo did.
pub fn describe(args: &DemoArgs, report: &TrainReport) -> String {
    let losses: Vec<String> = report.losses.iter().map(|l| format!("{l:.4}")).collect();
    format!(
        "trained {:?} model ({} parameters in {} tensors) for {} steps on {}, loss {}; captured step {} into {}",
        args.model,
        report.parameter_count,
        report.parameter_tensors,
        report.losses.len(),
        report.device,
        losses.join(" → "),
        args.capture_step,
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

/// What an inference trace says about its forward calls: `prefill` vs `decode` time, the
/// storages live at the end (the KV cache) and how live memory grows per decoded token, read
/// from the trace (spans, memory events), never from the run.
#[derive(Debug, Clone, PartialEq)]
pub struct InferenceFigures {
    /// `prefill` spans' total duration, ns.
    pub prefill_ns: Option<u64>,
    /// `decode` spans: count, and their durations (ns), in order.
    pub decode_ns: Vec<u64>,
    /// Storages allocated in the capture and live at its end, and their bytes.
    pub live_at_end: (u64, u64),
    /// Live bytes at the end of each `decode` span, in order.
    pub live_after_decode: Vec<u64>,
}

impl InferenceFigures {
    /// Reads them from `doc` (one replay of the memory events, O(n log n) for the sorts).
    pub fn of(doc: &trace_schema::TraceDocument) -> Self {
        let name_of = |s: &trace_schema::SpanRecord| doc.str(s.name);
        let mut prefill_ns = None;
        let mut decodes: Vec<(u64, u64)> = Vec::new();
        for s in &doc.spans {
            match (name_of(s), s.duration_ns) {
                ("prefill", Some(d)) => {
                    prefill_ns = Some(prefill_ns.unwrap_or(0u64).saturating_add(d));
                }
                ("decode", Some(d)) => decodes.push((s.start_ns, d)),
                _ => {}
            }
        }
        decodes.sort_unstable();
        let mut ends: Vec<u64> = decodes
            .iter()
            .map(|&(start, d)| start.saturating_add(d))
            .collect();
        ends.sort_unstable();
        // Replay: live bytes after every event; sample at each decode end.
        let mut live: std::collections::HashMap<(trace_schema::Sym, String), u64> =
            std::collections::HashMap::new();
        let mut fresh: std::collections::HashSet<(trace_schema::Sym, String)> =
            std::collections::HashSet::new();
        let mut total = 0u64;
        let mut next_end = 0usize;
        let mut live_after_decode = Vec::with_capacity(ends.len());
        doc.for_each_memory(trace_schema::MemoryOrder::Replay, |m| {
            while next_end < ends.len() && m.timestamp_ns > ends[next_end] {
                live_after_decode.push(total);
                next_end += 1;
            }
            let key = (m.device, m.storage.or(m.tensor).unwrap_or("").to_string());
            match m.action {
                trace_schema::MemoryAction::Alloc => {
                    let b = m.bytes.unwrap_or(0);
                    if let Some(old) = live.insert(key.clone(), b) {
                        total = total.saturating_sub(old);
                    }
                    total = total.saturating_add(b);
                    if m.pre_existing {
                        fresh.remove(&key);
                    } else {
                        fresh.insert(key);
                    }
                }
                trace_schema::MemoryAction::Free => {
                    if let Some(old) = live.remove(&key) {
                        total = total.saturating_sub(old);
                    }
                    fresh.remove(&key);
                }
            }
        });
        while next_end < ends.len() {
            live_after_decode.push(total);
            next_end += 1;
        }
        let live_at_end = fresh.iter().fold((0u64, 0u64), |(n, b), k| {
            (n + 1, b.saturating_add(live.get(k).copied().unwrap_or(0)))
        });
        Self {
            prefill_ns,
            decode_ns: decodes.iter().map(|&(_, d)| d).collect(),
            live_at_end,
            live_after_decode,
        }
    }

    /// Mean growth of live bytes per decoded token between the first and the last decode's
    /// end; `None` with fewer than two decodes.
    pub fn growth_per_token_bytes(&self) -> Option<f64> {
        let (first, last) = (
            self.live_after_decode.first()?,
            self.live_after_decode.last()?,
        );
        let steps = self
            .live_after_decode
            .len()
            .checked_sub(1)
            .filter(|n| *n > 0)?;
        Some((*last as f64 - *first as f64) / steps as f64)
    }

    /// The lines `demo --inference` prints before the summary.
    pub fn render(&self) -> String {
        use trace_format::{bytes, duration};
        let mut out = String::from("inference (from the trace)\n");
        match self.prefill_ns {
            Some(p) => out.push_str(&format!("  prefill       {}\n", duration(p))),
            None => out.push_str("  prefill       no prefill span\n"),
        }
        if self.decode_ns.is_empty() {
            out.push_str("  decode        no decode span\n");
        } else {
            let sum: u64 = self
                .decode_ns
                .iter()
                .fold(0u64, |s, d| s.saturating_add(*d));
            let mean = sum / self.decode_ns.len() as u64;
            out.push_str(&format!(
                "  decode        {} calls, {} in all, {} per token\n",
                self.decode_ns.len(),
                duration(sum),
                duration(mean)
            ));
        }
        out.push_str(&format!(
            "  live at end   {} in {} storages allocated in the call (the KV cache and its mask)\n",
            bytes(self.live_at_end.1),
            self.live_at_end.0
        ));
        if let Some(g) = self.growth_per_token_bytes() {
            out.push_str(&format!(
                "  growth        {} per decoded token (live bytes at the end of each decode call)\n",
                bytes(g.max(0.0).round() as u64)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real generation (llama2_c, tiny, seeded): one prefill, a decode per further token,
    /// the cache live at the end with its exact bytes, growth per token exactly one position of
    /// keys and values in every layer.
    #[test]
    fn inference_figures_from_a_real_generation() {
        let _serial = crate::candle_serial();
        let dir = tempfile::tempdir().expect("tempdir");
        let report = candle_graph_examples::infer::generate(dir.path(), 4, 16).expect("generate");
        let doc = trace_schema::load_path(&report.trace_path).expect("trace");
        let f = InferenceFigures::of(&doc);
        assert!(f.prefill_ns.is_some(), "{f:?}");
        assert_eq!(f.decode_ns.len(), 15, "{f:?}");
        let cfg = candle_graph_examples::infer::tiny_config();
        let head_dim = cfg.dim / cfg.n_heads;
        // One position of keys and values, f32, in every layer.
        let per_token = (2 * cfg.n_layers * cfg.n_kv_heads * head_dim * 4) as u64;
        // The cache holds every position but the last generated token's (never fed back).
        let positions = (4 + 16 - 1) as u64;
        let mask = 4 * 4; // the prefill's causal mask, u8
        assert_eq!(
            f.live_at_end,
            (2 * cfg.n_layers as u64 + 1, per_token * positions + mask),
            "{f:?}"
        );
        assert_eq!(f.growth_per_token_bytes(), Some(per_token as f64), "{f:?}");
        // The weights are made after the profiler started and declared on the session: no
        // tensor older than the session, so logical memory is complete (not `partial`).
        let contract = doc.meta.capture_contract.as_ref().expect("contract");
        assert_eq!(
            contract.logical_memory,
            trace_schema::CoverageLevel::Complete,
            "{:?}",
            contract.reasons
        );
        let text = f.render();
        assert!(text.contains("prefill"), "{text}");
        assert!(text.contains("15 calls"), "{text}");
    }
}
