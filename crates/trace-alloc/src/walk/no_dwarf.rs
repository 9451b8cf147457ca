//! The DWARF walk where the target has none (the cfg `dwarf_walk` unset): the same functions as
//! `dwarf.rs`, writing nothing, so allocation sites are off ([`SUPPORTED`] is false) and a
//! signal handler keeps only the interrupted program counter.

/// Whether this target walks stacks by DWARF call-frame information (false here).
pub const SUPPORTED: bool = false;

/// Most frames a signal handler's stack keeps (see `dwarf.rs`).
pub const MAX_FRAMES: usize = 128;

/// What a capture wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captured {
    /// Addresses written at the start of the buffer.
    pub len: usize,
    /// The stack was cut (always true here when anything was written).
    pub truncated: bool,
}

/// Writes nothing: no unwinder on this target. Returns 0.
pub fn capture(_buf: &mut [usize]) -> usize {
    0
}

/// Writes nothing: no unwinder on this target.
pub fn capture_cut(_buf: &mut [usize]) -> Captured {
    Captured {
        len: 0,
        truncated: false,
    }
}

/// Keeps only `pc` (no unwinder on this target).
pub fn capture_from(pc: usize, buf: &mut [usize]) -> Captured {
    match buf.first_mut() {
        Some(slot) => {
            *slot = pc;
            Captured {
                len: 1,
                truncated: true,
            }
        }
        None => Captured {
            len: 0,
            truncated: true,
        },
    }
}

/// Nothing to initialise.
pub fn warm_up() {}
