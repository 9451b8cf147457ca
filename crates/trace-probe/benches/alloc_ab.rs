//! Same-process paired A/B overhead of armed storage capture on real CPU training steps:
//! blocks of steps alternate between disarmed and armed (order swapped every pair); the figure
//! is the median of the per-pair wall-time ratios armed/disarmed, with their range. Armed means
//! the block's steps are the captured steps of a session (no sampling, no allocation sites, no
//! tracking before the capture, writing to `std::io::sink()`; the session is built and finished
//! outside the timed block): the hook logs every allocation, the watch table and the drop
//! signature run, the ring is drained, the loss is a tensor fact. The plain `AdamW` is the
//! same in both (no `ProbedOptimizer`: the graph and gradients are not registered, their
//! storages are written from their drop signature).
//!
//! `cargo bench -p trace-probe --bench alloc_ab` (env: `AB_PAIRS`, default 10; `AB_STEPS`,
//! default 20 steps per block; `AB_MODEL`: `mlp`, `tfm` or `both`).

use std::time::Instant;

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::{capture, MemoryCategory, ProfileRun, TraceSession, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

trait Model {
    fn loss(&self, step: u64) -> candle_core::Result<Tensor>;
}

struct Mlp(Linear, Linear, Linear);

impl Model for Mlp {
    fn loss(&self, step: u64) -> candle_core::Result<Tensor> {
        let x: Vec<f32> = (0..64 * 784)
            .map(|i| ((i as u64 * 31 + step) % 97) as f32 / 97.0)
            .collect();
        let x = Tensor::from_vec(x, (64, 784), &Device::Cpu)?;
        let y = Tensor::from_vec(
            (0..64u32).map(|i| i % 10).collect::<Vec<_>>(),
            64,
            &Device::Cpu,
        )?;
        let h = self.0.forward(&x)?.relu()?;
        let h = self.1.forward(&h)?.relu()?;
        candle_nn::loss::cross_entropy(&self.2.forward(&h)?, &y)
    }
}

struct Tfm {
    qkv: Linear,
    proj: Linear,
    up: Linear,
    down: Linear,
}

const B: usize = 8;
const T: usize = 64;
const DM: usize = 128;
const HEADS: usize = 4;

impl Model for Tfm {
    fn loss(&self, step: u64) -> candle_core::Result<Tensor> {
        let n = B * T * DM;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i as u64 * 31 + step) % 97) as f32 / 97.0)
            .collect();
        let x = Tensor::from_vec(x, (B, T, DM), &Device::Cpu)?;
        let hd = DM / HEADS;
        let norm = |x: &Tensor| -> candle_core::Result<Tensor> {
            x.broadcast_div(&(x.sqr()?.mean_keepdim(D::Minus1)? + 1e-5)?.sqrt()?)
        };
        let qkv = self
            .qkv
            .forward(&norm(&x)?)?
            .reshape((B, T, 3, HEADS, hd))?;
        let part = |i| -> candle_core::Result<Tensor> {
            qkv.narrow(2, i, 1)?
                .squeeze(2)?
                .transpose(1, 2)?
                .contiguous()
        };
        let (q, k, v) = (part(0)?, part(1)?, part(2)?);
        let att = candle_nn::ops::softmax(&(q.matmul(&k.t()?)? / (hd as f64).sqrt())?, D::Minus1)?;
        let y = att.matmul(&v)?.transpose(1, 2)?.reshape((B, T, DM))?;
        let x = (&x + self.proj.forward(&y)?)?;
        let h = self.down.forward(&self.up.forward(&norm(&x)?)?.gelu()?)?;
        candle_nn::loss::mse(&(&x + h)?, &x.detach())
    }
}

fn run_block(model: &dyn Model, opt: &mut AdamW, steps: u64, armed: bool) -> (f64, u64) {
    let session = armed.then(|| {
        let run = ProfileRun::training("alloc_ab", 1)
            .capture_steps(1..=steps)
            .track_pre_existing(false)
            .sample_hz(0)
            .alloc_site_threshold_bytes(0);
        TraceSession::new(run, std::io::sink()).expect("session")
    });
    let start = Instant::now();
    for step in 0..steps {
        let _step = session.as_ref().map(|s| s.step(step + 1));
        let loss = model.loss(step).expect("forward");
        if let Some(s) = &session {
            s.tensor_as("loss", &loss, MemoryCategory::Activation);
        }
        let grads = loss.backward().expect("backward");
        opt.step(&grads).expect("step");
        drop((grads, loss));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut calls = 0;
    if let Some(s) = session {
        s.finish().expect("finish");
        calls = capture::last_summary().armed_alloc_calls;
    }
    (elapsed, calls)
}

fn measure(name: &str, model: &dyn Model, varmap: &VarMap, pairs: usize, steps: u64) {
    let mut opt = AdamW::new(varmap.all_vars(), ParamsAdamW::default()).expect("adamw");
    run_block(model, &mut opt, 3, false); // warm-up
    let mut ratios = Vec::new();
    let mut calls = 0;
    let mut off_total = 0.0;
    for pair in 0..pairs {
        let (off, on) = if pair % 2 == 0 {
            let off = run_block(model, &mut opt, steps, false).0;
            let (on, c) = run_block(model, &mut opt, steps, true);
            calls = c;
            (off, on)
        } else {
            let (on, c) = run_block(model, &mut opt, steps, true);
            calls = c;
            (run_block(model, &mut opt, steps, false).0, on)
        };
        off_total += off;
        ratios.push(on / off);
    }
    ratios.sort_by(|a, b| a.total_cmp(b));
    let median = ratios[ratios.len() / 2];
    println!(
        "{name}: armed/disarmed median {median:.3} (range {:.3}–{:.3}, {pairs} pairs × {steps} steps); \
         disarmed {:.2} ms/step; {} allocation calls per armed step",
        ratios[0],
        ratios[ratios.len() - 1],
        off_total / (pairs as f64 * steps as f64) * 1e3,
        calls / steps
    );
}

fn main() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let pairs = env("AB_PAIRS", 10) as usize;
    let steps = env("AB_STEPS", 20);
    let model = std::env::var("AB_MODEL").unwrap_or_else(|_| "both".into());
    capture::availability().calibration.expect("calibration");
    if model == "mlp" || model == "both" {
        let vm = VarMap::new();
        let vb = VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu);
        let mlp = Mlp(
            candle_nn::linear(784, 512, vb.pp("l1")).unwrap(),
            candle_nn::linear(512, 512, vb.pp("l2")).unwrap(),
            candle_nn::linear(512, 10, vb.pp("l3")).unwrap(),
        );
        measure("mlp 784-512-512-10 b64", &mlp, &vm, pairs, steps);
    }
    if model == "tfm" || model == "both" {
        let vm = VarMap::new();
        let vb = VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu);
        let tfm = Tfm {
            qkv: candle_nn::linear(DM, 3 * DM, vb.pp("qkv")).unwrap(),
            proj: candle_nn::linear(DM, DM, vb.pp("proj")).unwrap(),
            up: candle_nn::linear(DM, 4 * DM, vb.pp("up")).unwrap(),
            down: candle_nn::linear(4 * DM, DM, vb.pp("down")).unwrap(),
        };
        measure("tfm B8 T64 D128 h4", &tfm, &vm, pairs, steps);
    }
}
