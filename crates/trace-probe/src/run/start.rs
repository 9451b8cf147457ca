//! Starting a run: [`ProfileRun::start`] opens the session and hands back the [`Profiler`]
//! guard (the session and the profiler sit above the run's configuration, which knows neither).

use std::path::Path;

use super::ProfileRun;
use crate::error::ProbeError;
use crate::profiler::Profiler;
use crate::session::TraceSession;

impl ProfileRun {
    /// Starts profiling into the trace file `path` (created or truncated, its parent
    /// directories created) — or, for a run with a schedule ([`ProfileRun::every`]), into the
    /// run directory `path` (created; refused when it already holds a run): opens the session, installs the `tracing` layer as
    /// [`ProfileRun::tracing`] says, and returns the guard that finishes the trace when dropped.
    ///
    /// # Errors
    /// [`ProbeError::InvalidRun`], [`ProbeError::CreateFile`] naming the path,
    /// [`ProbeError::WriterSpawn`], [`ProbeError::TracingInstall`].
    pub fn start(self, path: impl AsRef<Path>) -> Result<Profiler, ProbeError> {
        let tracing = self.tracing;
        let path = self.trace_path(path.as_ref());
        #[cfg(feature = "every")]
        if self.schedule.is_some() {
            return Profiler::new(TraceSession::scheduled(self, &path)?, tracing);
        }
        Profiler::new(TraceSession::create(self, path)?, tracing)
    }

    /// Like [`ProfileRun::start`], writing to any writer (a pipe, `std::io::sink()`).
    ///
    /// # Errors
    /// As [`ProfileRun::start`], without the file errors.
    pub fn start_with_writer<W: std::io::Write + Send + 'static>(
        self,
        out: W,
    ) -> Result<Profiler, ProbeError> {
        let tracing = self.tracing;
        Profiler::new(TraceSession::new(self, out)?, tracing)
    }
}
