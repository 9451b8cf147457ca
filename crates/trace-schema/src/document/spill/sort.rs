//! Sorting a [`MemoryLog`] into replay order, `(timestamp, index)`: in a window sliding over
//! file order when its events are out of order only locally (each thread on its own clock, a
//! few µs apart: thousands of short runs, one record never far from its place), else
//! externally, in blocks of [`SORT_BLOCK`] records merged afterwards.

use std::io;

use super::{
    decode, encode, zigzag, Cursor, MemoryItem, MemoryLog, MemoryLogWriter, MemoryOrder, Run,
    SORT_BLOCK,
};
use crate::spill_buffer::FILE_APPEND_BYTES;
use crate::varint::{get, put};

/// Records the sliding window holds back at most; past it the sort is the external one.
const WINDOW_RECORDS: usize = if cfg!(test) { 1 << 9 } else { 1 << 20 };
/// Records read between two flushes of the window at first (doubled whenever more than half
/// of them are held back, so that a flush's sort stays a small share of the records it writes).
const WINDOW_BATCH: usize = if cfg!(test) { 1 << 4 } else { 1 << 13 };

/// A record held in the window: its key and where its bytes lie in the arena.
#[derive(Debug, Clone, Copy)]
struct Held {
    ts: u64,
    index: u32,
    start: usize,
    end: usize,
}

/// The records read but not yet written, each as encoded but for its index and timestamp
/// (its flags, then the fields after the timestamp).
struct Window {
    arena: Vec<u8>,
    spare: Vec<u8>,
    held: Vec<Held>,
    batch: usize,
}

impl Window {
    /// Holds one record (`record` as the log stores it).
    fn hold(&mut self, ts: u64, index: u32, record: &[u8], with_index: bool) {
        let mut pos = 0;
        let _flags = get(record, &mut pos);
        let flags_end = pos;
        if with_index {
            let _index = get(record, &mut pos);
        }
        let _ts = get(record, &mut pos);
        let start = self.arena.len();
        self.arena.extend_from_slice(&record[..flags_end]);
        self.arena.extend_from_slice(&record[pos..]);
        self.held.push(Held {
            ts,
            index,
            start,
            end: self.arena.len(),
        });
    }

    /// Writes, in order, every held record of timestamp at most `bound` (no record still to
    /// come is earlier than `bound`, and one at `bound` comes later in file order); false when
    /// more than [`WINDOW_RECORDS`] stay held back.
    fn flush(&mut self, bound: u64, out: &mut MemoryLogWriter) -> io::Result<bool> {
        self.held.sort_unstable_by_key(|h| (h.ts, h.index));
        let ready = self.held.partition_point(|h| h.ts <= bound);
        for h in &self.held[..ready] {
            out.push_encoded(h.ts, h.index, &self.arena[h.start..h.end])?;
        }
        self.spare.clear();
        for h in &mut self.held[ready..] {
            let start = self.spare.len();
            self.spare.extend_from_slice(&self.arena[h.start..h.end]);
            (h.start, h.end) = (start, self.spare.len());
        }
        std::mem::swap(&mut self.arena, &mut self.spare);
        self.held.drain(..ready);
        if self.held.len() * 2 > self.batch {
            self.batch *= 2;
        }
        Ok(self.held.len() <= WINDOW_RECORDS)
    }
}

impl MemoryLogWriter {
    /// Appends a record held by a [`Window`] (`body`: its flags, then the fields after the
    /// timestamp) to a log that stores indices.
    fn push_encoded(&mut self, ts: u64, index: u32, body: &[u8]) -> io::Result<()> {
        debug_assert!(self.with_index);
        if self.len == 0 || ts < self.prev_ts {
            self.runs.push(Run {
                offset: self.bytes.written_bytes(),
                index,
                prev_ts: self.prev_ts,
                first_ts: ts,
            });
        }
        let mut pos = 0;
        let _flags = get(body, &mut pos);
        let buf = self.bytes.buffer();
        buf.extend_from_slice(&body[..pos]);
        put(buf, index as u64);
        put(buf, zigzag(ts.wrapping_sub(self.prev_ts) as i64));
        buf.extend_from_slice(&body[pos..]);
        self.prev_ts = ts;
        self.len += 1;
        self.bytes.end_record()
    }
}

