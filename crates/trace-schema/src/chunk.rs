//! Parsing one chunk of whole lines, on any thread: the fast path ([`crate::fast`]) for the bulk
//! kinds, the general path ([`crate::parse`]) for everything else, strings deduplicated in a
//! chunk-local table so that the sequential consumer interns each distinct string once per
//! chunk. Line numbers and byte offsets are relative to the chunk; the consumer adds its base.

use std::borrow::Cow;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::error::LoadError;
use crate::event::*;
use crate::fast::{parse_fast, Fast};
use crate::parse::parse_line;
use crate::version::SchemaVersion;

/// A string of one chunk's [`LocalStrings`].
pub(crate) type LocalId = u32;

/// Deduplicated strings of one chunk.
#[derive(Default)]
pub(crate) struct LocalStrings {
    arena: String,
    ends: Vec<u32>,
    table: HashTable<LocalId>,
    hasher: DefaultHashBuilder,
}

impl LocalStrings {
    fn span(&self, id: LocalId) -> (usize, usize) {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        (start, self.ends[i] as usize)
    }

    /// The string of `id`.
    pub fn get(&self, id: LocalId) -> &str {
        let (a, b) = self.span(id);
        &self.arena[a..b]
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    fn intern(&mut self, s: &str) -> LocalId {
        let hash = self.hasher.hash_one(s);
        let (arena, ends) = (&self.arena, &self.ends);
        let eq = |&id: &LocalId| {
            let i = id as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] as usize };
            &arena[start..ends[i] as usize] == s
        };
        if let Some(&id) = self.table.find(hash, eq) {
            return id;
        }
        let id = self.ends.len() as LocalId;
        self.arena.push_str(s);
        self.ends.push(self.arena.len() as u32);
        let (arena, ends, hasher) = (&self.arena, &self.ends, &self.hasher);
        self.table.insert_unique(hash, id, |&id| {
            let i = id as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] as usize };
            hasher.hash_one(&arena[start..ends[i] as usize])
        });
        id
    }
}

/// A range of [`ParsedChunk::dims`] (a shape) or [`ParsedChunk::ids`] (op inputs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Range {
    pub start: u32,
    pub len: u32,
}

/// A `memory` event with chunk-local strings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalMemory {
    pub timestamp_ns: u64,
    pub bytes: Option<u64>,
    pub device: LocalId,
    pub storage: Option<LocalId>,
    pub tensor: Option<LocalId>,
    pub span: Option<LocalId>,
    pub op_name: Option<LocalId>,
    pub shape: Option<Range>,
    pub dtype: Option<LocalId>,
    pub label: Option<LocalId>,
    pub action: MemoryAction,
    pub category: MemoryCategory,
    pub category_source: Option<CategorySource>,
    pub source: Option<MemorySource>,
    pub pre_existing: bool,
    /// trace/13: the allocation site id (resolved at the end of the load) and thread.
    pub site: Option<u32>,
    pub thread: Option<u64>,
}

/// An `op` event with chunk-local strings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalOp {
    pub span: LocalId,
    pub op_name: LocalId,
    pub inputs: Range,
    pub output: Option<LocalId>,
    pub shape: Range,
    pub dtype: LocalId,
    pub device: LocalId,
    pub duration_ns: u64,
    pub timestamp_ns: u64,
    pub output_dense_bytes: Option<u64>,
    pub input_dense_bytes: u64,
}

/// A `span_start` event with chunk-local strings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalSpanStart {
    pub id: LocalId,
    pub parent: Option<LocalId>,
    pub name: LocalId,
    pub start_ns: u64,
    pub kind: SpanKind,
    pub measured: bool,
    pub pass: Option<Pass>,
    pub module_path: Option<LocalId>,
    pub instance_key: Option<LocalId>,
    pub module_kind: Option<LocalId>,
    pub forward_span: Option<LocalId>,
    pub step_index: Option<u64>,
}

/// One parsed line.
#[derive(Debug)]
pub(crate) enum Item {
    Memory(LocalMemory),
    Op(LocalOp),
    SpanStart(LocalSpanStart),
    SpanEnd {
        id: LocalId,
        duration_ns: u64,
        inferred: bool,
        inferred_reason: Option<LocalId>,
    },
    /// A line of another kind (or one the fast path left), parsed by the general path.
    Event(Box<TraceEvent>),
}

