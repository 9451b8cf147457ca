//! Issue "Exact figures on any input": every command on traces built from the failure classes
//! (per-event peaks, overflowing sums, hostile text, several devices, overlap, cut-short traces)
//! prints right figures or a health issue — never a wrapped number or a raw control byte.

use crate::util::{run, write};

const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"infer","timestamp":"2026-01-01T00:00:00.000Z","capture_contract":{"logical_memory":"complete"}}"#;

fn trace(lines: &[&str], terminal: Option<u64>) -> String {
    let mut s = format!("{META}\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    if let Some(t) = terminal {
        s.push_str(&format!(
            "{{\"kind\":\"terminal\",\"outcome\":\"complete\",\"timestamp_ns\":{t}}}\n"
        ));
    }
    s
}

fn out(args: &[&str]) -> String {
    let r = run(args);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    r.stdout
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&out(args)).unwrap()
}

/// No byte of the output is a control character other than the line break.
fn assert_terminal_safe(text: &str) {
    for c in text.chars() {
        assert!(
            c == '\n' || !trace_format::is_unsafe(c),
            "raw control {c:?} in:\n{text}"
        );
    }
}

fn root(end_ns: u64) -> [String; 2] {
    [
        r#"{"kind":"span_start","id":"s1","name":"run","start_ns":0,"span_kind":"function","measured":true}"#.to_string(),
        format!(r#"{{"kind":"span_end","id":"s1","duration_ns":{end_ns}}}"#),
    ]
}

#[test]
fn a_peak_inside_one_tick_is_seen_by_every_command() {
    let [start, end] = root(100);
    let text = trace(
        &[
            &start,
            r#"{"kind":"memory","timestamp_ns":0,"action":"alloc","device":"cpu","storage_id":"p","bytes":1000,"category":"parameter","pre_existing":true}"#,
            r#"{"kind":"memory","timestamp_ns":50,"action":"alloc","device":"cpu","storage_id":"a","bytes":500,"span_id":"s1","category":"activation"}"#,
            r#"{"kind":"memory","timestamp_ns":50,"action":"free","device":"cpu","storage_id":"a","span_id":"s1"}"#,
            r#"{"kind":"memory","timestamp_ns":60,"action":"alloc","device":"cpu","storage_id":"b","bytes":300,"span_id":"s1","category":"activation"}"#,
            r#"{"kind":"memory","timestamp_ns":70,"action":"free","device":"cpu","storage_id":"b","span_id":"s1"}"#,
            &end,
        ],
        Some(100),
    );
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    let s = out(&["summary", p]);
    assert!(s.contains("memory peak  1.46 KiB on cpu at 50 ns"), "{s}");
    let v = json(&["summary", p, "--json"]);
    assert_eq!(v["memory_peak"]["live_bytes"], 1500);
    assert_eq!(v["memory_peak"]["timestamp_ns"], 50);
    let m = json(&["memory", p, "--json"]);
    assert_eq!(m["memory_peak"]["live_bytes"], 1500);
    assert_eq!(m["by_device"][0]["peak"]["live_bytes"], 1500);
    let q = json(&["query", p, "--kind", "memory"]);
    assert_eq!(q["result"]["logical"]["peak"]["live_bytes"], 1500);
}

#[test]
fn one_storage_allocated_and_freed_at_zero_prints_a_readable_peak() {
    let text = trace(
        &[
            r#"{"kind":"memory","timestamp_ns":0,"action":"alloc","device":"cpu","storage_id":"x","bytes":64,"category":"activation"}"#,
            r#"{"kind":"memory","timestamp_ns":0,"action":"free","device":"cpu","storage_id":"x"}"#,
        ],
        Some(0),
    );
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    let s = out(&["summary", p]);
    assert!(s.contains("memory peak  64 B on cpu at 0 ns"), "{s}");
    assert!(s.contains("by category: activation 64 B"), "{s}");
    assert!(!s.contains("on ,") && !s.contains("by category: \n"), "{s}");
}

#[test]
fn overflowing_byte_counts_are_never_a_number() {
    let [start, end] = root(100);
    let big = u64::MAX - 5;
    let a = format!(
        r#"{{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a","bytes":{big},"category":"activation"}}"#
    );
    let b = format!(
        r#"{{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"b","bytes":{big},"category":"activation"}}"#
    );
    let g = r#"{"kind":"gradient","event_id":"gradient-1","root":"x","key":"a","state":"present","norm":1.0,"parameter":false,"bytes":18446744073709551615}"#;
    let g2 = r#"{"kind":"gradient","event_id":"gradient-2","root":"x","key":"b","state":"present","norm":1.0,"parameter":false,"bytes":18446744073709551615}"#;
    let text = trace(&[&start, &a, &b, g, g2, &end], Some(100));
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    for cmd in ["summary", "memory", "check"] {
        let s = out(&[cmd, p]);
        // only the single overflowing allocation's own size may be that large
        for line in s.lines().filter(|l| !l.contains("overflowed")) {
            assert!(
                !line.contains("EiB") && !line.contains("TiB") && !line.contains("PiB"),
                "{cmd}: {line}"
            );
        }
        assert_terminal_safe(&s);
        if cmd != "check" {
            assert!(s.contains("overflowed"), "{cmd}: {s}");
        } else {
            assert!(s.contains("memory_bytes_overflow"), "{s}");
        }
    }
    let v = json(&["summary", p, "--json"]);
    assert!(v["memory_peak"].is_null(), "{v}");
    assert_eq!(v["memory_overflow"]["event_index"], 1);
    assert!(v["gradients"]["non_parameter_bytes"].is_null());
    assert_eq!(v["gradients"]["non_parameter_bytes_overflowed"], true);
    let m = json(&["memory", p, "--json"]);
    assert!(
        m["memory_peak"].is_null() && m["live_at_end"].is_null(),
        "{m}"
    );
    let c = json(&["check", p, "--json"]);
    let codes: Vec<&str> = c["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"memory_bytes_overflow"), "{codes:?}");
    let q = json(&["query", p, "--kind", "memory"]);
    assert!(q["result"]["logical"].is_null());
}

#[test]
fn overflowing_durations_are_an_error_never_a_wrapped_wall_time() {
    let half = 1u64 << 63;
    let lines = [
        r#"{"kind":"span_start","id":"s1","name":"run","start_ns":0,"span_kind":"function","measured":true}"#.to_string(),
        r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"a","start_ns":0,"span_kind":"function"}"#.to_string(),
        format!(r#"{{"kind":"span_end","id":"s2","duration_ns":{half}}}"#),
        format!(r#"{{"kind":"span_start","id":"s3","parent_id":"s1","name":"b","start_ns":{half},"span_kind":"function"}}"#),
        format!(r#"{{"kind":"span_end","id":"s3","duration_ns":{half}}}"#),
        r#"{"kind":"span_end","id":"s1","duration_ns":0}"#.to_string(),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let text = trace(&refs, Some(u64::MAX));
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    let s = out(&["summary", p]);
    assert!(s.contains("time         -\n"), "{s}");
    assert!(!s.contains("time         0 ns"), "{s}");
    let c = out(&["check", p]);
    assert!(c.contains("time_overflow"), "{c}");
    let m = out(&["memory", p]);
    assert_terminal_safe(&m);
    let q = json(&["query", p, "--kind", "slowest"]);
    assert!(q["result"].is_null() && q["refused"].is_array(), "{q}");
}

#[test]
fn control_characters_and_bidi_overrides_never_reach_the_terminal() {
    let evil = r"ev\u0001il\u001b[2J\u202egnp.exe";
    let long = "x".repeat(80);
    let lines = [
        format!(
            r#"{{"kind":"span_start","id":"s1","name":"{evil}","start_ns":0,"span_kind":"function","measured":true}}"#
        ),
        format!(
            r#"{{"kind":"span_start","id":"s2","parent_id":"s1","name":"{long}","start_ns":1,"span_kind":"function"}}"#
        ),
        format!(
            r#"{{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"a","bytes":64,"span_id":"s2","label":"{evil}","category":"activation"}}"#
        ),
        r#"{"kind":"span_end","id":"s2","duration_ns":5}"#.to_string(),
        r#"{"kind":"span_end","id":"s1","duration_ns":10}"#.to_string(),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let text = trace(&refs, Some(10));
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    for cmd in ["summary", "memory", "check"] {
        let s = out(&[cmd, p]);
        assert_terminal_safe(&s);
        if cmd != "check" {
            assert!(s.contains(r"ev\x01il\x1b[2J\u{202e}gnp.exe"), "{cmd}: {s}");
            // the long span name is elided in tables
            assert!(s.contains('…'), "{cmd}: {s}");
        }
    }
    // JSON keeps the full, unescaped names.
    let v = json(&["summary", p, "--json"]);
    let path = v["memory_peak"]["held"][0]["span_path"].as_str().unwrap();
    assert!(path.ends_with(&long), "{path}");
    assert!(
        path.starts_with("ev\u{1}il\u{1b}[2J\u{202e}gnp.exe/"),
        "{path}"
    );
}

#[test]
fn several_devices_get_a_peak_each_and_a_labelled_sum() {
    let [start, end] = root(100);
    let text = trace(
        &[
            &start,
            r#"{"kind":"memory","timestamp_ns":10,"action":"alloc","device":"cuda:0","storage_id":"a","bytes":1000,"span_id":"s1","category":"activation"}"#,
            r#"{"kind":"memory","timestamp_ns":20,"action":"free","device":"cuda:0","storage_id":"a","span_id":"s1"}"#,
            r#"{"kind":"memory","timestamp_ns":30,"action":"alloc","device":"cuda:1","storage_id":"b","bytes":600,"span_id":"s1","category":"activation"}"#,
            r#"{"kind":"memory","timestamp_ns":40,"action":"alloc","device":"cuda:0","storage_id":"c","bytes":700,"span_id":"s1","category":"gradient"}"#,
            &end,
        ],
        Some(100),
    );
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    let s = out(&["summary", p]);
    assert!(s.contains("memory peak per device"), "{s}");
    assert!(s.contains("cuda:0  1000 B at 10 ns"), "{s}");
    assert!(s.contains("cuda:1  600 B at 30 ns"), "{s}");
    assert!(
        s.contains("all devices together (a sum, not one device's memory): 1.27 KiB at 40 ns"),
        "{s}"
    );
    let v = json(&["summary", p, "--json"]);
    assert_eq!(v["device_peaks"][0]["device"], "cuda:0");
    assert_eq!(v["device_peaks"][0]["live_bytes"], 1000);
    assert_eq!(v["device_peaks"][1]["live_bytes"], 600);
    assert!(v["memory_peak"]["device"].is_null());
    assert_eq!(v["memory_peak"]["live_bytes"], 1300);
    // --device shows that device's own peak, not the global one filtered.
    let m = json(&["memory", p, "--json", "--device", "cuda:1"]);
    assert_eq!(m["memory_peak"]["live_bytes"], 600);
    assert_eq!(m["memory_peak"]["timestamp_ns"], 30);
}

#[test]
fn overlapping_children_are_counted_once() {
    let text = trace(
        &[
            r#"{"kind":"span_start","id":"s1","name":"run","start_ns":0,"span_kind":"function","measured":true}"#,
            r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"a","start_ns":0,"span_kind":"function"}"#,
            r#"{"kind":"span_start","id":"s3","parent_id":"s1","name":"b","start_ns":0,"span_kind":"function"}"#,
            r#"{"kind":"span_end","id":"s2","duration_ns":100}"#,
            r#"{"kind":"span_end","id":"s3","duration_ns":100}"#,
            r#"{"kind":"span_end","id":"s1","duration_ns":0}"#,
        ],
        Some(100),
    );
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    let s = out(&["summary", p]);
    assert!(s.contains("time         100 ns"), "{s}");
    assert!(s.contains("    0 ns  100 ns  run"), "{s}");
    let c = out(&["check", p]);
    assert!(c.contains("overlapping_siblings"), "{c}");
    assert!(c.contains("span_shorter_than_children"), "{c}");
}

#[test]
fn a_trace_without_its_terminal_keeps_closed_span_times() {
    let [start, end] = root(100);
    let text = trace(
        &[
            &start,
            r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"encoder","start_ns":10,"span_kind":"function"}"#,
            r#"{"kind":"span_end","id":"s2","duration_ns":60}"#,
            &end,
        ],
        None,
    );
    let (_d, p) = write("trace.jsonl", text.as_bytes());
    let p = p.to_str().unwrap();
    let s = out(&["summary", p]);
    assert!(
        s.contains("time         100 ns (from an incomplete capture)"),
        "{s}"
    );
    assert!(s.contains("60 ns   60 ns  run/encoder"), "{s}");
    assert!(!s.contains("unavailable: trace was cut short"), "{s}");
}
