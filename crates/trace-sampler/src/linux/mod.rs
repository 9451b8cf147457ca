//! The sampler on Linux (x86_64 and aarch64): the `SIGPROF` handler, per-thread POSIX timers,
//! the table of `mmap`'d sample slots and the symboliser.
//!
//! | module | job |
//! |---|---|
//! | `signal` | installs the `SIGPROF` handler once per process (refusing when another is installed); the async-signal-safe handler |
//! | `timer` | per-thread timers (`timer_create`, `SIGEV_THREAD_ID`) |
//! | `slots` | the fixed table of per-thread `mmap`'d buffers the handler writes variable-length records into, with the loss counters |
//! | `symbols` | symbolisation after the step (`backtrace::resolve`, inline frames, `dladdr`) |

mod signal;
mod slots;
mod symbols;
mod timer;

pub use signal::{install, set_frame_pointers};
pub use slots::SLOTS;
pub(crate) use symbols::resolve;

use crate::record::{Records, SlotCounts};

/// The sampler runs on this build.
pub const UNSUPPORTED_REASON: Option<&str> = None;

/// A kernel thread id.
pub type Tid = libc::pid_t;

/// The calling thread's kernel thread id.
pub fn current_tid() -> Tid {
    timer::current_tid()
}

/// A reserved sample buffer for one thread, not yet sampled: [`SampleBuffer::start`] aims a
/// timer at the thread.
#[derive(Debug)]
pub struct SampleBuffer {
    slot: slots::SlotHandle,
}

impl SampleBuffer {
    /// Reserves a slot with a buffer of `bytes` (`MAP_NORESERVE`: only the pages written cost
    /// memory).
    ///
    /// # Errors
    /// Every slot is in use ([`SLOTS`] threads sampled at once), or `mmap` failed; the message
    /// says which.
    pub fn reserve(bytes: usize) -> Result<Self, String> {
        slots::SlotHandle::reserve(bytes).map(|slot| Self { slot })
    }

    /// Opens the buffer to the handler and starts a timer that sends `SIGPROF` to thread `tid`
    /// every `period_ns` (first after one period). Install the handler first ([`install`]).
    ///
    /// # Errors
    /// `timer_create` or `timer_settime` failed (e.g. the thread has exited), with the OS error;
    /// the buffer is freed.
    pub fn start(self, tid: Tid, period_ns: u64) -> Result<ThreadSampler, String> {
        self.slot.open();
        let timer = timer::ThreadTimer::start(tid, self.slot.token(), period_ns)?;
        Ok(ThreadSampler {
            slot: self.slot,
            timer: Some(timer),
        })
    }
}

/// One thread being sampled: its timer and its buffer. [`ThreadSampler::stop`] deletes the
/// timer and closes the buffer; dropping it does too, then frees the slot and unmaps the buffer.
#[derive(Debug)]
pub struct ThreadSampler {
    slot: slots::SlotHandle,
    timer: Option<timer::ThreadTimer>,
}

impl ThreadSampler {
    /// Stops sampling: the timer deleted (`timer_delete`), the buffer closed to the handler
    /// (waiting for a handler in progress on another thread). Idempotent.
    pub fn stop(&mut self) {
        self.timer = None;
        self.slot.close();
    }

    /// The records written, in order (closes the buffer first, so they are final).
    pub fn records(&self) -> Records<'_> {
        self.slot.records()
    }

    /// What the buffer counted so far (exact once stopped).
    pub fn counts(&self) -> SlotCounts {
        self.slot.counts()
    }
}
