//! The wall-clock stack sampler on real Candle training steps (an MLP, `ProbedOptimizer` over
//! AdamW, the tracking allocator installed): the trace loads clean, declares `operations:
//! sampled`, the sampler's accounting adds up, every sample lies in its thread's window and
//! names the innermost span open then, stacks are symbolised with files and lines; off at rate
//! 0 and in deterministic mode; a second thread registered with `sample_this_thread` carries
//! its own key; a too-small buffer counts its losses.

// The sampler runs on Linux x86_64 / aarch64 only (cfg `stack_sampler`, set by build.rs);
// elsewhere `sampler::tests` checks the declared reason.
#![cfg(stack_sampler)]

mod common;
#[path = "support/serial.rs"]
mod serial;
#[path = "support/three_steps.rs"]
mod three_steps;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, Linear, VarBuilder, VarMap};
use common::sampling::{self, pass_of};
use serial::serial;
use three_steps::{three_steps, Loss};
use trace_probe::{CoverageLevel, Pass, ProfileRun, Profiler, TerminalOutcome, Tracking};
use trace_schema::{ContractField, SymbolQuality, TraceDocument};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const MATMUL: &str = "candle_core::tensor::Tensor::matmul";

/// A 3-layer MLP large enough that one training step lasts tens of milliseconds.
struct Mlp {
    l1: Linear,
    l2: Linear,
    l3: Linear,
}

const IN: usize = 512;
const HIDDEN: usize = 768;
const CLASSES: usize = 10;
const BATCH: usize = 512;

impl Mlp {
    fn new(varmap: &VarMap) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        Ok(Self {
            l1: candle_nn::linear(IN, HIDDEN, vb.pp("l1"))?,
            l2: candle_nn::linear(HIDDEN, HIDDEN, vb.pp("l2"))?,
            l3: candle_nn::linear(HIDDEN, CLASSES, vb.pp("l3"))?,
        })
    }
}

impl Loss for Mlp {
    fn loss(&self, x: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.l2.forward(&self.l1.forward(x)?.relu()?)?.relu()?;
        loss::cross_entropy(&self.l3.forward(&h)?, y)
    }
}

fn data() -> candle_core::Result<(Tensor, Tensor)> {
    let x = Tensor::randn(0f32, 1.0, (BATCH, IN), &Device::Cpu)?;
    let y = Tensor::zeros(BATCH, DType::U32, &Device::Cpu)?;
    Ok((x, y))
}

/// Trains 3 steps capturing step 2 under `run`.
fn train(run: ProfileRun) -> Res<TraceDocument> {
    let stepped = three_steps(run, Mlp::new, data)?;
    finish(stepped.profiler, &stepped.path)
}

fn finish(profiler: Profiler, path: &std::path::Path) -> Res<TraceDocument> {
    let summary = profiler.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Complete);
    let doc = trace_schema::load_path(path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    Ok(doc)
}

