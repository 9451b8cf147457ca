//! The tensor ids of a spilled document's ops (inputs and output), kept out of its resident
//! memory: one record per op, in file order, in a buffer and then an unnamed temporary file.
//! They are mostly unique per op, so interning them would grow with the trace; only the
//! execution graph and the data-edge check read them.

use crate::varint::{get, put};
use std::fs::File;
use std::io::{self, Write};

/// Past this many buffered bytes the log moves to a temporary file.
const TO_FILE_BYTES: usize = 8 << 20;

/// Appends the tensor ids of ops.
#[derive(Debug, Default)]
pub(crate) struct OpTensorLogWriter {
    buf: Vec<u8>,
    file: Option<(io::BufWriter<File>, u64)>,
    len: u64,
}

impl OpTensorLogWriter {
    /// Appends one op's inputs and output.
    pub fn push<'a>(
        &mut self,
        inputs: impl ExactSizeIterator<Item = &'a str>,
        output: Option<&str>,
    ) -> io::Result<()> {
        put(&mut self.buf, inputs.len() as u64);
        for i in inputs {
            put(&mut self.buf, i.len() as u64);
            self.buf.extend_from_slice(i.as_bytes());
        }
        match output {
            Some(o) => {
                put(&mut self.buf, o.len() as u64 + 1);
                self.buf.extend_from_slice(o.as_bytes());
            }
            None => put(&mut self.buf, 0),
        }
        self.len += 1;
        let limit = if self.file.is_some() {
            1 << 20
        } else {
            TO_FILE_BYTES
        };
        if self.buf.len() >= limit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            self.file = Some((io::BufWriter::new(tempfile::tempfile()?), 0));
        }
        let (w, n) = self.file.as_mut().expect("set");
        w.write_all(&self.buf)?;
        *n += self.buf.len() as u64;
        self.buf.clear();
        // The buffer grew to the in-memory limit; appends to the file need far less.
        if self.buf.capacity() > 2 << 20 {
            self.buf = Vec::with_capacity(1 << 20);
        }
        Ok(())
    }

    /// The finished log.
    ///
    /// # Errors
    /// I/O errors of the temporary file.
    pub fn finish(mut self) -> io::Result<OpTensorLog> {
        let storage = if self.file.is_some() {
            self.flush()?;
            let (w, len) = self.file.take().expect("set");
            Storage::File(w.into_inner().map_err(|e| e.into_error())?, len)
        } else {
            self.buf.shrink_to_fit();
            Storage::Buffer(std::mem::take(&mut self.buf))
        };
        Ok(OpTensorLog {
            storage,
            len: self.len,
        })
    }
}

#[derive(Debug)]
enum Storage {
    Buffer(Vec<u8>),
    File(File, u64),
}

/// The tensor ids of a spilled document's ops (see the module docs).
#[derive(Debug)]
pub struct OpTensorLog {
    storage: Storage,
    len: u64,
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
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

impl OpTensorLog {
    /// Number of ops.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True without ops.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `f(op index, inputs, output)` for every op, in file order.
    ///
    /// # Errors
    /// I/O errors reading the temporary file back.
    pub fn for_each(&self, mut f: impl FnMut(usize, &[&str], Option<&str>)) -> io::Result<()> {
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "op tensor log ends inside a record",
            )
        };
        // Decodes one record at `pos`; `None` when the buffer ends inside it.
        let mut one = |buf: &[u8], pos: &mut usize, op: usize| -> Option<()> {
            let text =
                |buf: &[u8], pos: &mut usize, len: usize| -> Option<std::ops::Range<usize>> {
                    let r = *pos..*pos + len;
                    buf.get(r.clone())?;
                    *pos += len;
                    Some(r)
                };
            let n = get(buf, pos)? as usize;
            let mut ranges = Vec::with_capacity(n);
            for _ in 0..n {
                let len = get(buf, pos)? as usize;
                ranges.push(text(buf, pos, len)?);
            }
            let out = match get(buf, pos)? as usize {
                0 => None,
                len => Some(text(buf, pos, len - 1)?),
            };
            let s = |r: std::ops::Range<usize>| std::str::from_utf8(&buf[r]).ok();
            let inputs: Vec<&str> = ranges.into_iter().map(s).collect::<Option<_>>()?;
            let output = match out {
                Some(r) => Some(s(r)?),
                None => None,
            };
            f(op, &inputs, output);
            Some(())
        };
        match &self.storage {
            Storage::Buffer(b) => {
                let mut pos = 0;
                for op in 0..self.len as usize {
                    one(b, &mut pos, op).ok_or_else(bad)?;
                }
            }
            Storage::File(file, len) => {
                let mut buf: Vec<u8> = Vec::new();
                let (mut offset, mut op) = (0u64, 0usize);
                while op < self.len as usize {
                    // Read more, at least doubling when one record does not fit.
                    let want = (buf.len() * 2).max(1 << 16);
                    let keep = buf.len();
                    let room = ((len - offset) as usize).min(want - keep);
                    if room == 0 {
                        return Err(bad());
                    }
                    buf.resize(keep + room, 0);
                    read_at(file, &mut buf[keep..], offset)?;
                    offset += room as u64;
                    let mut pos = 0;
                    while op < self.len as usize {
                        let mut probe = pos;
                        // Only decode records known to be whole, unless the file is read.
                        let whole = {
                            let mut p = pos;
                            skip(&buf, &mut p).is_some()
                        };
                        if !whole {
                            break;
                        }
                        one(&buf, &mut probe, op).ok_or_else(bad)?;
                        pos = probe;
                        op += 1;
                    }
                    buf.drain(..pos);
                }
            }
        }
        Ok(())
    }
}

/// Skips one record; `None` when the buffer ends inside it.
fn skip(buf: &[u8], pos: &mut usize) -> Option<()> {
    let n = get(buf, pos)?;
    for _ in 0..n {
        let len = get(buf, pos)? as usize;
        buf.get(*pos..*pos + len)?;
        *pos += len;
    }
    match get(buf, pos)? as usize {
        0 => {}
        len => {
            buf.get(*pos..*pos + len - 1)?;
            *pos += len - 1;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_a_buffer_and_a_file() {
        for big in [false, true] {
            let mut w = OpTensorLogWriter::default();
            let n = if big { 300_000 } else { 5 };
            let long = "x".repeat(70_000);
            for i in 0..n {
                let a = format!("t{i}");
                let inputs: Vec<&str> = match i % 3 {
                    0 => vec![],
                    1 => vec![&a],
                    _ => vec![&a, if i == 2 { &long } else { "z" }],
                };
                w.push(inputs.into_iter(), (i % 2 == 0).then_some("out"))
                    .unwrap();
            }
            let log = w.finish().unwrap();
            assert_eq!(log.len(), n);
            let mut seen = 0;
            log.for_each(|op, inputs, output| {
                assert_eq!(op, seen);
                assert_eq!(inputs.len(), op % 3);
                if op % 3 > 0 {
                    assert_eq!(inputs[0], format!("t{op}"));
                }
                if op == 2 {
                    assert_eq!(inputs[1].len(), 70_000);
                }
                assert_eq!(output, (op % 2 == 0).then_some("out"));
                seen += 1;
            })
            .unwrap();
            assert_eq!(seen, n);
        }
    }
}
