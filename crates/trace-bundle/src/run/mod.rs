//! A **run directory**: the bundles of one run captured on a schedule (one step in `n`), kept
//! bounded on disk, and its log `run.json` ([`RUN_SCHEMA`]) — every capture with its figures,
//! whether its bundle was kept (and why), dropped (and why) or failed (and why).
//!
//! | path                 | what                                                           |
//! |----------------------|----------------------------------------------------------------|
//! | `run.json`           | the [`RunLog`], replaced atomically (written beside, synced, renamed) |
//! | `step-<NNNNNNNN>/`   | the bundle of one capture ([`crate::publish`]: staged, verified, renamed) |
//! | `.captures/`         | traces being written or waiting to be bundled                  |
//!
//! A process killed at any moment leaves every published bundle valid: a bundle appears by a
//! rename of a verified directory, a dropped bundle is renamed away before it is deleted, and
//! `run.json` is replaced by a rename. [`RunDir::add`] never panics into its caller: what fails
//! is a [`CaptureState::Failed`] record naming why.

mod record;
pub mod retention;
pub mod scan;

pub use record::{CaptureRecord, CaptureState};
pub use scan::{scan, LeftOut, RunContents, Unbundled};

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trace_schema::TraceDocument;

use crate::manifest::{RunIdentity, MANIFEST_FILE};
use crate::{figures_file, publish, BundleError, DerivedFile};

/// Schema of [`RunLog`].
pub const RUN_SCHEMA: &str = "candle-graph/run/1";
/// File name of the run log at the run directory's root.
pub const RUN_FILE: &str = "run.json";
/// The largest `run.json` read, in bytes (256 MiB: about 400,000 capture records).
pub const MAX_RUN_LOG_BYTES: u64 = 256 << 20;
/// Hidden directory of the traces not yet bundled.
pub const CAPTURES_DIR: &str = ".captures";

/// The bundle directory name of a captured step: `step-` and the step on 8 digits or more.
pub fn bundle_dir_name(step: u64) -> String {
    format!("step-{step:08}")
}

/// The step of a bundle directory name made by [`bundle_dir_name`].
pub fn step_of_dir_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("step-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The schedule a run directory was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSchedule {
    /// Steps between captures.
    pub every: u64,
    /// The first captured step.
    pub first_step: u64,
    /// The cap on captures (0: none).
    pub repeat: u64,
    /// Most recent bundles kept.
    pub keep_last: usize,
}

/// The run log (`run.json`, [`RUN_SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLog {
    /// [`RUN_SCHEMA`].
    pub schema: String,
    /// The run's entrypoint.
    pub entrypoint: String,
    /// Its schedule.
    pub schedule: RunSchedule,
    /// Every capture attempted, by step.
    pub captures: Vec<CaptureRecord>,
}

/// Reads `dir/run.json` (`Ok(None)` when absent).
///
/// # Errors
/// An unreadable file, one that is not a run log of this schema, one with a figure past
/// [`MAX_RUN_FIGURE`] (named by its field), or one that records a step twice (the writer replaces a step's record, never repeats it: a step both kept and failed
/// has no one meaning, so the file is refused naming both records).
pub fn read_run_log(dir: &Path) -> Result<Option<RunLog>, BundleError> {
    use std::io::Read as _;
    let path = dir.join(RUN_FILE);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(BundleError::Io { path, source }),
    };
    // the run writes run.json as a regular file; a link or a device is not its log
    if !meta.is_file() {
        return Err(BundleError::Io {
            path,
            source: std::io::Error::other(
                "not a regular file (a symbolic link, a directory or a device): not a run log",
            ),
        });
    }
    let mut bytes = Vec::new();
    let read = std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_RUN_LOG_BYTES + 1).read_to_end(&mut bytes));
    if let Err(source) = read {
        return Err(BundleError::Io { path, source });
    }
    if bytes.len() as u64 > MAX_RUN_LOG_BYTES {
        return Err(BundleError::Io {
            path,
            source: std::io::Error::other(format!("over {MAX_RUN_LOG_BYTES} bytes: not a run log")),
        });
    }
    let log: RunLog = serde_json::from_slice(&bytes).map_err(|e| BundleError::Io {
        path: path.clone(),
        // serde quotes the value it refused whole: each long word elided, the line bounded
        source: std::io::Error::other(format!(
            "not a run log: {}",
            trace_format::sentence(&e.to_string())
        )),
    })?;
    if log.schema != RUN_SCHEMA {
        return Err(BundleError::Io {
            path,
            source: std::io::Error::other(format!(
                "schema {}, expected {RUN_SCHEMA:?}",
                crate::quoted(&log.schema)
            )),
        });
    }
    // a schedule captures one step in `every` from `first_step` (both at least 1)
    if log.schedule.every == 0 || log.schedule.first_step == 0 {
        return Err(BundleError::Io {
            path,
            source: std::io::Error::other(format!(
                "schedule.every {} and schedule.first_step {}: a run captures one step in every (≥ 1) from its first step (≥ 1); not a run log",
                log.schedule.every, log.schedule.first_step
            )),
        });
    }
    if let Some(problem) = impossible_figure(&log) {
        return Err(BundleError::Io {
            path,
            source: std::io::Error::other(problem),
        });
    }
    if let Some(problem) = repeated_step(&log.captures) {
        return Err(BundleError::Io {
            path,
            source: std::io::Error::other(problem),
        });
    }
    Ok(Some(log))
}

