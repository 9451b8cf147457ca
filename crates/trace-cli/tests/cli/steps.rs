//! A capture of several steps (issue 30 §3): `summary` and `memory` print the per-step table and
//! the `memory_growth` finding; `--json` carries the table as `steps`; a single-step trace has
//! neither.

use crate::util::{run, s, write, SMALL_TRACE};

/// Steps 2 and 3 under one measured region, each leaving one 1,024 B storage live.
fn two_steps(leak: bool) -> String {
    // the free line of storage `id` at `t`, or none when the step leaks it
    let free = |t: u64, id: &str| {
        if leak {
            String::new()
        } else {
            format!(
                "{{\"kind\":\"memory\",\"timestamp_ns\":{t},\"action\":\"free\",\"device\":\"cpu\",\"storage_id\":\"{id}\"}}\n"
            )
        }
    };
    let (free_a, free_b) = (free(16, "a"), free(36, "b"));
    format!(
        r#"{{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"mlp::train","phase":"train","timestamp":"2026-01-01T00:00:00.000Z","capture_step":2,"last_capture_step":3,"warmup_steps":1,"capture_contract":{{"logical_memory":"complete"}}}}
{{"kind":"span_start","id":"s1","name":"mlp::train","start_ns":0,"span_kind":"function","measured":true}}
{{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"p","bytes":4096,"category":"parameter","pre_existing":true}}
{{"kind":"span_start","id":"s2","parent_id":"s1","name":"step 2","start_ns":10,"span_kind":"function","step_index":2}}
{{"kind":"span_start","id":"s3","parent_id":"s2","name":"forward","start_ns":11,"span_kind":"function","step":"forward"}}
{{"kind":"memory","timestamp_ns":12,"action":"alloc","device":"cpu","storage_id":"a","bytes":1024,"span_id":"s3","shape":[16,16],"dtype":"f32"}}
{free_a}{{"kind":"span_end","id":"s3","duration_ns":8}}
{{"kind":"span_end","id":"s2","duration_ns":10}}
{{"kind":"span_start","id":"s4","parent_id":"s1","name":"step 3","start_ns":30,"span_kind":"function","step_index":3}}
{{"kind":"span_start","id":"s5","parent_id":"s4","name":"forward","start_ns":31,"span_kind":"function","step":"forward"}}
{{"kind":"memory","timestamp_ns":32,"action":"alloc","device":"cpu","storage_id":"b","bytes":1024,"span_id":"s5","shape":[16,16],"dtype":"f32"}}
{free_b}{{"kind":"span_end","id":"s5","duration_ns":8}}
{{"kind":"span_end","id":"s4","duration_ns":10}}
{{"kind":"span_end","id":"s1","duration_ns":50}}
{{"kind":"terminal","outcome":"complete","timestamp_ns":50}}
"#
    )
}

fn stdout(args: &[&str]) -> String {
    let r = run(args);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    r.stdout
}

#[test]
fn several_steps_get_a_table_and_growth_is_a_finding() {
    let (_dir, path) = write("steps.jsonl", two_steps(true).as_bytes());
    let p = s(&path);
    let text = stdout(&["summary", p]);
    assert!(text.contains("steps 2–3 after 1 warm-up"), "{text}");
    assert!(
        text.contains(
            "steps        2 captured (2–3) · live memory grows exactly +1.00 KiB per step"
        ),
        "{text}"
    );
    assert!(text.contains("step 2"), "{text}");
    assert!(text.contains("1.00 KiB in 1"), "{text}");
    assert!(text.contains("+1.00 KiB (1,024 B) per step"), "{text}");
    assert!(
        text.contains("1 × (16, 16) f32 in mlp::train/step 3/forward"),
        "{text}"
    );

    let v: serde_json::Value = serde_json::from_str(&stdout(&["summary", p, "--json"])).unwrap();
    let steps = &v["steps"];
    assert_eq!(steps["rows"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(steps["rows"][1]["step_index"], 3);
    assert_eq!(steps["rows"][1]["memory"]["retained_bytes"], 1024);
    assert_eq!(steps["rows"][1]["memory"]["live_at_end_bytes"], 4096 + 2048);
    assert_eq!(steps["growth"]["bytes_per_step"], 1024);
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(codes.contains(&"memory_growth"), "{codes:?}");

    let memory = stdout(&["memory", p]);
    assert!(memory.contains("steps        2 captured (2–3)"), "{memory}");

    // Steady: the table, no growth, no finding.
    let (_dir, path) = write("steady.jsonl", two_steps(false).as_bytes());
    let text = stdout(&["summary", s(&path)]);
    assert!(
        text.contains("2 captured (2–3) · no growth across steps"),
        "{text}"
    );
    assert!(!text.contains("memory_growth"), "{text}");
    assert!(!text.contains("live memory grows"), "{text}");

    // One step: no table.
    let (_dir, path) = write("one.jsonl", SMALL_TRACE.as_bytes());
    let text = stdout(&["summary", s(&path)]);
    assert!(!text.contains("captured ("), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&["summary", s(&path), "--json"])).unwrap();
    assert!(v.get("steps").is_none(), "{v}");
}

/// Byte counts that add up past `u64::MAX` (a parameter of 2^64 − 1 bytes and a step's
/// 1,024 B): every step memory figure is null in JSON and `overflow` in the table, never a
/// saturated or wrapped sum (a new user's trial showed 16.00 EiB per step).
#[test]
fn overflowed_byte_counts_give_no_step_memory_figure() {
    let trace = two_steps(true).replace(
        r#""bytes":4096,"category":"parameter""#,
        &format!(r#""bytes":{},"category":"parameter""#, u64::MAX),
    );
    let (_dir, path) = write("overflow.jsonl", trace.as_bytes());
    let p = s(&path);
    let v: serde_json::Value = serde_json::from_str(&stdout(&["summary", p, "--json"])).unwrap();
    let rows = v["steps"]["rows"].as_array().expect("step rows");
    assert_eq!(rows.len(), 2, "{v}");
    for row in rows {
        let m = &row["memory"];
        for key in [
            "live_at_start_bytes",
            "live_at_end_bytes",
            "peak_bytes",
            "peak_timestamp_ns",
            "allocated_bytes",
            "retained_bytes",
        ] {
            assert!(m[key].is_null(), "{key} of {m}");
        }
        assert_eq!(m["allocation_count"], 1, "{m}");
    }
    assert!(v["steps"].get("growth").is_none(), "{v}");
    let text = stdout(&["summary", p]);
    assert!(
        text.contains("2 captured (2–3) · memory unknown: byte counts overflow 2^64"),
        "{text}"
    );
    assert!(!text.contains("EiB"), "{text}");
    assert!(text.contains("overflow     overflow   overflow"), "{text}");
    assert!(text.contains("no step's memory figure is real"), "{text}");
}
