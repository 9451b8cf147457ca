//! Hand-written Kineto events for the rule tests: each helper writes one event object as
//! PyTorch 2.x's `export_chrome_trace` does (times in microseconds).

use serde_json::{json, Value};
use trace_import::Imported;
use trace_schema::TraceDocument;

/// Main thread id of the fixtures.
pub const MAIN: i64 = 100;

/// A complete (`X`) event on the host.
pub fn x(cat: &str, name: &str, tid: i64, ts: f64, dur: f64) -> Value {
    json!({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
           "args": {"External id": 0, "Record function id": 0}})
}

/// A `cpu_op`.
pub fn op(name: &str, ts: f64, dur: f64) -> Value {
    x("cpu_op", name, MAIN, ts, dur)
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
