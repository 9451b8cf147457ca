//! The wall-clock stack sampler's side in the session: during the captured step the
//! `trace-sampler` crate's timers send `SIGPROF` to the capturing thread (and to threads that
//! called [`crate::TraceSession::sample_this_thread`]) [`crate::ProfileRun::sample_hz`] times a
//! second; after the step the addresses are symbolised once each into the session's symbol
//! table and the trace gets `frame`, `stack`, `sample` and `sampler` events (trace/12) and
//! `operations: sampled` in its contract.
//!
//! | module | job |
//! |---|---|
//! | `session_plugin` | the capture plug-in: arming and disarming, threads, span attribution, the events |
//!
//! What `TraceSession::sample_this_thread` returns (`SamplingGuard`) is the session's.
//!
//! The handler, the timers, the buffers and the symbol table are `trace_sampler`'s (no Candle);
//! where it cannot run (not Linux on x86_64 or aarch64) its door refuses with the reason and the
//! plug-in declares `operations` unavailable with it.

pub(crate) mod session_plugin;

use trace_sampler::UNSUPPORTED_REASON;
use trace_wire::{CaptureContract, ContractField, CoverageLevel};

/// What a session's sampler is asked to do (from the run).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamplerSettings {
    /// Samples per second per thread (0: off).
    pub(crate) hz: u32,
    /// Deterministic mode: off, nothing declared.
    pub(crate) deterministic: bool,
    /// Bytes of each thread's buffer.
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
    #[test]
    fn the_fallback_declares_operations_unavailable_with_the_reason() {
        if UNSUPPORTED_REASON.is_none() {
            return; // the sampler runs on this build (TRACE_PROBE_NO_SAMPLER=1 checks this)
        }
        use crate::session::plugin::CapturePlugin;
        use session_plugin::SamplerPlugin;
        let settings = SamplerSettings {
            hz: trace_sampler::DEFAULT_SAMPLE_HZ,
            deterministic: false,
            buffer_bytes: trace_sampler::DEFAULT_SAMPLE_BUFFER_BYTES,
        };
        let mut meta = trace_wire::RunMeta::default();
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
