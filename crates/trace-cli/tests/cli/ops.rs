//! `candle-graph ops`: the per-operation table from sampled stacks — text, `--json`, `--by`,
//! `--pass`, `--top`, a trace without samples, few samples, hostile frame names.

use serde_json::Value;

use crate::util::run;

/// The hand-made sampled trace of trace-ops (its generator states the counts per op).
const SYNTHETIC: &str = "../trace-ops/tests/data/synthetic.jsonl";

fn ops(args: &[&str]) -> String {
    let mut all = vec!["ops"];
    all.extend_from_slice(args);
    let r = run(&all);
    assert_eq!(r.code, 0, "{all:?}: {}", r.stderr);
    r.stdout
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&ops(&all)).unwrap()
}

/// The rows and the probe's rows (kept out of the ranking, `probe`): together the region.
fn rows_and_probe(v: &Value) -> Vec<&Value> {
    let rows = v["rows"].as_array().unwrap().iter();
    rows.chain(v["probe"].as_array().into_iter().flatten())
        .collect()
}

fn row<'a>(v: &'a Value, op: &str) -> &'a Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == op)
        .unwrap_or_else(|| panic!("no row {op}: {v:#}"))
}

#[test]
fn text_table_of_a_sampled_trace() {
    let out = ops(&[SYNTHETIC]);
    assert!(
        out.starts_with("operations   estimated from 200 wall-clock samples at 2000 Hz, 3 lost; 95% intervals from the sample counts\nregion       100.00 ms (the measured region)\n"),
        "{out}"
    );
    assert!(!out.contains("few samples"), "{out}");
    assert!(out.contains("2 samples outside the measured region are not counted"));
    // the largest rows, in order
    let first: Vec<&str> = out
        .lines()
        .skip(4)
        .take(3)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        first,
        ["broadcast_matmul", "matmul.backward", "grad_accumulate"]
    );
    insta::assert_snapshot!("ops_synthetic", out);
}

#[test]
fn json_rows_with_intervals_and_shares_summing_to_one() {
    let v = json(&[SYNTHETIC, "--top", "100"]);
    assert_eq!(v["schema"], "candle-graph/ops/1");
    assert_eq!(
        (
            v["available"].clone(),
            v["figures"].clone(),
            v["by"].clone()
        ),
        (
            true.into(),
            "sampled_estimate".into(),
            "op_pass_module".into()
        )
    );
    assert_eq!(v["totals"]["counted"], 200);
    assert_eq!(v["totals"]["lost"], 3);
    assert_eq!(v["totals"]["hz"], 2000);
    assert_eq!(v["totals"]["outside_region"], 2);
    // the probe's own frames are out of the ranking, in `probe`: 5 samples in backward
    let probe = v["probe"].as_array().unwrap();
    assert_eq!(probe.len(), 1);
    assert_eq!(
        (probe[0]["op"].as_str(), probe[0]["samples"].as_u64()),
        (Some("(probe)"), Some(5))
    );
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["op"] != "(probe)"));
    let rows = rows_and_probe(&v);
    let total: f64 = rows.iter().map(|r| r["share"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-9, "{total}");
    for r in rows {
        let (s, lo, hi) = (
            r["share"].as_f64().unwrap(),
            r["share_low"].as_f64().unwrap(),
            r["share_high"].as_f64().unwrap(),
        );
        assert!(lo < s && s < hi, "{r}");
        let (ns, nlo, nhi) = (
            r["self_ns"].as_u64().unwrap(),
            r["self_ns_low"].as_u64().unwrap(),
            r["self_ns_high"].as_u64().unwrap(),
        );
        assert!(nlo < ns && ns < nhi, "{r}");
        assert_eq!(ns, (s * 100e6).round() as u64);
        for key in [
            "op",
            "pass",
            "module",
            "samples",
            "self_ns",
            "self_ns_low",
            "self_ns_high",
            "share",
            "kind",
        ] {
            assert!(r.get(key).is_some(), "{key} in {r}");
        }
    }
    let m = row(&v, "broadcast_matmul");
    assert_eq!(
        (
            m["samples"].as_u64(),
            m["pass"].as_str(),
            m["kind"].as_str(),
            m["inner_op"].as_str()
        ),
        (Some(50), Some("forward"), Some("op"), Some("matmul"))
    );
    assert_eq!(
        m["module"],
        "model/block/attn/model.layers.0.self_attn.q_proj"
    );
    assert_eq!(m["module_source"], "span");
    assert_eq!(row(&v, "matmul.backward")["samples"], 40);
    assert_eq!(row(&v, "matmul.backward")["kind"], "backward_op");
    assert_eq!(row(&v, "grad_accumulate")["samples"], 30);
    assert_eq!(row(&v, "custom_op1.backward")["samples"], 15);
    assert_eq!(row(&v, "softmax_last_dim")["samples"], 20);
    assert_eq!(row(&v, "cross_entropy")["samples"], 5);
    assert_eq!(row(&v, "sub")["pass"], "optimizer");
    let probe = &v["probe"][0];
    assert_eq!(
        (probe["kind"].as_str(), probe["samples"].as_u64()),
        (Some("probe"), Some(5))
    );
    assert_eq!(row(&v, "candle_nn::optim::AdamW::step")["kind"], "non_op");
}

