//! Allocation sites (trace/13) in the views: `memory`'s op column, merged identical rows and
//! `--ungrouped`, `--group-by op|site`, the JSON fields, the coverage line, and `ops`' exact
//! calls and alloc-clocked time on a trace with sites and no samples; hostile frame names.

use serde_json::Value;

use crate::util::{run, s, write};

/// The hand-made trace/13 step of trace-ops (its test works out every count and interval).
const SITES: &str = "../trace-ops/tests/data/sites.jsonl";

fn ok(args: &[&str]) -> String {
    let r = run(args);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    r.stdout
}

#[test]
fn memory_names_the_op_and_merges_identical_storages() {
    let out = ok(&["memory", SITES]);
    assert!(
        out.contains("held at the peak (top 3 rows, 6 of 6 storages; identical storages merged, --ungrouped lists them):"),
        "{out}"
    );
    // the three sqr temporaries of the optimizer: one row with a count
    assert!(out.contains("3 × 8.00 KiB = 24.00 KiB"), "{out}");
    assert!(out.contains("sqr · optimizer"), "{out}");
    assert!(out.contains("matmul · model/fc1 · forward"), "{out}");
    assert!(out.contains("matmul.backward · backward"), "{out}");
    assert!(
        out.contains(
            "ops named for 100.0% of the 64.00 KiB allocated in the step and live at the peak"
        ),
        "{out}"
    );
    let ungrouped = ok(&["memory", SITES, "--ungrouped"]);
    assert!(
        ungrouped.contains("held at the peak (top 6 of 6 storages):"),
        "{ungrouped}"
    );
    assert!(!ungrouped.contains(" × "), "{ungrouped}");
}

#[test]
fn memory_json_rows_carry_op_module_and_count() {
    let v: Value = serde_json::from_str(&ok(&["memory", SITES, "--json"])).unwrap();
    let held = v["memory_peak"]["held"].as_array().unwrap();
    assert_eq!(held.len(), 3);
    let sqr = held.iter().find(|r| r["op"] == "sqr").unwrap();
    assert_eq!(sqr["count"], 3);
    assert_eq!(sqr["bytes"], 8192, "bytes are per storage");
    assert_eq!(sqr["pass"], "optimizer");
    let matmul = held.iter().find(|r| r["op"] == "matmul").unwrap();
    assert_eq!(matmul["module"], "model/fc1");
    assert_eq!(matmul["count"], 2);
    let back = held.iter().find(|r| r["op"] == "matmul.backward").unwrap();
    assert!(back.get("count").is_none(), "a single storage has no count");
    // merged rows name their allocation sites; a single storage its one site
    assert_eq!(sqr["site_ids"], serde_json::json!([3]));
    assert_eq!(matmul["site_ids"], serde_json::json!([1]));
    assert!(back.get("site_ids").is_none() && back["site"] == 2);
    let cov = &v["memory_peak"]["op_coverage"];
    assert_eq!(cov["allocated_in_step_bytes"], 65536);
    assert_eq!(cov["with_op_bytes"], 65536);
}

/// The llama step with allocation sites (trace-ops' test data): more rows than the terminal's 10.
const LLAMA_SITES: &str = "../trace-ops/tests/data/llama_sites.jsonl";

#[test]
fn memory_json_gives_every_row_and_merged_rows_their_sites() {
    let v: Value = serde_json::from_str(&ok(&["memory", LLAMA_SITES, "--json"])).unwrap();
    let p = &v["memory_peak"];
    let held = p["held"].as_array().unwrap();
    assert!(held.len() > 10, "{} rows", held.len());
    assert_eq!(p["held_more_count"], 0, "every row: none left over");
    let storages: u64 = held.iter().map(|r| r["count"].as_u64().unwrap_or(1)).sum();
    let bytes: u64 = held
        .iter()
        .map(|r| r["bytes"].as_u64().unwrap() * r["count"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(
        bytes,
        p["live_bytes"].as_u64().unwrap(),
        "the rows add up to the peak"
    );
    let merged: Vec<&Value> = held.iter().filter(|r| r.get("count").is_some()).collect();
    assert!(!merged.is_empty());
    for r in &merged {
        let sites: Vec<u64> = r["site_ids"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_u64().unwrap()).collect())
            .unwrap_or_default();
        // storages without a site (from before the capture, under the threshold) have no op;
        // every merged row with an op names its sites
        if r.get("op").is_some() || r.get("ops").is_some() {
            assert!(!sites.is_empty(), "{r}");
            assert!(
                sites.windows(2).all(|w| w[0] < w[1]),
                "ascending, once each: {r}"
            );
            assert!(sites.len() as u64 <= r["count"].as_u64().unwrap());
            assert_eq!(r["sites"], sites.len() as u64, "the count of sites: {r}");
        }
    }
    assert!(
        storages > held.len() as u64,
        "{storages} storages in {} rows",
        held.len()
    );
    // the terminal keeps its 10 rows; --top still limits the JSON
    let text = ok(&["memory", LLAMA_SITES]);
    assert!(text.contains("held at the peak (top 10 rows, "), "{text}");
    let v: Value =
        serde_json::from_str(&ok(&["memory", LLAMA_SITES, "--json", "--top", "3"])).unwrap();
    assert_eq!(v["memory_peak"]["held"].as_array().unwrap().len(), 3);
}

#[test]
fn memory_groups_by_op_and_by_site() {
    let out = ok(&["memory", SITES, "--group-by", "op"]);
    assert!(
        out.contains("held at the peak by op (6 storages in 3 groups):"),
        "{out}"
    );
    assert!(out.contains("sqr · optimizer"), "{out}");
    let out = ok(&["memory", SITES, "--group-by", "site"]);
    assert!(out.contains("#3 sqr · optimizer"), "{out}");
    assert!(out.contains("#1 matmul · model/fc1 · forward"), "{out}");
}

#[test]
fn ops_without_samples_shows_calls_and_alloc_clocked_time() {
    let out = ok(&["ops", SITES]);
    assert!(
        out.starts_with("operations   from allocation sites only"),
        "{out}"
    );
    let line = out.lines().find(|l| l.contains("sqr")).unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells, ["sqr", "optimizer", "-", "3", "70", "ns"], "{out}");
    let v: Value = serde_json::from_str(&ok(&["ops", SITES, "--json"])).unwrap();
    assert_eq!(v["figures"], "alloc_clocked");
    assert_eq!(v["alloc_sites"]["calls"], 6);
    assert_eq!(v["alloc_sites"]["alloc_clocked_ns"], 350);
    let by_op: Value =
        serde_json::from_str(&ok(&["ops", SITES, "--by", "pass", "--json"])).unwrap();
    let fwd = by_op["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pass"] == "forward")
        .unwrap();
    assert_eq!(
        (fwd["calls"].as_u64(), fwd["alloc_clocked_ns"].as_u64()),
        (Some(2), Some(190))
    );
}

