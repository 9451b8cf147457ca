//! Writer: one line per event, each serialized whole before it is written, so the output never
//! holds a partial line of its own making.

use std::io::{self, Write};

use crate::event::TraceEvent;

/// Writes events as JSONL to any [`Write`]. Wrap files in a `BufWriter`; call
/// [`TraceWriter::flush`] at points a crash must not lose (the probe flushes at span ends).
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    inner: W,
    line: Vec<u8>,
    events_written: u64,
}

impl<W: Write> TraceWriter<W> {
    /// A writer over `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            line: Vec::with_capacity(256),
            events_written: 0,
        }
    }

    /// Serializes `event` and writes it as one `\n`-terminated line.
    ///
    /// # Errors
    /// Serialization errors (non-finite floats are written as `null` by serde_json, so in
    /// practice none) and I/O errors of the inner writer.
    pub fn write_event(&mut self, event: &TraceEvent) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, event).map_err(io::Error::other)?;
        self.line.push(b'\n');
        self.inner.write_all(&self.line)?;
        self.events_written += 1;
        Ok(())
    }

    /// Flushes the inner writer.
    ///
    /// # Errors
    /// I/O errors of the inner writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    /// Number of events written so far.
    pub fn events_written(&self) -> u64 {
        self.events_written
    }

    /// The inner writer (not flushed).
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// The inner writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }
}
