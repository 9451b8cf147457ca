//! Same-process paired A/B of the whole captured step against a plain step: an MLP training
//! step (784-512-512-10 by default, batch 64, AdamW, CPU) with the probe's tracking allocator
//! installed as the global allocator (disarmed outside the captured step, as in a user's
//! binary).
//!
//! Variants, run in blocks of `AB_STEPS` steps, all four per round in rotated order (reversed
//! every other cycle), each compared with the plain block of its round:
//! - `plain`: candle-nn `Linear`s and `AdamW`;
//! - `idle`: probed `Linear`s, `ProbedOptimizer`, the tracing layer installed, the step not
//!   captured, the session not tracking storages (`track_pre_existing(false)`: the allocator
//!   hook disarmed, the steady-state cost of the wrappers);
//! - `tracked`: the same under a session that tracks storages until its capture step (the
//!   default: the hook armed, every allocation logged, the drainer thread feeding the session
//!   tracker) — a warm-up step's cost; a fresh session per block (built, its step 1 run and
//!   finished outside the measurement);
//! - `untracked` (its control): the same fresh session per block with tracking off — a fresh
//!   optimizer's buffers fault in pages a long-lived model does not, so `tracked / untracked`
//!   is the tracking's cost;
//! - `fresh` (the control): step 2 of a fresh run (session, probed layers over the shared
//!   weights, fresh `ProbedOptimizer<AdamW>`, step 1 run), not captured;
//! - `captured`: the same, step 2 captured, writing to `std::io::sink()` — meta, root span,
//!   passes, module spans, gradient facts, the storage capture (armed allocator, ring drains,
//!   registration, memory events), device samples and allocation sites (the default 4 KiB
//!   threshold); stack sampling off (`sample_hz(0)`);
//! - `no_sites`: the same captured step with allocation sites off
//!   (`alloc_site_threshold_bytes(0)`): `captured / no_sites` is the sites' cost.
//!   Building the run and `finish()` are outside the measured step and reported apart (once per
//!   run for a user);
//! - `sampled_100`, `sampled_1k`, `sampled_10k`: the same captured step with the wall-clock
//!   stack sampler at 100 Hz, 1 kHz (the default) and 10 kHz; compared with `captured` (the
//!   sampler alone) and with `plain`. Their `finish()` includes the symbolisation of the
//!   samples (reported apart), and the sampler's own counters give the time per sample spent in
//!   the signal handler.
//!
//! Each step is measured three ways: the training thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`: the probe's cost on the hot path, insensitive to other jobs on a
//! shared machine), the process's CPU time (adds the writer thread's formatting and, with
//! several Candle threads, their work) and wall time. A pair's ratio is the sum over its block
//! of probed steps over the sum of its plain block; printed: median and range over the rounds.
//! Run with `RAYON_NUM_THREADS=1` so that Candle's kernels run on the training thread and its
//! CPU time is the whole step's.
//!
//! With `AB_PARTS=1` it also times the parts of the captured step separately (CPU time of the
//! training thread, median over `AB_PAIRS` repetitions): gradient facts, one span open/close,
//! one device sample.
//!
//! `RAYON_NUM_THREADS=1 cargo bench -p trace-probe --bench ab_overhead` (env: `AB_PAIRS` rounds,
//! default 30; `AB_STEPS` per block, default 5; `AB_HIDDEN`, default 512; `AB_ONLY=captured`,
//! `sampled_1k`, `fresh` or `plain` runs only those steps, for a sampling profiler; `AB_SAMPLING=1` runs only
//! `plain`, `captured` and the three sampled variants; `AB_SITES=1` only `plain`, `fresh`,
//! `no_sites`, `captured` and `sampled_1k`, and prints the walk's ns per stack;
//! `TRACE_PROBE_SITE_UNWINDER=libgcc` forces the DWARF walker on a frame-pointer build).

use std::time::Instant;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::nn::{self, Traced};
use trace_probe::{ProbedOptimizer, ProfileRun, SpanKind, TraceSession, Tracking};
use tracing_subscriber::{filter::LevelFilter, layer::SubscriberExt, Layer, Registry};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One reading of the three clocks, in ns.
#[derive(Debug, Clone, Copy)]
struct Clocks {
    thread_ns: u64,
    process_ns: u64,
    wall: Instant,
}

fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids are the standard ones.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Clocks {
    fn now() -> Self {
        Self {
            thread_ns: cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
            process_ns: cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            wall: Instant::now(),
        }
    }

    /// Elapsed since `self`: (thread CPU, process CPU, wall), seconds.
    fn since(&self) -> Cost {
        let now = Self::now();
        Cost {
            thread: (now.thread_ns - self.thread_ns) as f64 * 1e-9,
            process: (now.process_ns - self.process_ns) as f64 * 1e-9,
            wall: now.wall.duration_since(self.wall).as_secs_f64(),
        }
    }
}

/// Seconds spent, by clock.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    thread: f64,
    process: f64,
    wall: f64,
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, o: Self) {
        self.thread += o.thread;
        self.process += o.process;
        self.wall += o.wall;
    }
}

impl Cost {
    fn ratio(self, base: Self) -> Self {
        Self {
            thread: self.thread / base.thread,
            process: self.process / base.process,
            wall: self.wall / base.wall,
        }
    }
}

struct Dims {
    input: usize,
    hidden: usize,
    classes: usize,
    batch: usize,
}

fn batch(d: &Dims) -> candle_core::Result<(Tensor, Tensor)> {
    let x = Tensor::randn(0f32, 1.0, (d.batch, d.input), &Device::Cpu)?;
    let y = Tensor::zeros(d.batch, DType::U32, &Device::Cpu)?;
    Ok((x, y))
}

struct Plain {
    l1: Linear,
    l2: Linear,
    l3: Linear,
    opt: AdamW,
}

impl Plain {
    fn new(d: &Dims) -> candle_core::Result<Self> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        Ok(Self {
            l1: candle_nn::linear(d.input, d.hidden, vb.pp("l1"))?,
            l2: candle_nn::linear(d.hidden, d.hidden, vb.pp("l2"))?,
            l3: candle_nn::linear(d.hidden, d.classes, vb.pp("l3"))?,
            opt: AdamW::new(varmap.all_vars(), ParamsAdamW::default())?,
        })
    }

    fn step(&mut self, x: &Tensor, y: &Tensor) -> candle_core::Result<()> {
        let h = self.l2.forward(&self.l1.forward(x)?.relu()?)?.relu()?;
        let l = loss::cross_entropy(&self.l3.forward(&h)?, y)?;
        self.opt.backward_step(&l)
    }
}

/// The probed model: probed `Linear`s (module spans through the session's layer), the
/// optimizer wrapper and the step guard.
struct Probed {
    l1: Traced<Linear>,
    l2: Traced<Linear>,
    l3: Traced<Linear>,
    opt: ProbedOptimizer<AdamW>,
    session: TraceSession,
}

impl Probed {
    /// Builds the model under `session`'s layer (the layers' spans belong to the subscriber
    /// that is the default when they are created) over the weights in `varmap` (created there
    /// on first use, reused after).
    fn new(
        d: &Dims,
        session: &TraceSession,
        varmap: &VarMap,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        let l1 = nn::linear(d.input, d.hidden, vb.pp("l1"))?;
        let l2 = nn::linear(d.hidden, d.hidden, vb.pp("l2"))?;
        let l3 = nn::linear(d.hidden, d.classes, vb.pp("l3"))?;
        let opt = ProbedOptimizer::for_session(session, varmap.all_vars(), ParamsAdamW::default())?;
        Ok(Self {
            l1,
            l2,
            l3,
            opt,
            session: session.clone(),
        })
    }

    fn step(&mut self, n: u64, x: &Tensor, y: &Tensor) -> candle_core::Result<()> {
        let _step = self.session.step(n);
        let logits = {
            let h = self.l2.forward(&self.l1.forward(x)?.relu()?)?.relu()?;
            self.l3.forward(&h)?
        };
        let l = loss::cross_entropy(&logits, y)?;
        self.opt.backward_step(&l)
    }
}

