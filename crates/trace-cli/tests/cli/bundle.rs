//! `bundle`, `verify [--semantic]` and `series` through the binary: a bundle of a real demo
//! trace verifies; a tampered byte, a missing file, an extra file and a renamed run each exit 1
//! naming the file; a series of three captures prints per-step figures and refuses a repeat.

use std::path::Path;

use crate::util::{assert_stdout_has, run, s};

fn demo(dir: &Path, name: &str, step: u64) -> std::path::PathBuf {
    let out = dir.join(name);
    let steps = step.to_string();
    let r = run(&[
        "demo",
        "--model",
        "mlp",
        "--sample-hz",
        "0",
        "--steps",
        "4",
        "--capture-step",
        &steps,
        "--capture-steps",
        "1",
        "--out",
        s(&out),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    out
}

fn bundle(trace: &Path, out: &Path) {
    let r = run(&["bundle", s(trace), "-o", s(out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_stdout_has(&r, "verified");
}

#[test]
fn bundles_verify_and_each_tampering_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let trace = demo(dir.path(), "d2", 2);
    let b = dir.path().join("b");
    bundle(&trace, &b);
    for f in [
        "bundle.json",
        "trace.jsonl",
        "summary.json",
        "memory.json",
        "figures.json",
    ] {
        assert!(b.join(f).is_file(), "{f}");
    }
    let r = run(&["verify", s(&b), "--semantic"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_stdout_has(&r, "semantic     the derived outputs equal");

    let fresh = |name: &str| {
        let copy = dir.path().join(name);
        bundle(&trace, &copy);
        copy
    };
    // a tampered byte
    let t = fresh("tampered");
    let mut bytes = std::fs::read(t.join("summary.json")).unwrap();
    bytes[10] ^= 1;
    std::fs::write(t.join("summary.json"), bytes).unwrap();
    let r = run(&["verify", s(&t)]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_stdout_has(&r, "- summary.json: sha256 ");
    // a missing file
    let m = fresh("missing");
    std::fs::remove_file(m.join("memory.json")).unwrap();
    let r = run(&["verify", s(&m), "--json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["verification"]["problems"][0]["code"], "missing");
    assert_eq!(v["verification"]["problems"][0]["path"], "memory.json");
    // an extra file
    let e = fresh("extra");
    std::fs::write(e.join("notes.txt"), "x").unwrap();
    let r = run(&["verify", s(&e)]);
    assert_eq!(r.code, 1);
    assert_stdout_has(&r, "- notes.txt: in the bundle but not in the manifest");
    // a renamed run
    let n = fresh("renamed");
    let text = std::fs::read_to_string(n.join("bundle.json")).unwrap();
    std::fs::write(
        n.join("bundle.json"),
        text.replacen("\"run_id\": \"run-", "\"run_id\": \"other-", 1),
    )
    .unwrap();
    let r = run(&["verify", s(&n)]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_stdout_has(&r, "- trace.jsonl: meta run_id is ");
    // a derived output that no longer matches its trace: integrity holds, --semantic fails
    let d = fresh("rederived");
    let sum = d.join("summary.json");
    let changed = std::fs::read_to_string(&sum)
        .unwrap()
        .replacen("\"run\"", "\"run \"", 1);
    std::fs::write(&sum, &changed).unwrap();
    let manifest = std::fs::read_to_string(d.join("bundle.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let old = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "summary.json")
        .unwrap()
        .clone();
    let sha = trace_bundle_sha(&changed);
    let fixed = manifest
        .replace(old["sha256"].as_str().unwrap(), &sha)
        .replace(
            &format!("\"bytes\": {}", old["bytes"]),
            &format!("\"bytes\": {}", changed.len()),
        );
    std::fs::write(d.join("bundle.json"), fixed).unwrap();
    assert_eq!(run(&["verify", s(&d)]).code, 0);
    let r = run(&["verify", s(&d), "--semantic"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_stdout_has(&r, "- summary.json: differs from the output re-derived");
}

fn trace_bundle_sha(text: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(text.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_series_of_three_captures() {
    let dir = tempfile::tempdir().unwrap();
    let mut bundles = Vec::new();
    for step in [4u64, 2, 3] {
        let t = demo(dir.path(), &format!("d{step}"), step);
        let b = dir.path().join(format!("b{step}"));
        bundle(&t, &b);
        bundles.push(b);
    }
    let args: Vec<&str> = std::iter::once("series")
        .chain(bundles.iter().map(|b| s(b)))
        .collect();
    let r = run(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_stdout_has(&r, "mlp::train_step · train · cpu · 3 captures");
    let rows: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(['2', '3', '4']))
        .collect();
    assert_eq!(rows.len(), 3, "{}", r.stdout);
    assert!(rows[0].trim_start().starts_with("2 "), "{}", r.stdout);
    let mut json_args = args.clone();
    json_args.push("--json");
    let v: serde_json::Value = serde_json::from_str(&run(&json_args).stdout).unwrap();
    let steps: Vec<u64> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [2, 3, 4]);
    for st in v["steps"].as_array().unwrap() {
        assert!(st["figures"]["outer_wall_time_ns"].as_u64().unwrap() > 0);
        assert!(st["figures"]["logical_peak_bytes"].as_u64().unwrap() > 0);
    }
    // a repeated step is refused with its typed reason
    let r = run(&["series", s(&bundles[0]), s(&bundles[0]), "--json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["refused"]["code"], "repeated_step");
    assert_eq!(v["refused"]["step"], 4);
}
