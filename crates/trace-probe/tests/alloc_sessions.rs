//! Several sessions in one process (a profiler run next to others, benchmarks, `candle-graph
//! device-check`): the storages one session registered before its window (parameters,
//! optimizer state) must not reach the next session's trace as stale `pre_existing` storages
//! or as aliases of a reused address.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::Tracking;
use trace_probe::{ProbeError, ProbedOptimizer, ProfileRun, TraceSession};
use trace_schema::{MemoryAction, MemoryCategory, TraceDocument};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

/// Builds a one-layer model of `width`, runs `steps` updates with a session capturing
/// `capture_step` (written to `path`), and returns the loaded trace when it captured.
fn run(
    width: usize,
    capture_step: u64,
    steps: u64,
    path: &std::path::Path,
) -> Result<Option<TraceDocument>, Box<dyn std::error::Error>> {
    let varmap = VarMap::new();
    let session = TraceSession::create(
        ProfileRun::training("sessions", capture_step).varmap(&varmap),
        path,
    )?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let fc: Linear = candle_nn::linear(16, width, vb.pp("fc"))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    for step in 1..=steps {
        let _step = session.step(step);
        let x = Tensor::ones((4, 16), DType::F32, &Device::Cpu)?;
        let loss = fc.forward(&x)?.sqr()?.mean_all()?;
        opt.backward_step(&loss)?;
    }
    match session.finish() {
        Ok(_) => Ok(Some(trace_schema::load_path(path)?)),
        Err(ProbeError::CaptureStepNotReached { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn pre_existing(doc: &TraceDocument, category: MemoryCategory) -> Vec<(String, u64)> {
    doc.memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && m.pre_existing && m.category == category)
        .map(|m| {
            (
                m.label.map(|l| doc.str(l).to_string()).unwrap_or_default(),
                m.bytes.unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn a_later_session_sees_only_its_own_parameters_and_optimizer_state(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    // An earlier captured session and an earlier session that never captured (its window never
    // opened), both with their own model and AdamW, all dropped before the last one.
    assert!(run(32, 1, 1, &dir.path().join("a.jsonl"))?.is_some());
    assert!(run(48, u64::MAX, 1, &dir.path().join("b.jsonl"))?.is_none());
    let doc = run(8, 2, 2, &dir.path().join("c.jsonl"))?.expect("captured");

    // fc.weight (8 × 16) and fc.bias (8), f32.
    let mut params = pre_existing(&doc, MemoryCategory::Parameter);
    params.sort();
    assert_eq!(
        params,
        vec![("fc.bias".to_string(), 32), ("fc.weight".to_string(), 512)],
        "only this session's parameters, under their own names"
    );
    let mut moments: Vec<u64> = pre_existing(&doc, MemoryCategory::Optimizer)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    moments.sort_unstable();
    assert_eq!(
        moments,
        vec![32, 32, 512, 512],
        "two AdamW moments per parameter of this session's optimizer, none of the earlier ones"
    );
    let all_pre_existing = doc.memory.iter().filter(|m| m.pre_existing).count();
    assert_eq!(
        all_pre_existing, 6,
        "no stale storage of an earlier session"
    );
    Ok(())
}
