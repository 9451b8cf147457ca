//! Allocation sites read back by the views' analysis ([`trace_ops::SiteProfile`]) on a real
//! step of a model without module spans (candle-transformers' `llama2_c`, tiny config): at the
//! default threshold (1 KiB on this workspace's frame-pointer build) at least 95% of the bytes
//! allocated in the step and live at its peak carry an op (only storages below the threshold
//! do not), and without module spans the module is the stack-derived model type.

// Sites need the DWARF unwinder of the sampler's targets (cfg `stack_sampler`, set by build.rs).
#![cfg(stack_sampler)]

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use trace_probe::{ProfileRun, TerminalOutcome, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[test]
fn a_model_without_spans_has_ops_for_its_peak() -> Res<()> {
    use candle_transformers::models::llama2_c::{Cache, Config, Llama};
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let profiler = ProfileRun::inference("llama2_c::forward", 2)
        .sample_hz(0)
        // this 260k-parameter model's peak holds many 2 KiB storages: at a 4 KiB threshold
        // 86.9% of its in-step peak bytes carry an op (measured), at the frame-pointer default
        // of 1 KiB all but the smallest do
        .start(&path)?;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let cfg = Config::tiny_260k();
    let model = Llama::load(vb.clone(), cfg.clone())?;
    let tokens = Tensor::new(&[[1u32, 5, 9, 2, 7, 3, 4, 8]], &Device::Cpu)?;
    for step in 1..=2u64 {
        let _step = profiler.step(step);
        let mut cache = Cache::new(false, &cfg, vb.pp("rot"))?;
        let logits = model.forward(&tokens, 0, &mut cache)?;
        drop(logits);
    }
    assert_eq!(profiler.finish()?.outcome, TerminalOutcome::Complete);
    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let analysis = trace_graph::analyze(&doc);
    let sites = analysis.sites.as_ref().expect("the step has sites");
    assert_eq!(
        sites.totals.threshold_bytes,
        Some(1024),
        "the frame-pointer default"
    );
    let peak = analysis
        .memory
        .logical
        .as_ref()
        .unwrap()
        .peak
        .as_ref()
        .unwrap();
    let (mut inside, mut with_op) = (0u64, 0u64);
    for l in peak.live_allocations.iter().filter(|l| !l.pre_existing) {
        inside += l.bytes;
        if l.alloc_event.and_then(|e| sites.of_memory(e)).is_some() {
            with_op += l.bytes;
        } else {
            // only storages below the threshold go without a site
            assert!(l.bytes < 1024, "{} B without a site", l.bytes);
        }
    }
    assert!(inside > 0);
    let share = with_op as f64 / inside as f64;
    println!("op coverage of the peak: {with_op} of {inside} bytes ({share:.3})");
    assert!(share >= 0.95, "{with_op} of {inside}");
    // no module spans: the module of the matmuls is the model type from the stack
    let stack_modules: Vec<String> = sites
        .rows
        .iter()
        .filter(|r| r.op == "matmul" && r.module_source == Some(trace_ops::ModuleSource::Stack))
        .filter_map(|r| r.module.clone())
        .collect();
    println!("{stack_modules:?}");
    assert!(
        stack_modules.iter().any(|m| m.contains("llama2_c::")),
        "{stack_modules:?}"
    );
    // every allocating call counted: the forward ran its matmuls (q, k, v, o, w1, w2, w3 per
    // layer and the head) at least once each
    let calls: u64 = sites
        .rows
        .iter()
        .filter(|r| r.op == "matmul")
        .map(|r| r.calls)
        .sum();
    assert!(calls >= 8, "{calls}");
    Ok(())
}
