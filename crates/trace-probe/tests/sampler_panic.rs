//! A panic inside a sampled captured step: the trace on disk stays valid, keeps every sample
//! taken before the panic (symbolised by the panic hook's capture end, before the `failed`
//! terminal) and the sampler's account of them. One test per binary: the panic hook is
//! process-wide.

// The sampler runs on Linux x86_64 / aarch64 only (cfg `stack_sampler`, set by build.rs);
// elsewhere `sampler::tests` checks the declared reason.
#![cfg(stack_sampler)]

mod common;

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};
use common::sampling;
use trace_probe::{CoverageLevel, ProfileRun, TerminalOutcome, TraceSession};

#[test]
fn a_panic_in_a_sampled_step_keeps_its_samples() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let session = TraceSession::create(ProfileRun::training("diverges", 1).sample_hz(5000), &path)?;
    let in_step = session.clone();
    let result = std::panic::catch_unwind(AssertUnwindSafe(move || {
        let _step = in_step.step(1);
        let started = Instant::now();
        let a = Tensor::randn(0f32, 1.0, (256, 256), &Device::Cpu).expect("randn");
        while started.elapsed() < Duration::from_millis(60) {
            std::hint::black_box(a.matmul(&a).expect("matmul"));
        }
        panic!("loss diverged");
    }));
    assert!(result.is_err());
    let summary = session.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Failed);

    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    assert!(doc.truncation.is_none(), "whole file: {:?}", doc.truncation);
    let terminal = doc.terminal.as_ref().expect("terminal");
    assert_eq!(terminal.outcome, TerminalOutcome::Failed);
    assert!(terminal
        .reason
        .as_deref()
        .is_some_and(|r| r.contains("loss diverged")));
    let contract = doc.meta.capture_contract.clone().unwrap_or_default();
    assert_eq!(contract.operations, CoverageLevel::Sampled);
    // Every sample taken is in the file and accounted for (the root span never closed).
    let sampler = sampling::check_samples(&doc);
    assert_eq!(sampler.threads.len(), 1);
    let t = &sampler.threads[0];
    assert!(t.samples >= 50, "{t:?}");
    assert!(
        sampling::samples_in(&doc, "candle_core::tensor::Tensor::matmul") > t.samples as usize / 2
    );
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    Ok(())
}
