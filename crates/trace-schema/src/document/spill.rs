//! A document's memory events kept out of its resident memory: a compact binary log (varints,
//! shared strings as [`Sym`]s, storage and tensor ids inline), in a buffer while small and in an
//! unnamed temporary file past [`SPILL_TO_FILE_BYTES`], read back sequentially.
//!
//! Two orders are served: file order, and replay order — `(timestamp_ns, file order)`, the order
//! the memory analysis applies events in. The writer records where the timestamps step back; the
//! log is then a few sorted runs (one for a time-ordered trace, a handful for the probe's
//! pre-existing allocations). The first pass in replay order writes the log sorted, as one run,
//! into a second log that every later pass reads: a merge of the runs, or with more than
//! [`MAX_MERGED_RUNS`] runs a window sliding over file order (events out of order only
//! locally), else an external sort in blocks (module `sort`). A pass holds one buffer per run
//! (or the window), never the events.

use std::io;
use std::sync::Arc;

use crate::event::{CategorySource, MemoryAction, MemoryCategory, MemorySource};
use crate::intern::{ShapeId, Sym};
use crate::spill_buffer::{SpillWriter, SpilledBytes, FILE_APPEND_BYTES};
use crate::varint::{get, put};

mod sort;

/// Past this many bytes the log moves from a buffer to a temporary file.
pub const SPILL_TO_FILE_BYTES: usize = 16 << 20;
/// Runs merged directly; more are sorted in a sliding window, or externally first.
pub const MAX_MERGED_RUNS: usize = 64;
/// Records per block of the external sort.
const SORT_BLOCK: usize = if cfg!(test) { 1 << 10 } else { 1 << 18 };
/// Read buffer per cursor.
const READ_BUF: usize = 1 << 16;

/// One memory event read from a document (in memory or spilled); strings of the document are
/// [`Sym`]s, storage and tensor ids are borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryItem<'a> {
    /// Index of the event among the document's memory events, in file order.
    pub index: u32,
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Bytes (required on allocs; optional on frees).
    pub bytes: Option<u64>,
    /// Device.
    pub device: Sym,
    /// Storage identity (`None` in trace/6).
    pub storage: Option<&'a str>,
    /// Tensor id.
    pub tensor: Option<&'a str>,
    /// Span.
    pub span: Option<Sym>,
    /// Allocating op name.
    pub op_name: Option<Sym>,
    /// Shape.
    pub shape: Option<ShapeId>,
    /// Dtype.
    pub dtype: Option<Sym>,
    /// Label.
    pub label: Option<Sym>,
    /// Alloc or free.
    pub action: MemoryAction,
    /// Category.
    pub category: MemoryCategory,
    /// Provenance of the category.
    pub category_source: Option<CategorySource>,
    /// Observer.
    pub source: Option<MemorySource>,
    /// Existed before capture began.
    pub pre_existing: bool,
}

/// The order a pass reads memory events in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryOrder {
    /// File order.
    File,
    /// `(timestamp_ns, file order)`: the order the memory analysis applies events in.
    Replay,
}

// ---- encoding ---------------------------------------------------------------------------

const F_FREE: u32 = 1;
const F_PRE: u32 = 1 << 1;
const F_BYTES: u32 = 1 << 2;
const F_STORAGE: u32 = 1 << 3;
const F_TENSOR: u32 = 1 << 4;
const F_SPAN: u32 = 1 << 5;
const F_OP: u32 = 1 << 6;
const F_SHAPE: u32 = 1 << 7;
const F_DTYPE: u32 = 1 << 8;
const F_LABEL: u32 = 1 << 9;
const CAT_SHIFT: u32 = 10; // 3 bits
const CSRC_SHIFT: u32 = 13; // 2 bits
const SRC_SHIFT: u32 = 15; // 2 bits

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn category_code(c: MemoryCategory) -> u32 {
    match c {
        MemoryCategory::Parameter => 0,
        MemoryCategory::Activation => 1,
        MemoryCategory::Gradient => 2,
        MemoryCategory::Optimizer => 3,
        MemoryCategory::Other => 4,
    }
}

fn category_of(code: u32) -> MemoryCategory {
    match code {
        0 => MemoryCategory::Parameter,
        1 => MemoryCategory::Activation,
        2 => MemoryCategory::Gradient,
        3 => MemoryCategory::Optimizer,
        _ => MemoryCategory::Other,
    }
}

