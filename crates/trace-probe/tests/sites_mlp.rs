//! Allocation sites on real Candle training steps (the tracking allocator installed): every
//! storage of at least the threshold allocated in the captured step names a site whose stack
//! classifies to the op that allocated it.

#![cfg(stack_sampler)]

mod common;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::{ProbedOptimizer, ProfileRun, TerminalOutcome, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const IN: usize = 64;
const HIDDEN: usize = 128;
const CLASSES: usize = 16;
const BATCH: usize = 32;

struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn new(varmap: &VarMap) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        Ok(Self {
            fc1: candle_nn::linear(IN, HIDDEN, vb.pp("fc1"))?,
            fc2: candle_nn::linear(HIDDEN, CLASSES, vb.pp("fc2"))?,
        })
    }
    fn loss(&self, x: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.fc1.forward(x)?.relu()?;
        loss::cross_entropy(&self.fc2.forward(&h)?, y)
    }
}

fn train(run: ProfileRun) -> Res<common::sites::Sites> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let profiler = run.varmap(&varmap).start(&path)?;
    let mlp = Mlp::new(&varmap)?;
    let mut opt = ProbedOptimizer::<AdamW>::new(varmap.all_vars(), ParamsAdamW::default())?;
    let x = Tensor::randn(0f32, 1.0, (BATCH, IN), &Device::Cpu)?;
    let y = Tensor::zeros(BATCH, DType::U32, &Device::Cpu)?;
    for step in 1..=3u64 {
        let _step = profiler.step(step);
        opt.backward_step(&mlp.loss(&x, &y)?)?;
    }
    let summary = profiler.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Complete);
    Ok(common::sites::read(&path))
}

#[test]
fn explore() -> Res<()> {
    let _s = serial();
    let sites = train(ProfileRun::training("mlp::train_step", 2).sample_hz(0))?;
    println!("account {:?}", sites.account);
    for m in sites.window_allocs() {
        let c = m.site.map(|s| sites.class(s));
        println!(
            "{:>8} {:?} {:?} {:?} {:?}",
            m.bytes.unwrap_or(0),
            m.label,
            m.site,
            c.as_ref().map(|c| (&c.op, c.kind)),
            c.as_ref().and_then(|c| c.stack_module.clone())
        );
    }
    if let Some(s) = sites.window_allocs().find_map(|m| m.site) {
        for f in sites.frames_of(s) {
            println!("  {:?} {:?}:{:?}", f.function, f.file, f.line);
        }
    }
    Ok(())
}
