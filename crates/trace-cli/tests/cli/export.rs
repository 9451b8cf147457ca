//! `export --format chrome` and `memory --group-by` through the binary: files, gzip by
//! extension, stdout, filters, errors, cut-short traces. The format's rules are checked in
//! trace-report's own tests; here the command's edges.

use std::io::Read;

use crate::util::{run, s, write};

const LLAMA: &str = "../../examples/fixtures/llama";

fn parse(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("the export is JSON")
}

#[test]
fn writes_json_gzip_and_stdout_with_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("t.json");
    let gz = dir.path().join("t.json.gz");
    for out in [&plain, &gz] {
        let r = run(&["export", LLAMA, "--format", "chrome", "-o", s(out)]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.is_empty());
        assert!(r.stderr.contains("candle-graph: wrote"), "{}", r.stderr);
    }
    let a = parse(&std::fs::read(&plain).unwrap());
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_end(&mut unzipped)
        .expect("a gzip file");
    let b = parse(&unzipped);
    assert_eq!(a, b);
    assert!(std::fs::metadata(&gz).unwrap().len() < std::fs::metadata(&plain).unwrap().len() / 4);
    let r = run(&["export", LLAMA, "--format", "chrome", "-o", "-"]);
    assert_eq!(r.code, 0);
    assert_eq!(parse(r.stdout.as_bytes()), a);
    // no temporary file left behind
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // the llama fixture's 32 spans, memory counters, 31 gradient facts (21 parameters, 10 other tensors)
    let evs = a["traceEvents"].as_array().unwrap();
    assert_eq!(evs.iter().filter(|e| e["cat"] == "span").count(), 32);
    assert_eq!(evs.iter().filter(|e| e["cat"] == "gradient").count(), 31);
    let peak = evs
        .iter()
        .filter(|e| e["name"] == "live bytes")
        .map(|e| e["args"]["total"].as_u64().unwrap())
        .max();
    // rope cos/sin (512 B each) and the causal mask (1,024 B) are live since before the step
    assert_eq!(peak, Some(6_000_648));
}

