//! Hostile input, issue 32: times in every JSON number form read exactly, processes kept
//! apart, duplicate keys named, a byte order mark skipped.

mod common;
#[path = "common/span_lookup.rs"]
mod span_lookup;

use common::*;
use serde_json::json;
use span_lookup::*;
use trace_import::ImportError;

/// A Kineto document whose events are written as raw JSON text (exponent forms survive).
fn raw_kineto(events: &[String]) -> Vec<u8> {
    format!(
        "{{\"schemaVersion\": 1, \"profile_memory\": 1, \"traceEvents\": [\n{}\n]}}",
        events.join(",\n")
    )
    .into_bytes()
}

/// Issue 32: `"ts": 1.7000000000000099e15` through an `f64` resolves 256 ns at these
/// magnitudes (Unix-epoch microseconds): the op moved 208 ns, outside its parent, and its block
/// lost its op. Read from the text, every time is exact.
#[test]
fn exponent_form_times_are_exact() {
    let events = [
        r#"{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":1.7e15,"dur":1.0158e1}"#,
        r#"{"ph":"X","cat":"cpu_op","name":"aten::empty","pid":1,"tid":1,"ts":1.7000000000000099e15,"dur":2e-1}"#,
        r#"{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":17000000000000099.5E-1,
            "args":{"Addr":4.096e3,"Bytes":6.4e1,"Total Allocated":64,"Total Reserved":0,"Device Type":0,"Device Id":-1}}"#,
        r#"{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":1700000000000010.100,
            "args":{"Addr":4096,"Bytes":-64,"Total Allocated":-0,"Total Reserved":0,"Device Type":0,"Device Id":-1}}"#,
    ]
    .map(String::from);
    let imported = trace_import::import_bytes(&raw_kineto(&events)).expect("imports");
    assert!(
        imported.report.warnings.is_empty(),
        "{:?}",
        imported.report.warnings
    );
    let doc = imported.document();
    let step = span(&doc, "ProfilerStep#1");
    let op = span(&doc, "aten::empty");
    assert_eq!(parent_name(&doc, "aten::empty"), "ProfilerStep#1");
    assert_eq!(
        op.start_ns - step.start_ns,
        9_900,
        "9.9 µs after its parent, exactly"
    );
    assert_eq!(op.duration_ns, Some(200));
    assert_eq!(step.duration_ns, Some(10_158));
    let alloc = &doc.memory[0];
    assert_eq!(alloc.timestamp_ns - step.start_ns, 9_950);
    assert_eq!(alloc.bytes, Some(64));
    assert_eq!(alloc.op_name.map(|o| doc.str(o)), Some("aten::empty"));
    assert_eq!(
        doc.str(alloc.storage.unwrap()),
        "1000.0",
        "Addr 4.096e3 is 0x1000"
    );
    // the window is the step's: it did not move
    let root = span(&doc, "profiler window");
    assert_eq!(
        (root.start_ns, root.duration_ns),
        (step.start_ns, Some(10_158))
    );
}

/// A time that no integer of nanoseconds can hold is named (event index, field, text), and the
/// rest imports.
#[test]
fn a_time_that_cannot_be_represented_is_named() {
    let events = [
        r#"{"ph":"X","cat":"cpu_op","name":"ok","pid":1,"tid":1,"ts":1,"dur":2}"#,
        r#"{"ph":"X","cat":"cpu_op","name":"far","pid":1,"tid":1,"ts":1e40,"dur":2}"#,
        r#"{"ph":"X","cat":"cpu_op","name":"odd","pid":1,"tid":1,"ts":0x10,"dur":2}"#,
    ]
    .map(String::from);
    let bytes = raw_kineto(&events[..2]);
    let imported = trace_import::import_bytes(&bytes).expect("imports");
    let w = imported.report.warnings.join("\n");
    assert!(
        w.contains("traceEvents[1]: `X` event `far`: `ts` 1e40 is out of range"),
        "{w}"
    );
    assert_eq!(imported.document().spans.len(), 2, "the root and `ok`");
    // not JSON at all: the parser names the line
    let err = trace_import::import_bytes(&raw_kineto(&events)).unwrap_err();
    assert!(matches!(err, ImportError::Json { line: 4, .. }), "{err}");
}

