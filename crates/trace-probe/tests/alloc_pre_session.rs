//! Storages that lived before the captured step (issue 20 §2), on real Candle training steps:
//! the session tracker knows every storage allocated since the session was created, so an input
//! batch made before the step guard, a tensor kept across steps and one dropped inside the
//! captured step are `pre_existing` with their exact heap bytes (and the last one's free is
//! matched); a tensor made before the session makes logical memory `partial` with the reason;
//! turning tracking off says so too. Parameters and optimizer state are as before.
//!
//! One test function: which tensors existed before a session is a fact about the whole
//! process, so the order of the three sessions matters.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::capture;
use trace_probe::Tracking;
use trace_probe::{nn, ProbedOptimizer, ProfileRun, TraceSession};
use trace_schema::{CoverageLevel, MemoryAction, MemoryCategory, TraceDocument};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Bytes of the batch: x `(16, 64)` f32 and y `(16)` u32.
const X_BYTES: u64 = 16 * 64 * 4;
const Y_BYTES: u64 = 16 * 4;
/// A tensor made after the session, kept across every step, never used: `(3, 5)` f32.
const KEPT_BYTES: u64 = 3 * 5 * 4;
/// A tensor made before each step guard and dropped inside the step: `(100)` f32.
const DROPPED_BYTES: u64 = 100 * 4;

/// Three updates of a 64-32-4 MLP (AdamW) under a session created here, capturing step 2.
fn run(path: &std::path::Path, track: bool) -> Res<TraceDocument> {
    let varmap = VarMap::new();
    let session = TraceSession::create(
        ProfileRun::training("pre_session", 2)
            .varmap(&varmap)
            .track_pre_existing(track),
        path,
    )?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let l1 = nn::linear(64, 32, vb.pp("l1"))?;
    let l2 = nn::linear(32, 4, vb.pp("l2"))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let kept = Tensor::ones((3, 5), DType::F32, &Device::Cpu)?;
    for step in 1..=3u32 {
        // Made before the step guard, as a data loader does.
        let x = Tensor::from_vec(
            (0..16 * 64)
                .map(|i| ((i * 7 + step) % 13) as f32 / 13.0)
                .collect::<Vec<_>>(),
            (16, 64),
            &Device::Cpu,
        )?;
        let y = Tensor::from_vec(
            (0..16u32).map(|i| i % 4).collect::<Vec<_>>(),
            16,
            &Device::Cpu,
        )?;
        let scratch = Tensor::zeros(100, DType::F32, &Device::Cpu)?;
        let _step = session.step(step);
        drop(scratch); // freed in the captured step's forward pass
        let logits = l2.forward(&l1.forward(&x)?.relu()?)?;
        let loss = loss::cross_entropy(&logits, &y)?;
        opt.backward_step(&loss)?;
    }
    drop(kept);
    session.finish()?;
    Ok(trace_schema::load_path(path)?)
}

fn pre_existing(doc: &TraceDocument, category: MemoryCategory) -> Vec<u64> {
    let mut v: Vec<u64> = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && m.pre_existing && m.category == category)
        .map(|m| m.bytes.expect("bytes"))
        .collect();
    v.sort_unstable();
    v
}

fn logical(doc: &TraceDocument) -> (CoverageLevel, String) {
    let c = doc.meta.capture_contract.clone().expect("contract");
    let reason = c.reasons.get("logical_memory").cloned().unwrap_or_default();
    (c.logical_memory, reason)
}

/// Parameters (l1 64×32 + 32, l2 32×4 + 4, f32) and two AdamW moments of each: the same
/// figures whatever the tracker saw.
fn assert_parameters_and_optimizer_state(doc: &TraceDocument) {
    assert_eq!(
        pre_existing(doc, MemoryCategory::Parameter),
        vec![16, 128, 512, 8192],
        "parameters"
    );
    assert_eq!(
        pre_existing(doc, MemoryCategory::Optimizer),
        vec![16, 16, 128, 128, 512, 512, 8192, 8192],
        "AdamW moments"
    );
}

#[test]
fn storages_live_at_capture_start_are_pre_existing_with_their_bytes() -> Res<()> {
    let dir = tempfile::tempdir()?;

    // 1. The first session of the process, created before any tensor: everything is known.
    let doc = run(&dir.path().join("first.jsonl"), true)?;
    let (level, reason) = logical(&doc);
    assert_eq!(level, CoverageLevel::Complete, "{reason}");
    let mut expected = vec![X_BYTES, Y_BYTES, KEPT_BYTES, DROPPED_BYTES];
    expected.sort_unstable();
    assert_eq!(
        pre_existing(&doc, MemoryCategory::Other),
        expected,
        "batch (4,096 + 64 B), the kept tensor (60 B) and the one dropped in the step (400 B)"
    );
    assert_parameters_and_optimizer_state(&doc);
    // The tensor dropped in the step: its free is matched to its pre-existing alloc.
    let dropped = doc
        .memory
        .iter()
        .find(|m| m.pre_existing && m.bytes == Some(DROPPED_BYTES))
        .and_then(|m| m.storage)
        .expect("the dropped tensor's storage id");
    assert!(
        doc.memory
            .iter()
            .any(|m| m.action == MemoryAction::Free && m.storage == Some(dropped)),
        "the free of a storage live at capture start is in the trace"
    );
    let summary = capture::last_summary();
    assert_eq!(summary.adopted_storages, 4, "{summary:?}");
    assert_eq!(
        summary.adopted_bytes,
        X_BYTES + Y_BYTES + KEPT_BYTES + DROPPED_BYTES
    );
    assert_eq!(
        summary.join.pre_window_frees, 0,
        "no storage live at capture start was found only at its free"
    );
    assert_eq!(summary.unidentified_live_blocks, 0, "{summary:?}");

    // 2. A tensor made before the session (kept alive through it): it cannot be known.
    let before = Tensor::ones((7, 11), DType::F32, &Device::Cpu)?;
    let doc = run(&dir.path().join("second.jsonl"), true)?;
    let (level, reason) = logical(&doc);
    assert_eq!(level, CoverageLevel::Partial);
    assert!(
        reason.starts_with("storages older than the session are unknown:")
            && reason.contains("Candle tensors were created before the profiler started"),
        "{reason}"
    );
    assert!(
        !doc.memory.iter().any(|m| m.bytes == Some(7 * 11 * 4)),
        "the older tensor is not in the trace"
    );
    assert_eq!(
        pre_existing(&doc, MemoryCategory::Other),
        expected,
        "what the session saw allocated is still known"
    );
    assert_parameters_and_optimizer_state(&doc);
    drop(before);

    // 3. Tracking off: the batch is missing, and the contract says why.
    let doc = run(&dir.path().join("third.jsonl"), false)?;
    let (level, reason) = logical(&doc);
    assert_eq!(level, CoverageLevel::Partial);
    assert!(
        reason.contains("tracking before the captured step is off"),
        "{reason}"
    );
    assert_eq!(
        pre_existing(&doc, MemoryCategory::Other),
        vec![DROPPED_BYTES],
        "only the storage freed in the step is seen (at its free, by the drop signature)"
    );
    assert_parameters_and_optimizer_state(&doc);
    Ok(())
}
