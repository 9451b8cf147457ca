//! `query` writes its JSON as it makes it; `--limit` and `--fields` slice the result.

use serde_json::Value;

use crate::util::*;

fn query(args: &[&str]) -> Value {
    let r = run(args);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every array in `v` has at most `n` elements.
fn arrays_at_most(v: &Value, n: usize) -> bool {
    match v {
        Value::Array(a) => a.len() <= n && a.iter().all(|x| arrays_at_most(x, n)),
        Value::Object(m) => m.values().all(|x| arrays_at_most(x, n)),
        _ => true,
    }
}

#[test]
fn limit_and_fields_slice_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth.jsonl");
    trace_synth::write_synth_trace(&synth, &trace_synth::SynthConfig::mix(20_000)).unwrap();
    let p = s(&synth);

    let full = query(&["query", p, "--kind", "memory"]);
    let lifetimes = full["result"]["logical"]["lifetimes"].as_array().unwrap();
    assert!(lifetimes.len() > 1000, "{}", lifetimes.len());
    assert!(full.get("limit").is_none());

    let cut = query(&["query", p, "--kind", "memory", "--limit", "3"]);
    assert_eq!(cut["limit"], 3);
    assert!(arrays_at_most(&cut["result"], 3));
    // the figures are the full result's, the lists its first elements
    assert_eq!(
        cut["result"]["logical"]["peak"]["live_bytes"],
        full["result"]["logical"]["peak"]["live_bytes"]
    );
    assert_eq!(
        cut["result"]["logical"]["lifetimes"].as_array().unwrap()[..],
        lifetimes[..3]
    );

    let slim = query(&[
        "query",
        p,
        "--kind",
        "memory",
        "--limit",
        "5",
        "--fields",
        "bytes,storage_id",
    ]);
    assert_eq!(slim["fields"], serde_json::json!(["bytes", "storage_id"]));
    let rows = slim["result"]["logical"]["lifetimes"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for (row, whole) in rows.iter().zip(lifetimes) {
        let keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["bytes", "storage_id"], "{row}");
        assert_eq!(row["bytes"], whole["bytes"]);
        assert_eq!(row["storage_id"], whole["storage_id"]);
    }

    // rows made while writing: the same tensors, filtered the same way
    let mlp = "../../examples/fixtures/mlp";
    let tensors = query(&["query", mlp, "--kind", "tensors"]);
    let all = tensors["result"].as_array().unwrap();
    let key = |t: &Value| {
        t["label"]
            .as_str()
            .or(t["tensor_id"].as_str())
            .unwrap_or("")
            .to_string()
    };
    let prefix: String = key(&all[0]).chars().take(2).collect();
    let some = query(&[
        "query",
        mlp,
        "--kind",
        "tensors",
        "--label-prefix",
        &prefix,
        "--limit",
        "2",
    ]);
    let expected = all.iter().filter(|t| key(t).starts_with(&prefix)).count();
    assert!(expected > 0);
    assert_eq!(some["result"]["total"], all.len());
    assert_eq!(some["result"]["matched"], expected);
    let rows = some["result"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), expected.min(2));
    assert_eq!(
        key(&rows[0]),
        key(all.iter().find(|t| key(t).starts_with(&prefix)).unwrap())
    );
}
