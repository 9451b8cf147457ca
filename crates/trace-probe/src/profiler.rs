//! [`Profiler`]: the one guard a training loop holds, like dhat's `Profiler` or
//! tracing-chrome's flush guard. Created from the run config ([`crate::ProfileRun::start`]), it
//! opens the session, installs the `tracing` layer with its TRACE filter (module spans), makes
//! the session the one a [`crate::ProbedOptimizer`] built afterwards reports to, and finishes
//! the trace when dropped.

use std::ops::Deref;
use std::sync::{Mutex, Weak};
use std::thread::ThreadId;

use tracing::Subscriber;
use tracing_subscriber::filter::{Filtered, LevelFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

use crate::error::ProbeError;
use crate::layer::ProbeLayer;
use crate::run::TracingMode;
use crate::session::{Inner, TraceSession, TraceSummary};

/// The profiling guard (see the crate docs' quick start). Derefs to its [`TraceSession`] for
/// facts, spans and passes. Dropping it finishes the trace (a `complete` terminal, or `failed`
/// with the reason), so a forgotten [`Profiler::finish`] never leaves a truncated trace; call
/// `finish` to get the summary and the errors. `!Send` with the default [`TracingMode`]
/// (a thread's default subscriber must be dropped on that thread).
#[must_use = "profiling stops when the profiler is dropped"]
pub struct Profiler {
    session: TraceSession,
    _tracing: Option<tracing::subscriber::DefaultGuard>,
    finished: bool,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler")
            .field("session", &self.session)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl Profiler {
    pub(crate) fn new(session: TraceSession, mode: TracingMode) -> Result<Self, ProbeError> {
        let subscriber =
            || Registry::default().with(session.layer().with_filter(LevelFilter::TRACE));
        let tracing = match mode {
            TracingMode::ThreadDefault => Some(tracing::subscriber::set_default(subscriber())),
            TracingMode::Global => {
                tracing::subscriber::set_global_default(subscriber())
                    .map_err(|e| ProbeError::TracingInstall(e.to_string()))?;
                None
            }
            TracingMode::Manual => None,
        };
        active::register(&session);
        Ok(Self {
            session,
            _tracing: tracing,
            finished: false,
        })
    }

    /// The probe's `tracing` layer with its per-layer TRACE filter, to add to your own
    /// subscriber ([`TracingMode::Manual`]): `registry().with(fmt_layer).with(profiler.layer())`.
    /// A global `info` filter would hide the TRACE module spans; a per-layer one does not.
    pub fn layer<S>(&self) -> Filtered<ProbeLayer, LevelFilter, S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        self.session.layer().with_filter(LevelFilter::TRACE)
    }

    /// The session (clone it to record from other threads).
    pub fn session(&self) -> &TraceSession {
        &self.session
    }

    /// Finishes the trace now and says how it ended.
    ///
    /// # Errors
    /// As [`TraceSession::finish`].
    pub fn finish(mut self) -> Result<TraceSummary, ProbeError> {
        self.finished = true;
        self.session.finish()
    }
}

impl Deref for Profiler {
    type Target = TraceSession;

    fn deref(&self) -> &TraceSession {
        &self.session
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        active::unregister(&self.session);
        if self.finished {
            return;
        }
        match self.session.finish() {
            Ok(_) | Err(ProbeError::AlreadyFinished) => {}
            // The trace ends with a `failed` terminal saying so; the user hears it once.
            Err(err) => eprintln!("warning: trace-probe: {err}"),
        }
    }
}

/// The sessions of live profilers, for a `ProbedOptimizer` built through `Optimizer::new`,
/// which receives no session.
pub(crate) mod active {
    use super::*;

    static ACTIVE: Mutex<Vec<(u64, ThreadId, Weak<Inner>)>> = Mutex::new(Vec::new());

    pub(super) fn register(session: &TraceSession) {
        let mut active = crate::writer::lock(&ACTIVE);
        active.retain(|(_, _, w)| w.strong_count() > 0);
        active.push((
            session.inner.uid,
            std::thread::current().id(),
            std::sync::Arc::downgrade(&session.inner),
        ));
    }

    pub(super) fn unregister(session: &TraceSession) {
        crate::writer::lock(&ACTIVE)
            .retain(|(uid, _, w)| *uid != session.inner.uid && w.strong_count() > 0);
    }

    /// The session of the latest live profiler started on this thread (`None` when there is
    /// none: a profiler on another thread is not guessed at; bind an optimizer built elsewhere
    /// with `ProbedOptimizer::for_session`).
    pub(crate) fn current() -> Option<TraceSession> {
        let active = crate::writer::lock(&ACTIVE);
        let here = std::thread::current().id();
        active
            .iter()
            .rev()
            .filter(|(_, t, _)| *t == here)
            .find_map(|(_, _, w)| w.upgrade().map(|inner| TraceSession { inner }))
    }
}
