//! What a run directory holds, checked against its log ([`scan`]): the `step-*` bundles that
//! are the run's (the ones `run.json` records as kept, of its run), the `step-*` entries left
//! out and why (a symbolic link, a bundle copied in from another run, one the log records as
//! dropped or failed), and the traces in `.captures` that were never bundled (the process ended
//! before bundling them, or is still running).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{step_of_dir_name, CaptureState, RunLog, CAPTURES_DIR};
use crate::manifest::{Manifest, MANIFEST_FILE};
use crate::verify::MAX_MANIFEST_BYTES;
use crate::{quoted, BundleError};

/// A `step-*` entry of a run directory that is not one of the run's bundles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// Its name in the run directory.
    pub name: String,
    /// Why it is left out.
    pub reason: String,
}

/// A capture's trace in `.captures` that no bundle was made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unbundled {
    /// Its file name in `.captures`.
    pub file: String,
    /// The captured step its name gives.
    pub step: u64,
    /// Its size, bytes (absent when it could not be read, or is not a regular file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// What it is when it is not a regular file: `"a symbolic link"`, `"a directory"`,
    /// `"not a regular file"` (a FIFO, a socket, a device), `"unreadable"` (absent for a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_a_file: Option<&'static str>,
}

/// What [`scan`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContents {
    /// The run's bundles, by step.
    pub bundles: Vec<PathBuf>,
    /// The `step-*` entries left out, by name.
    pub left_out: Vec<LeftOut>,
    /// The traces in `.captures` never bundled, by step.
    pub unbundled: Vec<Unbundled>,
}

/// The contents of the run directory `dir` with its log `log` (see the module docs). Without
/// a log every `step-*` directory holding a manifest is a bundle of the run (symbolic links and
/// entries without a manifest are still left out).
///
/// # Errors
/// `dir` cannot be listed (an unreadable `.captures` is an error too: its traces are unknown).
pub fn scan(dir: &Path, log: Option<&RunLog>) -> Result<RunContents, BundleError> {
    let entries = std::fs::read_dir(dir).map_err(|source| BundleError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut found: Vec<(u64, String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            Some((step_of_dir_name(&name)?, name, e.path()))
        })
        .collect();
    found.sort();
    let mut out = RunContents::default();
    for (step, name, path) in found {
        match why_left_out(step, &name, &path, log) {
            Some(reason) => out.left_out.push(LeftOut { name, reason }),
            None => out.bundles.push(path),
        }
    }
    out.left_out.sort_by(|a, b| a.name.cmp(&b.name));
    out.unbundled = unbundled(&dir.join(CAPTURES_DIR))?;
    Ok(out)
}

/// Why the entry `name` (`path`, of captured step `step`) is not one of the run's bundles.
fn why_left_out(step: u64, name: &str, path: &Path, log: Option<&RunLog>) -> Option<String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    if meta.file_type().is_symlink() {
        return Some(
            "a symbolic link: a run directory's bundles are directories written in place \
             (give the bundle to `series` by its path to compare it)"
                .into(),
        );
    }
    if !meta.is_dir() {
        return Some("not a directory".into());
    }
    if !path.join(MANIFEST_FILE).is_file() {
        return Some(format!("no {MANIFEST_FILE}: not a bundle"));
    }
    let log = log?;
    let Some(record) = log.captures.iter().find(|c| c.step == step) else {
        return Some(format!(
            "run.json records no capture of step {step}: a bundle copied in from elsewhere, \
             or one published just before the run ended, before run.json recorded it"
        ));
    };
    if record.state != CaptureState::Kept {
        let state = match record.state {
            CaptureState::Dropped => "dropped",
            _ => "failed",
        };
        return Some(format!(
            "run.json records step {step} as {state}, not kept: not the run's bundle"
        ));
    }
    match record.bundle.as_deref() {
        Some(b) if b == name => {}
        Some(b) => {
            return Some(format!(
                "run.json's bundle of step {step} is {}, not this one",
                quoted(b)
            ))
        }
        None => {
            return Some(format!(
                "run.json records step {step} as kept but names no bundle for it: \
                 not known to be the run's bundle"
            ))
        }
    }
    // an unreadable manifest stays in: verification names what is wrong with it
    let manifest = read_manifest(path)?;
    let run = &manifest.run;
    if run.entrypoint != log.entrypoint {
        return Some(format!(
            "a bundle of another run: entrypoint {}, the run's is {}",
            quoted(&run.entrypoint),
            quoted(&log.entrypoint)
        ));
    }
    if run.capture_step != Some(step) {
        return Some(match run.capture_step {
            Some(s) => format!("a bundle of another capture: it captures step {s}"),
            None => "a bundle of another capture: its trace declares no capture step".into(),
        });
    }
    match &record.run_id {
        Some(id) if *id != run.run_id => Some(format!(
            "a bundle of another run: run id {}, run.json's capture of step {step} is {}",
            quoted(&run.run_id),
            quoted(id)
        )),
        _ => None,
    }
}

