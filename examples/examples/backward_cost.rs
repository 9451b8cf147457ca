//! What per-module backward spans cost on one captured update: pairs of captured updates of
//! the same seeded model, backward spans off and on (order alternating, one untimed warm-up
//! pair), each on a fresh model, AdamW and profiler writing to `std::io::sink()`. Reports, on
//! the llama-style demo model and the MLP:
//! - time: the ratio on/off of process CPU time (`getrusage`, user + system, which includes the
//!   probe's writer thread) and of wall time, as the median of the pairs' ratios with its
//!   interquartile range, and the ratio of the sums;
//! - memory: the heap the markers add by the end of the forward pass (live heap bytes, counting
//!   allocator: their copies, held by the graph until it is dropped, so also at the step's peak),
//!   and the trace's logical peak on/off (one captured update each written to a temporary file:
//!   the gradient pass-through allocations Candle makes for each marker are in the trace).
//!
//! `cargo run --release -p candle-graph-examples --example backward_cost -- [PAIRS]`

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system_counting();

use std::path::Path;
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

fn heap() -> i64 {
    trace_probe::heap_live_bytes().map_or(0, |b| b as i64)
}

/// One captured update.
struct Update {
    wall_ns: u64,
    cpu_ns: u64,
    /// Bytes the markers copied (the probe's count).
    copy_bytes: u64,
    /// Live heap added by the forward pass (loss computed, graph alive).
    forward_heap_bytes: i64,
}

/// One captured update of a fresh seeded `model`, its trace to `out` (or a sink).
fn update(
    model: ModelKind,
    backward_spans: bool,
    out: Option<&Path>,
) -> Result<Update, Box<dyn std::error::Error>> {
    let varmap = VarMap::new();
    let run = ProfileRun::training(format!("{model}::train_step"), 1)
        .varmap(&varmap)
        .deterministic(out.is_some())
        .backward_spans(backward_spans);
    let profiler = match out {
        Some(path) => run.start(path)?,
        None => run.start_with_writer(std::io::sink())?,
    };
    let work = Workload::with_varmap(model, ModelSizes::default(), 42, &Device::Cpu, varmap)?;
    let mut opt = ProbedOptimizer::<AdamW>::new(work.varmap().all_vars(), ParamsAdamW::default())?;
    let batch = work.batch(1)?;
    let heap0 = heap();
    let (wall0, cpu0) = (Instant::now(), cpu_ns());
    let forward_heap_bytes;
    {
        let _step = profiler.step(1);
        let loss = work.loss(&batch)?;
        forward_heap_bytes = heap() - heap0;
        opt.backward_step(&loss)?;
    }
    let (wall_ns, cpu_ns) = (wall0.elapsed().as_nanos() as u64, cpu_ns() - cpu0);
    let summary = profiler.finish()?;
    Ok(Update {
        wall_ns,
        cpu_ns,
        copy_bytes: summary.backward_marker_copy_bytes,
        forward_heap_bytes,
    })
}

/// (median, first quartile, third quartile).
fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.25), at(0.75))
}

/// The logical peak of a captured update's trace, bytes.
fn logical_peak(model: ModelKind, backward_spans: bool) -> Result<u64, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    update(model, backward_spans, Some(&path))?;
    let doc = trace_schema::load_path(&path)?;
    let analysis = trace_graph::analyze(&doc);
    let peak = analysis
        .memory
        .logical
        .and_then(|l| l.peak)
        .ok_or("no logical peak in the trace")?;
    Ok(peak.live_bytes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pairs: usize = std::env::args().nth(1).map_or(Ok(200), |s| s.parse())?;
    for model in [ModelKind::Llama, ModelKind::Mlp] {
        update(model, false, None)?;
        update(model, true, None)?;
        let (mut wall, mut cpu) = (Vec::new(), Vec::new());
        let (mut cpu_on, mut cpu_off, mut wall_on, mut wall_off) = (0u64, 0u64, 0u64, 0u64);
        let (mut copied, mut heap_on, mut heap_off) = (0, 0, 0);
        for i in 0..pairs {
            let on_first = i % 2 == 1;
            let a = update(model, on_first, None)?;
            let b = update(model, !on_first, None)?;
            let (off, on) = if on_first { (b, a) } else { (a, b) };
            wall.push(on.wall_ns as f64 / off.wall_ns.max(1) as f64);
            cpu.push(on.cpu_ns as f64 / off.cpu_ns.max(1) as f64);
            cpu_on += on.cpu_ns;
            cpu_off += off.cpu_ns;
            wall_on += on.wall_ns;
            wall_off += off.wall_ns;
            copied = on.copy_bytes;
            heap_on = on.forward_heap_bytes;
            heap_off = off.forward_heap_bytes;
        }
        let (cm, c1, c3) = quartiles(cpu);
        let (wm, w1, w3) = quartiles(wall);
        let (peak_off, peak_on) = (logical_peak(model, false)?, logical_peak(model, true)?);
        println!(
            "{model}: {pairs} pairs, off CPU {:.2} ms/update; CPU on/off median {cm:.3} (IQR {c1:.3}–{c3:.3}), sum ratio {:.3}; wall on/off median {wm:.3} (IQR {w1:.3}–{w3:.3}), sum ratio {:.3}",
            cpu_off as f64 / pairs as f64 / 1e6,
            cpu_on as f64 / cpu_off.max(1) as f64,
            wall_on as f64 / wall_off.max(1) as f64,
        );
        println!(
            "{model}: marker copies {copied} B; heap added by the forward pass on {heap_on} B, off {heap_off} B (+{} B); trace logical peak on {peak_on} B, off {peak_off} B (+{} B)",
            heap_on - heap_off,
            peak_on as i64 - peak_off as i64,
        );
    }
    Ok(())
}