#[test]
fn grouped_by_op_module_and_pass() {
    let v = json(&[SYNTHETIC, "--by", "pass"]);
    assert_eq!(v["by"], "pass");
    let passes: Vec<(String, u64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["op"].is_null() && r["module"].is_null(), "{r}");
            (
                r["pass"].as_str().unwrap().to_string(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        passes,
        [
            ("backward".to_string(), 90),
            ("forward".into(), 80),
            ("optimizer".into(), 30)
        ]
    );
    let v = json(&[SYNTHETIC, "--by", "module"]);
    let modules: Vec<(Value, u64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["module"].clone(), r["samples"].as_u64().unwrap()))
        .collect();
    assert_eq!(modules[0], (Value::Null, 130));
    assert_eq!(
        modules[1],
        (
            "model/block/attn/model.layers.0.self_attn.q_proj".into(),
            50
        )
    );
    assert_eq!(modules[2], ("model/block/attn".into(), 20));
    let v = json(&[SYNTHETIC, "--by", "op", "--top", "2"]);
    // 10 ops, the probe's row apart
    assert_eq!(v["row_count"], 9);
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
    assert!(row(&v, "broadcast_matmul")["pass"].is_null());
    let text = ops(&[SYNTHETIC, "--by", "op", "--top", "2"]);
    assert!(text.contains("  OPERATION "), "{text}");
    assert!(
        !text.contains(" PASS ") && !text.contains("MODULE"),
        "{text}"
    );
    assert!(
        text.contains("… 7 more rows (105 of the counted samples not shown; --top to see more)"),
        "{text}"
    );
}

#[test]
fn one_pass_keeps_shares_of_the_whole_region() {
    let v = json(&[SYNTHETIC, "--pass", "backward"]);
    assert_eq!(v["pass_filter"], "backward");
    let rows = rows_and_probe(&v);
    assert!(rows.iter().all(|r| r["pass"] == "backward"));
    let samples: u64 = rows.iter().map(|r| r["samples"].as_u64().unwrap()).sum();
    let share: f64 = rows.iter().map(|r| r["share"].as_f64().unwrap()).sum();
    assert_eq!(samples, 90);
    assert!((share - 0.45).abs() < 1e-9);
    let text = ops(&[SYNTHETIC, "--pass", "backward", "--by", "op"]);
    assert!(
        text.contains("pass         backward only (shares of the whole region)"),
        "{text}"
    );
    assert!(!text.contains("broadcast_matmul"), "{text}");
    let v = json(&[
        SYNTHETIC,
        "--pass",
        "optimizer",
        "--by",
        "op",
        "--sort",
        "op",
    ]);
    let ops_sorted: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops_sorted, ["candle_nn::optim::AdamW::step", "sub"]);
}

