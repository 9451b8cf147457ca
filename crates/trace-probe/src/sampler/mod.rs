//! The wall-clock stack sampler: during the captured step a POSIX timer on `CLOCK_MONOTONIC`
//! sends `SIGPROF` to the capturing thread (and to threads that called
//! [`crate::TraceSession::sample_this_thread`]) [`crate::ProfileRun::sample_hz`] times a second;
//! the handler writes the interrupted stack into a preallocated buffer; after the step the
//! addresses are symbolised once each and the trace gets `frame`, `stack`, `sample` and
//! `sampler` events (trace/12) and `operations: sampled` in its contract.
//!
//! | module | job |
//! |---|---|
//! | `signal` | installs the `SIGPROF` handler once per process (refusing when another is installed); the async-signal-safe handler |
//! | `timer` | per-thread timers (`timer_create`, `SIGEV_THREAD_ID`) |
//! | `slots` | the fixed table of per-thread `mmap`'d buffers the handler writes variable-length records into, with the loss counters |
//! | `unwind` | the allocation-free stack capture (`capture`, reusable from the allocator hook; `capture_from` for the handler) |
//! | `crate::stacks` | symbolisation after the step and the trace's shared frame and stack table (with the allocation sites) |
//! | `session_plugin` | the capture plug-in: arming and disarming, threads, span attribution, the events |
//! | `guard` | [`SamplingGuard`], what `sample_this_thread` returns |
//!
//! Linux on x86_64 and aarch64 only (cfg `stack_sampler`, set by the build script); elsewhere
//! the plug-in declares `operations` unavailable with the reason.

mod guard;
#[cfg(stack_sampler)]
mod session_plugin;
#[cfg(stack_sampler)]
mod signal;
#[cfg(stack_sampler)]
mod slots;
#[cfg(stack_sampler)]
mod timer;
#[cfg(stack_sampler)]
pub(crate) mod unwind;

pub use guard::SamplingGuard;
#[cfg(stack_sampler)]
pub(crate) use session_plugin::SamplerPlugin;

use trace_schema::{CaptureContract, ContractField, CoverageLevel};

/// The default sample rate, samples per second per thread.
pub const DEFAULT_SAMPLE_HZ: u32 = 1000;
/// The highest rate [`crate::ProfileRun::sample_hz`] accepts.
pub const MAX_SAMPLE_HZ: u32 = 100_000;
/// The default size of a thread's sample buffer: 64 MiB of address space, reserved with
/// `MAP_NORESERVE` (only the pages written cost memory): about 200,000 samples of 40 frames.
pub const DEFAULT_SAMPLE_BUFFER_BYTES: usize = 64 << 20;

/// Why the sampler cannot run on this build, if it cannot.
pub const UNSUPPORTED_REASON: Option<&str> = if cfg!(stack_sampler) {
    None
} else {
    Some(
        "stack sampling needs Linux on x86_64 or aarch64 (per-thread POSIX timers and the \
         interrupted program counter); this build's target has neither",
    )
};

/// What a session's sampler is asked to do (from the run).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamplerSettings {
    /// Samples per second per thread (0: off).
    pub(crate) hz: u32,
    /// Deterministic mode: off, nothing declared.
    pub(crate) deterministic: bool,
    /// Bytes of each thread's buffer.
    #[cfg_attr(not(stack_sampler), allow(dead_code))]
    pub(crate) buffer_bytes: usize,
}

impl SamplerSettings {
    /// Why sampling is off by configuration or platform (deterministic mode aside).
    pub(crate) fn off_reason(&self) -> Option<&'static str> {
        if self.hz == 0 {
            return Some("stack sampling off (ProfileRun::sample_hz(0))");
        }
        UNSUPPORTED_REASON
    }

    /// The timer period, ns.
    #[cfg_attr(not(stack_sampler), allow(dead_code))]
    pub(crate) fn period_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz.max(1))
    }
}

/// Writes why operations are not sampled, unless something else already declared them.
pub(crate) fn declare_off(contract: &mut CaptureContract, reason: &str) {
    if contract.operations == CoverageLevel::None
        && contract.reason(ContractField::Operations).is_none()
    {
        contract
            .reasons
            .insert(ContractField::Operations.into(), reason.to_string());
    }
}

/// Process-wide figures of the sampler so far (for the `ab_overhead` bench and the README).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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

/// Process-wide figures of the sampler so far (zero where it cannot run).
#[doc(hidden)]
pub fn stats() -> SamplerStats {
    #[cfg(stack_sampler)]
    {
        session_plugin::stats()
    }
    #[cfg(not(stack_sampler))]
    {
        SamplerStats::default()
    }
}

/// The plug-in of a build where the sampler cannot run: declares why.
#[cfg(not(stack_sampler))]
#[derive(Debug)]
pub(crate) struct SamplerPlugin {
    settings: SamplerSettings,
}

#[cfg(not(stack_sampler))]
impl SamplerPlugin {
    pub(crate) fn new(settings: SamplerSettings) -> Self {
        Self { settings }
    }
}

#[cfg(not(stack_sampler))]
impl crate::plugin::CapturePlugin for SamplerPlugin {
    fn on_meta(&self, meta: &mut trace_schema::RunMeta) {
        if self.settings.deterministic {
            return;
        }
        if let Some(reason) = self.settings.off_reason() {
            declare_off(
                meta.capture_contract.get_or_insert_with(Default::default),
                reason,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_reasons_and_the_period() {
        let s = SamplerSettings {
            hz: 0,
            deterministic: false,
            buffer_bytes: 1,
        };
        assert!(s.off_reason().is_some_and(|r| r.contains("sample_hz(0)")));
        let s = SamplerSettings { hz: 1000, ..s };
        assert_eq!(s.off_reason(), UNSUPPORTED_REASON);
        assert_eq!(s.period_ns(), 1_000_000);
        let mut c = CaptureContract::default();
        declare_off(&mut c, "why");
        assert_eq!(c.reason(ContractField::Operations), Some("why"));
        declare_off(&mut c, "other");
        assert_eq!(c.reason(ContractField::Operations), Some("why"), "kept");
    }

    /// Where the sampler cannot run, a trace says so: `operations` stays `none` with the
    /// platform's reason (and deterministic mode declares nothing).
    #[cfg(not(stack_sampler))]
    #[test]
    fn the_fallback_declares_operations_unavailable_with_the_reason() {
        use crate::plugin::CapturePlugin;
        let settings = SamplerSettings {
            hz: DEFAULT_SAMPLE_HZ,
            deterministic: false,
            buffer_bytes: DEFAULT_SAMPLE_BUFFER_BYTES,
        };
        let mut meta = trace_schema::RunMeta::default();
        SamplerPlugin::new(settings).on_meta(&mut meta);
        let contract = meta.capture_contract.unwrap_or_default();
        assert_eq!(contract.operations, CoverageLevel::None);
        assert_eq!(
            contract.reason(ContractField::Operations),
            UNSUPPORTED_REASON
        );
        assert!(UNSUPPORTED_REASON.is_some());
    }
}