impl Item {
    /// The `kind` of the event.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Item::Memory(_) => "memory",
            Item::Op(_) => "op",
            Item::SpanStart(_) => "span_start",
            Item::SpanEnd { .. } => "span_end",
            Item::Event(e) => e.kind_name(),
        }
    }
}

/// The parse of one chunk.
#[derive(Default)]
pub(crate) struct ParsedChunk {
    pub strings: LocalStrings,
    /// Shape dimensions, end to end.
    pub dims: Vec<u64>,
    /// Op input ids, end to end.
    pub ids: Vec<LocalId>,
    /// Events with their 0-based line inside the chunk.
    pub items: Vec<(u32, Item)>,
    /// Lines in the chunk (a final line without `\n` counts).
    pub lines: u64,
    /// Bytes in the chunk.
    pub bytes: u64,
    /// The first line that does not parse (line inside the chunk, 0-based, in the error); no
    /// item after it. Never the dropped partial last line of the input.
    pub error: Option<LoadError>,
    /// The version learnt from a meta line in this chunk (first chunks only).
    pub version: Option<SchemaVersion>,
    /// The last line of the input, without `\n`, did not parse: `(0-based line, bytes)`.
    pub partial: Option<(u32, u64)>,
    /// First invalid UTF-8 byte outside the input's final unterminated line: `(offset, 0-based
    /// line)` inside the chunk (only when asked for).
    pub utf8_error: Option<(u64, u32)>,
}

impl ParsedChunk {
    /// The dims of a shape range.
    pub fn dims(&self, r: Range) -> &[u64] {
        &self.dims[r.start as usize..(r.start + r.len) as usize]
    }

    /// The ids of an input range.
    pub fn ids(&self, r: Range) -> &[LocalId] {
        &self.ids[r.start as usize..(r.start + r.len) as usize]
    }

    fn s(&mut self, x: &str) -> LocalId {
        self.strings.intern(x)
    }

    fn o(&mut self, x: &Option<Cow<'_, str>>) -> Option<LocalId> {
        x.as_ref().map(|x| self.strings.intern(x))
    }

    fn shape(&mut self, dims: &[u64]) -> Range {
        let start = self.dims.len() as u32;
        self.dims.extend_from_slice(dims);
        Range {
            start,
            len: dims.len() as u32,
        }
    }

    fn push_fast(&mut self, line: u32, event: Fast<'_>) {
        let item = match event {
            Fast::Memory(m) => Item::Memory(LocalMemory {
                timestamp_ns: m.timestamp_ns,
                bytes: m.bytes,
                device: self.s(&m.device),
                storage: self.o(&m.storage_id),
                tensor: self.o(&m.tensor_id),
                span: self.o(&m.span_id),
                op_name: self.o(&m.op_name),
                shape: m.shape.as_deref().map(|d| self.shape(d)),
                dtype: self.o(&m.dtype),
                label: self.o(&m.label),
                action: m.action,
                category: m.category,
                category_source: m.category_source,
                source: m.source,
                pre_existing: m.pre_existing,
                site: m.site,
                thread: m.thread,
            }),
            Fast::Op(op) => {
                let start = self.ids.len() as u32;
                for input in &op.inputs {
                    let id = self.s(input);
                    self.ids.push(id);
                }
                Item::Op(LocalOp {
                    span: self.s(&op.span_id),
                    op_name: self.s(&op.op_name),
                    inputs: Range {
                        start,
                        len: op.inputs.len() as u32,
                    },
                    output: self.o(&op.output),
                    shape: self.shape(&op.shape),
                    dtype: self.s(&op.dtype),
                    device: self.s(&op.device),
                    duration_ns: op.duration_ns,
                    timestamp_ns: op.timestamp_ns,
                    output_dense_bytes: op.output_dense_bytes,
                    input_dense_bytes: op.input_dense_bytes,
                })
            }
            Fast::SpanStart(e) => Item::SpanStart(LocalSpanStart {
                id: self.s(&e.id),
                parent: self.o(&e.parent_id),
                name: self.s(&e.name),
                start_ns: e.start_ns,
                kind: e.span_kind,
                measured: e.measured,
                pass: e.step,
                module_path: self.o(&e.module_path),
                instance_key: self.o(&e.instance_key),
                module_kind: self.o(&e.module_kind),
                forward_span: self.o(&e.forward_span_id),
                step_index: e.step_index,
            }),
            Fast::SpanEnd(e) => Item::SpanEnd {
                id: self.s(&e.id),
                duration_ns: e.duration_ns,
                inferred: e.inferred,
                inferred_reason: self.o(&e.inferred_reason),
            },
        };
        self.items.push((line, item));
    }
}

