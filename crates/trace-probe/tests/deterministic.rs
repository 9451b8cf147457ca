//! Deterministic mode: two runs of the same seeded training loop (probed modules, the optimizer
//! wrapper with gradient facts, ops, tensor facts and stats) write identical bytes.

mod common;

use candle_core::{DType, Device, Module};
use candle_nn::Optimizer;
use candle_nn::{loss, AdamW, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::{nn, ProbedOptimizer, ProfileRun};

fn run_once(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let varmap = VarMap::new();
    let session = ProfileRun::training("mlp::train_step", 2)
        .deterministic(true)
        .varmap(&varmap)
        .start(path)?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let fc1 = nn::linear(common::IN, common::HIDDEN, vb.pp("fc1"))?;
    let fc2 = nn::linear(common::HIDDEN, common::CLASSES, vb.pp("fc2"))?;
    common::reseed(&varmap, 11)?;
    let mut opt = ProbedOptimizer::<AdamW>::new(varmap.all_vars(), ParamsAdamW::default())?;
    for step in 1..=2 {
        let (x, y) = common::batch(40 + step)?;
        let _step = session.step(step);
        session.tensor("batch.x", &x);
        let h = session.op("relu", &[&x], || fc1.forward(&x)?.relu())?;
        let logits = fc2.forward(&h)?;
        session.tensor_stats("logits", &logits)?;
        let l = session.op("cross_entropy", &[&logits, &y], || {
            loss::cross_entropy(&logits, &y)
        })?;
        opt.backward_step(&l)?;
    }
    session.finish()?;
    Ok(())
}

#[test]
fn two_seeded_runs_write_identical_bytes() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    run_once(&a)?;
    run_once(&b)?;
    let (text_a, text_b) = (common::read(&a), common::read(&b));
    assert_eq!(text_a, text_b);
    assert!(text_a.contains("\"run_id\":\"run-deterministic\""));
    assert!(text_a.contains("\"timestamp\":\"1970-01-01T00:00:00.000Z\""));
    assert!(!text_a.contains("\"host\":"));
    let doc = trace_schema::load_str(&text_a)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    assert_eq!(doc.gradients.iter().filter(|g| g.parameter).count(), 4);
    assert!(doc.gradients.iter().any(|g| !g.parameter));
    // Module spans from the probed constructors, under the forward pass the step opened.
    assert_eq!(
        doc.spans
            .iter()
            .filter(|s| s.kind == trace_probe::SpanKind::Module)
            .count(),
        2
    );
    assert_eq!(doc.ops.len(), 2);
    assert_eq!(doc.tensor_stats.len(), 1);
    Ok(())
}
