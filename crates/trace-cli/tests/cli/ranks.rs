//! `demo --ranks 4` end to end: four processes, four rank traces, the summary across them names
//! the straggler (the slowest rank's step, whichever it is: the processes share this machine's
//! cores, so which one is slowest is timing, not asserted) with its figures, and the memory
//! imbalance (the rank with four times the batch has the largest peak: bytes, deterministic);
//! `report` on the directory writes the same figures as an HTML page; a missing and a
//! cut-short rank are said, not fatal.

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
        "--steps",
        "3",
        "--capture-steps",
        "1",
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
    assert!(r.stdout.contains("straggler    rank "), "{}", r.stdout);
    let j = run(&["summary", s(&out), "--json"]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["schema"], "candle-graph/ranks/1");
    assert_eq!(v["ranks"].as_array().unwrap().len(), 4);
    // the straggler is the rank of the slowest step, above the others' median
    let straggler = v["straggler"]["rank"].as_u64().expect("a straggler");
    let step = &v["straggler"]["step"];
    let slowest = step["rank_ns"].as_u64().unwrap();
    assert!(slowest >= step["others_median_ns"].as_u64().unwrap());
    let steps: Vec<u64> = v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["figures"]["outer_wall_time_ns"].as_u64())
        .collect();
    assert_eq!(steps.len(), 4, "{}", j.stdout);
    assert_eq!(
        steps.iter().max(),
        Some(&slowest),
        "rank {straggler}: {}",
        j.stdout
    );
    // four times the batch: the largest peak (bytes do not depend on timing)
    assert_eq!(v["memory"]["max_rank"], 3, "{}", j.stdout);
    assert!(v["straggler"]["pass"].is_array(), "{}", j.stdout);

    // `report` on the directory: the same figures as one HTML page
    let page = dir.path().join("ranks.html");
    let h = run(&["report", s(&out), "-o", s(&page)]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!("data-step-ns=\"{slowest}\"")),
        "{html}"
    );
    assert!(
        html.contains(&format!("data-rank=\"{straggler}\"")),
        "{html}"
    );
    let excess = step["excess_ns"].as_u64().unwrap();
    assert!(
        html.contains(&format!("data-step-excess-ns=\"{excess}\"")),
        "{html}"
    );
    assert!(html.contains("data-max-rank=\"3\""), "{html}");
    assert!(html.contains(&format!(
        "data-max-bytes=\"{}\"",
        v["memory"]["max_bytes"].as_u64().unwrap()
    )));
    assert!(html.contains("data-read=\"4\""), "{html}");
    assert_eq!(
        html.matches("<tr").count(),
        4 + 1,
        "one row per rank and the header"
    );
    assert!(!html.contains("id=\"problems\""), "nothing missing yet");

    // a rank lost and one cut short: said, not fatal
    std::fs::remove_file(out.join("trace.rank1.jsonl")).unwrap();
    let t2 = out.join("trace.rank2.jsonl");
    let text = std::fs::read_to_string(&t2).unwrap();
    std::fs::write(&t2, &text[..text.len() * 2 / 3]).unwrap();
    // `memory` on the directory: the same per-rank table (peaks, what held them, imbalance);
    // `report` says what is missing and cut short on its page
    let m = run(&["memory", s(&out)]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert!(m.stdout.contains("3 of 4 ranks read"), "{}", m.stdout);
    let h = run(&["report", s(&out), "-o", s(&page)]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("data-read=\"3\""), "{html}");
    assert!(
        html.contains("missing: rank 1 has no trace in the directory"),
        "{html}"
    );
    assert!(html.contains("cut short: rank 2;"), "{html}");
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