fn sym_of(v: u64) -> Sym {
    Sym::from_index(v as usize)
}

/// Appends one record. `prev_ts` is the timestamp of the record before it (0 for the first),
/// `index` is written only for logs that store it (sorted logs).
fn encode(out: &mut Vec<u8>, m: &MemoryItem<'_>, prev_ts: u64, with_index: bool) {
    let mut flags = 0u32;
    let mut flag = |on: bool, f: u32| {
        if on {
            flags |= f;
        }
    };
    flag(m.action == MemoryAction::Free, F_FREE);
    flag(m.pre_existing, F_PRE);
    flag(m.bytes.is_some(), F_BYTES);
    flag(m.storage.is_some(), F_STORAGE);
    flag(m.tensor.is_some(), F_TENSOR);
    flag(m.span.is_some(), F_SPAN);
    flag(m.op_name.is_some(), F_OP);
    flag(m.shape.is_some(), F_SHAPE);
    flag(m.dtype.is_some(), F_DTYPE);
    flag(m.label.is_some(), F_LABEL);
    flags |= category_code(m.category) << CAT_SHIFT;
    flags |= (match m.category_source {
        None => 0,
        Some(CategorySource::Declared) => 1,
        Some(CategorySource::Registry) => 2,
        Some(CategorySource::Inferred) => 3,
    }) << CSRC_SHIFT;
    flags |= (match m.source {
        None => 0,
        Some(MemorySource::Allocator) => 1,
        Some(MemorySource::Registry) => 2,
        Some(MemorySource::Caller) => 3,
    }) << SRC_SHIFT;
    put(out, flags as u64);
    if with_index {
        put(out, m.index as u64);
    }
    put(out, zigzag(m.timestamp_ns.wrapping_sub(prev_ts) as i64));
    if let Some(b) = m.bytes {
        put(out, b);
    }
    put(out, m.device.index() as u64);
    for s in [m.span, m.op_name, m.dtype, m.label].into_iter().flatten() {
        put(out, s.index() as u64);
    }
    if let Some(shape) = m.shape {
        put(out, shape.index() as u64);
    }
    for id in [m.storage, m.tensor].into_iter().flatten() {
        put(out, id.len() as u64);
        out.extend_from_slice(id.as_bytes());
    }
}

/// Decodes one record at `*pos`; `None` when the buffer ends inside it.
fn decode_raw(buf: &[u8], pos: &mut usize, prev_ts: u64, index: Option<u32>) -> Option<Raw> {
    let flags = get(buf, pos)? as u32;
    let index = match index {
        Some(i) => i,
        None => get(buf, pos)? as u32,
    };
    let timestamp_ns = prev_ts.wrapping_add(unzigzag(get(buf, pos)?) as u64);
    let bytes = if flags & F_BYTES != 0 {
        Some(get(buf, pos)?)
    } else {
        None
    };
    let device = sym_of(get(buf, pos)?);
    let mut opt_sym = |f: u32| -> Option<Option<Sym>> {
        Some(if flags & f != 0 {
            Some(sym_of(get(buf, pos)?))
        } else {
            None
        })
    };
    let span = opt_sym(F_SPAN)?;
    let op_name = opt_sym(F_OP)?;
    let dtype = opt_sym(F_DTYPE)?;
    let label = opt_sym(F_LABEL)?;
    let shape = if flags & F_SHAPE != 0 {
        Some(ShapeId::from_index(get(buf, pos)? as usize))
    } else {
        None
    };
    let mut string = |f: u32| -> Option<Option<(u32, u32)>> {
        if flags & f == 0 {
            return Some(None);
        }
        let len = get(buf, pos)? as usize;
        let start = *pos;
        buf.get(start..start + len)?;
        *pos += len;
        Some(Some((start as u32, (start + len) as u32)))
    };
    let storage = string(F_STORAGE)?;
    let tensor = string(F_TENSOR)?;
    Some(Raw {
        storage,
        tensor,
        item: MemoryItem {
            index,
            timestamp_ns,
            bytes,
            device,
            storage: None,
            tensor: None,
            span,
            op_name,
            shape,
            dtype,
            label,
            action: if flags & F_FREE != 0 {
                MemoryAction::Free
            } else {
                MemoryAction::Alloc
            },
            category: category_of((flags >> CAT_SHIFT) & 7),
            category_source: match (flags >> CSRC_SHIFT) & 3 {
                0 => None,
                1 => Some(CategorySource::Declared),
                2 => Some(CategorySource::Registry),
                _ => Some(CategorySource::Inferred),
            },
            source: match (flags >> SRC_SHIFT) & 3 {
                0 => None,
                1 => Some(MemorySource::Allocator),
                2 => Some(MemorySource::Registry),
                _ => Some(MemorySource::Caller),
            },
            pre_existing: flags & F_PRE != 0,
        },
    })
}

