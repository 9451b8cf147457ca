//! A storage made after the session was created over a `Vec` allocated before it
//! (`Tensor::from_vec` of an earlier `Vec`): the session tracker sees the storage but not its
//! data buffer's allocation, so its bytes are unknown — it is left out and logical memory is
//! `partial` with that reason (its own process: the first session of it, so no older tensor
//! masks the case).

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::Tracking;
use trace_probe::{nn, ProbedOptimizer, ProfileRun, TraceSession};
use trace_schema::{CoverageLevel, MemoryAction, MemoryCategory};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

#[test]
fn a_storage_over_a_buffer_older_than_the_session_makes_the_contract_partial(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("unsized.jsonl");
    // 300 f32, allocated before the profiler starts; no tensor yet.
    let early: Vec<f32> = (0..300).map(|i| i as f32).collect();
    let varmap = VarMap::new();
    let session = TraceSession::create(ProfileRun::training("unsized", 2).varmap(&varmap), &path)?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let fc = nn::linear(8, 4, vb.pp("fc"))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let late = Tensor::from_vec(early, 300, &Device::Cpu)?; // a storage made now, over it
    for step in 1..=2u32 {
        let x = Tensor::ones((2, 8), DType::F32, &Device::Cpu)?;
        let y = Tensor::zeros(2, DType::U32, &Device::Cpu)?;
        let _step = session.step(step);
        let l = loss::cross_entropy(&fc.forward(&x)?, &y)?;
        opt.backward_step(&l)?;
    }
    drop(late);
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    let c = doc.meta.capture_contract.clone().expect("contract");
    assert_eq!(c.logical_memory, CoverageLevel::Partial);
    let reason = c.reasons.get("logical_memory").cloned().unwrap_or_default();
    assert!(
        reason.starts_with(
            "1 storages live at capture start hold data buffers allocated before the session"
        ),
        "{reason}"
    );
    let mut other: Vec<u64> = doc
        .memory
        .iter()
        .filter(|m| {
            m.action == MemoryAction::Alloc && m.pre_existing && m.category == MemoryCategory::Other
        })
        .map(|m| m.bytes.unwrap_or(0))
        .collect();
    other.sort_unstable();
    assert_eq!(
        other,
        vec![8, 64],
        "the batch is known (2×8 f32, 2 u32), the 1,200 B storage is not"
    );
    Ok(())
}
