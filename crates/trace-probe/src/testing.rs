//! The testing front door: run a closure as one captured step (or several) in-process, with the
//! trace kept in memory (no file unless asked), and hand the trace over as bytes or as a
//! loaded [`trace_schema::TraceDocument`]. The figures and the budgets on them are computed by
//! the `trace-budget` crate, which does not depend on Candle:
//!
//! ```no_run
//! use trace_probe::{testing, ProfileRun};
//! let trace = testing::capture(ProfileRun::training("mlp::train_step", 2), |profiler| {
//!     for step in 1..=2u64 {
//!         let _step = profiler.step(step);
//!         // build the batch, forward, backward_step …
//!     }
//!     Ok::<(), candle_core::Error>(())
//! })?;
//! let doc = trace.document()?; // trace_budget::Figures::of(&doc), budgets …
//! # let _ = doc;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Captures made through this module run one at a time in a process: `cargo test` runs the
//! tests of one binary on several threads, and the tracking allocator is one per process, so a
//! capture waits for the one before it to finish (its figures are then its own, as if it ran
//! alone). The closure builds the model inside, after the profiler started (module spans and
//! a [`crate::ProbedOptimizer`] find the live profiler).

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::ProbeError;
use crate::profiler::Profiler;
use crate::run::ProfileRun;
use crate::session::TraceSummary;

/// One capture at a time per process (see the module docs).
static SERIAL: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread holds the capture slot: a second capture started inside the first's
    /// closure would wait for itself forever, so it is refused instead.
    static HOLDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The in-memory sink the session writes the trace to.
#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        crate::writer::lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A live in-memory capture: the [`Profiler`] of a run whose trace goes to memory. Build the
/// model and run the steps with [`InMemoryCapture::profiler`], then
/// [`InMemoryCapture::finish`]. Holds the process's capture slot until finished or dropped.
#[must_use = "the capture ends when this is dropped"]
pub struct InMemoryCapture {
    // Field order: the profiler finishes before the slot is released.
    profiler: Option<Profiler>,
    buffer: SharedBuffer,
    _slot: MutexGuard<'static, ()>,
}

impl std::fmt::Debug for InMemoryCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryCapture")
            .field("profiler", &self.profiler)
            .finish_non_exhaustive()
    }
}

impl InMemoryCapture {
    /// Waits for the process's capture slot, then starts `run` writing to memory.
    ///
    /// # Errors
    /// As [`ProfileRun::start_with_writer`].
    pub fn start(run: ProfileRun) -> Result<Self, ProbeError> {
        // A test that panicked while holding the slot poisons it; its profiler was dropped
        // (finished) during the unwind, so the slot is free to take.
        if HOLDING.with(std::cell::Cell::get) {
            return Err(ProbeError::InvalidRun {
                problems: vec![
                    "a trace_probe::testing capture is already running on this thread \
                     (captures run one at a time; start the second after the first finished)"
                        .to_string(),
                ],
            });
        }
        let slot = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        HOLDING.with(|h| h.set(true));
        let buffer = SharedBuffer::default();
        let profiler = run.start_with_writer(buffer.clone())?;
        Ok(Self {
            profiler: Some(profiler),
            buffer,
            _slot: slot,
        })
    }

    /// The live profiler (`profiler.step(n)`, `ProbedOptimizer::new`, labelled facts).
    ///
    /// # Panics
    /// Never: the profiler is only taken by `finish`, which consumes the capture.
    pub fn profiler(&self) -> &Profiler {
        match &self.profiler {
            Some(p) => p,
            None => unreachable!("the profiler is taken only by finish(self)"),
        }
    }

    /// Finishes the trace and returns it.
    ///
    /// # Errors
    /// As [`Profiler::finish`].
    pub fn finish(mut self) -> Result<CapturedTrace, ProbeError> {
        let summary = match self.profiler.take() {
            Some(p) => p.finish()?,
            None => return Err(ProbeError::AlreadyFinished),
        };
        let jsonl = std::mem::take(&mut *crate::writer::lock(&self.buffer.0));
        Ok(CapturedTrace { jsonl, summary })
    }
}

