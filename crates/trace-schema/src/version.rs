//! Schema versions this crate reads and writes.

use std::fmt;

/// A supported `candle-graph/trace/N` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum SchemaVersion {
    /// `candle-graph/trace/6`: no terminal, no storage ids, legacy byte field names.
    V6,
    /// `candle-graph/trace/7`: capture contract, device intervals, terminal.
    V7,
    /// `candle-graph/trace/8`: the current meta shape.
    V8,
    /// `candle-graph/trace/9`: gradient contracts, tensor labels.
    V9,
    /// `candle-graph/trace/10`: tensor_stats (the original tool's latest).
    V10,
    /// `candle-graph/trace/11`: storage capture, dropped-event counts.
    V11,
    /// `candle-graph/trace/12`: sampled call stacks (`frame`, `stack`, `sample`, `sampler`)
    /// and the `sampled` coverage level.
    V12,
    /// `candle-graph/trace/13`: allocation sites (`site`, `alloc_sites`; `site` and `thread`
    /// on memory events); this project's write version.
    V13,
}

/// The version this crate writes.
pub const WRITE_VERSION: SchemaVersion = SchemaVersion::V13;

/// Every supported schema string, newest first.
pub const SUPPORTED_SCHEMAS: &[&str] = &[
    "candle-graph/trace/13",
    "candle-graph/trace/12",
    "candle-graph/trace/11",
    "candle-graph/trace/10",
    "candle-graph/trace/9",
    "candle-graph/trace/8",
    "candle-graph/trace/7",
    "candle-graph/trace/6",
];

impl SchemaVersion {
    /// Parses a `schema` string; `None` when unsupported.
    pub fn parse(schema: &str) -> Option<Self> {
        Some(match schema {
            "candle-graph/trace/6" => Self::V6,
            "candle-graph/trace/7" => Self::V7,
            "candle-graph/trace/8" => Self::V8,
            "candle-graph/trace/9" => Self::V9,
            "candle-graph/trace/10" => Self::V10,
            "candle-graph/trace/11" => Self::V11,
            "candle-graph/trace/12" => Self::V12,
            "candle-graph/trace/13" => Self::V13,
            _ => return None,
        })
    }

    /// The `schema` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V6 => "candle-graph/trace/6",
            Self::V7 => "candle-graph/trace/7",
            Self::V8 => "candle-graph/trace/8",
            Self::V9 => "candle-graph/trace/9",
            Self::V10 => "candle-graph/trace/10",
            Self::V11 => "candle-graph/trace/11",
            Self::V12 => "candle-graph/trace/12",
            Self::V13 => "candle-graph/trace/13",
        }
    }

    /// Whether this version ends with a `terminal` event (trace/7 and later).
    pub fn has_terminal(self) -> bool {
        self >= Self::V7
    }

    /// Whether `memory` events carry a storage identity (`storage_id`).
    pub fn has_storage_id(self) -> bool {
        self >= Self::V7
    }

    /// Whether an event kind exists in this version.
    pub fn allows_kind(self, kind: &str) -> bool {
        match kind {
            "tensor_stats" => self >= Self::V10,
            "dropped_events" => self >= Self::V11,
            "frame" | "stack" | "sample" | "sampler" => self >= Self::V12,
            "site" | "alloc_sites" => self >= Self::V13,
            "device_interval" | "terminal" => self >= Self::V7,
            _ => true,
        }
    }
}

impl fmt::Display for SchemaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