#[test]
fn bad_filters_fail_clearly_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    let r = run(&[
        "export",
        LLAMA,
        "--format",
        "chrome",
        "--span",
        "train/nope",
        "-o",
        s(&out),
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("no span has the path `train/nope`"),
        "{}",
        r.stderr
    );
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    let r = run(&[
        "export", LLAMA, "--format", "chrome", "--window", "5ms..2ms",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("starts after it ends"), "{}", r.stderr);
    let r = run(&["export", LLAMA, "--format", "chrome", "--window", "5h.."]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is not a duration"), "{}", r.stderr);
    let r = run(&["export", LLAMA, "-o", s(&out)]);
    assert_eq!(r.code, 2, "--format is required");
}

#[test]
fn a_cut_short_trace_exports_and_says_so() {
    let text = std::fs::read("../../examples/fixtures/llama/trace.jsonl").unwrap();
    let (dir, path) = write("trace.jsonl", &text[..text.len() / 2]);
    let out = dir.path().join("t.json");
    let r = run(&["export", s(&path), "--format", "chrome", "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("is truncated"), "{}", r.stderr);
    let v = parse(&std::fs::read(&out).unwrap());
    assert_eq!(v["otherData"]["truncated"], true);
    let evs = v["traceEvents"].as_array().unwrap();
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "B" && e["args"]["open"] == true));
}

#[test]
fn memory_group_by_counts_every_storage_live_at_the_peak() {
    for by in ["span", "shape", "category"] {
        let r = run(&["memory", LLAMA, "--group-by", by, "--top", "3", "--json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let p = &v["memory_peak"];
        let g = &p["held_groups"];
        assert_eq!(g["by"], by);
        let groups = g["groups"].as_array().unwrap();
        assert!(groups.len() <= 3);
        let bytes: u64 = groups
            .iter()
            .map(|x| x["bytes"].as_u64().unwrap())
            .sum::<u64>()
            + g["more_bytes"].as_u64().unwrap();
        let storages: u64 = groups
            .iter()
            .map(|x| x["storages"].as_u64().unwrap())
            .sum::<u64>()
            + g["more_storages"].as_u64().unwrap();
        // 5.72 MiB in 259 storages at the llama fixture's peak (the step's 253, the rope tables
        // and the causal mask made before it)
        assert_eq!(bytes, 6_000_648, "{by}");
        assert_eq!(storages, 259, "{by}");
        let text = run(&["memory", LLAMA, "--group-by", by, "--top", "3"]).stdout;
        assert!(
            text.contains(&format!("held at the peak by {by} (259 storages in")),
            "{text}"
        );
    }
    // by category the groups are the categories, largest first
    let r = run(&["memory", LLAMA, "--group-by", "category", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let first = &v["memory_peak"]["held_groups"]["groups"][0];
    assert_eq!(first["key"], "activation");
    // 2.84 MiB, as the by-category line says, 8 of the 122 storages inferred
    assert_eq!(first["bytes"], 2_977_800);
    assert_eq!(first["inferred_category"], 8);
}

const SAMPLED: &str = "../trace-report/tests/browser/sampled.jsonl";

#[test]
fn speedscope_writes_a_profile_per_thread_and_refuses_a_trace_without_samples() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.speedscope.json");
    let r = run(&["export", SAMPLED, "--format", "speedscope", "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.is_empty());
    assert!(
        r.stderr.contains("1 profile, 299 samples, 15 frames"),
        "{}",
        r.stderr
    );
    let v = parse(&std::fs::read(&out).unwrap());
    assert_eq!(
        v["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    assert_eq!(v["profiles"][0]["samples"].as_array().unwrap().len(), 299);
    // stdout and gzip give the same file
    let r = run(&["export", SAMPLED, "--format", "speedscope", "-o", "-"]);
    assert_eq!(r.code, 0);
    assert_eq!(parse(r.stdout.as_bytes()), v);
    let gz = dir.path().join("out.speedscope.json.gz");
    let r = run(&["export", SAMPLED, "--format", "speedscope", "-o", s(&gz)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_end(&mut unzipped)
        .unwrap();
    assert_eq!(parse(&unzipped), v);
    // no samples: an error, and no file
    let none = dir.path().join("none.json");
    let r = run(&["export", LLAMA, "--format", "speedscope", "-o", s(&none)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no sampled call stacks"), "{}", r.stderr);
    assert!(!none.exists());
    // the chrome filters do not apply
    let r = run(&[
        "export",
        SAMPLED,
        "--format",
        "speedscope",
        "--window",
        "..1ms",
        "-o",
        s(&out),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--format chrome only"), "{}", r.stderr);
}

#[test]
fn chrome_export_of_a_sampled_trace_counts_its_samples() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    let r = run(&["export", SAMPLED, "--format", "chrome", "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("299 samples)"), "{}", r.stderr);
    let v = parse(&std::fs::read(&out).unwrap());
    let n = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "sample")
        .count();
    assert_eq!(n, 299);
}

/// `export --format parquet`: the same run given twice is refused, naming both files (its rows
/// would count twice); a rank directory with an unreadable rank trace exports the others with
/// a warning, as `summary` on the directory reads the others; a cut-short trace is exported
/// with the warning every other command gives.
#[test]
fn parquet_refuses_a_run_twice_and_skips_an_unreadable_rank() {
    let dir = tempfile::tempdir().unwrap();
    let trace = format!("{LLAMA}/trace.jsonl");
    let out = dir.path().join("tables");
    let r = run(&[
        "export",
        "--format",
        "parquet",
        &trace,
        &trace,
        "-o",
        s(&out),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is already exported from") && r.stderr.contains("trace.jsonl"),
        "{}",
        r.stderr
    );
    let ranks = dir.path().join("ranks");
    std::fs::create_dir(&ranks).unwrap();
    std::fs::copy(&trace, ranks.join("trace.rank0.jsonl")).unwrap();
    std::fs::write(ranks.join("trace.rank1.jsonl"), "").unwrap();
    let out = dir.path().join("rank-tables");
    let r = run(&["export", "--format", "parquet", s(&ranks), "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: skipping the rank trace")
            && r.stderr.contains("trace.rank1.jsonl"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("of 1 trace into"), "{}", r.stderr);
    assert!(out.join("runs.parquet").exists());
    let text = std::fs::read_to_string(&trace).unwrap();
    let (_cut_dir, cut) = write("cut.jsonl", &text.as_bytes()[..text.len() - 40]);
    let out = dir.path().join("cut-tables");
    let r = run(&["export", "--format", "parquet", s(&cut), "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("is truncated"), "{}", r.stderr);
}