/// A record decoded but for its ids: where they lie in the buffer, their UTF-8 not checked yet
/// (its `item` has no ids). What tells a whole record from a cut one, and a record's key,
/// without the cost of the ids.
struct Raw {
    item: MemoryItem<'static>,
    storage: Option<(u32, u32)>,
    tensor: Option<(u32, u32)>,
}

impl Raw {
    /// The record with its ids, from the buffer it was decoded from (`None` when an id is not
    /// UTF-8: a log is written from `&str`s and never edited).
    fn with_ids(self, buf: &[u8]) -> Option<MemoryItem<'_>> {
        let text = |r: Option<(u32, u32)>| -> Option<Option<&str>> {
            match r {
                None => Some(None),
                Some((a, b)) => Some(Some(id_text(buf.get(a as usize..b as usize)?)?)),
            }
        };
        Some(MemoryItem {
            storage: text(self.storage)?,
            tensor: text(self.tensor)?,
            ..self.item
        })
    }
}

/// An id's bytes as text: ASCII (every id the probe writes) checked inline, anything else by
/// `from_utf8`; `None` when not UTF-8. Every pass reads every id of the log, and `from_utf8`'s
/// call and set-up cost more than a short id's check (9% of `summary --json`'s samples on the
/// encoder trace, `docs/scale.md`).
#[inline]
fn id_text(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

fn decode<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    prev_ts: u64,
    index: Option<u32>,
) -> Option<MemoryItem<'a>> {
    decode_raw(buf, pos, prev_ts, index)?.with_ids(buf)
}

/// Where a sorted run starts: byte offset, index of its first record, timestamp of the record
/// before it, timestamp of its first record (the smallest of the run).
#[derive(Debug, Clone, Copy)]
struct Run {
    offset: u64,
    index: u32,
    prev_ts: u64,
    first_ts: u64,
}

/// An immutable log of memory events (see the module docs).
#[derive(Debug)]
pub struct MemoryLog {
    storage: SpilledBytes,
    len: u32,
    runs: Vec<Run>,
    /// Records carry their index (a sorted log); otherwise it is their position.
    with_index: bool,
    /// The log sorted by `(timestamp, index)`, made by the first pass in replay order that
    /// needs it (more than [`MAX_MERGED_RUNS`] runs) and read by every later one: an analysis
    /// makes several passes in replay order, and a trace whose events come out of time order
    /// (several threads, each on its own clock) has thousands of runs.
    sorted_copy: std::sync::OnceLock<Box<MemoryLog>>,
}

/// Appends memory events to a [`MemoryLog`].
#[derive(Debug)]
pub struct MemoryLogWriter {
    bytes: SpillWriter,
    len: u32,
    runs: Vec<Run>,
    prev_ts: u64,
    with_index: bool,
}

impl Default for MemoryLogWriter {
    /// A writer that moves to a file past [`SPILL_TO_FILE_BYTES`].
    fn default() -> Self {
        Self::with_file_threshold(SPILL_TO_FILE_BYTES)
    }
}

impl MemoryLogWriter {
    /// A writer that moves to a file past `bytes` buffered bytes (tests: small logs on disk).
    pub(crate) fn with_file_threshold(bytes: usize) -> Self {
        Self {
            bytes: SpillWriter::new(bytes),
            len: 0,
            runs: Vec::new(),
            prev_ts: 0,
            with_index: false,
        }
    }

    /// Appends an event (its `index` is its position unless the log stores indices).
    ///
    /// # Errors
    /// I/O errors of the temporary file.
    pub fn push(&mut self, m: &MemoryItem<'_>) -> io::Result<()> {
        if self.len == 0 || m.timestamp_ns < self.prev_ts {
            self.runs.push(Run {
                offset: self.bytes.written_bytes(),
                index: if self.with_index { m.index } else { self.len },
                prev_ts: self.prev_ts,
                first_ts: m.timestamp_ns,
            });
        }
        encode(self.bytes.buffer(), m, self.prev_ts, self.with_index);
        self.prev_ts = m.timestamp_ns;
        self.len += 1;
        self.bytes.end_record()
    }