impl Drop for InMemoryCapture {
    fn drop(&mut self) {
        // the profiler finishes its trace first (a capture dropped unfinished, as in a panic)
        drop(self.profiler.take());
        HOLDING.with(|h| h.set(false));
    }
}

/// A finished in-memory trace.
#[derive(Debug, Clone)]
pub struct CapturedTrace {
    /// The trace, JSONL (`candle-graph/trace/13`).
    pub jsonl: Vec<u8>,
    /// How the session ended (events written, errors).
    pub summary: TraceSummary,
}

impl CapturedTrace {
    /// The trace loaded as a document (what every analysis reads). Needs the crate's
    /// `document` feature (`trace-probe = { …, features = ["document"] }` in
    /// `[dev-dependencies]`), so that a build of the probe alone does not compile the loader.
    ///
    /// # Errors
    /// The loader's error, naming the line (a trace the probe wrote loads).
    #[cfg(feature = "document")]
    pub fn document(&self) -> Result<trace_schema::TraceDocument, trace_schema::LoadError> {
        trace_schema::load_reader(self.jsonl.as_slice())
    }

    /// Writes the trace to `path` (for `candle-graph` to read it later), creating its parent
    /// directory.
    ///
    /// # Errors
    /// The file system's error.
    pub fn save(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, &self.jsonl)
    }
}

/// Runs `steps` with the profiler of `run` writing to memory and returns the finished trace.
/// `steps` builds the model and runs the loop, calling `profiler.step(n)` per step; its error
/// is returned as is (after the trace is finished and dropped).
///
/// # Errors
/// `steps`'s error, or the probe's (start, finish) converted into `E`.
pub fn capture<E: From<ProbeError>>(
    run: ProfileRun,
    steps: impl FnOnce(&Profiler) -> Result<(), E>,
) -> Result<CapturedTrace, E> {
    let live = InMemoryCapture::start(run)?;
    steps(live.profiler())?;
    Ok(live.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_in_memory_loads_as_a_document_and_saves_on_request(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let trace = capture(
            ProfileRun::training("unit::step", 2).deterministic(true),
            |profiler| {
                for step in 1..=2u64 {
                    let _step = profiler.step(step);
                }
                Ok::<(), ProbeError>(())
            },
        )?;
        assert!(trace.jsonl.starts_with(b"{\"kind\":\"meta\""));
        let doc = trace.document()?;
        assert_eq!(doc.meta.capture_step, Some(2));
        assert!(doc.terminal.is_some(), "the trace is finished");
        let dir = std::env::temp_dir().join(format!("probe-testing-{}", std::process::id()));
        let path = dir.join("t/trace.jsonl");
        trace.save(&path)?;
        assert_eq!(std::fs::read(&path).ok(), Some(trace.jsonl.clone()));
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    #[test]
    fn a_capture_inside_a_capture_is_refused_not_a_deadlock() {
        let outer = InMemoryCapture::start(ProfileRun::training("unit::step", 1));
        assert!(outer.is_ok());
        let inner = InMemoryCapture::start(ProfileRun::training("unit::step", 1));
        assert!(
            matches!(&inner, Err(ProbeError::InvalidRun { problems }) if problems[0].contains("already running on this thread")),
            "{inner:?}"
        );
        drop(outer);
        assert!(InMemoryCapture::start(ProfileRun::training("unit::step", 1)).is_ok());
    }

    #[test]
    fn the_closure_error_is_returned_and_the_slot_is_released() {
        let failed = capture(ProfileRun::training("unit::step", 1), |_| {
            Err::<(), ProbeError>(ProbeError::AlreadyFinished)
        });
        assert!(matches!(failed, Err(ProbeError::AlreadyFinished)));
        // the slot was released: a second capture starts
        assert!(InMemoryCapture::start(ProfileRun::training("unit::step", 1)).is_ok());
    }
}