#[test]
fn a_sampled_training_step_is_attributed_symbolised_and_accounted() -> Res<()> {
    let _serial = serial();
    // 5 kHz for a step of ~50 ms or more: hundreds of samples.
    let doc = train(ProfileRun::training("mlp::train_step", 2).sample_hz(5000))?;
    let contract = doc.meta.capture_contract.clone().unwrap_or_default();
    assert_eq!(contract.operations, CoverageLevel::Sampled);
    let reason = contract.reason(ContractField::Operations).unwrap_or("");
    assert!(reason.contains("5000 Hz"), "{reason}");

    let sampler = sampling::check_samples(&doc);
    assert_eq!(sampler.hz, 5000);
    // This workspace builds with frame pointers (.cargo/config.toml): the handler walks them in
    // the executable's code and falls back to libgcc in the shared C libraries (memset, memcpy).
    assert!(
        sampler.unwinder.starts_with("frame_pointers"),
        "{}",
        sampler.unwinder
    );
    // This test binary is a dev build: candle at opt-level 3 with debuginfo.
    assert_eq!(sampler.symbols, SymbolQuality::LineTables);
    assert_eq!(sampler.threads.len(), 1, "only the capturing thread");
    let thread = &sampler.threads[0];
    assert!(thread.samples >= 200, "{thread:?}");

    // The window is the measured region's: inside the root span.
    let spans = sampling::spans(&doc);
    let root = doc.spans.iter().find(|s| s.measured).expect("root");
    assert!(root.start_ns <= thread.start_ns);
    assert!(thread.end_ns <= root.end_ns().expect("closed"));
    let root_id = doc.strings.resolve(root.id);

    // Every sample of the capturing thread is in some span (the root at least) and the passes
    // each get samples.
    assert!(doc.samples.samples.iter().all(|s| s.span.is_some()));
    let mut per_pass = [0usize; 3];
    for s in &doc.samples.samples {
        let id = doc.strings.resolve(s.span.expect("span"));
        match pass_of(&spans, id) {
            Some(Pass::Forward) => per_pass[0] += 1,
            Some(Pass::Backward) => per_pass[1] += 1,
            Some(Pass::Optimizer) => per_pass[2] += 1,
            None => assert_eq!(id, root_id, "only the root has no pass"),
        }
    }
    assert!(
        per_pass.iter().all(|&n| n > 0),
        "samples per pass {per_pass:?}"
    );

    // Candle's ops are named with file and line, and the matmuls are sampled.
    let matmul = doc
        .samples
        .frames
        .iter()
        .find(|f| f.function.as_deref() == Some(MATMUL))
        .expect("a matmul frame");
    assert!(
        matmul
            .file
            .as_deref()
            .is_some_and(|f| f.ends_with("tensor.rs")),
        "{matmul:?}"
    );
    assert!(matmul.line.is_some_and(|l| l > 0));
    assert!(sampling::samples_in(&doc, MATMUL) > 0);
    assert!(sampling::samples_in(&doc, "candle_nn::optim::AdamW::step") > 0 || per_pass[2] > 0);
    // The loop's own function is on the stacks (stacks reach the user's code).
    assert!(
        sampling::samples_in(&doc, "sampler_mlp::train") > thread.samples as usize / 2,
        "most stacks reach the test's loop"
    );
    sampling::assert_handler_frames_cut(&doc);
    // No names with their hash.
    for f in &doc.samples.frames {
        if let Some(name) = &f.function {
            let last = name.rsplit("::").next().unwrap_or("");
            assert!(
                !(last.len() == 17
                    && last.starts_with('h')
                    && last[1..].chars().all(|c| c.is_ascii_hexdigit())),
                "{name}"
            );
        }
    }
    // Stacks are innermost first: a matmul stack has the matmul before the loop.
    let stack = doc.samples.stacks.iter().position(|s| {
        let names: Vec<_> = s
            .frames
            .iter()
            .map(|&f| doc.samples.frames[f as usize].function.as_deref())
            .collect();
        let m = names.iter().position(|n| *n == Some(MATMUL));
        let t = names.iter().position(|n| *n == Some("sampler_mlp::train"));
        matches!((m, t), (Some(m), Some(t)) if m < t)
    });
    assert!(stack.is_some(), "a stack with matmul inside train");
    Ok(())
}

#[test]
fn rate_zero_samples_nothing_and_says_why() -> Res<()> {
    let _serial = serial();
    let doc = train(ProfileRun::training("mlp::train_step", 2).sample_hz(0))?;
    // No sample and no sampler account; the frame and stack tables hold the allocation
    // sites' stacks (trace/13: one symbol table per trace).
    assert!(doc.samples.samples.is_empty());
    assert!(doc.samples.sampler.is_none());
    let contract = doc.meta.capture_contract.clone().unwrap_or_default();
    assert_eq!(contract.operations, CoverageLevel::None);
    let reason = contract.reason(ContractField::Operations).unwrap_or("");
    assert!(reason.contains("sample_hz(0)"), "{reason}");
    Ok(())
}