fn rank_mem(pid: i64, ts: f64, addr: u64, bytes: i64, total: i64) -> serde_json::Value {
    json!({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid,
           "tid": 7, "ts": ts,
           "args": {"Total Reserved": 8192, "Total Allocated": total, "Bytes": bytes,
                    "Device Id": 0, "Device Type": 1, "Addr": addr}})
}

/// Issue 32: two ranks' traces merged into one, both on `cuda:0`, each reusing the same device
/// address. One rank's free never ends the other's block: the device peaks at 4,000 B (1,000 +
/// 3,000), each process's replay matches its own counter, and no frees are "missing".
#[test]
fn two_processes_on_one_device_are_kept_apart() {
    let (imported, doc) = import(vec![
        rank_mem(1, 1.0, 0x7f00, 1000, 1000),
        rank_mem(2, 2.0, 0x7f00, 3000, 3000),
        rank_mem(1, 3.0, 0x7f00, -1000, 0),
        rank_mem(2, 4.0, 0x7f00, -3000, 0),
    ]);
    let report = &imported.report;
    let m = report.memory.as_ref().unwrap();
    assert_eq!(m.processes, ["1", "2"]);
    assert_eq!(
        (m.inferred_frees, m.repeated_frees, m.pre_existing),
        (0, 0, 0)
    );
    let figures: Vec<_> = m
        .devices
        .iter()
        .map(|d| {
            (
                d.device.as_str(),
                d.process.as_deref(),
                d.replayed_peak_bytes,
                d.total_allocated_max_bytes,
                d.constant_gap_bytes(),
            )
        })
        .collect();
    assert_eq!(
        figures,
        [
            ("cuda:0", None, 4000, None, None),
            ("cuda:0", Some("1"), 1000, Some(1000), Some(0)),
            ("cuda:0", Some("2"), 3000, Some(3000), Some(0)),
        ]
    );
    let w = report.warnings.join("\n");
    assert!(!w.contains("missing"), "{w}");
    assert!(
        w.contains("cuda:0 is used by 2 processes (pids 1, 2)"),
        "{w}"
    );
    let ids: Vec<&str> = doc
        .memory
        .iter()
        .map(|e| doc.str(e.storage.unwrap()))
        .collect();
    assert_eq!(ids, ["p1.7f00.0", "p2.7f00.0", "p1.7f00.0", "p2.7f00.0"]);
    assert!(
        doc.device_memory.is_empty(),
        "a per-process counter is not the device's"
    );
    let logical = trace_memory::analyze_memory(&doc).logical.unwrap();
    assert_eq!(logical.peak.unwrap().live_bytes, 4000);
    // one process: storage ids and samples as before
    let (one, doc) = import(vec![
        rank_mem(1, 1.0, 0x7f00, 1000, 1000),
        rank_mem(1, 3.0, 0x7f00, -1000, 0),
    ]);
    let m = one.report.memory.unwrap();
    assert!(m.processes.is_empty() && m.devices[0].process.is_none());
    assert_eq!(doc.str(doc.memory[0].storage.unwrap()), "7f00.0");
    assert_eq!(doc.device_memory.len(), 2);
}

/// Issue 32: `traceEvents` twice — other readers keep the last array, this one read both —
/// is an error naming the key and the line of the second.
#[test]
fn a_key_that_changes_the_meaning_twice_is_an_error() {
    let text = b"{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1}],\n\"traceEvents\": []}";
    let err = trace_import::import_bytes(text).unwrap_err();
    assert!(
        matches!(&err, ImportError::DuplicateKey { line: 2, key, .. } if key == "traceEvents"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("the key `traceEvents` appears twice"),
        "{err}"
    );
    let text = b"{\"baseTimeNanoseconds\": 1, \"traceEvents\": [], \"baseTimeNanoseconds\": 2}";
    let err = trace_import::import_bytes(text).unwrap_err();
    assert!(matches!(&err, ImportError::DuplicateKey { key, .. } if key == "baseTimeNanoseconds"));
}

/// A UTF-8 byte order mark before the document is skipped.
#[test]
fn a_byte_order_mark_is_skipped() {
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(kineto(vec![op("aten::empty", 1.0, 2.0)]));
    assert_eq!(
        trace_import::content_kind(&bytes),
        trace_import::ContentKind::ChromeTrace
    );
    let doc = trace_import::import_bytes(&bytes)
        .expect("imports")
        .document();
    assert_eq!(span(&doc, "aten::empty").duration_ns, Some(2000));
}