#[test]
fn a_trace_without_samples_says_why() {
    let r = run(&["ops", "../../examples/fixtures/mlp"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "operations: unavailable — not captured\n");
    let v = json(&["../../examples/fixtures/mlp"]);
    assert_eq!(
        (v["available"].clone(), v["reason"].clone()),
        (false.into(), "not captured".into())
    );
    assert_eq!(v["rows"], serde_json::json!([]));
    assert!(v.get("totals").is_none());
}

#[test]
fn few_samples_are_flagged() {
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SYNTHETIC))
            .unwrap();
    let mut kept = 0;
    let few: String = text
        .lines()
        .filter(|l| {
            // the account would no longer match the 30 samples kept
            if l.starts_with(r#"{"kind":"sampler""#) {
                return false;
            }
            if !l.starts_with(r#"{"kind":"sample""#) {
                return true;
            }
            kept += 1;
            kept <= 30
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("few.jsonl");
    std::fs::write(&path, few).unwrap();
    let p = path.to_str().unwrap();
    let out = ops(&[p]);
    assert!(
        out.contains(
            "warning      few samples (30 < 100): shares are rough and ranks may be wrong"
        ),
        "{out}"
    );
    let v = json(&[p]);
    assert_eq!(v["totals"]["few_samples"], true);
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["few_samples"] == true));
    let summary = run(&["summary", p]).stdout;
    assert!(
        summary.contains("  warning: few samples (30 < 100)"),
        "{summary}"
    );
}

#[test]
fn hostile_frame_names_are_escaped_and_elided() {
    let out = ops(&[SYNTHETIC]);
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.contains("make_batch"))
        .expect("the hostile row");
    assert!(
        // escaped, then elided in the middle (the cut may fall inside an escape)
        line.starts_with("  evil\\x1b[2J\\u{2") && line.contains('…'),
        "{line}"
    );
    // the JSON keeps the full name (serde escapes the controls)
    let v = json(&[SYNTHETIC]);
    let name = format!("evil\u{1b}[2J\u{202e}::{}::make_batch", "x".repeat(120));
    assert_eq!(row(&v, &name)["kind"], "non_op");
}

#[test]
fn check_and_summary_show_the_sampled_capability_and_findings() {
    let check = run(&["check", SYNTHETIC]).stdout;
    let line = check
        .lines()
        .find(|l| l.trim_start().starts_with("operations "))
        .unwrap();
    assert!(
        line.contains("sampled")
            && line.contains("202 samples at 2000 Hz, 3 lost: figures are estimates"),
        "{line}"
    );
    let v: Value = serde_json::from_str(&run(&["summary", SYNTHETIC, "--json"]).stdout).unwrap();
    let slowest = &v["slowest_operations"];
    assert_eq!(slowest["available"], true);
    assert_eq!(slowest["rows"][0]["op"], "broadcast_matmul");
    assert_eq!(slowest["rows"][0]["pass"], "forward");
    let findings = v["findings"].as_array().unwrap();
    let code = |c: &str| {
        findings
            .iter()
            .find(|f| f["code"] == c)
            .unwrap_or_else(|| panic!("{c}"))
    };
    let io = code("file_io_in_operation");
    assert!(io["advice"].as_str().unwrap().contains("RAYON_NUM_THREADS"));
    let acc = code("gradient_accumulation_share");
    assert!(
        acc["summary"]
            .as_str()
            .unwrap()
            .contains("33.3% (95% interval 24.5–43.6%, 30 of 90 samples) of the backward pass"),
        "{acc}"
    );
    let large = code("large_operation_share");
    assert!(
        large["summary"].as_str().unwrap().starts_with(
            "operation broadcast_matmul takes 25.0% (95% interval 19.5–31.4%, 50 of 200 samples)"
        ),
        "{large}"
    );
    let summary = run(&["summary", "../../examples/fixtures/mlp"]).stdout;
    assert!(
        summary.contains("\nslowest operations  unavailable — not captured\n"),
        "{summary}"
    );
}