fn subscriber(session: &TraceSession) -> impl tracing::Subscriber + Send + Sync {
    Registry::default().with(session.layer().with_filter(LevelFilter::TRACE))
}

/// One run of a user's loop, a fresh session writing to `std::io::sink()`: the session
/// capturing step 2 (or, as the control, step 3, so that step 2 is not captured), the model
/// built under its layer over the shared weights, a fresh `ProbedOptimizer<AdamW>`, the layer
/// installed, and step 1 run (as in a training loop: the optimizer state is warm when the
/// captured step runs).
struct Run {
    model: Probed,
    _default: tracing::subscriber::DefaultGuard,
}

impl Run {
    /// A run capturing step 2 (or, `capture` false, never reaching its capture step), sampling
    /// the captured step at `sample_hz` (0: off).
    fn new(
        d: &Dims,
        varmap: &VarMap,
        capture: bool,
        sample_hz: u32,
        x: &Tensor,
        y: &Tensor,
    ) -> Res<Self> {
        Self::with_sites(d, varmap, capture, sample_hz, 4096, x, y)
    }

    /// [`Run::new`] with allocation sites at `site_threshold` bytes (0: off).
    fn with_sites(
        d: &Dims,
        varmap: &VarMap,
        capture: bool,
        sample_hz: u32,
        site_threshold: usize,
        x: &Tensor,
        y: &Tensor,
    ) -> Res<Self> {
        let step = if capture { 2 } else { 3 };
        let session = TraceSession::new(
            ProfileRun::training("ab", step)
                .sample_hz(sample_hz)
                .alloc_site_threshold_bytes(site_threshold),
            std::io::sink(),
        )?;
        let default = tracing::subscriber::set_default(subscriber(&session));
        let mut model = Probed::new(d, &session, varmap)?;
        model.step(1, x, y)?;
        Ok(Self {
            model,
            _default: default,
        })
    }

