//! The tensor ids of a spilled document's ops (inputs and output), kept out of its resident
//! memory: one record per op, in file order, in a buffer and then an unnamed temporary file.
//! They are mostly unique per op, so interning them would grow with the trace; only the
//! execution graph and the data-edge check read them. The bytes are a
//! [`crate::spill_buffer::SpillWriter`]'s.

use std::io;

use crate::spill_buffer::{SpillWriter, SpilledBytes};
use crate::varint::{get, put};

/// Appends the tensor ids of ops.
#[derive(Debug, Default)]
pub(crate) struct OpTensorLogWriter {
    bytes: SpillWriter,
    len: u64,
}

impl OpTensorLogWriter {
    /// Appends one op's inputs and output.
    pub fn push<'a>(
        &mut self,
        inputs: impl ExactSizeIterator<Item = &'a str>,
        output: Option<&str>,
    ) -> io::Result<()> {
        let buf = self.bytes.buffer();
        put(buf, inputs.len() as u64);
        for i in inputs {
            put(buf, i.len() as u64);
            buf.extend_from_slice(i.as_bytes());
        }
        match output {
            Some(o) => {
                put(buf, o.len() as u64 + 1);
                buf.extend_from_slice(o.as_bytes());
            }
            None => put(buf, 0),
        }
        self.len += 1;
        self.bytes.end_record()
    }

    /// The finished log.
    ///
    /// # Errors
    /// I/O errors of the temporary file.
    pub fn finish(self) -> io::Result<OpTensorLog> {
        Ok(OpTensorLog {
            bytes: self.bytes.finish()?,
            len: self.len,
        })
    }
}

/// The tensor ids of a spilled document's ops (see the module docs).
#[derive(Debug)]
pub struct OpTensorLog {
    bytes: SpilledBytes,
    len: u64,
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
        let mut op = 0usize;
        // One record at `pos`; `None` (nothing consumed) when the window ends inside it.
        self.bytes
            .for_each_record(self.len, "op tensor log", |buf, pos| {
                let text = |p: &mut usize, len: usize| -> Option<&str> {
                    let s = std::str::from_utf8(buf.get(*p..p.checked_add(len)?)?).ok()?;
                    *p += len;
                    Some(s)
                };
                let mut p = *pos;
                let n = get(buf, &mut p)? as usize;
                let mut inputs: Vec<&str> = Vec::with_capacity(n.min(1 << 10));
                for _ in 0..n {
                    let len = get(buf, &mut p)? as usize;
                    inputs.push(text(&mut p, len)?);
                }
                let output = match get(buf, &mut p)? as usize {
                    0 => None,
                    len => Some(text(&mut p, len - 1)?),
                };
                f(op, &inputs, output);
                op += 1;
                *pos = p;
                Some(())
            })
    }
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