/// The real sampled traces of the demo's llama and MLP steps (trace-ops' test data): the
/// table a user sees, with its headline numbers asserted.
#[test]
fn real_sampled_llama_and_mlp_steps() {
    for (name, samples, lost, must) in [
        (
            "llama",
            218,
            7,
            &[
                "matmul",
                "matmul.backward",
                "grad_accumulate",
                "softmax",
                "div.backward",
            ][..],
        ),
        (
            "mlp",
            372,
            32,
            &["matmul", "matmul.backward", "grad_accumulate", "affine"][..],
        ),
    ] {
        let path = format!("../trace-ops/tests/data/{name}_sampled.jsonl");
        let v = json(&[&path, "--by", "op", "--top", "1000"]);
        assert_eq!(
            (
                v["totals"]["counted"].as_u64(),
                v["totals"]["lost"].as_u64()
            ),
            (Some(samples), Some(lost)),
            "{name}"
        );
        let rows = rows_and_probe(&v);
        let total: f64 = rows.iter().map(|r| r["share"].as_f64().unwrap()).sum();
        assert!((total - 1.0).abs() < 1e-9, "{name}: {total}");
        for op in must {
            let r = row(&v, op);
            assert!(
                r["share_low"].as_f64() < r["share"].as_f64()
                    && r["share"].as_f64() < r["share_high"].as_f64(),
                "{name} {op}"
            );
            assert!(
                r["self_ns_low"].as_u64() < r["self_ns"].as_u64()
                    && r["self_ns"].as_u64() < r["self_ns_high"].as_u64(),
                "{name} {op}"
            );
        }
        insta::assert_snapshot!(
            format!("ops_{name}_sampled_by_op"),
            ops(&[&path, "--by", "op", "--top", "12"])
        );
        let summary = run(&["summary", &path]).stdout;
        assert!(
            summary.contains("gradient_accumulation_share: gradient accumulation"),
            "{name}: {summary}"
        );
        if name == "llama" {
            // many small matmuls: the /proc/cpuinfo reads are 44% of matmul.backward's samples
            // (below the MLP's three large ones they stay under the finding's threshold)
            assert!(
                summary.contains("file_io_in_operation: file I/O inside matmul.backward: 11.9% (95% interval 8.3–16.9%, 26 of 218 samples)"),
                "{summary}"
            );
            assert!(summary.contains("RAYON_NUM_THREADS"));
        }
    }
}

/// One rule for bad samples (issue 46): a sample the account counts but the file lacks is
/// missing, said beside the estimate of the kept ones (1 of 202: under 5%, not biased).
#[test]
fn samples_that_disagree_with_the_account_are_said_beside_the_estimate() {
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SYNTHETIC))
            .unwrap();
    let mut dropped = false;
    let short: String = text
        .lines()
        .filter(|l| {
            let sample = l.starts_with(r#"{"kind":"sample""#);
            let drop = sample && !dropped;
            dropped |= drop;
            !drop
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.jsonl");
    std::fs::write(&path, short).unwrap();
    let out = ops(&[path.to_str().unwrap()]);
    assert!(
        out.contains(
            "1 of 202 samples the sampler's account counts are missing from the trace: the \
             figures rest on the kept samples"
        ),
        "{out}"
    );
    assert!(!out.contains("operations: unavailable"), "{out}");
    // cut short inside the samples: no estimate either
    let cut: String = text
        .lines()
        .take_while(|l| !l.starts_with(r#"{"kind":"sampler""#))
        .take(text.lines().count() / 2 + 5)
        .map(|l| format!("{l}\n"))
        .collect();
    let path = dir.path().join("cut.jsonl");
    std::fs::write(&path, cut).unwrap();
    let out = ops(&[path.to_str().unwrap()]);
    assert!(out.contains("operations: unavailable"), "{out}");
}

#[test]
fn many_lost_samples_are_warned_about() {
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SYNTHETIC))
            .unwrap();
    let lossy: String = text
        .lines()
        .map(|l| {
            if !l.starts_with(r#"{"kind":"sampler""#) {
                return format!("{l}\n");
            }
            let mut v: Value = serde_json::from_str(l).unwrap();
            for t in v["threads"].as_array_mut().unwrap() {
                let samples = t["samples"].as_u64().unwrap();
                t["lost_overrun"] = samples.into(); // as many lost as taken: 50%
                t["lost_buffer"] = 0.into();
                t["ticks"] = (2 * samples).into();
            }
            format!("{v}\n")
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lossy.jsonl");
    std::fs::write(&path, lossy).unwrap();
    let out = ops(&[path.to_str().unwrap()]);
    assert!(
        out.contains("timer expirations gave no sample (50.0%)"),
        "{out}"
    );
    // the plain trace loses fewer than 10%: no such line
    let plain = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SYNTHETIC);
    assert!(!ops(&[plain.to_str().unwrap()]).contains("gave no sample"));
}