/// The manifest of the bundle `dir`, when it reads and parses (at most
/// [`MAX_MANIFEST_BYTES`]).
fn read_manifest(dir: &Path) -> Option<Manifest> {
    let file = std::fs::File::open(dir.join(MANIFEST_FILE)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The capture traces (`step-<N>.jsonl`) in the `.captures` directory `dir`, by step (none
/// when it does not exist). A `.captures` that is a symbolic link is not read through (the run
/// writes its own in place), and one that is not a directory is named as what it is: both are
/// errors, like an unreadable one (its traces are unknown).
fn unbundled(dir: &Path) -> Result<Vec<Unbundled>, BundleError> {
    let not_ours = |what: &str| BundleError::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::other(format!(
            "{what}, not the run's directory of captures: a run writes {CAPTURES_DIR} in place, \
             as a directory; not read (remove or rename it to read the run)"
        )),
    };
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Ok(m) if m.file_type().is_symlink() => return Err(not_ours("a symbolic link")),
        Ok(m) if m.is_file() => return Err(not_ours("a regular file")),
        Ok(m) if !m.is_dir() => {
            return Err(not_ours("not a directory (a FIFO, a socket or a device)"))
        }
        _ => {}
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(BundleError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out: Vec<Unbundled> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let step = step_of_dir_name(file.strip_suffix(".jsonl")?)?;
            // the entry itself, not what a link points to
            let meta = std::fs::symlink_metadata(e.path()).ok();
            let bytes = meta.as_ref().filter(|m| m.is_file()).map(|m| m.len());
            let not_a_file = match &meta {
                None => Some("unreadable"),
                Some(m) if m.file_type().is_symlink() => Some("a symbolic link"),
                Some(m) if m.is_dir() => Some("a directory"),
                Some(m) if !m.is_file() => Some("not a regular file"),
                Some(_) => None,
            };
            Some(Unbundled {
                file,
                step,
                bytes,
                not_a_file,
            })
        })
        .collect();
    out.sort_by(|a, b| (a.step, &a.file).cmp(&(b.step, &b.file)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{bundle_dir_name, CaptureRecord, RunSchedule, RUN_SCHEMA};
    use crate::RunIdentity;

    fn log(records: Vec<CaptureRecord>) -> RunLog {
        RunLog {
            schema: RUN_SCHEMA.into(),
            entrypoint: "m::step".into(),
            schedule: RunSchedule {
                every: 2,
                first_step: 2,
                repeat: 0,
                keep_last: 8,
            },
            captures: records,
        }
    }

    fn kept(step: u64, run_id: &str) -> CaptureRecord {
        CaptureRecord {
            bundle: Some(bundle_dir_name(step)),
            run_id: Some(run_id.into()),
            ..CaptureRecord::new(step, CaptureState::Kept)
        }
    }

    /// A directory with a manifest of `run_id` capturing `step` (scan reads nothing else).
    fn fake_bundle(dir: &Path, name: &str, step: u64, run_id: &str, entrypoint: &str) {
        let b = dir.join(name);
        std::fs::create_dir_all(&b).unwrap();
        let m = Manifest {
            schema: crate::BUNDLE_SCHEMA.into(),
            run: RunIdentity {
                run_id: run_id.into(),
                entrypoint: entrypoint.into(),
                phase: Some("train".into()),
                capture_step: Some(step),
                device: Some("cpu".into()),
                rank: None,
                world_size: None,
            },
            files: Vec::new(),
        };
        std::fs::write(b.join(MANIFEST_FILE), serde_json::to_vec(&m).unwrap()).unwrap();
    }

    #[test]
    fn only_the_bundles_the_log_keeps_are_the_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_bundle(d, "step-00000002", 2, "run-a2", "m::step");
        fake_bundle(d, "step-00000004", 4, "run-other", "m::step"); // another run's bundle
        fake_bundle(d, "step-00000006", 6, "run-a6", "m::step"); // not in the log
        fake_bundle(d, "step-00000008", 8, "run-a8", "m::step"); // logged as failed
        fake_bundle(d, "step-10", 10, "run-a10", "m::step"); // not the logged name
        fake_bundle(d, "step-00000012", 12, "run-a12", "other::step");
        std::fs::create_dir(d.join("step-00000014")).unwrap(); // no manifest
        #[cfg(unix)]
        std::os::unix::fs::symlink(d.join("step-00000002"), d.join("step-00000016")).unwrap();
        fake_bundle(d, "step-00000018", 18, "run-a18", "m::step"); // kept, but no name logged
        let l = log(vec![
            kept(2, "run-a2"),
            kept(4, "run-a4"),
            CaptureRecord::new(8, CaptureState::Failed),
            kept(10, "run-a10"),
            kept(12, "run-a12"),
            kept(14, "run-a14"),
            kept(16, "run-a16"),
            CaptureRecord {
                bundle: None,
                ..kept(18, "run-a18")
            },
        ]);
        let c = scan(d, Some(&l)).unwrap();
        assert_eq!(c.bundles, [d.join("step-00000002")]);
        let why = |name: &str| {
            c.left_out
                .iter()
                .find(|l| l.name == name)
                .map(|l| l.reason.clone())
                .unwrap_or_else(|| panic!("{name} is not left out: {:?}", c.left_out))
        };
        assert!(why("step-00000004").contains("run id \"run-other\""));
        assert!(why("step-00000006").contains("records no capture of step 6"));
        assert!(why("step-00000008").contains("as failed"));
        assert!(why("step-10").contains("\"step-00000010\""));
        assert!(why("step-00000012").contains("entrypoint \"other::step\""));
        assert!(why("step-00000014").contains("no bundle.json"));
        #[cfg(unix)]
        assert!(why("step-00000016").contains("symbolic link"));
        assert!(
            why("step-00000018").contains("as kept but names no bundle for it"),
            "{}",
            why("step-00000018")
        );
        // without a log, the bundles are the directories holding a manifest
        let c = scan(d, None).unwrap();
        assert_eq!(c.bundles.len(), 7, "{:?}", c.bundles);
    }

    #[test]
    fn traces_left_in_captures_are_unbundled() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert!(scan(d, None).unwrap().unbundled.is_empty());
        let captures = d.join(CAPTURES_DIR);
        std::fs::create_dir(&captures).unwrap();
        std::fs::write(captures.join("step-00000010.jsonl"), "x").unwrap();
        std::fs::write(captures.join("step-00000008.jsonl"), "xyz").unwrap();
        std::fs::write(captures.join("notes.txt"), "").unwrap();
        std::fs::create_dir(captures.join("dropped-step-00000002-7")).unwrap();
        std::fs::create_dir(captures.join("step-00000012.jsonl")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/dev/null", captures.join("step-00000014.jsonl")).unwrap();
        let mut u = scan(d, None).unwrap().unbundled;
        assert_eq!(u[2].not_a_file, Some("a directory"));
        assert_eq!(u[2].bytes, None);
        #[cfg(unix)]
        assert_eq!(u[3].not_a_file, Some("a symbolic link"));
        u.truncate(2);
        assert_eq!(
            u,
            [
                Unbundled {
                    file: "step-00000008.jsonl".into(),
                    step: 8,
                    bytes: Some(3),
                    not_a_file: None,
                },
                Unbundled {
                    file: "step-00000010.jsonl".into(),
                    step: 10,
                    bytes: Some(1),
                    not_a_file: None,
                },
            ]
        );
    }
}