impl MemoryLog {
    /// Writes the log in replay order into `out` (a log that stores indices) by a window
    /// sliding over file order: a record is written once no record still to come can precede
    /// it. The runs are sorted and their first timestamps known, so the least timestamp still
    /// to come is the next record's of the current run or the least first timestamp of the runs
    /// after it. One read of the log, every record moved as encoded (never decoded), small
    /// batches sorted in memory: linear in the log when its events are out of order only
    /// locally, whatever its number of runs. `Ok(false)`, and `out` to be dropped, when more
    /// than [`WINDOW_RECORDS`] records would be held back at once (a run far back in time late
    /// in the file).
    pub(super) fn sort_in_window(&self, out: &mut MemoryLogWriter) -> io::Result<bool> {
        debug_assert!(!self.with_index);
        // the least first timestamp of the runs from `k` on
        let mut after = vec![u64::MAX; self.runs.len() + 1];
        for k in (0..self.runs.len()).rev() {
            after[k] = after[k + 1].min(self.runs[k].first_ts);
        }
        let mut window = Window {
            arena: Vec::new(),
            spare: Vec::new(),
            held: Vec::new(),
            batch: WINDOW_BATCH,
        };
        let mut run = 0;
        let mut cursor = Cursor::whole(self);
        while let Some((ts, index, record)) = cursor.next_encoded()? {
            while run + 1 < self.runs.len() && index >= self.runs[run + 1].index {
                run += 1;
            }
            window.hold(ts, index, record, self.with_index);
            // still to come: the rest of this run (from `ts` on) and the runs after it
            if window.held.len() >= window.batch && !window.flush(ts.min(after[run + 1]), out)? {
                return Ok(false);
            }
        }
        window.flush(u64::MAX, out)
    }

    /// The log sorted by `(timestamp, index)` in blocks of [`SORT_BLOCK`] records (each a run of
    /// the new log, which stores indices).
    pub(super) fn sorted(&self) -> io::Result<MemoryLog> {
        // Appended to the file at every FILE_APPEND_BYTES: the sorted copy is as large as the log.
        let mut out = MemoryLogWriter {
            with_index: true,
            ..MemoryLogWriter::with_file_threshold(FILE_APPEND_BYTES)
        };
        let mut block: Vec<u8> = Vec::new();
        let mut entries: Vec<(u64, u32, u32, u32)> = Vec::new(); // ts, index, start, end
        let flush = |block: &mut Vec<u8>,
                     entries: &mut Vec<(u64, u32, u32, u32)>,
                     out: &mut MemoryLogWriter|
         -> io::Result<()> {
            entries.sort_unstable_by_key(|e| (e.0, e.1));
            out.prev_ts = u64::MAX; // force a new run
            for &(ts, index, start, _) in entries.iter() {
                let mut pos = start as usize;
                let m = decode(block, &mut pos, 0, None).expect("encoded here");
                let m = MemoryItem {
                    timestamp_ns: ts,
                    ..m
                };
                if out.prev_ts == u64::MAX {
                    out.runs.push(Run {
                        offset: out.bytes.written_bytes(),
                        index,
                        prev_ts: 0,
                        first_ts: ts,
                    });
                    out.prev_ts = 0;
                    encode(out.bytes.buffer(), &m, 0, true);
                } else {
                    encode(out.bytes.buffer(), &m, out.prev_ts, true);
                }
                out.prev_ts = ts;
                out.len += 1;
                out.bytes.end_record()?;
            }
            block.clear();
            entries.clear();
            Ok(())
        };
        let mut err = None;
        self.for_each(MemoryOrder::File, |m| {
            if err.is_some() {
                return;
            }
            let start = block.len() as u32;
            // Each record of a block is encoded on its own (timestamp relative to 0).
            encode(&mut block, m, 0, true);
            entries.push((m.timestamp_ns, m.index, start, block.len() as u32));
            if entries.len() >= SORT_BLOCK {
                if let Err(e) = flush(&mut block, &mut entries, &mut out) {
                    err = Some(e);
                }
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if !entries.is_empty() {
            flush(&mut block, &mut entries, &mut out)?;
        }
        // Always a file: the sorted copy is as large as the log.
        out.bytes.flush_to_file()?;
        out.finish()
    }
}