/// Trims ASCII whitespace at both ends.
pub(crate) fn trim_ascii(bytes: &[u8]) -> &[u8] {
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

/// Parses `buf` (whole lines; only when `last` may its final line lack `\n`).
///
/// `version` is the document's version, or `None` before the meta line: then the first event is
/// parsed as the first line of a document and, when it is a meta of a supported schema, its
/// version applies to the lines after it. `check_utf8` asks for [`ParsedChunk::utf8_error`].
pub(crate) fn parse_chunk(
    buf: &[u8],
    mut version: Option<SchemaVersion>,
    last: bool,
    check_utf8: bool,
) -> ParsedChunk {
    let mut out = ParsedChunk {
        bytes: buf.len() as u64,
        ..ParsedChunk::default()
    };
    if check_utf8 {
        if let Err(e) = std::str::from_utf8(buf) {
            let at = e.valid_up_to();
            let in_final_line = last && !buf[at..].contains(&b'\n');
            if !in_final_line {
                let line = memchr::memchr_iter(b'\n', &buf[..at]).count() as u32;
                out.utf8_error = Some((at as u64, line));
            }
        }
    }
    let mut start = 0usize;
    let mut line = 0u32;
    while start < buf.len() {
        let (end, terminated) = match memchr::memchr(b'\n', &buf[start..]) {
            Some(i) => (start + i + 1, true),
            None => (buf.len(), false),
        };
        let raw = &buf[start..end];
        let this = line;
        start = end;
        line += 1;
        if out.error.is_some() {
            continue; // keep counting lines
        }
        let bytes = trim_ascii(raw);
        if bytes.is_empty() {
            continue;
        }
        if let Some(v) = version {
            if let Some(fast) = parse_fast(bytes, v) {
                out.push_fast(this, fast);
                continue;
            }
        }
        match parse_line(bytes, this as u64, version) {
            Ok(event) => {
                if let (None, TraceEvent::Meta(meta)) = (version, &event) {
                    version = SchemaVersion::parse(&meta.schema);
                    out.version = version;
                }
                out.items.push((this, Item::Event(Box::new(event))));
            }
            Err(_) if !terminated && last => {
                out.partial = Some((this, raw.len() as u64));
            }
            Err(e) => out.error = Some(e),
        }
    }
    out.lines = line as u64;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_items_and_errors_are_relative_to_the_chunk() {
        let text = b"\n{\"kind\":\"span_end\",\"id\":\"s1\"}\n  \n{\"kind\":\"nope\"}\n{\"kind\":\"span_end\",\"id\":\"s2\"}\n";
        let c = parse_chunk(text, Some(SchemaVersion::V11), false, true);
        assert_eq!(c.lines, 5);
        assert_eq!(c.items.len(), 1);
        assert_eq!(c.items[0].0, 1);
        assert!(matches!(
            c.error,
            Some(LoadError::UnknownKind { line: 3, .. })
        ));
        assert!(c.utf8_error.is_none());
    }

    #[test]
    fn a_cut_last_line_is_partial_only_at_the_end_of_the_input() {
        let text = b"{\"kind\":\"span_end\",\"id\":\"s1\"}\n{\"kind\":\"span_e";
        let c = parse_chunk(text, Some(SchemaVersion::V11), true, true);
        assert_eq!((c.items.len(), c.partial), (1, Some((1, 15))));
        let text = b"ok\n\xff\n{\"a\":\"\xc3";
        let c = parse_chunk(text, Some(SchemaVersion::V11), true, true);
        assert_eq!(c.utf8_error, Some((3, 1)));
        let c = parse_chunk(&text[..5], Some(SchemaVersion::V11), true, true);
        assert_eq!(c.utf8_error, Some((3, 1)));
        let c = parse_chunk(b"{\"a\":\"\xc3", Some(SchemaVersion::V11), true, true);
        assert_eq!(c.utf8_error, None);
    }
}
