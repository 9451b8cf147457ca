//! The probe's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the probe. The probe never panics into user code; it returns
/// these instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The run configuration breaks a rule (one-based step, warm-up below the step, valid
    /// contract and comparison identity); every violation is listed.
    #[error("invalid profile run: {}", .problems.join("; "))]
    InvalidRun {
        /// Every violation found.
        problems: Vec<String>,
    },
    /// The trace file could not be created.
    #[error("cannot create trace file {path}")]
    CreateFile {
        /// The path that was tried.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The first I/O error of the writer thread (sticky: later writes are skipped).
    #[error("writing the trace failed")]
    Io(#[source] std::io::Error),
    /// The writer thread could not be started.
    #[error("cannot start the trace writer thread")]
    WriterSpawn(#[source] std::io::Error),
    /// The writer thread panicked (a bug in the probe, reported rather than propagated).
    #[error("the trace writer thread panicked")]
    WriterPanicked,
    /// `finish()` was called but the capture step never ran; the trace ends with a `failed`
    /// terminal saying so.
    #[error("capture step {step} was never reached (the trace ends with a failed terminal)")]
    CaptureStepNotReached {
        /// The configured one-based capture step.
        step: u64,
    },
    /// The session was already finished.
    #[error("the trace session is already finished")]
    AlreadyFinished,
    /// A Candle call made by the probe failed (device synchronisation, a device read).
    #[error("candle error in the probe while {context}")]
    Candle {
        /// What the probe was doing.
        context: &'static str,
        /// The Candle error.
        #[source]
        source: candle_core::Error,
    },
    /// A capture plug-in did not run the inner optimizer's construction (a bug in the probe,
    /// reported rather than propagated).
    #[error("a capture plug-in did not run the optimizer construction")]
    PluginSkippedConstruction,
    /// Tensor statistics are not defined for this dtype.
    #[error("tensor statistics are not supported for dtype {dtype} ({reason})")]
    UnsupportedDtype {
        /// The dtype label.
        dtype: &'static str,
        /// Why (integer, sub-byte).
        reason: &'static str,
    },
    /// The profiler could not install its `tracing` layer as the global default (another global
    /// subscriber is set): use [`crate::TracingMode::Manual`] and add
    /// [`crate::Profiler::layer`] to your own subscriber.
    #[error("cannot install the probe's tracing layer as the global default: {0}")]
    TracingInstall(String),
    /// A gradient contract passed by the caller is invalid.
    #[error("invalid gradient contract: {}", .problems.join("; "))]
    InvalidGradientContract {
        /// Every violation found.
        problems: Vec<String>,
    },
}

impl ProbeError {
    pub(crate) fn candle(context: &'static str) -> impl FnOnce(candle_core::Error) -> ProbeError {
        move |source| ProbeError::Candle { context, source }
    }
}

/// So that `?` works in a `candle_core::Result` function: the probe's error becomes a wrapped
/// Candle error whose message is the probe error's (its cause chain is not kept; use
/// [`ProbeError`] directly to match on causes).
impl From<ProbeError> for candle_core::Error {
    fn from(err: ProbeError) -> Self {
        let mut message = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        candle_core::Error::wrap(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_into_a_candle_error_with_its_causes() {
        fn run() -> candle_core::Result<()> {
            Err(ProbeError::CreateFile {
                path: "x/trace.jsonl".into(),
                source: std::io::Error::other("read-only"),
            })?;
            Ok(())
        }
        let text = run().unwrap_err().to_string();
        assert!(
            text.contains("x/trace.jsonl") && text.contains("read-only"),
            "{text}"
        );
    }
}
