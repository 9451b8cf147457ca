//! `check` on a real Candle loop (two steps of issue 20's MLP) that ended before its capture
//! step: the first issue it lists says so, with the probe's reason and what to change.

use candle_core::Device;
use candle_graph_examples::train::train_loop;
use candle_graph_examples::{ModelKind, ModelSizes, UpdateStyle, Workload};
use candle_nn::{AdamW, ParamsAdamW, VarMap};
use trace_probe::{ProbeError, ProbedOptimizer, ProfileRun};

use crate::util::{run, s};

#[test]
fn check_says_first_that_the_capture_step_was_never_reached() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let profiler = ProfileRun::training("mlp::train_step", 4)
        .varmap(&varmap)
        .start(&path)
        .unwrap();
    let work = Workload::with_varmap(
        ModelKind::Mlp,
        ModelSizes::default(),
        42,
        &Device::Cpu,
        varmap,
    )
    .unwrap();
    train_loop::<ProbedOptimizer<AdamW>>(
        &profiler,
        &work,
        ParamsAdamW::default(),
        2,
        UpdateStyle::BackwardStep,
        Default::default(),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(matches!(
        profiler.finish(),
        Err(ProbeError::CaptureStepNotReached { step: 4, .. })
    ));

    let doc = trace_schema::load_path(&path).unwrap();
    let a = trace_graph::analyze(&doc);
    assert_eq!(
        a.health.issues[0].code,
        trace_graph::HealthCode::CaptureNotStarted,
        "{:#?}",
        a.health.issues
    );
    // no captured step: nothing to qualify as without warm-up
    assert!(a
        .findings
        .iter()
        .all(|f| f.code != trace_graph::FindingCode::CapturedWithoutWarmUp));

    let r = run(&["check", s(&path)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // the first row under the issue table's header
    let rows: Vec<&str> = r
        .stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("SEVERITY"))
        .skip(1)
        .collect();
    assert!(
        rows[0].contains("error") && rows[0].contains("capture_not_started"),
        "{}",
        r.stdout
    );
    assert!(
        rows[0].contains("capture step 4 was never reached"),
        "{}",
        r.stdout
    );
    assert!(rows[0].contains("run at least 4 steps"), "{}", r.stdout);
    assert!(!r.stdout.contains("capture_failed"), "{}", r.stdout);

    let r = run(&["check", s(&path), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["issues"][0]["code"], "capture_not_started",
        "{}",
        r.stdout
    );
    assert_eq!(v["valid_and_complete"], false);
}