    /// Step 2, measured; then `finish()`, measured apart.
    fn step(mut self, x: &Tensor, y: &Tensor) -> Res<(Cost, Cost)> {
        let t = Clocks::now();
        self.model.step(2, x, y)?;
        let step = t.since();
        let t = Clocks::now();
        // The control never reaches its capture step: `finish` says so, as it should.
        let _ = self.model.session.finish();
        Ok((step, t.since()))
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn range(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// `label: median (range)` of one clock's ratios.
fn describe(label: &str, ratios: &[Cost]) {
    let line = |name: &str, f: fn(&Cost) -> f64| {
        let v: Vec<f64> = ratios.iter().map(f).collect();
        let (lo, hi) = range(&v);
        format!("{name} {:.3} ({lo:.3}–{hi:.3})", median(&v))
    };
    println!(
        "{label}: median ratio (range) — thread CPU {}; process CPU {}; wall {}",
        line("", |c| c.thread).trim_start(),
        line("", |c| c.process).trim_start(),
        line("", |c| c.wall).trim_start(),
    );
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The variants, in the order of the first pair (rotated every pair).
const VARIANTS: [&str; 10] = [
    "plain",
    "idle",
    "tracked",
    "untracked",
    "fresh",
    "no_sites",
    "captured",
    "sampled_100",
    "sampled_1k",
    "sampled_10k",
];
/// `AB_SITES=1`: only these.
const SITES_VARIANTS: [&str; 5] = ["plain", "fresh", "no_sites", "captured", "sampled_1k"];
/// `AB_SAMPLING=1`: only these.
const SAMPLING_VARIANTS: [&str; 5] = [
    "plain",
    "captured",
    "sampled_100",
    "sampled_1k",
    "sampled_10k",
];

/// The sample rate of a captured variant.
fn sample_hz(variant: &str) -> u32 {
    match variant {
        "sampled_100" => 100,
        "sampled_1k" => 1000,
        "sampled_10k" => 10_000,
        _ => 0,
    }
}

fn main() -> Res<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(()); // `cargo test --benches` lists benchmarks; there is nothing to list.
    }
    let pairs = env("AB_PAIRS", 30);
    let steps = env("AB_STEPS", 5);
    let d = Dims {
        input: 784,
        hidden: env("AB_HIDDEN", 512),
        classes: 10,
        batch: 64,
    };
    let (x, y) = batch(&d)?;
    let mut plain = Plain::new(&d)?;
    trace_probe::capture::availability()
        .calibration
        .map_err(|e| format!("allocator calibration: {e}"))?;
    let weights = VarMap::new();

    match std::env::var("AB_ONLY").as_deref() {
        Ok(which @ ("captured" | "fresh" | "sampled_1k")) => {
            let hz = if which == "sampled_1k" { 1000 } else { 0 };
            for _ in 0..pairs * steps {
                Run::new(&d, &weights, which != "fresh", hz, &x, &y)?.step(&x, &y)?;
            }
            return Ok(());
        }
        Ok("plain") => {
            for _ in 0..pairs * steps {
                plain.step(&x, &y)?;
            }
            return Ok(());
        }
        _ => {}
    }

    // The idle model's layer stays installed for the process (as a user would install it);
    // runs install their own session's layer over it while they run.
    let idle_session = TraceSession::new(
        ProfileRun::training("ab", u64::MAX).track_pre_existing(false),
        std::io::sink(),
    )?;
    let _default = tracing::subscriber::set_default(subscriber(&idle_session));
    let idle_weights = VarMap::new();
    let mut idle = Probed::new(&d, &idle_session, &idle_weights)?;

    // Warm-up.
    for _ in 0..3 {
        plain.step(&x, &y)?;
        idle.step(2, &x, &y)?;
        Run::new(&d, &weights, false, 0, &x, &y)?.step(&x, &y)?;
        Run::new(&d, &weights, true, 0, &x, &y)?.step(&x, &y)?;
    }
    // The first sampled run's finish() reads the binary's line tables (the symboliser's cache
    // is cold); later ones find them cached.
    let (_, cold) = Run::new(&d, &weights, true, 1000, &x, &y)?.step(&x, &y)?;
    println!(
        "first sampled finish() of the process (cold symboliser): {:.1} ms thread CPU, {:.1} ms wall",
        cold.thread * 1e3,
        cold.wall * 1e3
    );

    let variants: Vec<&str> = if env("AB_SITES", 0) == 1 {
        SITES_VARIANTS.to_vec()
    } else if env("AB_SAMPLING", 0) == 1 {
        SAMPLING_VARIANTS.to_vec()
    } else {
        VARIANTS.to_vec()
    };
    let index = |name: &str| variants.iter().position(|v| *v == name);
    let mut setup = Vec::new();
    let mut finish = Vec::new();
    // Per sampled variant: finish() thread CPU, ms (includes the symbolisation).
    let mut finish_sampled: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    // Allocation sites of the `captured` runs: (stacks, walk ns) summed; finish() ms.
    let mut site_walks = (0u64, 0u64);
    let mut finish_sites = Vec::new();
    let mut block = |variant: &str| -> Res<Cost> {
        let mut total = Cost::default();
        if variant == "tracked" || variant == "untracked" {
            let session = TraceSession::new(
                ProfileRun::training("ab", u64::MAX).track_pre_existing(variant == "tracked"),
                std::io::sink(),
            )?;
            let default = tracing::subscriber::set_default(subscriber(&session));
            let mut model = Probed::new(&d, &session, &weights)?;
            model.step(1, &x, &y)?;
            for _ in 0..steps {
                let t = Clocks::now();
                model.step(2, &x, &y)?;
                total += t.since();
            }
            drop(default);
            let _ = session.finish(); // never captured: stops tracking
            return Ok(total);
        }
        for _ in 0..steps {
            match variant {
                "plain" => {
                    let t = Clocks::now();
                    plain.step(&x, &y)?;
                    total += t.since();
                }
                "idle" => {
                    let t = Clocks::now();
                    idle.step(2, &x, &y)?;
                    total += t.since();
                }
                _ => {
                    let capture = variant != "fresh";
                    let sites = if variant == "no_sites" { 0 } else { 4096 };
                    let t = Clocks::now();
                    let run =
                        Run::with_sites(&d, &weights, capture, sample_hz(variant), sites, &x, &y)?;
                    let made = t.since();
                    let (step, fin) = run.step(&x, &y)?;
                    total += step;
                    if variant == "captured" {
                        let c = trace_alloc::sites::counts();
                        site_walks.0 += c.captured;
                        site_walks.1 += c.capture_ns;
                        finish_sites.push(fin.thread * 1e3);
                    }
                    if variant == "captured" {
                        setup.push(made.thread * 1e3);
                        finish.push(fin.thread * 1e3);
                    }
                    if let Some(i) = index(variant).filter(|_| sample_hz(variant) > 0) {
                        finish_sampled[i].push(fin.thread * 1e3);
                    }
                }
            }
        }
        Ok(total)
    };
    let sampler_before = trace_sampler::stats();
    // ratios[v][pair]: variant v over plain, same pair.
    let mut ratios: Vec<Vec<Cost>> = vec![Vec::new(); variants.len()];
    // over_captured[v][pair]: variant v over captured (sampling off), same pair.
    let mut over_captured: Vec<Vec<Cost>> = vec![Vec::new(); variants.len()];
    let mut captured_over_fresh = Vec::new();
    let mut captured_over_no_sites = Vec::new();
    let mut tracked_over_untracked = Vec::new();
    let mut plain_ms = Vec::new();
    for pair in 0..pairs {
        let mut order: Vec<usize> = (0..variants.len()).collect();
        order.rotate_left(pair % variants.len());
        if (pair / variants.len()) % 2 == 1 {
            order.reverse();
        }
        let mut cost = vec![Cost::default(); variants.len()];
        for v in order {
            cost[v] = block(variants[v])?;
        }
        plain_ms.push(cost[0].thread / steps as f64 * 1e3);
        for v in 1..variants.len() {
            ratios[v].push(cost[v].ratio(cost[0]));
        }
        if let Some(c) = index("captured") {
            for v in 0..variants.len() {
                over_captured[v].push(cost[v].ratio(cost[c]));
            }
            if let Some(f) = index("fresh") {
                captured_over_fresh.push(cost[c].ratio(cost[f]));
            }
        }
        if let (Some(c), Some(n)) = (index("captured"), index("no_sites")) {
            captured_over_no_sites.push(cost[c].ratio(cost[n]));
        }
        if let (Some(t), Some(u)) = (index("tracked"), index("untracked")) {
            tracked_over_untracked.push(cost[t].ratio(cost[u]));
        }
    }
    let sampler_after = trace_sampler::stats();
    println!(
        "MLP 784-{h}-{h}-10 batch 64 AdamW, tracking allocator installed, {pairs} rounds x {steps} steps per variant, \
         RAYON_NUM_THREADS={}, plain step median {:.2} ms thread CPU",
        std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "unset".into()),
        median(&plain_ms),
        h = d.hidden
    );
    let labels = [
        (
            "idle",
            "idle / plain (wrappers + layer, step not captured, not tracking: hook disarmed)",
        ),
        (
            "tracked",
            "tracked / plain (the same, the session tracking storages: hook armed)",
        ),
        (
            "untracked",
            "untracked / plain (the same, tracking off: the control)",
        ),
        (
            "fresh",
            "fresh / plain (step 2 of a fresh run, not captured, tracking)",
        ),
        (
            "captured",
            "captured / plain (step 2 of a fresh run, captured, allocator armed, sites on, sampling off)",
        ),
        (
            "no_sites",
            "no_sites / plain (the same, allocation sites off)",
        ),
        (
            "sampled_100",
            "sampled_100 / plain (the same, stack sampling at 100 Hz)",
        ),
        (
            "sampled_1k",
            "sampled_1k / plain (the same, stack sampling at 1 kHz)",
        ),
        (
            "sampled_10k",
            "sampled_10k / plain (the same, stack sampling at 10 kHz)",
        ),
    ];
    for (name, label) in labels {
        if let Some(i) = index(name) {
            describe(label, &ratios[i]);
        }
    }
    if !tracked_over_untracked.is_empty() {
        describe(
            "tracked / untracked (tracking storages before the capture step, alone)",
            &tracked_over_untracked,
        );
    }
    if !captured_over_no_sites.is_empty() {
        describe(
            "captured / no_sites (the allocation sites alone)",
            &captured_over_no_sites,
        );
        let walker = trace_probe::capture::last_summary()
            .sites
            .map(|s| s.unwinder.wire_name())
            .unwrap_or("-");
        println!(
            "  sites: {} stacks walked ({walker}), {:.2} µs per stack in the hook; finish() with the sites' symbolisation {:.2} ms median",
            site_walks.0,
            site_walks.1 as f64 / site_walks.0.max(1) as f64 * 1e-3,
            median(&finish_sites)
        );
    }
    if !captured_over_fresh.is_empty() {
        describe("captured / fresh (the capture alone)", &captured_over_fresh);
    }
    for name in ["sampled_100", "sampled_1k", "sampled_10k"] {
        if let Some(i) = index(name) {
            describe(
                &format!("{name} / captured (the sampler alone)"),
                &over_captured[i],
            );
            println!(
                "  {name}: finish() with the symbolisation, thread CPU median {:.2} ms (range {:.2}–{:.2})",
                median(&finish_sampled[i]),
                range(&finish_sampled[i]).0,
                range(&finish_sampled[i]).1
            );
        }
    }
    let samples = sampler_after.samples - sampler_before.samples;
    if samples > 0 {
        let handler_ns = sampler_after.handler_ns - sampler_before.handler_ns;
        let symbolize_ns = sampler_after.symbolize_ns - sampler_before.symbolize_ns;
        let finishes = sampler_after.finishes - sampler_before.finishes;
        println!(
            "sampler: {samples} samples ({} walked by frame pointers), {:.1} µs per sample in the handler (timestamp to record written); \
             symbolisation and events after the step {:.2} ms per run ({} runs, {} unique addresses in all)",
            sampler_after.frame_pointer_samples - sampler_before.frame_pointer_samples,
            handler_ns as f64 / samples as f64 * 1e-3,
            symbolize_ns as f64 / finishes.max(1) as f64 * 1e-6,
            finishes,
            sampler_after.unique_addresses - sampler_before.unique_addresses,
        );
    }
    println!(
        "per run, outside the step (thread CPU, median): session + model + optimizer + step 1 {:.2} ms, finish {:.2} ms",
        median(&setup),
        median(&finish)
    );
    let _ = idle_session.finish();
    if env("AB_PARTS", 0) == 1 {
        parts(&d, &weights, &x, &y, pairs)?;
    }
    Ok(())
}

/// Times the parts of a captured step on their own (training thread CPU).
fn parts(d: &Dims, weights: &VarMap, x: &Tensor, y: &Tensor, reps: usize) -> Res<()> {
    let mut facts = Vec::new();
    let mut span = Vec::new();
    let mut sample = Vec::new();
    for _ in 0..reps {
        let run = Run::new(d, weights, true, 0, x, y)?;
        let session = run.model.session.clone();
        let guard = session.step(2);
        let h = run
            .model
            .l2
            .forward(&run.model.l1.forward(x)?.relu()?)?
            .relu()?;
        let l = loss::cross_entropy(&run.model.l3.forward(&h)?, y)?;
        let grads = l.backward()?;
        let t = Clocks::now();
        session.gradient_facts("model", run.model.opt.parameters(), &grads)?;
        facts.push(t.since().thread * 1e6);
        const SPANS: usize = 20;
        let t = Clocks::now();
        for _ in 0..SPANS {
            let _span = session.span("part", SpanKind::Function);
        }
        span.push(t.since().thread * 1e6 / SPANS as f64);
        let t = Clocks::now();
        let _ = trace_probe::capture::device_memory_sample(
            &Device::Cpu,
            trace_probe::DeviceLabel::Cpu,
            session.now_ns(),
        );
        sample.push(t.since().thread * 1e6);
        drop((grads, l, h));
        drop(guard);
        session.finish()?;
    }
    println!(
        "parts (thread CPU, median of {reps}): gradient facts {:.0} µs, span open+close {:.1} µs, device sample {:.1} µs",
        median(&facts),
        median(&span),
        median(&sample)
    );
    Ok(())
}
