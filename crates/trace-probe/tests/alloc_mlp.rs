//! Exactness of automatic storage capture on a real CPU training step: the MLP
//! 784-512-512-10, batch 64, AdamW, with the tracking allocator installed.
//!
//! Oracles that neither pass through the allocator hook nor transcribe Candle's code: storage
//! bytes read through the public API (`storage_and_layout`), `loss.sorted_nodes()` by storage
//! key, and the AdamW algorithm's two moments per parameter.

mod alloc_common;

use std::collections::HashSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::capture;
use trace_probe::capture::storage_facts;
use trace_probe::Tracking;
use trace_probe::{CoverageLevel, Pass, ProbedOptimizer, ProfileRun, TraceSession};
use trace_schema::{MemoryAction, MemoryCategory};

#[global_allocator]
static ALLOC: Tracking = Tracking::system_counting();

struct Mlp {
    l1: Linear,
    l2: Linear,
    l3: Linear,
}

impl Mlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.l1.forward(x)?.relu()?;
        let h = self.l2.forward(&h)?.relu()?;
        self.l3.forward(&h)
    }
}

fn batch(step: u64) -> candle_core::Result<(Tensor, Tensor)> {
    let mut rng = StdRng::seed_from_u64(step);
    let x: Vec<f32> = (0..64 * 784).map(|_| rng.gen_range(-0.5..0.5)).collect();
    let y: Vec<u32> = (0..64).map(|_| rng.gen_range(0..10)).collect();
    Ok((
        Tensor::from_vec(x, (64, 784), &Device::Cpu)?,
        Tensor::from_vec(y, 64, &Device::Cpu)?,
    ))
}

fn storage_bytes(t: &Tensor) -> u64 {
    storage_facts(t).bytes.expect("cpu storage bytes")
}