/// The largest step number, byte count or duration a run log can record: 2^63 − 1 (292 years
/// of nanoseconds, 8 EiB). A larger one is no measurement but a sentinel such as `u64::MAX` or a
/// negative number written unsigned, and the log is refused naming the field rather than read
/// as a real figure.
pub const MAX_RUN_FIGURE: u64 = i64::MAX as u64;

/// The first figure of `log` past [`MAX_RUN_FIGURE`], named by its field: the schedule's step
/// numbers and every capture's step and measurements (`repeat` and `keep_last` are caps, where a
/// huge value only means no cap).
fn impossible_figure(log: &RunLog) -> Option<String> {
    let schedule = [
        ("schedule.every", log.schedule.every),
        ("schedule.first_step", log.schedule.first_step),
    ];
    let captures = log.captures.iter().enumerate().flat_map(|(i, c)| {
        [
            ("step", Some(c.step)),
            ("wall_time_ns", c.wall_time_ns),
            ("logical_peak_bytes", c.logical_peak_bytes),
            ("logical_live_end_bytes", c.logical_live_end_bytes),
            ("heap_end_bytes", c.heap_end_bytes),
            ("resident_end_bytes", c.resident_end_bytes),
            ("trace_bytes", c.trace_bytes),
            ("bundle_bytes", c.bundle_bytes),
            ("finish_to_bundle_ns", c.finish_to_bundle_ns),
        ]
        .into_iter()
        .filter_map(move |(field, v)| Some((format!("captures[{i}].{field}"), v?)))
    });
    schedule
        .into_iter()
        .map(|(f, v)| (f.to_string(), v))
        .chain(captures)
        .find(|&(_, v)| v > MAX_RUN_FIGURE)
        .map(|(field, v)| {
            format!(
                "{field} is {v}: past 2^63 − 1, no run records such a figure (a sentinel or a \
                 negative number written unsigned); not a run log"
            )
        })
}

/// The first step recorded twice in `captures`, named with both records' places and states.
fn repeated_step(captures: &[CaptureRecord]) -> Option<String> {
    let mut seen = std::collections::BTreeMap::new();
    for (i, c) in captures.iter().enumerate() {
        if let Some(first) = seen.insert(c.step, i) {
            let state = |r: &CaptureRecord| match r.state {
                CaptureState::Kept => "kept",
                CaptureState::Dropped => "dropped",
                CaptureState::Failed => "failed",
            };
            return Some(format!(
                "captures[{first}] ({}) and captures[{i}] ({}) both record step {}: a run log \
                 records each step once",
                state(&captures[first]),
                state(c),
                c.step
            ));
        }
    }
    None
}

/// The bundles of a run directory: its `step-*` subdirectories holding a manifest, by step
/// (hidden and other entries ignored).
///
/// # Errors
/// The directory cannot be listed.
pub fn list_bundles(dir: &Path) -> Result<Vec<PathBuf>, BundleError> {
    let entries = std::fs::read_dir(dir).map_err(|source| BundleError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let step = step_of_dir_name(&e.file_name().to_string_lossy())?;
            let path = e.path();
            path.join(MANIFEST_FILE).is_file().then_some((step, path))
        })
        .collect();
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// Whether `dir` is a run directory (it has a `run.json`).
pub fn is_run_dir(dir: &Path) -> bool {
    dir.join(RUN_FILE).is_file()
}

/// The analysis a [`DeriveFn`] is given (trace-graph's, full detail).
pub use trace_graph::Analysis;
/// The loaded trace a derived output is made from (trace-schema's, re-exported for producers
/// that bundle without depending on the loader themselves).
pub use trace_schema::TraceDocument as LoadedTrace;

/// Derives a capture's extra outputs from its trace (beside `figures.json`).
pub type DeriveFn = dyn Fn(&TraceDocument, &Analysis) -> Vec<DerivedFile> + Send + Sync;

/// A run directory being written (see the module docs).
pub struct RunDir {
    root: PathBuf,
    log: RunLog,
    derive: Option<std::sync::Arc<DeriveFn>>,
}

