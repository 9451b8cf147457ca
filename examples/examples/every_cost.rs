//! What leaving the probe on costs over a whole training run (issue 49, part 4): the built-in
//! llama model trained for `--steps` steps with one step in `--every` captured
//! (`ProfileRun::every`: each capture's session, its `finish()`, its bundle written into the run
//! directory by the bundler thread) against the same run whose schedule never reaches its first
//! step (the idle probe: probed layers, the hook disarmed, the bundler thread waiting). Both in
//! one process, in pairs, the order swapped every pair, so that the machine's drift touches
//! both sides alike.
//!
//! ```text
//! cargo run --release -p candle-graph-examples --example every_cost -- \
//!     [--steps 2000] [--every 200] [--pairs 2] [--sample-hz 1000]
//! ```
//!
//! Prints, per run, the process's CPU time (`getrusage(RUSAGE_SELF)`: every thread, the
//! bundler's and the writer's included) and wall time; per pair, capture on over off; then the
//! median cost of one capture (CPU on − off over the captures), the step's CPU time, the share
//! of the run at `--every`, the `n` that keeps it within 1% and within 0.1%, the disk per
//! capture (its bundle) and the time from a finished capture to its bundle (`run.json`).

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use candle_graph_examples::train::{train, TrainConfig, TrainError};
use candle_graph_examples::ModelKind;
use clap::Parser;

// As the CLI's demo: the tracking allocator, counting (the heap figure of the run's story).
#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system_counting();

