//! Hand-written Kineto events for the rule tests: each helper writes one event object as
//! PyTorch 2.x's `export_chrome_trace` does (times in microseconds).

#![allow(dead_code)]

use serde_json::{json, Value};
use trace_import::Imported;
use trace_schema::{SpanRecord, TraceDocument};

/// Main thread id of the fixtures.
pub const MAIN: i64 = 100;
/// Autograd engine thread id.
pub const AUTOGRAD: i64 = 200;

/// A complete (`X`) event on the host.
pub fn x(cat: &str, name: &str, tid: i64, ts: f64, dur: f64) -> Value {
    json!({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
           "args": {"External id": 0, "Record function id": 0}})
}

/// A `cpu_op`.
pub fn op(name: &str, ts: f64, dur: f64) -> Value {
    x("cpu_op", name, MAIN, ts, dur)
}

/// A `user_annotation`.
pub fn ann(name: &str, ts: f64, dur: f64) -> Value {
    x("user_annotation", name, MAIN, ts, dur)
}

/// A `[memory]` instant event on the CPU (`Device Type` 0, `Device Id` -1).
pub fn cpu_mem(ts: f64, addr: u64, bytes: i64, total_allocated: i64) -> Value {
    mem(MAIN, ts, addr, bytes, total_allocated, 0, 0, -1)
}

/// A `[memory]` instant event.
#[allow(clippy::too_many_arguments)]
pub fn mem(
    tid: i64,
    ts: f64,
    addr: u64,
    bytes: i64,
    total_allocated: i64,
    total_reserved: i64,
    device_type: i64,
    device_id: i64,
) -> Value {
    json!({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
           "tid": tid, "ts": ts,
           "args": {"Total Reserved": total_reserved, "Total Allocated": total_allocated,
                    "Bytes": bytes, "Device Id": device_id, "Device Type": device_type,
                    "Addr": addr}})
}

/// `thread_name` metadata.
pub fn thread_name(tid: i64, name: &str) -> Value {
    json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "ts": 0,
           "args": {"name": name}})
}

/// A Kineto document around `events`.
pub fn kineto(events: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec_pretty(&json!({
        "schemaVersion": 1,
        "deviceProperties": [],
        "profile_memory": 1,
        "record_shapes": 1,
        "traceEvents": events,
        "traceName": "/home/someone/fixture.json",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1_700_000_000_000_000_000u64
    }))
    .unwrap()
}

/// Imports `events` (panics with the error).
pub fn import(events: Vec<Value>) -> (Imported, TraceDocument) {
    let imported = trace_import::import_bytes(&kineto(events)).expect("imports");
    let doc = imported.document();
    (imported, doc)
}

/// The span named `name` (the first one).
pub fn span<'a>(doc: &'a TraceDocument, name: &str) -> &'a SpanRecord {
    doc.spans
        .iter()
        .find(|s| doc.str(s.name) == name)
        .unwrap_or_else(|| panic!("no span {name}"))
}

/// Name of a span's parent.
pub fn parent_name<'a>(doc: &'a TraceDocument, name: &str) -> &'a str {
    let s = span(doc, name);
    doc.str(doc.span(s.parent.expect("has a parent")).unwrap().name)
}

/// Names of the spans of `step`, in file order.
pub fn with_step(doc: &TraceDocument, step: trace_schema::Pass) -> Vec<&str> {
    doc.spans
        .iter()
        .filter(|s| s.pass == Some(step))
        .map(|s| doc.str(s.name))
        .collect()
}
