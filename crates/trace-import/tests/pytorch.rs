//! The real PyTorch traces of `cargo xtask pytorch-fixtures` (torch 2.15.0, CPU): the replayed
//! peak equals PyTorch's own `Total Allocated` maximum, read independently from the raw JSON.

use std::io::Read;
use std::path::PathBuf;

use trace_schema::Pass;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pytorch")
        .join(format!("{name}.json.gz"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The largest `Total Allocated` of the `[memory]` events, straight from the JSON.
fn total_allocated_max(gz: &[u8]) -> u64 {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "[memory]")
        .map(|e| e["args"]["Total Allocated"].as_u64().unwrap())
        .max()
        .unwrap()
}

fn check(name: &str, expected_peak: u64) {
    let gz = fixture(name);
    let counter_max = total_allocated_max(&gz);
    assert_eq!(
        counter_max, expected_peak,
        "{name}: the committed fixture's maximum"
    );
    let imported = trace_import::import_bytes(&gz).unwrap();
    let r = &imported.report;
    assert!(r.warnings.is_empty(), "{name}: {:?}", r.warnings);
    let m = r.memory.as_ref().unwrap();
    assert_eq!(
        m.pre_existing, 0,
        "{name}: on the CPU PyTorch reports no earlier blocks"
    );
    let cpu = &m.devices[0];
    assert_eq!(cpu.device, "cpu");
    assert_eq!(cpu.total_allocated_max_bytes, Some(counter_max));
    assert_eq!(cpu.replayed_peak_bytes, counter_max);
    assert_eq!(
        cpu.constant_gap_bytes(),
        Some(0),
        "{name}: capture starts from zero"
    );
    for pass in ["forward", "backward", "optimizer"] {
        assert_eq!(r.passes.get(pass), Some(&1), "{name}: one {pass} span");
    }

    let doc = imported.document();
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let profile = trace_memory::analyze_memory(&doc);
    let logical = profile.logical.as_ref().unwrap();
    assert_eq!(
        logical.peak.as_ref().unwrap().live_bytes,
        counter_max,
        "{name}"
    );
    let physical = profile.physical.as_ref().unwrap();
    assert_eq!(
        physical.by_device[0].peak_used.unwrap().bytes,
        counter_max,
        "{name}: PyTorch's counter as the physical plane"
    );
    let steps: Vec<Pass> = logical.pass_peaks.iter().map(|s| s.pass).collect();
    assert_eq!(steps, [Pass::Forward, Pass::Backward, Pass::Optimizer]);
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{name}: {:?}",
        analysis.health
    );
    assert!(analysis.health.capture_complete);

    // The written JSONL loads back to the same document.
    let mut jsonl = Vec::new();
    imported.write_jsonl(&mut jsonl).unwrap();
    let reloaded = trace_schema::load_reader(jsonl.as_slice()).unwrap();
    assert_eq!(reloaded.to_events(), doc.to_events());
}

#[test]
fn mlp_replayed_peak_is_pytorchs_total_allocated_maximum() {
    check("mlp", 5_890_104);
}

#[test]
fn transformer_layer_replayed_peak_is_pytorchs_total_allocated_maximum() {
    check("transformer", 528_132);
}
