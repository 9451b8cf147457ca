//! The result of an import: the events and the account of how they were made.

use std::io::{self, Write};

use trace_schema::{TraceDocument, TraceEvent, TraceWriter};

use crate::report::ImportReport;

/// An imported trace: candle-graph events (meta first; a terminal last unless the input was
/// cut short) and the account of the import.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The events, in the order a trace file holds them.
    pub events: Vec<TraceEvent>,
    /// What was read, made and left out.
    pub report: ImportReport,
}

impl Imported {
    /// The loaded document, as `trace_schema` would load the written events (a cut-short input
    /// has no terminal: the document is truncated). O(n).
    pub fn document(&self) -> TraceDocument {
        let mut builder = trace_schema::TraceBuilder::new(trace_schema::WRITE_VERSION);
        for (i, event) in self.events.iter().enumerate() {
            builder.push(i as u64 + 1, event.clone());
        }
        builder.finish(None)
    }

    /// Writes the events as a candle-graph JSONL trace.
    ///
    /// # Errors
    /// I/O errors of `out`.
    pub fn write_jsonl<W: Write>(&self, out: W) -> io::Result<W> {
        let mut writer = TraceWriter::new(out);
        for event in &self.events {
            writer.write_event(event)?;
        }
        writer.flush()?;
        Ok(writer.into_inner())
    }
}
