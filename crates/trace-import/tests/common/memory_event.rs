//! `[memory]` instant events (included by the test binaries that use it, beside `common`).

use serde_json::{json, Value};

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
