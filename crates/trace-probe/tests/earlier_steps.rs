//! A single-step capture of a loop that keeps every step's loss in a `Vec` (a common way to log
//! them) sees the earlier steps' graphs live at capture start (issue 30 §3): the
//! `earlier_steps_retained` finding names their bytes and their ratio to this step's
//! activations; the same loop without the `Vec` has no such finding.
//!
//! One test function: the session tracker is process-wide.

mod common;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_graph::FindingCode;
use trace_probe::Tracking;
use trace_probe::{nn, ProbedOptimizer, ProfileRun, TraceSession};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Four AdamW updates of a 64-256-10 MLP on a (32, 64) batch, step 4 captured; `keep` pushes
/// each loss into a `Vec` kept across steps.
fn run(path: &std::path::Path, keep: bool) -> Res<trace_graph::Analysis> {
    let varmap = VarMap::new();
    let session =
        TraceSession::create(ProfileRun::training("keep_losses", 4).varmap(&varmap), path)?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let l1 = nn::linear(64, 256, vb.pp("l1"))?;
    let l2 = nn::linear(256, 10, vb.pp("l2"))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let mut losses: Vec<Tensor> = Vec::new();
    for step in 1..=4u32 {
        let (x, y) = common::step_batch(step)?;
        let _step = session.step(step);
        let logits = l2.forward(&l1.forward(&x)?.relu()?)?;
        let loss = loss::cross_entropy(&logits, &y)?;
        opt.backward_step(&loss)?;
        if keep {
            losses.push(loss.clone());
        }
    }
    drop(losses);
    session.finish()?;
    let doc = trace_schema::load_path(path)?;
    Ok(trace_graph::analyze(&doc))
}

#[test]
fn kept_losses_are_named_as_earlier_steps_retained() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let leaking = run(&dir.path().join("leak.jsonl"), true)?;
    let f = leaking
        .findings
        .iter()
        .find(|f| f.code == FindingCode::EarlierStepsRetained)
        .expect("the finding on a loop that keeps its losses");
    let ratio = f.evidence.share.expect("ratio");
    // Three earlier graphs (steps 1-3), each about one step's forward allocations.
    assert!((2.0..=4.0).contains(&ratio), "{ratio}: {}", f.summary);
    assert_eq!(f.severity, trace_graph::Severity::Warning);
    let bytes = f.evidence.bytes.expect("bytes");
    let forward = f.evidence.allocated_bytes.expect("forward bytes");
    assert_eq!(ratio, bytes as f64 / forward as f64);
    // Each earlier graph holds at least l1's output and its relu, (32, 256) f32 each.
    assert!(bytes >= 3 * 2 * 32 * 256 * 4, "{bytes}");
    assert!(f.summary.contains("earlier steps"), "{}", f.summary);

    let steady = run(&dir.path().join("steady.jsonl"), false)?;
    assert!(
        !steady
            .findings
            .iter()
            .any(|f| f.code == FindingCode::EarlierStepsRetained),
        "a steady loop keeps only its batch: {:?}",
        steady
            .findings
            .iter()
            .map(|f| &f.summary)
            .collect::<Vec<_>>()
    );
    Ok(())
}