    /// Records written.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True before the first record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Finishes the log.
    ///
    /// # Errors
    /// I/O errors of the temporary file.
    pub fn finish(self) -> io::Result<MemoryLog> {
        let storage = self.bytes.finish()?;
        Ok(MemoryLog {
            storage,
            len: self.len,
            runs: self.runs,
            with_index: self.with_index,
            sorted_copy: std::sync::OnceLock::new(),
        })
    }
}

/// Sequential reader of one run (or of the whole log).
struct Cursor<'l> {
    log: &'l MemoryLog,
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    offset: u64,
    end: u64,
    prev_ts: u64,
    next_index: u32,
    left: u32,
}

impl<'l> Cursor<'l> {
    fn new(log: &'l MemoryLog, run: usize) -> Self {
        let r = log.runs[run];
        let end = log
            .runs
            .get(run + 1)
            .map_or(log.storage.len(), |n| n.offset);
        let left = log.runs.get(run + 1).map_or(log.len, |n| {
            if log.with_index {
                u32::MAX // counted by bytes instead
            } else {
                n.index
            }
        }) - if log.with_index { 0 } else { r.index };
        Self {
            log,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
            offset: r.offset,
            end,
            prev_ts: r.prev_ts,
            next_index: r.index,
            left,
        }
    }

    /// A cursor over the whole log (file order: the runs are contiguous).
    fn whole(log: &'l MemoryLog) -> Self {
        Self {
            end: log.storage.len(),
            left: log.len,
            ..Self::new(log, 0)
        }
    }

    fn done(&self) -> bool {
        self.left == 0 || (self.pos == self.filled && self.offset >= self.end)
    }

    /// Decodes the next record (`None` at the end of the run).
    fn next(&mut self) -> io::Result<Option<MemoryItem<'_>>> {
        let Some((raw, _)) = self.advance()? else {
            return Ok(None);
        };
        match raw.with_ids(&self.buf[..self.filled]) {
            Some(item) => Ok(Some(item)),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "memory log holds an id that is not UTF-8",
            )),
        }
    }

    /// The next record's timestamp, index and encoded bytes as stored (its ids not checked):
    /// what a sort moves without decoding the record.
    fn next_encoded(&mut self) -> io::Result<Option<(u64, u32, &[u8])>> {
        let Some((raw, start)) = self.advance()? else {
            return Ok(None);
        };
        Ok(Some((
            raw.item.timestamp_ns,
            raw.item.index,
            &self.buf[start..self.pos],
        )))
    }

    /// Moves past the next record: it and where it starts in the buffer (`None` at the end of
    /// the run).
    fn advance(&mut self) -> io::Result<Option<(Raw, usize)>> {
        if self.done() {
            return Ok(None);
        }
        // a whole record in the buffer (its ids' UTF-8 checked by the caller, once)
        let (raw, start) = loop {
            let index = (!self.log.with_index).then_some(self.next_index);
            let mut pos = self.pos;
            if let Some(raw) = decode_raw(&self.buf[..self.filled], &mut pos, self.prev_ts, index) {
                let start = self.pos;
                self.pos = pos;
                break (raw, start);
            }
            if self.offset >= self.end {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "memory log ends inside a record",
                ));
            }
            self.refill()?;
        };
        self.prev_ts = raw.item.timestamp_ns;
        self.next_index += 1;
        self.left = self.left.saturating_sub(1);
        Ok(Some((raw, start)))
    }

    /// Moves the unread bytes to the front and reads more (growing the buffer for a record
    /// longer than it).
    fn refill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.pos..self.filled, 0);
        self.filled -= self.pos;
        self.pos = 0;
        let want = if self.filled * 2 > READ_BUF.max(self.buf.len()) {
            self.buf.len().max(READ_BUF) * 2
        } else {
            self.buf.len().max(READ_BUF)
        };
        self.buf.resize(want, 0);
        let room = ((self.end - self.offset) as usize).min(self.buf.len() - self.filled);
        let n = self
            .log
            .storage
            .read_at(self.offset, &mut self.buf[self.filled..self.filled + room])?;
        self.filled += n;
        self.offset += n as u64;
        Ok(())
    }

    /// `(timestamp, index)` of the next record, without consuming it.
    fn peek_key(&mut self) -> io::Result<Option<(u64, u32)>> {
        if self.done() {
            return Ok(None);
        }
        loop {
            let index = (!self.log.with_index).then_some(self.next_index);
            let mut pos = self.pos;
            if let Some(r) = decode_raw(&self.buf[..self.filled], &mut pos, self.prev_ts, index) {
                return Ok(Some((r.item.timestamp_ns, r.item.index)));
            }
            if self.offset >= self.end {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "memory log ends inside a record",
                ));
            }
            self.refill()?;
        }
    }
}

