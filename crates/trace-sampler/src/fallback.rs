//! The sampler where it cannot run (not Linux on x86_64 or aarch64, or built with
//! `TRACE_PROBE_NO_SAMPLER=1`): the same door as `linux/`, where [`install`] and
//! [`SampleBuffer::reserve`] say why not, so nothing is ever sampled.

use crate::record::{Records, SlotCounts};
use crate::resolved::Resolved;

/// Why the sampler cannot run on this build.
pub const UNSUPPORTED_REASON: Option<&str> = Some(UNSUPPORTED);

const UNSUPPORTED: &str = "stack sampling needs Linux on x86_64 or aarch64 (per-thread POSIX \
     timers and the interrupted program counter); this build's target has neither";

/// Most threads sampled at once: none here.
pub const SLOTS: usize = 0;

/// A kernel thread id (none here: always 0).
pub type Tid = i32;

/// 0: no kernel thread ids here.
pub fn current_tid() -> Tid {
    0
}

/// Refuses: no sampler on this build.
///
/// # Errors
/// Always, with why.
pub fn install() -> Result<(), String> {
    Err(UNSUPPORTED.to_string())
}

/// Nothing to allow.
pub fn set_frame_pointers(_on: bool) {}

/// No symboliser here: one unnamed frame.
pub(crate) fn resolve(_addr: u64, _exact: bool) -> Vec<Resolved> {
    vec![Resolved::default()]
}

/// Never made here ([`SampleBuffer::reserve`] refuses).
#[derive(Debug)]
pub struct SampleBuffer {
    never: Never,
}

#[derive(Debug)]
enum Never {}

impl SampleBuffer {
    /// Refuses: no sampler on this build.
    ///
    /// # Errors
    /// Always, with why.
    pub fn reserve(_bytes: usize) -> Result<Self, String> {
        Err(UNSUPPORTED.to_string())
    }

    /// Unreachable: no buffer exists here.
    ///
    /// # Errors
    /// None (no value of this type exists).
    pub fn start(self, _tid: Tid, _period_ns: u64) -> Result<ThreadSampler, String> {
        match self.never {}
    }
}

/// Never made here.
#[derive(Debug)]
pub struct ThreadSampler {
    never: Never,
}

impl ThreadSampler {
    /// Unreachable: no sampler exists here.
    pub fn stop(&mut self) {
        match self.never {}
    }

    /// Unreachable: no sampler exists here.
    pub fn records(&self) -> Records<'_> {
        match self.never {}
    }

    /// Unreachable: no sampler exists here.
    pub fn counts(&self) -> SlotCounts {
        match self.never {}
    }
}
