//! `candle-graph device-check --device cpu` end to end through the binary: the same checks the
//! GPU script runs on `cuda:0`, here on CPU (reference and device runs both on CPU).

use crate::util::{run, s};

#[test]
fn device_check_on_cpu_passes_and_writes_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("check");
    let r = run(&[
        "device-check",
        "--device",
        "cpu",
        "--model",
        "mlp",
        "--pairs",
        "2",
        "--out",
        s(&out),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for name in [
        "parameters",
        "gradients",
        "adamw-state",
        "peak-vs-device",
        "synchronized",
        "gradient-verdicts",
        "overhead",
    ] {
        assert!(
            r.stdout.contains(&format!("PASS mlp cpu {name}: ")),
            "{name}: {}",
            r.stdout
        );
    }
    assert!(r
        .stdout
        .ends_with("device-check cpu: 7 of 7 checks passed\n"));
    assert_eq!(
        std::fs::read_to_string(out.join("checks.txt")).unwrap(),
        r.stdout
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("checks.json")).unwrap()).unwrap();
    assert_eq!(v["checks"].as_array().unwrap().len(), 7);
    assert!(out.join("mlp/cpu/trace.jsonl").is_file());
    assert!(out.join("mlp/reference-cpu/trace.jsonl").is_file());
    // the device trace feeds the other commands
    let c = run(&["check", s(&out.join("mlp/cpu")), "--require-valid"]);
    assert_eq!(c.code, 0, "{}", c.stderr);
}

#[test]
fn a_backend_not_compiled_in_is_a_clear_error() {
    if cfg!(feature = "cuda") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = run(&[
        "demo",
        "--device",
        "cuda:0",
        "--model",
        "mlp",
        "--out",
        s(&dir.path().join("d")),
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("built without the `cuda` feature"),
        "{}",
        r.stderr
    );
}