#[test]
fn mlp_step_logical_memory_is_exact() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("mlp.jsonl");
    let varmap = VarMap::new();
    let session = TraceSession::create(ProfileRun::training("mlp", 2).varmap(&varmap), &path)?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let mlp = Mlp {
        l1: candle_nn::linear(784, 512, vb.pp("l1"))?,
        l2: candle_nn::linear(512, 512, vb.pp("l2"))?,
        l3: candle_nn::linear(512, 10, vb.pp("l3"))?,
    };
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;

    let param_keys: HashSet<usize> = varmap
        .all_vars()
        .iter()
        .map(|v| trace_probe::capture::storage_key(v.as_tensor()))
        .collect();
    let param_bytes: u64 = varmap
        .all_vars()
        .iter()
        .map(|v| storage_bytes(v.as_tensor()))
        .sum();

    let mut checkpoints = Vec::new();
    let mut expected_start = 0;
    let mut expected_forward = 0;
    for step in 1..=2u64 {
        let (x, y) = batch(step)?;
        let _step = session.step(step);
        session.tensor_as("batch.x", &x, MemoryCategory::Other);
        session.tensor_as("batch.y", &y, MemoryCategory::Other);
        let t_start = session.now_ns();
        let logits = {
            let _fwd = session.pass(Pass::Forward);
            mlp.forward(&x)?
        };
        let l = loss::cross_entropy(&logits, &y)?;
        let t_forward = session.now_ns();
        if step == 2 {
            // Capture start: parameters + AdamW's two moments per parameter + batch + targets.
            expected_start = 3 * param_bytes + storage_bytes(&x) + storage_bytes(&y);
            // After forward: the distinct storages of the graph, parameters and their views
            // (w.t(), broadcast biases share the parameter's key) excluded.
            let mut seen = HashSet::new();
            for node in l.sorted_nodes() {
                let key = trace_probe::capture::storage_key(node);
                if !param_keys.contains(&key) && seen.insert(key) {
                    expected_forward += storage_bytes(node);
                }
            }
        }
        opt.backward_step(&l)?;
        drop(l);
        drop(logits);
        let t_end = session.now_ns();
        if step == 2 {
            checkpoints = vec![t_start, t_forward, t_end];
        }
    }
    session.finish()?;
    let summary = capture::last_summary();

    let doc = trace_schema::load_path(&path)?;
    let contract = doc.meta.capture_contract.clone().expect("contract");
    assert_eq!(
        contract.logical_memory,
        CoverageLevel::Complete,
        "{:?}",
        contract.reasons
    );
    assert_eq!(doc.meta.tracking_allocator_installed, Some(true));
    assert_eq!(doc.dropped_events.unwrap_or(0), 0);

    let live: Vec<u64> = checkpoints
        .iter()
        .map(|&t| alloc_common::live_at(&doc, t))
        .collect();
    assert_eq!(live[0], expected_start, "capture start");
    assert_eq!(live[1] - live[0], expected_forward, "after forward");
    assert_eq!(
        live[2], expected_start,
        "after the step, loss and gradients dropped"
    );

    // Parameters are never freed; pre-existing storages are exactly the registered ones.
    let param_frees = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Free && m.category == MemoryCategory::Parameter)
        .count();
    assert_eq!(param_frees, 0);
    // Every storage allocated in the window is freed in the trace or live at the end.
    let profile = trace_memory::analyze_memory(&doc);
    let logical = profile.logical.expect("logical profile");
    assert!(logical.unmatched_frees.is_empty());
    let live_end_in_window: Vec<_> = logical
        .lifetimes
        .iter()
        .filter(|l| l.end_ns.is_none() && !l.pre_existing)
        .collect();
    assert!(live_end_in_window.is_empty(), "{live_end_in_window:?}");

    // (c) The peak is at least every checkpoint, equals the sum of its live list, and lies in the
    // span the timeline names.
    let peak = logical.peak.clone().expect("peak");
    for (&t, &l) in checkpoints.iter().zip(&live) {
        assert!(peak.live_bytes >= l, "peak below checkpoint at {t}");
    }
    let sum: u64 = peak.live_allocations.iter().map(|l| l.bytes).sum();
    assert_eq!(peak.live_bytes, sum);
    assert_eq!(
        alloc_common::live_at(&doc, peak.timestamp_ns),
        peak.live_bytes
    );
    let (span, step) = alloc_common::span_containing(&doc, peak.timestamp_ns).expect("peak span");
    let step = step.expect("the peak lies in a step span");
    let step_peak = logical
        .pass_peaks
        .iter()
        .find(|p| p.pass == step)
        .expect("step peak");
    assert_eq!(step_peak.peak.live_bytes, peak.live_bytes);

    // Unregistered storages take their bytes from the freed data buffer: for every registered
    // storage that could be checked, that size equals `len × element size`.
    assert!(summary.data_size_checked > 0);
    assert_eq!(summary.data_size_mismatches, 0);
    // Report (printed with --nocapture; the README quotes it).
    let j = summary.join;
    let unregistered = j.block_frees - j.registered_frees;
    eprintln!(
        "MLP peak: {} bytes at {} ns in span {span:?} (step {step:?}); by category {:?}",
        peak.live_bytes, peak.timestamp_ns, peak.by_category
    );
    for l in peak.live_allocations.iter().take(12) {
        eprintln!(
            "  {:>9} B {:?} {:?} {:?} {:?}",
            l.bytes, l.category, l.category_source, l.label, l.shape
        );
    }
    eprintln!(
        "match rate: {} signature matches of {} unregistered block-sized frees; registered frees {} \
         ({} with signature); data allocs joined {}; alloc calls {}; storages: {} anonymous, {} \
         registered in window, {} pre-existing; unidentified live blocks {}",
        j.signature_frees,
        unregistered,
        j.registered_frees,
        j.registered_with_signature,
        j.signature_with_data_alloc,
        summary.armed_alloc_calls,
        summary.anonymous_storages,
        summary.registered_in_window,
        summary.pre_existing_storages,
        summary.unidentified_live_blocks
    );
    // Device samples: heap and RSS observed, nothing invented.
    assert!(!doc.device_memory.is_empty());
    for s in &doc.device_memory {
        assert!(s.used_bytes.is_some() && s.resident_bytes.is_some());
        assert!(s.free_bytes.is_none() && s.capacity_bytes.is_none());
    }
    // Logical live bytes never exceed the heap bytes the allocator counts, at every sample.
    for s in &doc.device_memory {
        let used = s.used_bytes.expect("counting mode");
        assert!(alloc_common::live_at(&doc, s.timestamp_ns) <= used);
    }
    Ok(())
}
