//! Process-wide figures of the sampler, summed over every session (for the `ab_overhead` bench
//! and the README's cost table): the session that writes a thread's samples adds them here.

use std::sync::atomic::{AtomicU64, Ordering};

static SAMPLES: AtomicU64 = AtomicU64::new(0);
static HANDLER_NS: AtomicU64 = AtomicU64::new(0);
static FRAME_POINTER_SAMPLES: AtomicU64 = AtomicU64::new(0);
static SYMBOLIZE_NS: AtomicU64 = AtomicU64::new(0);
static UNIQUE_ADDRESSES: AtomicU64 = AtomicU64::new(0);
static FINISHES: AtomicU64 = AtomicU64::new(0);

/// Process-wide figures of the sampler so far (all zero where it cannot run). Totals since
/// process start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SamplerStats {
    /// Samples written, all sessions.
    pub samples: u64,
    /// Time spent in the signal handler for them, ns.
    pub handler_ns: u64,
    /// Samples whose stack was walked by frame pointers (the rest: libgcc).
    pub frame_pointer_samples: u64,
    /// Time spent symbolising and building the events after the steps, ns.
    pub symbolize_ns: u64,
    /// Unique addresses resolved.
    pub unique_addresses: u64,
    /// Sessions whose samples were written.
    pub finishes: u64,
}

/// Process-wide figures of the sampler so far.
pub fn stats() -> SamplerStats {
    SamplerStats {
        samples: SAMPLES.load(Ordering::Relaxed),
        handler_ns: HANDLER_NS.load(Ordering::Relaxed),
        frame_pointer_samples: FRAME_POINTER_SAMPLES.load(Ordering::Relaxed),
        symbolize_ns: SYMBOLIZE_NS.load(Ordering::Relaxed),
        unique_addresses: UNIQUE_ADDRESSES.load(Ordering::Relaxed),
        finishes: FINISHES.load(Ordering::Relaxed),
    }
}

/// Adds one session's written samples to the totals: `samples`, their handler time
/// (`handler_ns`), how many were walked by frame pointers, the time spent symbolising
/// (`symbolize_ns`) and the unique addresses it resolved.
pub fn add_finish(
    samples: u64,
    handler_ns: u64,
    frame_pointer_samples: u64,
    symbolize_ns: u64,
    unique_addresses: u64,
) {
    SAMPLES.fetch_add(samples, Ordering::Relaxed);
    HANDLER_NS.fetch_add(handler_ns, Ordering::Relaxed);
    FRAME_POINTER_SAMPLES.fetch_add(frame_pointer_samples, Ordering::Relaxed);
    SYMBOLIZE_NS.fetch_add(symbolize_ns, Ordering::Relaxed);
    UNIQUE_ADDRESSES.fetch_add(unique_addresses, Ordering::Relaxed);
    FINISHES.fetch_add(1, Ordering::Relaxed);
}
