//! [`SpillWriter`] / [`SpilledBytes`]: append-only bytes kept in a buffer while small and in an
//! unnamed temporary file past a threshold, then read back by offset or record by record. The
//! one spill buffer of the workspace: a spilled document's memory log and op tensor ids
//! (`document::spill`, `document::op_tensors`) and trace-memory's summary timeline use it; each
//! keeps only its own record encoding.

use std::fs::File;
use std::io::{self, Write};

/// The default threshold: past this many buffered bytes the bytes move to a temporary file.
pub const DEFAULT_TO_FILE_BYTES: usize = 8 << 20;

/// Once the bytes are on file, the buffer is appended to the file whenever it holds this many.
pub const FILE_APPEND_BYTES: usize = 1 << 20;

/// Read size of [`SpilledBytes::for_each_record`] (grown for a longer record).
const READ_CHUNK_BYTES: usize = 1 << 16;

/// Appends bytes: callers encode a record into [`SpillWriter::buffer`], then call
/// [`SpillWriter::end_record`], which moves the buffer to the file when it is due.
#[derive(Debug)]
pub struct SpillWriter {
    buf: Vec<u8>,
    /// The temporary file and the bytes written to it.
    file: Option<(io::BufWriter<File>, u64)>,
    to_file_bytes: usize,
}

impl Default for SpillWriter {
    /// A writer with [`DEFAULT_TO_FILE_BYTES`].
    fn default() -> Self {
        Self::new(DEFAULT_TO_FILE_BYTES)
    }
}

impl SpillWriter {
    /// A writer that moves to a temporary file once `to_file_bytes` are buffered.
    pub fn new(to_file_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            file: None,
            to_file_bytes,
        }
    }

    /// The bytes not yet on file; encode the next record at its end.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Bytes written so far (on file and buffered): the offset of the next byte.
    pub fn written_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, |(_, n)| *n) + self.buf.len() as u64
    }

    /// True once the bytes moved to the temporary file.
    pub fn is_on_file(&self) -> bool {
        self.file.is_some()
    }

    /// Call after each record: moves the buffer to the file when it holds the threshold (or,
    /// once on file, [`FILE_APPEND_BYTES`]).
    ///
    /// # Errors
    /// I/O errors creating or writing the temporary file.
    pub fn end_record(&mut self) -> io::Result<()> {
        let limit = if self.file.is_some() {
            self.to_file_bytes.min(FILE_APPEND_BYTES)
        } else {
            self.to_file_bytes
        };
        if self.buf.len() >= limit {
            self.flush_to_file()?;
        }
        Ok(())
    }

    /// Moves the buffered bytes to the temporary file now (creating it).
    ///
    /// # Errors
    /// I/O errors creating or writing the temporary file.
    pub fn flush_to_file(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            self.file = Some((
                io::BufWriter::with_capacity(FILE_APPEND_BYTES, tempfile::tempfile()?),
                0,
            ));
        }
        let Some((w, n)) = self.file.as_mut() else {
            unreachable!("set above");
        };
        w.write_all(&self.buf)?;
        *n += self.buf.len() as u64;
        self.buf.clear();
        // The buffer grew to the in-memory limit; appends to the file need far less.
        if self.buf.capacity() > 2 * FILE_APPEND_BYTES {
            self.buf = Vec::with_capacity(FILE_APPEND_BYTES);
        }
        Ok(())
    }

    /// The finished bytes: the buffer (shrunk to fit), or the file with the rest appended.
    ///
    /// # Errors
    /// I/O errors writing the temporary file.
    pub fn finish(mut self) -> io::Result<SpilledBytes> {
        if self.file.is_none() {
            self.buf.shrink_to_fit();
            return Ok(SpilledBytes::Buffer(self.buf));
        }
        self.flush_to_file()?;
        let Some((w, len)) = self.file.take() else {
            unreachable!("checked above");
        };
        let file = w.into_inner().map_err(|e| e.into_error())?;
        Ok(SpilledBytes::File { file, len })
    }
}

/// Finished bytes of a [`SpillWriter`].
#[derive(Debug)]
pub enum SpilledBytes {
    /// Still in memory.
    Buffer(Vec<u8>),
    /// In an unnamed temporary file of `len` bytes.
    File {
        /// The file.
        file: File,
        /// Its length in bytes.
        len: u64,
    },
}

