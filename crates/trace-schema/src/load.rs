//! The loader: line-aligned chunks parsed in parallel (the `chunk` module, on the rayon pool),
//! applied in file order by one consumer that enforces the stream-shape rules (meta first and
//! once, nothing after terminal, supported schema) and the truncation rule exactly as the
//! sequential [`crate::TraceReader`] does, and builds the document.
//!
//! At most a few chunks are in flight, so the loader's own memory does not grow with the file;
//! with [`LoadOptions::spill_memory`] the document does not hold its memory events either.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc;

use crate::chunk::{parse_chunk, Item, ParsedChunk};
use crate::document::{TraceBuilder, TraceDocument};
use crate::error::LoadError;
use crate::event::TraceEvent;
use crate::gate::StreamGate;
use crate::version::SchemaVersion;

/// Bytes per chunk (a chunk grows to hold a longer line).
pub const CHUNK_BYTES: usize = 1 << 20;

/// The longest line the loader reads (64 MiB): the format's lines are events of a few hundred
/// bytes (a stack or site table line of 10^5 frames is a few MB), so input without a line break
/// for this long is not a trace, and is refused before it fills memory.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// How to load a trace.
#[derive(Clone, Copy)]
pub struct LoadOptions<'a> {
    /// Keep memory events in a compact log (in a buffer, then an unnamed temporary file) instead
    /// of `doc.memory`, so the document's resident size does not grow with them; read them with
    /// [`TraceDocument::for_each_memory`].
    pub spill_memory: bool,
    /// Reject bytes that are not UTF-8 ([`LoadError::NotUtf8`], which takes precedence over any
    /// other error in the file), except in a final line without `\n`.
    pub require_utf8: bool,
    /// Called with the bytes read so far, after each chunk.
    pub progress: Option<&'a (dyn Fn(u64) + Sync)>,
    /// Bytes per chunk.
    pub chunk_bytes: usize,
    /// Parse chunks on the rayon pool (false: on the calling thread).
    pub parallel: bool,
}

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        Self {
            spill_memory: false,
            require_utf8: false,
            progress: None,
            chunk_bytes: CHUNK_BYTES,
            parallel: true,
        }
    }
}

impl std::fmt::Debug for LoadOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadOptions")
            .field("spill_memory", &self.spill_memory)
            .field("require_utf8", &self.require_utf8)
            .field("progress", &self.progress.is_some())
            .field("chunk_bytes", &self.chunk_bytes)
            .field("parallel", &self.parallel)
            .finish()
    }
}

fn io(source: std::io::Error) -> LoadError {
    LoadError::Io {
        path: "<stream>".into(),
        source,
    }
}

