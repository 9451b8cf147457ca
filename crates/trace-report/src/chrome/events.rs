//! The events of the export as they are written: times in microseconds, the event record, the
//! output that counts what it writes, and the options and errors of the export.

use std::io::Write;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::window::Window;
use crate::FindingText;

/// The `otherData.format` of this export.
pub const FORMAT: &str = "candle-graph/chrome/1";

/// pid of the host process (spans, operations, instants).
pub const HOST_PID: u32 = 1;

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ChromeOptions {
    /// Keep only the spans whose `/`-joined path equals this, with their subtrees, and the
    /// counters and instants inside their time range.
    pub span_path: Option<String>,
    /// Keep only what intersects this window (relative to the time origin).
    pub window: Option<Window>,
    /// Findings as the caller states them (with advice), exported as instant events.
    pub findings: Vec<FindingText>,
    /// Name and version of the exporting tool, for `otherData.tool`.
    pub tool: (String, String),
}

/// Why the export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChromeError {
    /// `--span` names no span.
    #[error("no span has the path `{path}`{hint}")]
    UnknownSpanPath {
        /// The path asked for.
        path: String,
        /// Candidate paths.
        hint: String,
    },
    /// Writing failed.
    #[error("cannot write the export: {0}")]
    Io(#[from] std::io::Error),
    /// Serializing failed (not expected for these types).
    #[error("cannot serialize the export: {0}")]
    Json(#[from] serde_json::Error),
}

/// Counts of what was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExportStats {
    /// Every event in `traceEvents`.
    pub events: u64,
    /// Spans as nesting `X`/`B` slices.
    pub nested_spans: u64,
    /// Spans as async `b`/`e` slices.
    pub async_spans: u64,
    /// Operations (either form).
    pub ops: u64,
    /// Counter events.
    pub counters: u64,
    /// Instant events.
    pub instants: u64,
    /// Sampled call stacks (one `X` slice each on its thread's samples track).
    pub samples: u64,
}

/// Microseconds with the nanoseconds as a fraction, written as a JSON number.
#[derive(Debug, Clone, Copy)]
pub(super) struct Us(pub(super) u64);

impl Us {
    /// The exact decimal: `12.345`, `12.3`, `12`.
    pub(super) fn decimal(self) -> String {
        let (us, ns) = (self.0 / 1000, self.0 % 1000);
        if ns == 0 {
            return us.to_string();
        }
        let frac = format!("{ns:03}");
        format!("{us}.{}", frac.trim_end_matches('0'))
    }
}

impl Serialize for Us {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Written as an exact decimal token (a float would lose nanoseconds past 2^42 µs).
        serde_json::value::RawValue::from_string(self.decimal())
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

/// A map of `(key, value)` pairs in the given order.
pub(super) struct Pairs<'a, V: Serialize>(pub(super) &'a [(&'a str, V)]);

impl<V: Serialize> Serialize for Pairs<'_, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One trace event; absent fields are omitted.
#[derive(Serialize)]
pub(super) struct Ev<'a, A: Serialize> {
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cat: Option<&'static str>,
    pub(super) ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ts: Option<Us>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dur: Option<Us>,
    pub(super) pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) args: Option<A>,
}

impl<'a, A: Serialize> Ev<'a, A> {
    pub(super) fn new(name: &'a str, ph: &'static str, pid: u32) -> Self {
        Self {
            name,
            cat: None,
            ph,
            ts: None,
            dur: None,
            pid,
            tid: None,
            id: None,
            s: None,
            args: None,
        }
    }
}

/// Streams events as the elements of the `traceEvents` array.
pub(super) struct Out<W: Write> {
    pub(super) w: W,
    pub(super) first: bool,
    pub(super) stats: ExportStats,
}

impl<W: Write> Out<W> {
    pub(super) fn event<A: Serialize>(&mut self, ev: &Ev<'_, A>) -> Result<(), ChromeError> {
        self.w.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        serde_json::to_writer(&mut self.w, ev)?;
        self.stats.events += 1;
        Ok(())
    }
}

/// The absolute time range kept, ns since session start, both ends inclusive.
#[derive(Debug, Clone, Copy)]
pub(super) struct Range {
    pub(super) lo: u64,
    pub(super) hi: u64,
}

impl Range {
    pub(super) fn holds(self, t: u64) -> bool {
        t >= self.lo && t <= self.hi
    }

    pub(super) fn meets(self, start: u64, end: Option<u64>) -> bool {
        start <= self.hi && end.is_none_or(|e| e >= self.lo)
    }
}

pub(super) fn device_pid(k: usize) -> u32 {
    HOST_PID + 1 + k as u32
}
