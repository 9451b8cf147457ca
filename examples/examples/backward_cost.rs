//! What per-module backward spans cost on one captured update: pairs of captured updates of
//! the same seeded model, backward spans off and on (order alternating, one untimed warm-up
//! pair), each on a fresh model, AdamW and profiler writing to `std::io::sink()`. Reports the
//! median ratio on/off of wall time and of process CPU time (`getrusage`, user + system, which
//! includes the probe's writer thread), and the bytes the markers copied.
//!
//! `cargo run --release -p candle-graph-examples --example backward_cost -- [PAIRS]`

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

use std::time::Instant;

use candle_core::Device;
use candle_graph_examples::{ModelKind, ModelSizes, Workload};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarMap};
use trace_probe::{ProbedOptimizer, ProfileRun};

fn cpu_ns() -> u64 {
    // SAFETY: `getrusage` writes the struct it is given; zeroed is a valid `rusage`.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a `rusage` and a valid `who`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(u.ru_utime) + ns(u.ru_stime)
}

/// (wall ns, cpu ns, marker copy bytes) of one captured update.
fn update(
    model: ModelKind,
    backward_spans: bool,
) -> Result<(u64, u64, u64), Box<dyn std::error::Error>> {
    let varmap = VarMap::new();
    let profiler = ProfileRun::training(format!("{model}::train_step"), 1)
        .varmap(&varmap)
        .backward_spans(backward_spans)
        .start_with_writer(std::io::sink())?;
    let work = Workload::with_varmap(model, ModelSizes::default(), 42, &Device::Cpu, varmap)?;
    let mut opt = ProbedOptimizer::<AdamW>::new(work.varmap().all_vars(), ParamsAdamW::default())?;
    let batch = work.batch(1)?;
    let (wall0, cpu0) = (Instant::now(), cpu_ns());
    {
        let _step = profiler.step(1);
        let loss = work.loss(&batch)?;
        opt.backward_step(&loss)?;
    }
    let (wall, cpu) = (wall0.elapsed().as_nanos() as u64, cpu_ns() - cpu0);
    let summary = profiler.finish()?;
    Ok((wall, cpu, summary.backward_marker_copy_bytes))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pairs: usize = std::env::args().nth(1).map_or(Ok(30), |s| s.parse())?;
    for model in [ModelKind::Llama, ModelKind::Mlp] {
        update(model, false)?;
        update(model, true)?;
        let (mut wall, mut cpu, mut copied) = (Vec::new(), Vec::new(), 0);
        for i in 0..pairs {
            let on_first = i % 2 == 1;
            let a = update(model, on_first)?;
            let b = update(model, !on_first)?;
            let (off, on) = if on_first { (b, a) } else { (a, b) };
            wall.push(on.0 as f64 / off.0 as f64);
            cpu.push(on.1 as f64 / off.1.max(1) as f64);
            copied = on.2;
        }
        let (wmin, wmax) = (
            wall.iter().cloned().fold(f64::MAX, f64::min),
            wall.iter().cloned().fold(0.0, f64::max),
        );
        println!(
            "{model}: {pairs} pairs; on/off wall median {:.3} (range {wmin:.3}–{wmax:.3}); cpu median {:.3}; marker copies {copied} bytes",
            median(wall.clone()),
            median(cpu),
        );
    }
    Ok(())
}
