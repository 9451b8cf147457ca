//! Two sessions at once with the tracking allocator, on two threads: a second session's
//! capture start beside the first one's open window. Its own test binary (its own process): the
//! other tests of `alloc_sessions` run sessions one after another and would meet this one's.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::Tracking;
use trace_probe::{ProbedOptimizer, ProfileRun, TraceSession};
use trace_schema::{MemoryAction, TraceDocument};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

/// A second session's captured step begins while the first one's window is open (two threads):
/// the first keeps its window — every storage its step allocates and frees is written with its
/// free, and its trace is clean — and the second's trace stays valid.
#[test]
fn a_capture_start_beside_an_open_window_leaves_that_window_alone(
) -> Result<(), Box<dyn std::error::Error>> {
    use std::sync::{Arc, Barrier};
    let dir = tempfile::tempdir()?;
    let (path_a, path_b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    // 1: A's window is open; 2: B's capture start is done.
    let (opened, started) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (o, s) = (opened.clone(), started.clone());
    let other = std::thread::spawn(move || -> Result<TraceDocument, String> {
        let inner = || -> Result<TraceDocument, Box<dyn std::error::Error>> {
            let varmap = VarMap::new();
            let session =
                TraceSession::create(ProfileRun::training("beside", 1).varmap(&varmap), &path_b)?;
            let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
            let fc: Linear = candle_nn::linear(16, 8, vb.pp("fc"))?;
            o.wait();
            let step = session.step(1);
            s.wait();
            let x = Tensor::ones((4, 16), DType::F32, &Device::Cpu)?;
            let _y = fc.forward(&x)?;
            drop(step);
            session.finish()?;
            Ok(trace_schema::load_path(&path_b)?)
        };
        inner().map_err(|e| e.to_string())
    });
    let varmap = VarMap::new();
    let session = TraceSession::create(ProfileRun::training("first", 1).varmap(&varmap), &path_a)?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let fc: Linear = candle_nn::linear(16, 32, vb.pp("fc"))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let step = session.step(1);
    // A storage of A's step no graph holds (so never registered), made before B's capture
    // start and freed after it. The sleep lets the drainer (1 ms polls) join its allocation:
    // the window's join must still know it when it is freed.
    let early = Tensor::ones((64, 64), DType::F32, &Device::Cpu)?.sqr()?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    opened.wait();
    started.wait();
    assert!(early.sum_all()?.to_scalar::<f32>()? > 0.0);
    drop(early);
    let x = Tensor::ones((4, 16), DType::F32, &Device::Cpu)?;
    let loss = fc.forward(&x)?.sqr()?.mean_all()?;
    opt.backward_step(&loss)?;
    drop(step);
    session.finish()?;
    let a = trace_schema::load_path(&path_a)?;
    let b = other.join().expect("the other thread")?;

    let analysis = trace_graph::analyze(&a);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    assert!(a.semantic_issues.is_empty(), "{:?}", a.semantic_issues);
    // The 16 KiB storage made before B's start is written with its alloc in the step and its free.
    let early_ids: Vec<_> = a
        .memory
        .iter()
        .filter(|m| {
            m.action == MemoryAction::Alloc && !m.pre_existing && m.bytes == Some(64 * 64 * 4)
        })
        .filter_map(|m| m.storage)
        .collect();
    assert!(!early_ids.is_empty(), "A's early storages are in its trace");
    // None of them lived before A's step: none is written as pre-existing (as one whose
    // allocation the window's join forgot would be).
    assert!(
        !a.memory
            .iter()
            .any(|m| m.pre_existing && m.bytes == Some(64 * 64 * 4)),
        "a storage of A's step written as pre-existing"
    );
    for id in early_ids {
        assert!(
            a.memory
                .iter()
                .any(|m| m.action == MemoryAction::Free && m.storage == Some(id)),
            "{} has its free",
            a.str(id)
        );
    }
    // B's trace stays a valid trace.
    let analysis = trace_graph::analyze(&b);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    Ok(())
}
