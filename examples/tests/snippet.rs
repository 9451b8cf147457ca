//! The `activations_retained_into_optimizer` advice's snippet, compiled and run exactly as
//! printed ([`trace_graph::DROP_LOSS_SNIPPET`] is found verbatim in this file's loop), on the
//! README's quick-start MLP with a `ProbedOptimizer`: the advised run keeps its backward pass in
//! the trace, does not get the same advice again, and its measured peaks are what the plain
//! run's what-if predicted — equal to the byte where the what-if is exact, never below its
//! figures where it is a bound.

use std::path::Path;
use std::sync::Mutex;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_graph::{Analysis, FindingCode};
use trace_probe::{nn, ProbedOptimizer, ProfileRun, Tracking};
use trace_schema::Pass;

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

/// The allocator's capture is process-wide: one training run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// This file: the snippet must appear in it as printed.
const SOURCE: &str = include_str!("snippet.rs");

/// The README's quick start; `advised`: the step as the advice prints it.
#[rustfmt::skip]
fn train(path: &Path, advised: bool) -> candle_core::Result<()> {
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let profiler = ProfileRun::training("mlp::train_step", 2)
        .varmap(&varmap)
        .deterministic(true)
        .start(path)?;
    let fc1 = nn::linear(784, 128, vb.pp("fc1"))?;
    let fc2 = nn::linear(128, 10, vb.pp("fc2"))?;
    let mut opt = ProbedOptimizer::<AdamW>::new(varmap.all_vars(), ParamsAdamW::default())?;
    let x = Tensor::randn(0f32, 1.0, (64, 784), &device)?;
    let y = Tensor::zeros(64, DType::U32, &device)?;
    for step in 1..=3 {
        let _step = profiler.step(step);
        let logits = fc2.forward(&fc1.forward(&x)?.relu()?)?;
        let loss = loss::cross_entropy(&logits, &y)?;
        if advised {
            let grads = profiler.backward(&loss)?; drop((loss, logits)); opt.step(&grads)?;
        } else {
            opt.backward_step(&loss)?;
        }
    }
    profiler.finish()?;
    Ok(())
}

fn analyze(advised: bool) -> Analysis {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    train(&path, advised).unwrap();
    let doc = trace_schema::load_path(&path).unwrap();
    let a = trace_graph::analyze(&doc);
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    assert!(a.health.capture_complete);
    a
}

fn pass_peak(a: &Analysis, pass: Pass) -> u64 {
    let l = a.memory.logical.as_ref().unwrap();
    l.pass_peaks
        .iter()
        .find(|p| p.pass == pass)
        .unwrap_or_else(|| panic!("no {pass:?} pass"))
        .peak
        .live_bytes
}

#[test]
fn the_snippet_is_in_this_file_as_printed() {
    assert!(
        SOURCE.contains(&format!("            {}\n", trace_graph::DROP_LOSS_SNIPPET)),
        "the advised step must be the snippet, verbatim: {}",
        trace_graph::DROP_LOSS_SNIPPET
    );
}

#[test]
fn the_what_if_of_dropping_the_loss_is_what_the_advised_run_measures() {
    let plain = analyze(false);
    let f = plain
        .findings
        .iter()
        .find(|f| f.code == FindingCode::ActivationsRetainedIntoOptimizer)
        .expect("the plain loop keeps the loss live through the step");
    let w = f
        .evidence
        .what_if
        .as_ref()
        .expect("the retention finding carries a what-if");
    let run_peak = plain
        .memory
        .logical
        .as_ref()
        .unwrap()
        .peak
        .as_ref()
        .unwrap()
        .live_bytes;
    // the replay without releases is the trace's own peak
    assert_eq!(w.baseline_run_peak_bytes, run_peak);
    assert_eq!(
        w.baseline_pass_peaks
            .iter()
            .find(|p| p.pass == Pass::Optimizer)
            .unwrap()
            .live_bytes,
        pass_peak(&plain, Pass::Optimizer)
    );

    let advised = analyze(true);
    // the backward pass is still in the trace (a plain `loss.backward()` would lose it)
    assert!(pass_peak(&advised, Pass::Backward) > 0);
    // the advice is not repeated
    let again = advised
        .findings
        .iter()
        .find(|f| f.code == FindingCode::ActivationsRetainedIntoOptimizer);
    assert!(
        again.is_none_or(|f| f
            .evidence
            .what_if
            .as_ref()
            .is_none_or(|x| x.action != w.action)),
        "{:?}",
        again.map(|f| &f.summary)
    );
    let measured_run = advised
        .memory
        .logical
        .as_ref()
        .unwrap()
        .peak
        .as_ref()
        .unwrap()
        .live_bytes;
    let measured_opt = pass_peak(&advised, Pass::Optimizer);
    let predicted_opt = w
        .pass_peaks
        .iter()
        .find(|p| p.pass == Pass::Optimizer)
        .unwrap()
        .live_bytes;
    eprintln!(
        "what-if exact={} run {} → predicted {} measured {}; optimizer {} → predicted {} measured {}",
        w.exact,
        run_peak,
        w.run_peak_bytes,
        measured_run,
        pass_peak(&plain, Pass::Optimizer),
        predicted_opt,
        measured_opt
    );
    if w.exact {
        assert_eq!(w.run_peak_bytes, measured_run);
        assert_eq!(predicted_opt, measured_opt);
    } else {
        // a bound: the advice frees at most what the replay released
        assert!(w.run_peak_bytes <= measured_run, "{w:?}");
        assert!(predicted_opt <= measured_opt, "{w:?}");
    }
    // On this loop (deterministic mode) the bound is reached: the trace cannot tell the loss's
    // frees from the gradient store's (one run of frees), yet everything released is the
    // loss's graph — predicted and measured agree to the byte.
    assert_eq!(w.run_peak_bytes, measured_run);
    assert_eq!(predicted_opt, measured_opt);
    // the advice lowered the optimizer pass's peak, as the what-if says
    assert!(measured_opt < pass_peak(&plain, Pass::Optimizer));
}