impl SpilledBytes {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            SpilledBytes::Buffer(b) => b.len() as u64,
            SpilledBytes::File { len, .. } => *len,
        }
    }

    /// True without bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads up to `buf.len()` bytes at `offset`; the count read (0 past the end).
    ///
    /// # Errors
    /// I/O errors reading the file.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            SpilledBytes::Buffer(b) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
                let n = buf.len().min(b.len() - start);
                buf[..n].copy_from_slice(&b[start..start + n]);
                Ok(n)
            }
            SpilledBytes::File { file, len } => {
                let n = (buf.len() as u64).min(len.saturating_sub(offset)) as usize;
                read_exact_at(file, &mut buf[..n], offset)?;
                Ok(n)
            }
        }
    }

    /// Decodes `count` records from the start, in order: `decode(window, pos)` reads one record
    /// at `*pos` and advances it, or returns `None` (with no effect of its own) when the window
    /// ends inside the record; the window then grows, and only a window holding every remaining
    /// byte makes `None` an error.
    ///
    /// # Errors
    /// I/O errors reading the file; `InvalidData` ("`what` ends inside a record") when the
    /// bytes end inside a record.
    pub fn for_each_record(
        &self,
        count: u64,
        what: &str,
        mut decode: impl FnMut(&[u8], &mut usize) -> Option<()>,
    ) -> io::Result<()> {
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{what} ends inside a record"),
            )
        };
        match self {
            SpilledBytes::Buffer(b) => {
                let mut pos = 0;
                for _ in 0..count {
                    decode(b, &mut pos).ok_or_else(bad)?;
                }
            }
            SpilledBytes::File { file, len } => {
                let mut buf: Vec<u8> = Vec::new();
                let (mut pos, mut offset, mut left) = (0usize, 0u64, count);
                while left > 0 {
                    let mut next = pos;
                    if decode(&buf, &mut next).is_some() {
                        pos = next;
                        left -= 1;
                        continue;
                    }
                    if offset >= *len {
                        return Err(bad());
                    }
                    // Drop what was decoded; read more, at least doubling for a long record.
                    buf.drain(..pos);
                    pos = 0;
                    let keep = buf.len();
                    let want = (keep * 2).max(READ_CHUNK_BYTES);
                    let room = ((len - offset) as usize).min(want - keep);
                    buf.resize(keep + room, 0);
                    read_exact_at(file, &mut buf[keep..], offset)?;
                    offset += room as u64;
                }
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(file, buf, offset)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::varint::{get, put};

    fn write(values: &[u64], to_file_bytes: usize) -> SpilledBytes {
        let mut w = SpillWriter::new(to_file_bytes);
        for &v in values {
            put(w.buffer(), v);
            w.end_record().unwrap();
        }
        w.finish().unwrap()
    }

    fn read(bytes: &SpilledBytes, count: u64) -> io::Result<Vec<u64>> {
        let mut out = Vec::new();
        bytes.for_each_record(count, "test log", |buf, pos| {
            out.push(get(buf, pos)?);
            Some(())
        })?;
        Ok(out)
    }

    #[test]
    fn records_round_trip_in_a_buffer_and_a_file() {
        let values: Vec<u64> = (0..200_000u64).map(|i| i * 7919 % 1_000_003).collect();
        let small = write(&values, usize::MAX);
        assert!(matches!(small, SpilledBytes::Buffer(_)));
        let big = write(&values, 1000);
        assert!(matches!(big, SpilledBytes::File { .. }));
        assert_eq!(small.len(), big.len());
        assert_eq!(read(&small, values.len() as u64).unwrap(), values);
        assert_eq!(read(&big, values.len() as u64).unwrap(), values);
        let mut a = [0u8; 100];
        let mut b = [0u8; 100];
        assert_eq!(small.read_at(5000, &mut a).unwrap(), 100);
        assert_eq!(big.read_at(5000, &mut b).unwrap(), 100);
        assert_eq!(a, b);
        assert_eq!(big.read_at(big.len() - 3, &mut b).unwrap(), 3);
    }

    #[test]
    fn a_record_longer_than_the_read_chunk_is_read_whole() {
        let mut w = SpillWriter::new(10);
        for len in [5usize, 300_000, 7] {
            put(w.buffer(), len as u64);
            w.buffer().extend(std::iter::repeat_n(b'x', len));
            w.end_record().unwrap();
        }
        let bytes = w.finish().unwrap();
        let mut lens = Vec::new();
        bytes
            .for_each_record(3, "long", |buf, pos| {
                let n = get(buf, pos)? as usize;
                let mut p = *pos;
                buf.get(p..p + n)?;
                p += n;
                *pos = p;
                lens.push(n);
                Some(())
            })
            .unwrap();
        assert_eq!(lens, [5, 300_000, 7]);
    }

    #[test]
    fn bytes_ending_inside_a_record_are_an_error() {
        let bytes = write(&[1, 2, 3], usize::MAX);
        let err = read(&bytes, 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(err.to_string(), "test log ends inside a record");
        let bytes = write(&[1, 2, 3], 1);
        assert_eq!(
            read(&bytes, 4).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }
}