impl MemoryLog {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True without events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the encoded log.
    pub fn encoded_bytes(&self) -> u64 {
        self.storage.len()
    }

    /// Calls `f` on every event in `order`.
    ///
    /// # Errors
    /// I/O errors reading the temporary file back.
    pub fn for_each(
        &self,
        order: MemoryOrder,
        mut f: impl FnMut(&MemoryItem<'_>),
    ) -> io::Result<()> {
        if self.runs.is_empty() {
            return Ok(());
        }
        match order {
            MemoryOrder::File if self.with_index => {
                unreachable!("a sorted log is only read in replay order")
            }
            MemoryOrder::File => {
                let mut c = Cursor::whole(self);
                while let Some(m) = c.next()? {
                    f(&m);
                }
                Ok(())
            }
            MemoryOrder::Replay if self.runs.len() == 1 => {
                let mut c = Cursor::new(self, 0);
                while let Some(m) = c.next()? {
                    f(&m);
                }
                Ok(())
            }
            MemoryOrder::Replay if self.with_index => self.merge(f),
            MemoryOrder::Replay => self.sorted_copy()?.for_each(MemoryOrder::Replay, f),
        }
    }

    /// The log in replay order, as one sorted run: made by the first pass in replay order (a
    /// merge of the runs; with more than [`MAX_MERGED_RUNS`], a window sliding over file
    /// order, else an external sort in blocks and a merge), then kept, so that every later pass reads it straight through
    /// (no merge, no second decode of each record to compare it). Two passes that ask at the
    /// same time may both make it; one copy is kept.
    fn sorted_copy(&self) -> io::Result<&MemoryLog> {
        if let Some(sorted) = self.sorted_copy.get() {
            return Ok(sorted);
        }
        let writer = || MemoryLogWriter {
            with_index: true,
            ..MemoryLogWriter::with_file_threshold(FILE_APPEND_BYTES)
        };
        let mut out = writer();
        // thousands of runs are most often events out of order only locally: a window first
        let windowed = self.runs.len() > MAX_MERGED_RUNS && self.sort_in_window(&mut out)?;
        if !windowed {
            out = writer();
            let mut err = None;
            let mut push = |m: &MemoryItem<'_>| {
                if err.is_none() {
                    err = out.push(m).err();
                }
            };
            if self.runs.len() <= MAX_MERGED_RUNS {
                self.merge(&mut push)?;
            } else {
                self.sorted()?.merge(&mut push)?;
            }
            if let Some(e) = err {
                return Err(e);
            }
        }
        // a file: the copy is as large as the log
        out.bytes.flush_to_file()?;
        let sorted = Box::new(out.finish()?);
        Ok(self.sorted_copy.get_or_init(|| sorted))
    }

    /// Merges the sorted runs by `(timestamp, index)`.
    fn merge(&self, mut f: impl FnMut(&MemoryItem<'_>)) -> io::Result<()> {
        use std::cmp::Reverse;
        let mut cursors: Vec<Cursor<'_>> =
            (0..self.runs.len()).map(|r| Cursor::new(self, r)).collect();
        let mut heap = std::collections::BinaryHeap::with_capacity(cursors.len());
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some((ts, index)) = c.peek_key()? {
                heap.push(Reverse((ts, index, i)));
            }
        }
        while let Some(Reverse((_, _, i))) = heap.pop() {
            let c = &mut cursors[i];
            if let Some(m) = c.next()? {
                f(&m);
            }
            if let Some((ts, index)) = c.peek_key()? {
                heap.push(Reverse((ts, index, i)));
            }
        }
        Ok(())
    }
}

/// A shared, immutable [`MemoryLog`] (documents are `Clone`).
pub type SharedMemoryLog = Arc<MemoryLog>;

#[cfg(test)]
mod tests;
