//! A wall-clock stack sampler and the trace's symbol table, with no Candle in sight.
//!
//! During a captured step a POSIX timer on `CLOCK_MONOTONIC` sends `SIGPROF` to each sampled
//! thread a given number of times a second; the async-signal-safe handler writes the
//! interrupted stack (by frame pointers where allowed, otherwise the DWARF walk of
//! `trace_alloc::walk`) into the thread's preallocated `mmap`'d buffer; after the step the
//! records are read back ([`ThreadSampler::records`]) and their addresses interned into a
//! [`SessionStacks`] table, each unique address symbolised once.
//!
//! The narrow door, in the order a capture uses it:
//! 1. [`install`] the handler (once per process; refuses when another profiler owns `SIGPROF`);
//! 2. [`SampleBuffer::reserve`] a buffer per thread, then [`SampleBuffer::start`] its timer
//!    ([`current_tid`] names the thread);
//! 3. [`ThreadSampler::stop`] after the step, then [`ThreadSampler::records`] and
//!    [`ThreadSampler::counts`];
//! 4. [`SessionStacks::add`] each record's frames, [`SessionStacks::write`] the table's events.
//!
//! ```
//! let Ok(()) = trace_sampler::install() else {
//!     return; // not Linux on x86_64/aarch64, or another profiler owns SIGPROF
//! };
//! let buffer = trace_sampler::SampleBuffer::reserve(1 << 20).expect("a slot");
//! let mut sampler = buffer
//!     .start(trace_sampler::current_tid(), 1_000_000) // 1 kHz
//!     .expect("a timer");
//! let t = std::time::Instant::now();
//! while t.elapsed() < std::time::Duration::from_millis(30) {
//!     std::hint::black_box((0..1000u64).sum::<u64>());
//! }
//! sampler.stop();
//! let stacks = trace_sampler::SessionStacks::default();
//! for record in sampler.records() {
//!     stacks.add(record.frames, true);
//! }
//! assert!(sampler.counts().ticks >= sampler.counts().samples);
//! ```
//!
//! Platform code lives in one folder: `src/linux/` (Linux on x86_64 and aarch64, the cfg
//! `stack_sampler` set by the build script); elsewhere `src/fallback.rs` has the same door and
//! [`install`] says why not ([`UNSUPPORTED_REASON`]).
//!
//! | module | job |
//! |---|---|
//! | `linux/` | the handler, the timers, the slots, the symboliser |
//! | `fallback` | the same door where the sampler cannot run |
//! | `record` | [`Records`] and [`SlotCounts`]: what a buffer holds, read back |
//! | [`stacks`] | the interned frame and stack table shared by samples and allocation sites |
//! | [`stats`] | process-wide figures (for the benches) |

#![deny(missing_docs)]

#[cfg_attr(stack_sampler, path = "linux/mod.rs")]
#[cfg_attr(not(stack_sampler), path = "fallback.rs")]
mod platform;
mod record;
mod resolved;
pub mod stacks;
pub mod stats;

pub use platform::{
    current_tid, install, set_frame_pointers, SampleBuffer, ThreadSampler, Tid, SLOTS,
};
pub use record::{Record, Records, SlotCounts};
pub use resolved::Resolved;
pub use stacks::{symbol_cache_bytes, SessionStacks, TableFigures};
pub use stats::{stats, SamplerStats};

/// Why the sampler cannot run on this build, if it cannot.
pub const UNSUPPORTED_REASON: Option<&str> = platform::UNSUPPORTED_REASON;

/// Whether the sampler can run on this build (Linux on x86_64 or aarch64).
pub const SUPPORTED: bool = UNSUPPORTED_REASON.is_none();

/// The default sample rate, samples per second per thread.
pub const DEFAULT_SAMPLE_HZ: u32 = 1000;
/// The highest rate a capture may ask for, samples per second per thread.
pub const MAX_SAMPLE_HZ: u32 = 100_000;
/// The default size of a thread's sample buffer: 64 MiB of address space, reserved with
/// `MAP_NORESERVE` (only the pages written cost memory): about 200,000 samples of 40 frames.
pub const DEFAULT_SAMPLE_BUFFER_BYTES: usize = 64 << 20;
