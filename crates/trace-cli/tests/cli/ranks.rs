//! `demo --ranks 4` end to end: four processes, four rank traces, the summary across them names
//! the straggler (the rank with four times the batch) with its figures; a missing and a cut-short
//! rank are said, not fatal; the Parquet export of the ranks keeps one run row per rank.

use crate::util::{run, s};

#[test]
fn four_rank_processes_and_their_straggler() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ranks");
    let r = run(&[
        "demo",
        "--ranks",
        "4",
        "--model",
        "mlp",
        "--sample-hz",
        "0",
        "--out",
        s(&out),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for rank in 0..4 {
        let t = out.join(format!("trace.rank{rank}.jsonl"));
        let first = std::fs::read_to_string(&t).unwrap();
        let meta: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        assert_eq!(meta["rank"], rank, "{t:?}");
        assert_eq!(meta["local_rank"], rank);
        assert_eq!(meta["world_size"], 4);
        assert_eq!(meta["tags"]["seed"], (42 + rank).to_string());
        let batch = if rank == 3 { "256" } else { "64" };
        assert_eq!(meta["tags"]["batch_size"], batch);
    }
    assert!(r.stdout.contains("4 of 4 ranks read"), "{}", r.stdout);
    assert!(
        r.stdout.contains("straggler    rank 3: step "),
        "{}",
        r.stdout
    );
    let j = run(&["summary", s(&out), "--json"]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["schema"], "candle-graph/ranks/1");
    assert_eq!(v["ranks"].as_array().unwrap().len(), 4);
    // four times the batch: the slowest step and the largest peak
    assert_eq!(v["straggler"]["rank"], 3, "{}", j.stdout);
    let step = &v["straggler"]["step"];
    assert!(step["rank_ns"].as_u64().unwrap() > step["others_median_ns"].as_u64().unwrap());
    assert_eq!(v["memory"]["max_rank"], 3, "{}", j.stdout);
    assert!(v["straggler"]["pass"].is_array(), "{}", j.stdout);

    // a rank lost and one cut short: said, not fatal
    std::fs::remove_file(out.join("trace.rank1.jsonl")).unwrap();
    let t2 = out.join("trace.rank2.jsonl");
    let text = std::fs::read_to_string(&t2).unwrap();
    std::fs::write(&t2, &text[..text.len() * 2 / 3]).unwrap();
    let r = run(&["summary", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("missing      rank 1: no trace"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("cut short    rank 2"), "{}", r.stdout);
    assert!(r.stdout.contains("2 (cut)"), "{}", r.stdout);
}