#[test]
fn hostile_frame_names_are_escaped_in_every_view() {
    let text = std::fs::read_to_string(SITES)
        .unwrap()
        .replace("candle_core::tensor::Tensor::sqr", "evil\\u001b[2J::run");
    let (_dir, path) = write("hostile_sites.jsonl", text.as_bytes());
    for args in [
        vec!["memory", s(&path)],
        vec!["memory", s(&path), "--group-by", "site"],
        vec!["ops", s(&path)],
    ] {
        let out = ok(&args);
        assert!(!out.contains('\u{1b}'), "{args:?}: {out:?}");
        assert!(out.contains("evil"), "{args:?}: {out}");
    }
}

/// The real demo steps with sites (trace-ops' test data): at least 95% of the bytes allocated
/// in the step and live at the peak carry an op (the done-when), on the MLP and on
/// llama.
#[test]
fn real_demo_steps_name_the_op_of_the_peak() {
    for (trace, min_rows) in [
        ("../trace-ops/tests/data/mlp_sites.jsonl", 14),
        ("../trace-ops/tests/data/llama_sites.jsonl", 10),
    ] {
        let v: Value =
            serde_json::from_str(&ok(&["memory", trace, "--json", "--top", "100"])).unwrap();
        let cov = &v["memory_peak"]["op_coverage"];
        let (with_op, inside) = (
            cov["with_op_bytes"].as_u64().unwrap(),
            cov["allocated_in_step_bytes"].as_u64().unwrap(),
        );
        assert!(
            inside > 0 && with_op as f64 >= 0.95 * inside as f64,
            "{trace}: {cov}"
        );
        let held = v["memory_peak"]["held"].as_array().unwrap();
        let named: u64 = held
            .iter()
            .filter(|r| r.get("op").is_some() || r.get("ops").is_some())
            .map(|r| r["count"].as_u64().unwrap_or(1))
            .sum();
        assert!(named >= min_rows, "{trace}: {named} storages with an op");
    }
    // the MLP's AdamW temporaries at the peak: fourteen of fc1.weight's size, merged into one
    // row with the tally of their ops (AdamW's update of one 512×784 f32 parameter: six
    // scalar affines, three adds, two muls, one div, sqrt and sub), tied to the parameter by size
    let out = ok(&[
        "memory",
        "../trace-ops/tests/data/mlp_sites.jsonl",
        "--top",
        "30",
    ]);
    assert!(out.contains("14 × 1.53 MiB = 21.44 MiB"), "{out}");
    assert!(
        out.contains("update of fc1.weight (by size) · optimizer"),
        "{out}"
    );
    let v: Value = serde_json::from_str(&ok(&[
        "memory",
        "../trace-ops/tests/data/mlp_sites.jsonl",
        "--json",
    ]))
    .unwrap();
    let top = &v["memory_peak"]["held"][0];
    assert_eq!(top["count"], 14, "{top}");
    assert_eq!(top["bytes"], 512 * 784 * 4, "{top}");
    assert_eq!(top["module"], "update of fc1.weight (by size)", "{top}");
    let tally: Vec<(String, u64)> = top["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["op"].as_str().unwrap().to_string(),
                o["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let expect = [
        ("affine", 6),
        ("add", 3),
        ("mul", 2),
        ("div", 1),
        ("sqrt", 1),
        ("sub", 1),
    ];
    assert_eq!(
        tally,
        expect.map(|(o, n)| (o.to_string(), n)).to_vec(),
        "{top}"
    );
    let unmerged = ok(&[
        "memory",
        "../trace-ops/tests/data/mlp_sites.jsonl",
        "--ungrouped",
        "--top",
        "30",
    ]);
    for op in ["affine · optimizer", "sqrt · optimizer", "div · optimizer"] {
        assert!(unmerged.contains(op), "{op}: {unmerged}");
    }
    // ops: calls and alloc-clocked time beside the samples
    let v: Value = serde_json::from_str(&ok(&[
        "ops",
        "../trace-ops/tests/data/mlp_sites.jsonl",
        "--json",
        "--top",
        "100",
    ]))
    .unwrap();
    let sqrt = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "sqrt" && r["pass"] == "optimizer")
        .unwrap();
    // one sqrt per parameter whose update allocates at least 4 KiB: the three weights
    // (512×784, 512×512, 10×512 f32); the biases (2 KiB, 2 KiB, 40 B) are below the threshold
    assert_eq!(sqrt["calls"].as_u64(), Some(3), "{sqrt}");
    assert!(sqrt["alloc_clocked_ns"].as_u64().unwrap() > 0, "{sqrt}");
}
