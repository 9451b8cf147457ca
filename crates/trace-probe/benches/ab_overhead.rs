//! Same-process paired A/B of the probe's wrappers on an MLP training step (784-512-512-10 by
//! default, batch 64, AdamW, CPU). Blocks of steps alternate between the plain model and the
//! probed one (probed `Linear`s from `trace_probe::nn`, `ProbedOptimizer`, the tracing layer installed), swapping the
//! order every pair; prints the median of the per-pair time ratios and their range. Reported in
//! the README, never asserted.
//!
//! Two probed variants:
//! - `idle`: wrappers and layer present, not the captured step (the steady-state cost);
//! - `captured`: every step is a captured step of a fresh session writing to `std::io::sink()`
//!   (session open, meta, passes, gradient facts with one device read, finish; a fresh AdamW per
//!   step, since a session captures one step). The layers' `tracing` spans were created under
//!   the idle session's subscriber and report there, so this variant records no module spans;
//! - `fresh`: the same fresh session and AdamW per step without capturing (separates the cost
//!   of building them from the cost of capturing).
//!
//! `cargo bench -p trace-probe --bench ab_overhead` (env: `AB_PAIRS`, `AB_STEPS`, `AB_HIDDEN`).

use std::time::Instant;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::nn::{self, Traced};
use trace_probe::{ProbedOptimizer, ProfileRun, TraceSession};
use tracing_subscriber::{filter::LevelFilter, layer::SubscriberExt, Layer, Registry};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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

struct Wrapped {
    varmap: VarMap,
    l1: Traced<Linear>,
    l2: Traced<Linear>,
    l3: Traced<Linear>,
    opt: ProbedOptimizer<AdamW>,
    session: TraceSession,
}

impl Wrapped {
    fn new(d: &Dims, session: &TraceSession) -> candle_core::Result<Self> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let l1 = nn::linear(d.input, d.hidden, vb.pp("l1"))?;
        let l2 = nn::linear(d.hidden, d.hidden, vb.pp("l2"))?;
        let l3 = nn::linear(d.hidden, d.classes, vb.pp("l3"))?;
        let opt = ProbedOptimizer::for_session(session, varmap.all_vars(), ParamsAdamW::default())?;
        Ok(Self {
            varmap,
            l1,
            l2,
            l3,
            opt,
            session: session.clone(),
        })
    }

    /// Rebinds the optimizer (a fresh AdamW) to a new session (the layers' spans reach
    /// whichever session's layer is installed).
    fn rebind(&mut self, session: &TraceSession) -> Result<(), trace_probe::ProbeError> {
        self.opt =
            ProbedOptimizer::for_session(session, self.varmap.all_vars(), ParamsAdamW::default())?;
        self.session = session.clone();
        Ok(())
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(()); // `cargo test --benches` lists benchmarks; there is nothing to list.
    }
    let pairs = env("AB_PAIRS", 10);
    let steps = env("AB_STEPS", 20);
    let d = Dims {
        input: 784,
        hidden: env("AB_HIDDEN", 512),
        classes: 10,
        batch: 64,
    };
    let (x, y) = batch(&d)?;
    let mut plain = Plain::new(&d)?;

    // The layer stays installed for the whole process (as a user would install it).
    let idle_session = TraceSession::new(ProfileRun::training("ab", u64::MAX), std::io::sink())?;
    let _default = tracing::subscriber::set_default(
        Registry::default().with(idle_session.layer().with_filter(LevelFilter::TRACE)),
    );
    let mut idle = Wrapped::new(&d, &idle_session)?;
    let captured_template = TraceSession::new(ProfileRun::training("ab", 1), std::io::sink())?;
    let mut captured = Wrapped::new(&d, &captured_template)?;

    // Warm-up.
    for _ in 0..3 {
        plain.step(&x, &y)?;
        idle.step(2, &x, &y)?;
    }

    let time_plain = |plain: &mut Plain| -> candle_core::Result<f64> {
        let t = Instant::now();
        for _ in 0..steps {
            plain.step(&x, &y)?;
        }
        Ok(t.elapsed().as_secs_f64() / steps as f64)
    };
    let mut ratios_idle = Vec::new();
    let mut ratios_captured = Vec::new();
    let mut ratios_fresh = Vec::new();
    let mut plain_ms = Vec::new();
    for pair in 0..pairs {
        let mut run_idle = || -> candle_core::Result<f64> {
            let t = Instant::now();
            for _ in 0..steps {
                idle.step(2, &x, &y)?;
            }
            Ok(t.elapsed().as_secs_f64() / steps as f64)
        };
        let (p, i) = if pair % 2 == 0 {
            let p = time_plain(&mut plain)?;
            (p, run_idle()?)
        } else {
            let i = run_idle()?;
            (time_plain(&mut plain)?, i)
        };
        let mut run_fresh = || -> Result<f64, Box<dyn std::error::Error>> {
            let t = Instant::now();
            for _ in 0..steps {
                let session = TraceSession::new(ProfileRun::training("ab", 1), std::io::sink())?;
                captured.rebind(&session)?;
                captured.step(2, &x, &y)?;
                let _ = session.finish();
            }
            Ok(t.elapsed().as_secs_f64() / steps as f64)
        };
        let (p3, f) = if pair % 2 == 0 {
            let p3 = time_plain(&mut plain)?;
            (p3, run_fresh()?)
        } else {
            let f = run_fresh()?;
            (time_plain(&mut plain)?, f)
        };
        ratios_fresh.push(f / p3);
        let mut run_captured = || -> Result<f64, Box<dyn std::error::Error>> {
            let t = Instant::now();
            for _ in 0..steps {
                let session = TraceSession::new(ProfileRun::training("ab", 1), std::io::sink())?;
                captured.rebind(&session)?;
                captured.step(1, &x, &y)?;
                session.finish()?;
            }
            Ok(t.elapsed().as_secs_f64() / steps as f64)
        };
        let (p2, c) = if pair % 2 == 0 {
            let p2 = time_plain(&mut plain)?;
            (p2, run_captured()?)
        } else {
            let c = run_captured()?;
            (time_plain(&mut plain)?, c)
        };
        plain_ms.push(p * 1e3);
        ratios_idle.push(i / p);
        ratios_captured.push(c / p2);
    }
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    let (il, ih) = range(&ratios_idle);
    let (cl, ch) = range(&ratios_captured);
    println!(
        "MLP 784-{h}-{h}-10 batch 64 AdamW, {pairs} pairs x {steps} steps, plain median {:.2} ms/step",
        median(&mut plain_ms.clone()),
        h = d.hidden
    );
    println!(
        "idle (wrappers + layer, not captured): median ratio {:.3}, range {il:.3}-{ih:.3}",
        median(&mut ratios_idle)
    );
    let (fl, fh) = range(&ratios_fresh);
    println!(
        "fresh session + optimizer per step, not captured: median ratio {:.3}, range {fl:.3}-{fh:.3}",
        median(&mut ratios_fresh)
    );
    println!(
        "captured (fresh session per step, sink): median ratio {:.3}, range {cl:.3}-{ch:.3}",
        median(&mut ratios_captured)
    );
    let _ = idle_session.finish();
    let _ = captured_template.finish();
    Ok(())
}
