//! `user_annotation` events (included by the test binaries that use it, beside `common`).

use serde_json::Value;

use crate::common::{x, MAIN};

/// A `user_annotation`.
pub fn ann(name: &str, ts: f64, dur: f64) -> Value {
    x("user_annotation", name, MAIN, ts, dur)
}
