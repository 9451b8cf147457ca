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
    /// Tensor statistics are not defined for this dtype.
    #[error("tensor statistics are not supported for dtype {dtype} ({reason})")]
    UnsupportedDtype {
        /// The dtype label.
        dtype: &'static str,
        /// Why (integer, sub-byte).
        reason: &'static str,
    },
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
