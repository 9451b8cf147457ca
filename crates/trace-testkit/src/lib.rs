//! # trace-testkit
//!
//! Builders of trace events for tests, at the version the writer writes
//! ([`trace_wire::WRITE_VERSION`]): one set shared by every analysis crate's tests instead of a
//! hand-written builder per crate. Dev-only (`publish = false`).
//!
//! Events with many optional fields are builders ([`Memory`], [`SpanStart`], [`Op`], [`Meta`])
//! ending in `.ev()`; the rest are functions returning a [`TraceEvent`]. Every default is
//! stated on its constructor.
//!
//! ```
//! use trace_testkit::*;
//! let doc = document([
//!     alloc(10, "st1", 64).span("s1").ev(),
//!     free(20, "st1").ev(),
//! ]);
//! assert_eq!(doc.memory_len(), 2);
//! assert_eq!(doc.version, trace_wire::WRITE_VERSION);
//! ```

#![deny(missing_docs)]

mod events;
mod scenarios;

pub use events::*;
pub use scenarios::*;

use trace_schema::TraceDocument;
use trace_wire::{TraceEvent, TraceWriter};

/// The timestamp of the terminal [`trace`] appends, ns.
pub const TERMINAL_NS: u64 = 1_000_000;

/// A whole trace: [`meta`]`()` with logical-memory coverage `logical_memory` (absent: no
/// contract), then `events`, then a complete [`terminal`] at [`TERMINAL_NS`].
pub fn trace_with(
    logical_memory: Option<trace_wire::CoverageLevel>,
    events: impl IntoIterator<Item = TraceEvent>,
) -> Vec<TraceEvent> {
    let mut all = vec![meta().logical_memory(logical_memory).ev()];
    all.extend(events);
    all.push(terminal(TERMINAL_NS));
    all
}

/// [`trace_with`] without a capture contract.
pub fn trace(events: impl IntoIterator<Item = TraceEvent>) -> Vec<TraceEvent> {
    trace_with(None, events)
}

/// The document of [`trace`]`(events)`.
pub fn document(events: impl IntoIterator<Item = TraceEvent>) -> TraceDocument {
    TraceDocument::from_events(trace(events))
}

/// The document of [`trace_with`]`(logical_memory, events)`.
pub fn document_with(
    logical_memory: Option<trace_wire::CoverageLevel>,
    events: impl IntoIterator<Item = TraceEvent>,
) -> TraceDocument {
    TraceDocument::from_events(trace_with(logical_memory, events))
}

/// `events` as JSONL, one line each, as the probe's writer writes them.
pub fn jsonl<'a>(events: impl IntoIterator<Item = &'a TraceEvent>) -> String {
    let mut w = TraceWriter::new(Vec::new());
    for e in events {
        w.write_event(e).expect("writing to a Vec cannot fail");
    }
    String::from_utf8(w.into_inner()).expect("serde_json writes UTF-8")
}
