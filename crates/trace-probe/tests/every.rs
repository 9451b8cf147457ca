//! Captures on a schedule (issue 49 §1): `ProfileRun::every(n)` on real Candle training steps
//! (an MLP built with the probed constructors after the profiler started, `ProbedOptimizer`
//! through `Optimizer::new`, the loop's step guard) writes a run directory of verified
//! bundles, bounded on disk, and `run.json` of every capture.
//! - every(2) over 8 steps keeping one activation every 2 steps outside the step guard: 4
//!   captures, each a verified bundle of its step with module spans, the three passes and a
//!   gradient fact per parameter (replayed into each capture session); the process heap grows
//!   across captures; `keep_last(2)` keeps the last two and the first of the growth, and says
//!   why the others were dropped.
//! - every(4): the steps far from a capture leave the allocator hook disarmed (the idle cost),
//!   the step before a capture arms it.
//! - A capture whose trace cannot be created is a failed record; training goes on and the later
//!   captures are bundled.
//!
//! One test function: the session tracker and the capture window are process-wide.
#![cfg(feature = "every")]

mod common;

use std::path::Path;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_bundle::run::{read_run_log, CaptureState, RunLog};
use trace_probe::{nn, ProbedOptimizer, ProfileRun, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system_counting();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Trains `steps` AdamW updates of a 64-256-10 MLP under `run` started into `dir`, keeping a
/// 4 MiB tensor every `leak_every` steps (outside the step guard); `at_step` runs after each
/// step's guard dropped.
fn train(
    run: ProfileRun,
    dir: &Path,
    steps: u32,
    leak_every: Option<u32>,
    mut at_step: impl FnMut(u32),
) -> Res<RunLog> {
    let varmap = VarMap::new();
    let profiler = run.varmap(&varmap).sample_hz(0).start(dir)?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let l1 = nn::linear(64, 256, vb.pp("l1"))?;
    let l2 = nn::linear(256, 10, vb.pp("l2"))?;
    let mut opt = ProbedOptimizer::<AdamW>::new(varmap.all_vars(), ParamsAdamW::default())?;
    let mut kept: Vec<Tensor> = Vec::new();
    for step in 1..=steps {
        let (x, y) = common::step_batch(step)?;
        let h = {
            let _step = profiler.step(step);
            let h = l1.forward(&x)?.relu()?;
            let logits = l2.forward(&h)?;
            let loss = loss::cross_entropy(&logits, &y)?;
            opt.backward_step(&loss)?;
            h
        };
        if leak_every.is_some_and(|n| step % n == 0) {
            // 4 MiB: far above what the bundler thread holds beside the loop
            kept.push(Tensor::ones((1024, 1024), DType::F32, h.device())?);
        }
        at_step(step);
    }
    profiler.finish()?;
    drop(kept);
    Ok(read_run_log(dir)?.expect("run.json"))
}

fn scheduled_runs_write_bounded_verified_bundles(root: &Path) -> Res<()> {
    let dir = root.join("every2");
    let log = train(
        ProfileRun::training("mlp::train", 1).every(2).keep_last(2),
        &dir,
        8,
        Some(2),
        |_| {},
    )?;
    let steps: Vec<u64> = log.captures.iter().map(|c| c.step).collect();
    assert_eq!(steps, [2, 4, 6, 8], "{log:#?}");
    assert_eq!(log.schedule.every, 2);
    // the heap at the step's end grows by the kept tensor per capture
    let heap: Vec<u64> = log
        .captures
        .iter()
        .map(|c| c.heap_end_bytes.expect("counting allocator: heap sampled"))
        .collect();
    assert!(heap.windows(2).all(|w| w[1] > w[0]), "{heap:?}");
    for c in &log.captures {
        let bundle = dir.join(trace_bundle::run::bundle_dir_name(c.step));
        match c.state {
            CaptureState::Kept => {
                let v = trace_bundle::verify(&bundle)?;
                assert!(v.is_valid(), "{:?}", v.problems);
                assert_eq!(v.run.as_ref().and_then(|r| r.capture_step), Some(c.step));
                assert!(!c.kept_for.is_empty());
                assert!(c.bundle_bytes.unwrap() > c.trace_bytes.unwrap());
                assert!(c.finish_to_bundle_ns.is_some());
                let doc = trace_schema::load_path(bundle.join("trace.jsonl"))?;
                let names: Vec<&str> = doc.spans.iter().map(|s| doc.str(s.name)).collect();
                for want in ["mlp::train", "forward", "backward", "optimizer", "l1", "l2"] {
                    assert!(names.contains(&want), "step {}: {names:?}", c.step);
                }
                // the optimizer's parameters were replayed into this capture's session
                let params = doc.gradients.iter().filter(|g| g.root == "model").count();
                assert_eq!(params, 4, "step {}", c.step);
                let contract = doc.meta.capture_contract.as_ref().expect("contract");
                assert_eq!(contract.logical_memory, trace_probe::CoverageLevel::Partial);
            }
            CaptureState::Dropped => {
                assert!(
                    !bundle.exists(),
                    "dropped bundle {} still there",
                    bundle.display()
                );
                assert!(c.reason.as_deref().unwrap().contains("bounded on disk"));
            }
            CaptureState::Failed => panic!("capture {} failed: {:?}", c.step, c.reason),
        }
    }
    let kept: Vec<u64> = log
        .captures
        .iter()
        .filter(|c| c.state == CaptureState::Kept)
        .map(|c| c.step)
        .collect();
    // the last two, and the first of the growth (step 2): at most the peak and slowest besides
    for s in [2, 6, 8] {
        assert!(kept.contains(&s), "{kept:?}");
    }
    let first = log.captures.iter().find(|c| c.step == 2).unwrap();
    assert!(
        first.kept_for.iter().any(|w| w == "first of a growth"),
        "{first:?}"
    );
    // no trace left waiting to be bundled
    let staged: Vec<_> = std::fs::read_dir(dir.join(".captures"))?.collect();
    assert!(staged.is_empty(), "{staged:?}");
    // a run directory is written once
    let again = ProfileRun::training("mlp::train", 1).every(2).start(&dir);
    assert!(again.is_err());
    Ok(())
}

fn steps_far_from_a_capture_are_idle(root: &Path) -> Res<()> {
    let dir = root.join("every4");
    let mut armed = Vec::new();
    let log = train(
        ProfileRun::training("mlp::train", 1).every(4),
        &dir,
        8,
        None,
        |step| armed.push((step, trace_alloc::is_armed())),
    )?;
    // after step 1 and 2 nothing is open; after step 3 the capture of step 4 tracks storages
    assert_eq!(armed[0], (1, false), "{armed:?}");
    assert_eq!(armed[1], (2, false), "{armed:?}");
    assert_eq!(armed[2], (3, true), "{armed:?}");
    let steps: Vec<(u64, CaptureState)> = log.captures.iter().map(|c| (c.step, c.state)).collect();
    assert_eq!(steps, [(4, CaptureState::Kept), (8, CaptureState::Kept)]);
    Ok(())
}

fn a_failed_capture_does_not_stop_training(root: &Path) -> Res<()> {
    let dir = root.join("failing");
    // a directory where the capture of step 4 would write its trace: it cannot open
    std::fs::create_dir_all(dir.join(".captures").join("step-00000004.jsonl"))?;
    let log = train(
        ProfileRun::training("mlp::train", 1).every(2).repeat(3),
        &dir,
        8,
        None,
        |_| {},
    )?;
    let states: Vec<(u64, CaptureState)> = log.captures.iter().map(|c| (c.step, c.state)).collect();
    // repeat(3): steps 2, 4 and 6; 4 failed, 6 was bundled after it
    assert_eq!(
        states,
        [
            (2, CaptureState::Kept),
            (4, CaptureState::Failed),
            (6, CaptureState::Kept)
        ]
    );
    let failed = &log.captures[1];
    assert!(
        failed.reason.as_deref().unwrap().contains("did not open"),
        "{failed:?}"
    );
    Ok(())
}

#[test]
fn every_n_steps_on_real_training() -> Res<()> {
    let root = tempfile::tempdir()?;
    scheduled_runs_write_bounded_verified_bundles(root.path())?;
    steps_far_from_a_capture_are_idle(root.path())?;
    a_failed_capture_does_not_stop_training(root.path())?;
    Ok(())
}

#[test]
fn a_schedule_is_refused_where_a_trace_file_is_expected() {
    let run = ProfileRun::training("mlp::train", 1).every(2);
    assert!(trace_probe::TraceSession::new(run, std::io::sink()).is_err());
    assert!(!ProfileRun::training("e", 1).every(0).problems().is_empty());
}