impl std::fmt::Debug for RunDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunDir")
            .field("root", &self.root)
            .field("captures", &self.log.captures.len())
            .finish_non_exhaustive()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl RunDir {
    /// Creates the run directory `root` (and its parents) and writes its empty log.
    ///
    /// # Errors
    /// [`BundleError::Exists`] when `root` already holds a run log or bundles;
    /// [`BundleError::Io`].
    pub fn create(
        root: &Path,
        entrypoint: &str,
        schedule: RunSchedule,
    ) -> Result<Self, BundleError> {
        std::fs::create_dir_all(root.join(CAPTURES_DIR)).map_err(io(root))?;
        if is_run_dir(root) || !list_bundles(root)?.is_empty() {
            return Err(BundleError::Exists(root.to_path_buf()));
        }
        let dir = Self {
            root: root.to_path_buf(),
            log: RunLog {
                schema: RUN_SCHEMA.into(),
                entrypoint: entrypoint.into(),
                schedule,
                captures: Vec::new(),
            },
            derive: None,
        };
        dir.write_log()?;
        Ok(dir)
    }

    /// Adds outputs derived from each capture's trace to its bundle.
    pub fn with_derived(mut self, derive: std::sync::Arc<DeriveFn>) -> Self {
        self.derive = Some(derive);
        self
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The log as written so far.
    pub fn log(&self) -> &RunLog {
        &self.log
    }

    /// Where the trace of the capture of `step` is written before it is bundled.
    pub fn staging_trace(&self, step: u64) -> PathBuf {
        self.root
            .join(CAPTURES_DIR)
            .join(format!("{}.jsonl", bundle_dir_name(step)))
    }

    /// Records a capture that produced no trace to bundle.
    ///
    /// # Errors
    /// Writing the log.
    pub fn record_failure(&mut self, step: u64, reason: String) -> Result<(), BundleError> {
        let mut r = CaptureRecord::new(step, CaptureState::Failed);
        r.reason = Some(reason);
        self.push(r);
        self.write_log()
    }

    fn push(&mut self, r: CaptureRecord) {
        self.log.captures.retain(|c| c.step != r.step);
        self.log.captures.push(r);
        self.log.captures.sort_by_key(|c| c.step);
    }

    /// Bundles the finished trace `trace` of the capture of `step` (finished at `finished`)
    /// into `step-<NNNNNNNN>/`, removes the trace, applies the retention and rewrites the log.
    /// Returns the capture's record (failed, with the reason, when anything failed).
    ///
    /// # Errors
    /// Only writing the log; a failed bundle is a record, not an error.
    pub fn add(
        &mut self,
        step: u64,
        trace: &Path,
        finished: Instant,
    ) -> Result<CaptureRecord, BundleError> {
        let record = match self.bundle(step, trace, finished) {
            Ok(r) => r,
            Err(e) => {
                let mut r = CaptureRecord::new(step, CaptureState::Failed);
                r.reason = Some(e.to_string());
                r
            }
        };
        let _ = std::fs::remove_file(trace);
        self.push(record.clone());
        self.apply_retention();
        self.write_log()?;
        Ok(self
            .log
            .captures
            .iter()
            .find(|c| c.step == step)
            .cloned()
            .unwrap_or(record))
    }

    fn bundle(
        &self,
        step: u64,
        trace: &Path,
        finished: Instant,
    ) -> Result<CaptureRecord, BundleError> {
        let doc = trace_schema::load_path(trace).map_err(|e| BundleError::Io {
            path: trace.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let analysis = trace_graph::analyze(&doc);
        let figures = trace_graph::StepFigures::of(&doc, &analysis);
        let mut derived = vec![figures_file(&figures).map_err(|e| BundleError::Io {
            path: trace.to_path_buf(),
            source: std::io::Error::other(e),
        })?];
        if let Some(derive) = &self.derive {
            // the figures are this crate's (a deriver that adds them too gives the same bytes)
            derived.extend(
                derive(&doc, &analysis)
                    .into_iter()
                    .filter(|d| d.path != crate::FIGURES_FILE),
            );
        }
        let name = bundle_dir_name(step);
        let out = self.root.join(&name);
        // the identity as the trace's meta line writes it (verification reads it there): the
        // loaded document holds a name longer than 1 KiB as its head and tail only
        let identity =
            crate::read_trace_identity(trace).unwrap_or_else(|_| RunIdentity::of(&doc.meta));
        let v = publish(trace, &identity, &derived, &out)?;
        let mut r = CaptureRecord::new(step, CaptureState::Kept);
        r.bundle = Some(name);
        r.run_id = Some(doc.meta.run_id.clone());
        r.wall_time_ns = figures.outer_wall_time_ns;
        r.logical_peak_bytes = figures.logical_peak_bytes;
        r.logical_live_end_bytes = analysis
            .memory
            .logical
            .as_ref()
            .map(|l| l.live_at_end.bytes);
        let last_sample = doc
            .device_memory
            .iter()
            .rev()
            .find(|s| s.used_bytes.is_some());
        r.heap_end_bytes = last_sample.and_then(|s| s.used_bytes);
        r.resident_end_bytes = doc
            .device_memory
            .iter()
            .rev()
            .find_map(|s| s.resident_bytes);
        r.trace_bytes = std::fs::metadata(trace).ok().map(|m| m.len());
        let manifest_bytes = std::fs::metadata(out.join(MANIFEST_FILE))
            .map(|m| m.len())
            .unwrap_or(0);
        r.bundle_bytes = Some(v.bytes_verified.saturating_add(manifest_bytes));
        r.finish_to_bundle_ns = u64::try_from(finished.elapsed().as_nanos()).ok();
        Ok(r)
    }

    /// Drops the bundles the retention does not keep (renamed away, then deleted) and notes
    /// why each stays.
    fn apply_retention(&mut self) {
        let keep_last = self.log.schedule.keep_last;
        let plan = retention::plan(&self.log.captures, keep_last);
        for c in &mut self.log.captures {
            if c.state != CaptureState::Kept {
                continue;
            }
            if let Some(why) = plan.keep.get(&c.step) {
                c.kept_for = why.iter().map(|s| (*s).to_string()).collect();
                continue;
            }
            if let Some(name) = c.bundle.take() {
                let from = self.root.join(&name);
                let away = self
                    .root
                    .join(CAPTURES_DIR)
                    .join(format!("dropped-{name}-{}", std::process::id()));
                if std::fs::rename(&from, &away).is_ok() {
                    let _ = std::fs::remove_dir_all(&away);
                }
            }
            c.state = CaptureState::Dropped;
            c.kept_for.clear();
            c.reason = Some(format!(
                "bounded on disk: not one of the last {keep_last} captures, the highest peak, \
                 the slowest step or the first of a growth"
            ));
        }
    }

    /// Writes the log beside, syncs it and renames it over `run.json`.
    ///
    /// # Errors
    /// [`BundleError::Io`].
    pub fn write_log(&self) -> Result<(), BundleError> {
        use std::io::Write as _;
        let path = self.root.join(RUN_FILE);
        let tmp = self
            .root
            .join(format!(".{RUN_FILE}.tmp-{}", std::process::id()));
        let mut text = serde_json::to_vec_pretty(&self.log).map_err(|e| BundleError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        text.push(b'\n');
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(&text)
            .and_then(|()| f.sync_all())
            .map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_that_records_a_step_twice_is_refused_naming_both_records() {
        let tmp = tempfile::tempdir().unwrap();
        let schedule = RunSchedule {
            every: 2,
            first_step: 2,
            repeat: 0,
            keep_last: 8,
        };
        let mut dir = RunDir::create(tmp.path(), "m::step", schedule).unwrap();
        dir.record_failure(2, "no trace".into()).unwrap();
        // the writer replaces a step's record
        dir.record_failure(2, "again".into()).unwrap();
        let log = read_run_log(tmp.path()).unwrap().unwrap();
        assert_eq!(log.captures.len(), 1);
        // a log edited (or written by another tool) with step 4 both kept and failed
        let mut log = log;
        let mut kept = CaptureRecord::new(4, CaptureState::Kept);
        kept.bundle = Some(bundle_dir_name(4));
        log.captures.push(kept);
        log.captures
            .push(CaptureRecord::new(4, CaptureState::Failed));
        std::fs::write(
            tmp.path().join(RUN_FILE),
            serde_json::to_vec_pretty(&log).unwrap(),
        )
        .unwrap();
        let err = read_run_log(tmp.path()).unwrap_err().to_string();
        assert!(err.contains(RUN_FILE), "{err}");
        assert!(
            err.contains("captures[1] (kept) and captures[2] (failed) both record step 4"),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_run_log_that_is_a_link_or_a_device_is_refused_unread() {
        let tmp = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", tmp.path().join(RUN_FILE)).unwrap();
        let err = read_run_log(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::remove_file(tmp.path().join(RUN_FILE)).unwrap();
        std::fs::create_dir(tmp.path().join(RUN_FILE)).unwrap();
        let err = read_run_log(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_schedule_of_every_zero_steps_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let schedule = RunSchedule {
            every: 2,
            first_step: 2,
            repeat: 0,
            keep_last: 8,
        };
        let dir = RunDir::create(tmp.path(), "m::step", schedule).unwrap();
        let mut log = dir.log().clone();
        log.schedule.every = 0;
        std::fs::write(
            tmp.path().join(RUN_FILE),
            serde_json::to_vec_pretty(&log).unwrap(),
        )
        .unwrap();
        let err = read_run_log(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("schedule.every 0"), "{err}");
    }
}
