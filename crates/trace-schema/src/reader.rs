//! Streaming reader: yields events with 1-based line numbers, enforcing the stream-shape rules
//! (meta first and once, nothing after terminal, supported schema) and the truncation rule.
//!
//! # Truncation
//! A final line without `\n` that does not parse is the partial line of a crash: it is dropped
//! and reported by [`TraceReader::partial_line`]. A final line without `\n` that parses is
//! accepted. A `\n`-terminated line that does not parse is an error, even the last one.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::document::{TraceBuilder, TraceDocument};
use crate::error::LoadError;
use crate::event::TraceEvent;
use crate::gate::StreamGate;
use crate::parse::parse_line;
use crate::version::SchemaVersion;

/// One event and the 1-based line it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct LineEvent {
    /// 1-based line number.
    pub line: u64,
    /// The event.
    pub event: TraceEvent,
}

/// Streaming reader over any [`BufRead`].
#[derive(Debug)]
pub struct TraceReader<R> {
    inner: R,
    buf: Vec<u8>,
    line: u64,
    gate: StreamGate,
    partial_line: Option<(u64, u64)>,
    done: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader over `inner`.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: Vec::with_capacity(512),
            line: 0,
            gate: StreamGate::default(),
            partial_line: None,
            done: false,
        }
    }

    /// The schema version, once the meta line was read.
    pub fn version(&self) -> Option<SchemaVersion> {
        self.gate.version()
    }

    /// `(line, bytes)` of the dropped partial last line, once the reader is exhausted.
    pub fn partial_line(&self) -> Option<(u64, u64)> {
        self.partial_line
    }

    /// Reads the next non-blank line into `buf`: `(line, terminated)`, or `None` at the end.
    fn read_line(&mut self) -> Result<Option<(u64, bool)>, LoadError> {
        loop {
            self.buf.clear();
            let n = self
                .inner
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| LoadError::Io {
                    path: "<stream>".into(),
                    source,
                })?;
            if n == 0 {
                if self.gate.version().is_none() {
                    return Err(LoadError::MissingMeta {
                        line: 1,
                        found: crate::load::empty_input(self.line),
                    });
                }
                return Ok(None);
            }
            self.line += 1;
            if self.line == 1 && self.buf.starts_with(crate::load::BOM) {
                self.buf.drain(..crate::load::BOM.len());
            }
            if trim_ascii(&self.buf).is_empty() {
                continue;
            }
            return Ok(Some((self.line, self.buf.last() == Some(&b'\n'))));
        }
    }

    /// Parses the line in `buf` (general path) and applies the truncation and shape rules.
    fn parse_current(
        &mut self,
        line: u64,
        terminated: bool,
    ) -> Result<Option<LineEvent>, LoadError> {
        let parsed = parse_line(trim_ascii(&self.buf), line, self.gate.version());
        let event = match parsed {
            Ok(event) => event,
            Err(_) if !terminated => {
                self.partial_line = Some((line, self.buf.len() as u64));
                if self.gate.version().is_none() {
                    return Err(LoadError::MissingMeta {
                        line,
                        found: "only a partial first line".to_string(),
                    });
                }
                return Ok(None);
            }
            Err(err) => return Err(err),
        };
        self.gate.check_event(&event, line)?;
        Ok(Some(LineEvent { line, event }))
    }

    fn next_event(&mut self) -> Result<Option<LineEvent>, LoadError> {
        match self.read_line()? {
            Some((line, terminated)) => self.parse_current(line, terminated),
            None => Ok(None),
        }
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<LineEvent, LoadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_event() {
            Ok(Some(event)) => Some(Ok(event)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// Loads a whole trace from a reader (chunks parsed in parallel, see [`crate::load`]).
///
/// # Errors
/// The first [`LoadError`] met; see the crate docs for the exact list.
pub fn load_reader<R: Read>(reader: R) -> Result<TraceDocument, LoadError> {
    crate::load::load_reader_with(reader, &crate::load::LoadOptions::default())
}

/// The sequential reference loader: [`TraceReader`] events pushed one by one into a
/// [`TraceBuilder`] (the loader must give the same document; tests compare them).
///
/// # Errors
/// As [`load_reader`].
#[doc(hidden)]
pub fn load_reader_sequential<R: Read>(reader: R) -> Result<TraceDocument, LoadError> {
    let mut events = TraceReader::new(BufReader::with_capacity(1 << 16, reader));
    let mut builder: Option<TraceBuilder> = None;
    for event in events.by_ref() {
        let LineEvent { line, event } = event?;
        let b = builder.get_or_insert_with(|| {
            TraceBuilder::new(events_version(&event).unwrap_or(crate::version::WRITE_VERSION))
        });
        b.push(line, event);
    }
    let partial = events.partial_line();
    let builder = builder.ok_or(LoadError::MissingMeta {
        line: 1,
        found: "no event".to_string(),
    })?;
    Ok(builder.finish(partial))
}

fn events_version(event: &TraceEvent) -> Option<SchemaVersion> {
    match event {
        TraceEvent::Meta(meta) => SchemaVersion::parse(&meta.schema),
        _ => None,
    }
}

/// Loads a trace file.
///
/// # Errors
/// [`LoadError::Io`] naming the path when it cannot be opened or read, else as [`load_reader`].
pub fn load_path(path: impl AsRef<Path>) -> Result<TraceDocument, LoadError> {
    crate::load::load_path_with(path, &crate::load::LoadOptions::default())
}

/// Loads a trace held in memory.
///
/// # Errors
/// As [`load_reader`].
pub fn load_str(text: &str) -> Result<TraceDocument, LoadError> {
    load_reader(text.as_bytes())
}
