//! The bundler thread of a scheduled run: bundles each finished capture's trace (the training
//! thread finished its session: the terminal, the symbols of the samples) into the run directory
//! ([`trace_bundle::run::RunDir::add`]: figures, publish, retention, `run.json`) and records a
//! capture that failed. Nothing it meets reaches the training loop: errors and panics become
//! failed records; a run directory that cannot be written is reported once on stderr.
//!
//! Its allocations (and those of the one-thread pool the analysis runs on) are ignored by the
//! tracking allocator's hook, so a capture running beside it sees only the loop's storages, and
//! its threads are the probe's ([`trace_alloc::mark_probe_thread`]): the heap figure of a device
//! sample leaves out what they hold (a bundle in the making, the run log).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use trace_bundle::run::{RunDir, RunSchedule};

use crate::error::ProbeError;
use crate::session::TraceSummary;
use crate::writer::lock;

/// Work for the bundler.
pub(crate) enum Job {
    /// A capture whose session finished: its trace to bundle.
    Bundle {
        /// Its step.
        step: u64,
        /// How its session finished.
        outcome: Result<TraceSummary, ProbeError>,
        /// When.
        finished: Instant,
    },
    /// A capture that could not run.
    Failed {
        /// Its step.
        step: u64,
        /// Why.
        reason: String,
    },
}

type LastOutcome = Arc<Mutex<Option<Result<TraceSummary, ProbeError>>>>;

/// The bundler thread and its channel.
pub(crate) struct Bundler {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    root: PathBuf,
    staging: Box<dyn Fn(u64) -> PathBuf + Send>,
    last: LastOutcome,
}

impl Bundler {
    /// Creates the run directory `root` and starts the thread.
    ///
    /// # Errors
    /// [`ProbeError::CreateFile`] when the directory cannot be created or already holds a run;
    /// [`ProbeError::WriterSpawn`].
    pub(crate) fn start(
        root: &Path,
        entrypoint: &str,
        schedule: crate::run::Schedule,
        outputs: Option<crate::run::BundleOutputs>,
    ) -> Result<Self, ProbeError> {
        let schedule = RunSchedule {
            every: schedule.every,
            first_step: schedule.first_step,
            repeat: schedule.repeat,
            keep_last: schedule.keep_last,
        };
        let dir =
            RunDir::create(root, entrypoint, schedule).map_err(|e| ProbeError::CreateFile {
                path: root.to_path_buf(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let dir = match outputs {
            Some(o) => dir.with_derived(o.0),
            None => dir,
        };
        let staging_root = dir.staging_trace(0);
        let staging_dir = staging_root
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let (tx, rx) = channel::<Job>();
        let last: LastOutcome = Arc::default();
        let last_thread = Arc::clone(&last);
        let thread = std::thread::Builder::new()
            .name("trace-probe-bundler".into())
            .spawn(move || {
                let _quiet = trace_alloc::IgnoreAllocs::new();
                trace_alloc::mark_probe_thread();
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .start_handler(|_| {
                        std::mem::forget(trace_alloc::IgnoreAllocs::new());
                        trace_alloc::mark_probe_thread();
                    })
                    .build()
                    .ok();
                let mut dir = dir;
                let mut warned = false;
                for job in rx {
                    let work = std::panic::AssertUnwindSafe(|| {
                        handle(&mut dir, job, &last_thread, pool.as_ref())
                    });
                    let outcome = std::panic::catch_unwind(work)
                        .unwrap_or_else(|_| Err("the bundler panicked".to_string()));
                    if let (Err(e), false) = (outcome, warned) {
                        warned = true;
                        eprintln!("warning: trace-probe: run directory: {e}");
                    }
                }
            })
            .map_err(ProbeError::WriterSpawn)?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            root: root.to_path_buf(),
            staging: Box::new(move |step| {
                staging_dir.join(format!(
                    "{}.jsonl",
                    trace_bundle::run::bundle_dir_name(step)
                ))
            }),
            last,
        })
    }

    /// Where the trace of the capture of `step` is written.
    pub(crate) fn staging_trace(&self, step: u64) -> PathBuf {
        (self.staging)(step)
    }

    /// The run directory.
    #[allow(dead_code)]
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Queues a job (dropped silently once the thread is gone: the loop never waits).
    pub(crate) fn send(&self, job: Job) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(job);
        }
    }

    /// Removes the trace of a capture session opened for a step the loop never reached.
    pub(crate) fn discard(&self, step: u64) {
        let _ = std::fs::remove_file(self.staging_trace(step));
    }

    /// Waits for every queued job; the last capture's outcome (`None`: no capture finished).
    pub(crate) fn join(mut self) -> Option<Result<TraceSummary, ProbeError>> {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        lock(&self.last).take()
    }
}

impl Drop for Bundler {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One job: `Err` only when the run log could not be written.
fn handle(
    dir: &mut RunDir,
    job: Job,
    last: &LastOutcome,
    pool: Option<&rayon::ThreadPool>,
) -> Result<(), String> {
    let result = match job {
        Job::Failed { step, reason } => dir.record_failure(step, reason),
        Job::Bundle {
            step,
            outcome,
            finished,
        } => {
            let trace = dir.staging_trace(step);
            let result = match &outcome {
                Err(e) if !trace.is_file() => dir.record_failure(step, e.to_string()),
                _ => {
                    let mut add = || dir.add(step, &trace, finished).map(|_| ());
                    match pool {
                        Some(p) => p.install(add),
                        None => add(),
                    }
                }
            };
            *lock(last) = Some(outcome);
            result
        }
    };
    result.map_err(|e| e.to_string())
}