#[test]
fn deterministic_mode_samples_nothing_and_declares_nothing() -> Res<()> {
    let _serial = serial();
    let doc = train(
        ProfileRun::training("mlp::train_step", 2)
            .deterministic(true)
            .sample_hz(5000),
    )?;
    assert!(doc.samples.is_empty());
    let contract = doc.meta.capture_contract.clone().unwrap_or_default();
    assert_eq!(contract.operations, CoverageLevel::None);
    assert_eq!(contract.reason(ContractField::Operations), None);
    Ok(())
}

#[test]
fn a_full_buffer_loses_samples_and_counts_them() -> Res<()> {
    let _serial = serial();
    let doc = train(
        ProfileRun::training("mlp::train_step", 2)
            .sample_hz(5000)
            .sample_buffer_bytes(4096),
    )?;
    let sampler = sampling::check_samples(&doc);
    let t = &sampler.threads[0];
    assert!(t.lost_buffer > 0, "{t:?}");
    assert!(t.samples > 0 && t.samples < 4096 / 16, "{t:?}");
    assert_eq!(sampler.lost(), t.lost_buffer + t.lost_overrun);
    Ok(())
}

#[test]
fn a_thread_that_asks_is_sampled_under_its_own_key() -> Res<()> {
    use std::sync::mpsc;
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let profiler = ProfileRun::training("loader", 1)
        .sample_hz(5000)
        .start(&path)?;
    let session = (*profiler).clone();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<usize>();
    let (ready_tx, ready_rx) = mpsc::channel::<bool>();
    let loader = std::thread::Builder::new().name("loader".into()).spawn(
        move || -> candle_core::Result<()> {
            let guard = session.sample_this_thread();
            ready_tx.send(guard.is_active()).ok();
            go_rx.recv().ok();
            let n = load_batches()?;
            done_tx.send(n).ok();
            drop(guard);
            Ok(())
        },
    )?;
    assert!(ready_rx.recv()?, "the guard is active");
    // Registering the capturing thread too does not sample it twice (checked below).
    let _again = profiler.sample_this_thread();
    {
        let _step = profiler.step(1);
        go_tx.send(())?;
        let n = done_rx.recv()?; // the capturing thread waits: sampled while it waits
        assert!(n > 0);
    }
    loader.join().expect("loader thread")?;
    let summary = profiler.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Complete);
    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let sampler = sampling::check_samples(&doc);
    assert_eq!(
        sampler.threads.len(),
        2,
        "loader and capturing thread, once each: {:?}",
        sampler.threads
    );
    let loader = sampler
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("loader"))
        .expect("the loader thread");
    let main = sampler
        .threads
        .iter()
        .find(|t| t.name.as_deref() != Some("loader"))
        .expect("the capturing thread");
    assert_ne!(loader.thread, main.thread);
    assert!(loader.samples > 20, "{loader:?}");
    let loader_samples: Vec<_> = doc
        .samples
        .samples
        .iter()
        .filter(|s| s.thread == loader.thread)
        .collect();
    // The loader opened no span: its samples name none; they show its function.
    assert!(loader_samples.iter().all(|s| s.span.is_none()));
    let in_loader = loader_samples
        .iter()
        .filter(|s| sampling::stack_has(&doc, s.stack, "sampler_mlp::load_batches"))
        .count();
    assert!(
        in_loader * 2 > loader_samples.len(),
        "{in_loader} of {}",
        loader_samples.len()
    );
    // The capturing thread's samples are all in the root span.
    assert!(doc
        .samples
        .samples
        .iter()
        .filter(|s| s.thread == main.thread)
        .all(|s| s.span.is_some()));
    Ok(())
}

/// A data loader's work: builds and normalises batches for a while.
#[inline(never)]
fn load_batches() -> candle_core::Result<usize> {
    let started = std::time::Instant::now();
    let mut n = 0;
    while started.elapsed() < std::time::Duration::from_millis(60) || n < 3 {
        let b = Tensor::randn(0f32, 1.0, (256, 512), &Device::Cpu)?;
        let b = b.broadcast_sub(&b.mean_keepdim(1)?)?.exp()?;
        std::hint::black_box(b.sum_all()?.to_scalar::<f32>()?);
        n += 1;
    }
    Ok(n)
}
