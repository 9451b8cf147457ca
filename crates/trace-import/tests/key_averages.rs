//! The op table of an imported PyTorch trace equals PyTorch's own `key_averages()` of the same
//! recorded step: `cargo xtask pytorch-fixtures` writes both (`NAME.json.gz`, the Kineto trace;
//! `NAME.key_averages.json`, `prof.key_averages()` as data), and every op row must agree in
//! calls, total and self CPU time.

use std::path::PathBuf;

use serde::Deserialize;

#[derive(Deserialize)]
struct Averages {
    by_name: Vec<Average>,
}

#[derive(Deserialize)]
struct Average {
    key: String,
    count: u64,
    self_cpu_time_total_us: f64,
    cpu_time_total_us: f64,
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pytorch")
        .join(name)
}

/// PyTorch sums µs floats; the import keeps each event's ns exactly: allow 1 ns per call (each
/// duration's rounding) plus 1 ns per call for its children's (self time).
fn check(name: &str) {
    let gz = std::fs::read(data(&format!("{name}.json.gz"))).unwrap();
    let averages: Averages = serde_json::from_str(
        &std::fs::read_to_string(data(&format!("{name}.key_averages.json"))).unwrap(),
    )
    .unwrap();
    let imported = trace_import::import_bytes(&gz).unwrap();
    let doc = imported.document();
    let table = trace_ops::MeasuredOps::from_document(&doc).expect("op spans");
    let ours = table.by_name();
    let mut compared = 0;
    for row in &ours {
        let theirs = averages
            .by_name
            .iter()
            .find(|a| a.key == row.op)
            .unwrap_or_else(|| panic!("{name}: {} is not in key_averages", row.op));
        assert_eq!(row.calls, theirs.count, "{name}: calls of {}", row.op);
        let total_ns = (theirs.cpu_time_total_us * 1000.0).round() as i128;
        let self_ns = (theirs.self_cpu_time_total_us * 1000.0).round() as i128;
        let slack = 2 * row.calls as i128 + 2;
        assert!(
            (row.total_ns as i128 - total_ns).abs() <= slack,
            "{name}: total of {}: {} ns vs key_averages {} ns",
            row.op,
            row.total_ns,
            total_ns
        );
        assert!(
            (row.self_ns as i128 - self_ns).abs() <= slack * 4,
            "{name}: self of {}: {} ns vs key_averages {} ns",
            row.op,
            row.self_ns,
            self_ns
        );
        compared += 1;
    }
    // Every aten op PyTorch averaged is in our table (the rest are annotations and the step).
    for a in averages
        .by_name
        .iter()
        .filter(|a| a.key.starts_with("aten::"))
    {
        assert!(
            ours.iter().any(|r| r.op == a.key),
            "{name}: {} missing",
            a.key
        );
    }
    assert!(compared >= 20, "{name}: {compared} ops compared");
}

#[test]
fn the_mlp_op_table_equals_key_averages() {
    check("mlp");
}

#[test]
fn the_transformer_op_table_equals_key_averages() {
    check("transformer");
}