/// Command line.
#[derive(Parser, Debug, Clone, Copy)]
struct Args {
    /// Training steps of each run.
    #[arg(long, default_value_t = 2000)]
    steps: u64,
    /// Capture one step in this many (the run with capture on).
    #[arg(long, default_value_t = 200)]
    every: u64,
    /// Pairs of runs (on, off), the order swapped every pair.
    #[arg(long, default_value_t = 2)]
    pairs: usize,
    /// Steps of the warm-up run before the pairs (capture on, every `--every`; discarded): the
    /// process's one-time costs — the symbol cache the first capture's `finish()` parses —
    /// stay out of the pairs and are printed apart (0: no warm-up).
    #[arg(long, default_value_t = 400)]
    warmup_steps: u64,
    /// Stack samples per second of a captured step (0: off).
    #[arg(long, default_value_t = trace_probe::DEFAULT_SAMPLE_HZ)]
    sample_hz: u32,
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct RunFigures {
    cpu_ns: u64,
    wall_ns: u64,
    captures: u64,
    bundle_bytes_mean: Option<u64>,
    finish_to_bundle_ns_median: Option<u64>,
}

/// User plus system CPU time of the whole process so far, ns.
fn process_cpu_ns() -> u64 {
    // SAFETY: `rusage` is plain old data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `getrusage` writes into the struct it is given, which outlives the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    (!v.is_empty()).then(|| v[v.len() / 2])
}

/// The captures of a run directory's `run.json`: how many, the mean bundle size, the median
/// time from a finished capture to its bundle.
fn run_log(dir: &Path) -> (u64, Option<u64>, Option<u64>) {
    let Ok(text) = std::fs::read_to_string(dir.join("run.json")) else {
        return (0, None, None);
    };
    let Ok(log) = serde_json::from_str::<serde_json::Value>(&text) else {
        return (0, None, None);
    };
    let captures = log["captures"].as_array().cloned().unwrap_or_default();
    let field = |name: &str| -> Vec<u64> {
        captures
            .iter()
            .filter_map(|c| c[name].as_u64())
            .collect::<Vec<_>>()
    };
    let bytes = field("bundle_bytes");
    let mean = (!bytes.is_empty()).then(|| bytes.iter().sum::<u64>() / bytes.len() as u64);
    (
        captures.len() as u64,
        mean,
        median(field("finish_to_bundle_ns")),
    )
}

fn one_run(args: &Args, on: bool, dir: &Path) -> Result<RunFigures, String> {
    let mut config = TrainConfig::new(ModelKind::Llama, dir);
    config.steps = args.steps;
    config.every = Some(args.every);
    // off: the schedule's first step lies beyond the run
    config.first_step = (!on).then(|| args.steps + 1);
    config.keep_last = Some(4);
    config.sample_hz = args.sample_hz;
    let cpu = process_cpu_ns();
    let wall = Instant::now();
    match train(&config) {
        // off: the schedule's first step was never reached, as intended
        Err(TrainError::Probe(trace_probe::ProbeError::CaptureStepNotReached { .. })) if !on => {}
        Ok(_) => {}
        Err(e) => {
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message.push_str(&format!(": {s}"));
                source = s.source();
            }
            return Err(message);
        }
    }
    let wall_ns = u64::try_from(wall.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let cpu_ns = process_cpu_ns().saturating_sub(cpu);
    let (captures, bundle_bytes_mean, finish_to_bundle_ns_median) = run_log(dir);
    Ok(RunFigures {
        cpu_ns,
        wall_ns,
        captures,
        bundle_bytes_mean,
        finish_to_bundle_ns_median,
    })
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let root = match tempfile_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "llama demo, {} steps a run, capture on: every({}) at {} Hz; off: the schedule never reached; {} pairs",
        args.steps, args.every, args.sample_hz, args.pairs
    );
    if args.warmup_steps > 0 {
        let warm = Args {
            steps: args.warmup_steps,
            ..args
        };
        let dir = root.join("warm-up");
        match one_run(&warm, true, &dir) {
            Ok(f) => println!(
                "warm-up (discarded; the process's first captures parse the symbol cache): {} steps, CPU {}, {} captures",
                warm.steps,
                ms(f.cpu_ns),
                f.captures
            ),
            Err(e) => {
                eprintln!("error: warm-up: {e}");
                return ExitCode::from(2);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut per_capture_ns: Vec<i64> = Vec::new();
    let mut step_cpu_ns = Vec::new();
    let mut ratios = Vec::new();
    let mut last_on = None;
    for pair in 0..args.pairs {
        let order = if pair % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        let mut figures = [None, None];
        for on in order {
            let dir = root.join(format!("pair{pair}-{}", if on { "on" } else { "off" }));
            match one_run(&args, on, &dir) {
                Ok(f) => {
                    println!(
                        "pair {pair} {:>3}: CPU {:>10}  wall {:>10}  captures {}",
                        if on { "on" } else { "off" },
                        ms(f.cpu_ns),
                        ms(f.wall_ns),
                        f.captures
                    );
                    figures[usize::from(!on)] = Some(f);
                }
                Err(e) => {
                    eprintln!("error: pair {pair}: {e}");
                    return ExitCode::from(2);
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        let (Some(on), Some(off)) = (figures[0], figures[1]) else {
            continue;
        };
        ratios.push(on.cpu_ns as f64 / off.cpu_ns.max(1) as f64);
        step_cpu_ns.push(off.cpu_ns / args.steps.max(1));
        if on.captures > 0 {
            let extra = on.cpu_ns as i64 - off.cpu_ns as i64;
            per_capture_ns.push(extra / on.captures as i64);
        }
        last_on = Some(on);
    }
    let _ = std::fs::remove_dir_all(&root);
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "CPU on / off: {} (median {:.4})",
        ratios
            .iter()
            .map(|r| format!("{r:.4}"))
            .collect::<Vec<_>>()
            .join(", "),
        sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
    );
    per_capture_ns.sort_unstable();
    let capture = per_capture_ns.get(per_capture_ns.len() / 2).copied();
    if let (Some(capture), Some(step)) = (capture, median(step_cpu_ns)) {
        let signed_ms = |ns: i64| format!("{:+.1} ms", ns as f64 / 1e6);
        println!(
            "one capture: {} of CPU (median of (on − off) / captures over the pairs; range {} to {}); a step {}",
            signed_ms(capture),
            signed_ms(per_capture_ns[0]),
            signed_ms(per_capture_ns[per_capture_ns.len() - 1]),
            ms(step)
        );
        if capture > 0 {
            let capture = capture as f64;
            println!(
                "at every({}) the captures are {:.3}% of the run's CPU; within 1%: every({}) or rarer; within 0.1%: every({}) or rarer",
                args.every,
                capture / (args.every as f64 * step as f64) * 100.0,
                (capture / (0.01 * step as f64)).ceil(),
                (capture / (0.001 * step as f64)).ceil()
            );
        } else {
            println!(
                "the captures' cost is below the noise between runs here: no share computed (use a denser --every)"
            );
        }
    }
    if let Some(on) = last_on {
        println!(
            "disk per capture: {} bytes (its bundle); finished capture to bundle: {} (median)",
            on.bundle_bytes_mean
                .map_or("-".to_string(), |b| b.to_string()),
            on.finish_to_bundle_ns_median.map_or("-".to_string(), ms)
        );
    }
    ExitCode::SUCCESS
}

/// A fresh directory for the runs, under the system's temporary directory.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("every-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
