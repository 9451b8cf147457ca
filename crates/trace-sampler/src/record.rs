//! What a sampled thread's buffer holds, read back after the step: its [`Records`] and the
//! [`SlotCounts`] of its accounting. Platform-free (the Linux slots write this layout; the
//! fallback has none).
//!
//! A record is variable-length, in `u64` words: the timestamp (ns since
//! `trace_alloc::clock::process_base`), then `frames | flags << 32`, then the frame addresses,
//! innermost first (the first is the interrupted program counter, the others return addresses).

/// Flag of a record's second word: the stack was cut (depth limit, or unwinding failed).
pub(crate) const TRUNCATED: u64 = 1 << 32;

/// What a slot counted, read after it closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotCounts {
    /// Timer expirations seen: samples plus lost ones.
    pub ticks: u64,
    /// Records written.
    pub samples: u64,
    /// Expirations merged by the kernel (`si_overrun`): no stack taken.
    pub lost_overrun: u64,
    /// Records that did not fit in the buffer.
    pub lost_buffer: u64,
    /// Time spent in the handler (from its timestamp to the record's end), ns.
    pub handler_ns: u64,
    /// Samples whose stack was walked by frame pointers (the rest by libgcc).
    pub frame_pointer_samples: u64,
}

/// One record read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Ns since `trace_alloc::clock::process_base`.
    pub process_ns: u64,
    /// Addresses, innermost first: the interrupted program counter, then return addresses.
    pub frames: &'a [u64],
    /// The stack was cut.
    pub truncated: bool,
}

/// Iterator over a closed slot's records.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    words: &'a [u64],
}

impl<'a> Records<'a> {
    /// Records over the words a slot's buffer holds (see the module docs for the layout).
    pub fn new(words: &'a [u64]) -> Self {
        Self { words }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let (&process_ns, rest) = self.words.split_first()?;
        let (&meta, rest) = rest.split_first()?;
        let n = (meta & u64::from(u32::MAX)) as usize;
        let frames = rest.get(..n)?;
        self.words = &rest[n..];
        Some(Record {
            process_ns,
            frames,
            truncated: meta & TRUNCATED != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_back_in_order_and_a_cut_record_ends_the_walk() {
        let words = [10, 2 | TRUNCATED, 0xa, 0xb, 20, 1, 0xc, 30, 5, 0xd];
        let got: Vec<Record<'_>> = Records::new(&words).collect();
        assert_eq!(got.len(), 2, "the third record is cut short: not read");
        assert_eq!(
            got[0],
            Record {
                process_ns: 10,
                frames: &[0xa, 0xb],
                truncated: true
            }
        );
        assert_eq!(
            got[1],
            Record {
                process_ns: 20,
                frames: &[0xc],
                truncated: false
            }
        );
    }
}
