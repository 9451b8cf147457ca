//! `[memory]` instant events on the CPU (included by the test binaries that use it, beside `common`).

use serde_json::Value;

use crate::common::MAIN;
use crate::memory_event::mem;

/// A `[memory]` instant event on the CPU (`Device Type` 0, `Device Id` -1).
pub fn cpu_mem(ts: f64, addr: u64, bytes: i64, total_allocated: i64) -> Value {
    mem(MAIN, ts, addr, bytes, total_allocated, 0, 0, -1)
}