/// Reads the next chunk of whole lines: `(bytes, last)`; `last` when the input ended.
///
/// `offset` is the byte offset of the chunk's start (of `carry`, the unfinished line the last
/// chunk left). A line longer than [`MAX_LINE_BYTES`] is [`LoadError::LineTooLong`].
fn read_chunk<R: Read>(
    reader: &mut R,
    carry: &mut Vec<u8>,
    size: usize,
    offset: u64,
) -> Result<(Vec<u8>, bool), LoadError> {
    let mut buf = std::mem::take(carry);
    let mut target = size.max(buf.len() + 1);
    loop {
        let old = buf.len();
        buf.resize(target, 0);
        let mut filled = old;
        let mut eof = false;
        while filled < buf.len() {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
        buf.truncate(filled);
        if eof {
            return Ok((buf, true));
        }
        if let Some(nl) = memchr::memrchr(b'\n', &buf[old..]) {
            let cut = old + nl + 1;
            carry.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
            return Ok((buf, false));
        }
        if buf.len() >= MAX_LINE_BYTES {
            // No line break in the whole buffer (the carry has none either): one line.
            return Err(LoadError::LineTooLong {
                offset,
                limit: MAX_LINE_BYTES as u64,
            });
        }
        // A line longer than the chunk: grow, up to the limit.
        target = (buf.len() * 2).min(MAX_LINE_BYTES);
    }
}

/// A chunk in the pipeline.
enum Pending {
    Ready(Box<ParsedChunk>),
    Spawned(mpsc::Receiver<ParsedChunk>),
}

/// Applies parsed chunks in file order (the rules of [`crate::TraceReader`]).
struct Consumer {
    builder: Option<TraceBuilder>,
    spill: bool,
    gate: StreamGate,
    line_base: u64,
    byte_base: u64,
    partial: Option<(u64, u64)>,
}

impl Consumer {
    fn consume(&mut self, chunk: &ParsedChunk) -> Result<(), LoadError> {
        if let Some((offset, line)) = chunk.utf8_error {
            return Err(LoadError::NotUtf8 {
                line: self.line_base + line as u64 + 1,
                offset: self.byte_base + offset,
            });
        }
        if let Some(b) = self.builder.as_mut() {
            b.begin_chunk(chunk);
        }
        for (rel, item) in &chunk.items {
            let line = self.line_base + *rel as u64 + 1;
            self.check_shape(item, line)?;
            let b = match self.builder.as_mut() {
                Some(b) => b,
                None => {
                    let version = match item {
                        Item::Event(e) => match &**e {
                            TraceEvent::Meta(m) => SchemaVersion::parse(&m.schema),
                            _ => None,
                        },
                        _ => None,
                    }
                    .unwrap_or(crate::version::WRITE_VERSION);
                    let mut b = if self.spill {
                        TraceBuilder::spilled(version)
                    } else {
                        TraceBuilder::new(version)
                    };
                    b.begin_chunk(chunk);
                    self.builder.insert(b)
                }
            };
            b.push_item(line, item, chunk);
        }
        if let Some(e) = &chunk.error {
            return Err(clone_error(e).shifted(self.line_base + 1));
        }
        if let Some((rel, bytes)) = chunk.partial {
            let line = self.line_base + rel as u64 + 1;
            if self.gate.version().is_none() {
                return Err(LoadError::MissingMeta {
                    line,
                    found: "only a partial first line".to_string(),
                });
            }
            self.partial = Some((line, bytes));
        }
        self.line_base += chunk.lines;
        self.byte_base += chunk.bytes;
        Ok(())
    }

    fn check_shape(&mut self, item: &Item, line: u64) -> Result<(), LoadError> {
        let meta = match item {
            Item::Event(e) => match &**e {
                TraceEvent::Meta(m) => Some(m),
                _ => None,
            },
            _ => None,
        };
        self.gate.check(item.kind_name(), meta, line)
    }
}

/// Parse errors are reported once; this copies one out of a chunk (no I/O variant there).
fn clone_error(e: &LoadError) -> LoadError {
    match e {
        LoadError::Io { path, source } => LoadError::Io {
            path: path.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        LoadError::Malformed { line, message } => LoadError::Malformed {
            line: *line,
            message: message.clone(),
        },
        LoadError::LineTooLong { offset, limit } => LoadError::LineTooLong {
            offset: *offset,
            limit: *limit,
        },
        LoadError::UnknownKind { line, kind } => LoadError::UnknownKind {
            line: *line,
            kind: kind.clone(),
        },
        LoadError::Field {
            line,
            kind,
            field,
            message,
        } => LoadError::Field {
            line: *line,
            kind: kind.clone(),
            field: field.clone(),
            message: message.clone(),
        },
        LoadError::MissingMeta { line, found } => LoadError::MissingMeta {
            line: *line,
            found: found.clone(),
        },
        LoadError::DuplicateMeta { line, first_line } => LoadError::DuplicateMeta {
            line: *line,
            first_line: *first_line,
        },
        LoadError::EventAfterTerminal {
            line,
            kind,
            terminal_line,
        } => LoadError::EventAfterTerminal {
            line: *line,
            kind: kind.clone(),
            terminal_line: *terminal_line,
        },
        LoadError::NotUtf8 { line, offset } => LoadError::NotUtf8 {
            line: *line,
            offset: *offset,
        },
        LoadError::UnsupportedSchema {
            line,
            schema,
            detail,
        } => LoadError::UnsupportedSchema {
            line: *line,
            schema: schema.clone(),
            detail: detail.clone(),
        },
    }
}

/// Loads a whole trace from a reader with `options`.
///
/// # Errors
/// The first [`LoadError`] in file order (a [`LoadError::NotUtf8`] anywhere first, when asked
/// for); see the crate docs for the list.
pub fn load_reader_with<R: Read>(
    mut reader: R,
    options: &LoadOptions<'_>,
) -> Result<TraceDocument, LoadError> {
    // Never block a pool thread on another pool job: inside the pool, parse inline.
    let parallel = options.parallel && rayon::current_thread_index().is_none();
    let depth = 2 * rayon::current_num_threads() + 1;
    let utf8 = options.require_utf8;
    let mut consumer = Consumer {
        builder: None,
        spill: options.spill_memory,
        gate: StreamGate::default(),
        line_base: 0,
        byte_base: 0,
        partial: None,
    };
    let mut carry = Vec::new();
    let mut known: Option<SchemaVersion> = None;
    let mut read_bytes = 0u64;
    let mut eof = false;
    let mut inflight: VecDeque<Pending> = VecDeque::new();
    let mut failure: Option<LoadError> = None;
    loop {
        while !eof && failure.is_none() && inflight.len() < depth.max(1) {
            let (buf, last) = read_chunk(
                &mut reader,
                &mut carry,
                options.chunk_bytes.max(1),
                read_bytes,
            )?;
            eof = last;
            read_bytes += buf.len() as u64;
            if let Some(p) = options.progress {
                p(read_bytes);
            }
            if buf.is_empty() {
                break;
            }
            match known {
                // Until the meta line is read, chunks are parsed here: later ones need its
                // version.
                None => {
                    let first = read_bytes == buf.len() as u64;
                    let text = match buf.strip_prefix(BOM) {
                        // A UTF-8 byte order mark first: skipped (its bytes still count in
                        // offsets).
                        Some(rest) if first => {
                            consumer.byte_base += BOM.len() as u64;
                            rest
                        }
                        _ => &buf[..],
                    };
                    let chunk = parse_chunk(text, None, last, utf8);
                    if first && (chunk.error.is_some() || chunk.partial.is_some()) {
                        if let Some(e) = cr_only_line_endings(text, &chunk) {
                            return Err(e);
                        }
                    }
                    known = chunk.version;
                    inflight.push_back(Pending::Ready(Box::new(chunk)));
                }
                Some(v) if parallel => {
                    let (tx, rx) = mpsc::sync_channel(1);
                    rayon::spawn(move || {
                        let _ = tx.send(parse_chunk(&buf, Some(v), last, utf8));
                    });
                    inflight.push_back(Pending::Spawned(rx));
                }
                Some(v) => inflight.push_back(Pending::Ready(Box::new(parse_chunk(
                    &buf,
                    Some(v),
                    last,
                    utf8,
                )))),
            }
        }
        let Some(next) = inflight.pop_front() else {
            break;
        };
        let chunk = match next {
            Pending::Ready(c) => *c,
            Pending::Spawned(rx) => rx.recv().expect("a chunk parser panicked"),
        };
        if let Some(err) = &failure {
            // Drain what is in flight; a byte that is not UTF-8 anywhere takes precedence.
            if let (Some((offset, line)), false) =
                (chunk.utf8_error, matches!(err, LoadError::NotUtf8 { .. }))
            {
                failure = Some(LoadError::NotUtf8 {
                    line: consumer.line_base + line as u64 + 1,
                    offset: consumer.byte_base + offset,
                });
            }
        } else if let Err(e) = consumer.consume(&chunk) {
            failure = Some(e);
        } else {
            continue;
        }
        consumer.line_base += chunk.lines;
        consumer.byte_base += chunk.bytes;
    }
    if let Some(err) = failure {
        if utf8 && !matches!(err, LoadError::NotUtf8 { .. }) {
            if let Some(e) = scan_utf8(&mut reader, &mut carry, &consumer, options)? {
                return Err(e);
            }
        }
        return Err(err);
    }
    if consumer.gate.version().is_none() {
        return Err(LoadError::MissingMeta {
            line: 1,
            found: empty_input(consumer.line_base),
        });
    }
    let builder = consumer.builder.take().ok_or(LoadError::MissingMeta {
        line: 1,
        found: "no event".to_string(),
    })?;
    builder.finish_io(consumer.partial).map_err(io)
}

/// The UTF-8 byte order mark some editors put first; a trace may start with one.
pub(crate) const BOM: &[u8] = b"\xef\xbb\xbf";

/// What an input without an event holds, for [`LoadError::MissingMeta`] on line 1 (lines are
/// 1-based even in an empty file).
pub(crate) fn empty_input(lines: u64) -> String {
    if lines == 0 {
        "an empty file".to_string()
    } else {
        format!("only blank lines ({lines})")
    }
}

/// When the first line of the input fails to parse and holds a carriage return followed by
/// more text, its lines end in CR only (classic Mac OS): an error that says so, instead of "a
/// partial first line".
fn cr_only_line_endings(text: &[u8], chunk: &ParsedChunk) -> Option<LoadError> {
    let failed_line = match (&chunk.error, chunk.partial) {
        (Some(e), _) => e.line(),
        (None, Some((line, _))) => u64::from(line),
        (None, None) => return None,
    };
    if failed_line != 0 {
        return None;
    }
    let first = &text[..memchr::memchr(b'\n', text).unwrap_or(text.len())];
    let first = crate::chunk::trim_ascii(first);
    let cr = memchr::memchr(b'\r', first)?;
    let crs = memchr::memchr_iter(b'\r', first).count() + 1;
    (cr + 1 < first.len()).then(|| LoadError::Malformed {
        line: 1,
        message: format!(
            "lines end in a carriage return only (CR, classic Mac OS line endings: {crs} lines read as one); a trace is JSON Lines with LF or CRLF line endings (convert with `tr '\\r' '\\n'`)"
        ),
    })
}

/// After an error: the first byte that is not UTF-8 in the rest of the input.
fn scan_utf8<R: Read>(
    reader: &mut R,
    carry: &mut Vec<u8>,
    consumer: &Consumer,
    options: &LoadOptions<'_>,
) -> Result<Option<LoadError>, LoadError> {
    let (mut line_base, mut byte_base) = (consumer.line_base, consumer.byte_base);
    loop {
        let (buf, last) = match read_chunk(reader, carry, options.chunk_bytes.max(1), byte_base) {
            Ok(read) => read,
            // Input without an end of line: the first error stands, the scan stops.
            Err(LoadError::LineTooLong { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Err(e) = std::str::from_utf8(&buf) {
            let at = e.valid_up_to();
            if !last || buf[at..].contains(&b'\n') {
                let line = memchr::memchr_iter(b'\n', &buf[..at]).count() as u64;
                return Ok(Some(LoadError::NotUtf8 {
                    line: line_base + line + 1,
                    offset: byte_base + at as u64,
                }));
            }
        }
        if last {
            return Ok(None);
        }
        line_base += memchr::memchr_iter(b'\n', &buf).count() as u64;
        byte_base += buf.len() as u64;
    }
}

/// Loads a trace file with `options`.
///
/// # Errors
/// [`LoadError::Io`] naming the path when it cannot be opened or read, else as
/// [`load_reader_with`].
pub fn load_path_with(
    path: impl AsRef<Path>,
    options: &LoadOptions<'_>,
) -> Result<TraceDocument, LoadError> {
    let path = path.as_ref();
    let name = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(name)?;
    load_reader_with(file, options).map_err(|err| match err {
        LoadError::Io { source, .. } => name(source),
        other => other,
    })
}
