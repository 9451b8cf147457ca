//! Publishing a bundle ([`publish`]): the trace and its derived outputs written into a hidden
//! sibling directory, each file synced, the manifest written, the staged bundle verified, then
//! renamed into place; on any failure the staging directory is removed and nothing is left at
//! the destination.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::manifest::{
    check_relative_path, digest_reader, FileEntry, Manifest, RunIdentity, BUNDLE_SCHEMA,
    MANIFEST_FILE, TRACE_FILE,
};
use crate::verify::{verify, Verification};
use crate::{BundleError, DerivedFile};

/// Writes the bundle `out` from the trace file `trace` (copied as [`TRACE_FILE`]), whose meta
/// carries `run`, and `derived` (each at its safe relative path). Returns the verification of
/// the published bundle.
///
/// # Errors
/// [`BundleError::Exists`] when `out` exists; [`BundleError::DerivedPath`] for an unsafe,
/// duplicate or reserved derived path; [`BundleError::Io`] naming the file; [`BundleError::Staged`]
/// when the staged bundle fails its own verification (e.g. the trace's meta is not `run`).
pub fn publish(
    trace: &Path,
    run: &RunIdentity,
    derived: &[DerivedFile],
    out: &Path,
) -> Result<Verification, BundleError> {
    if std::fs::symlink_metadata(out).is_ok() {
        return Err(BundleError::Exists(out.to_path_buf()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for d in derived {
        check_relative_path(&d.path).map_err(|problem| BundleError::DerivedPath {
            path: d.path.clone(),
            problem: problem.to_string(),
        })?;
        if d.path == TRACE_FILE || !seen.insert(d.path.as_str()) {
            return Err(BundleError::DerivedPath {
                path: d.path.clone(),
                problem: "listed twice or the trace's name".into(),
            });
        }
    }
    let staging = staging_name(out);
    let result = stage(trace, run, derived, &staging).and_then(|()| {
        let v = verify(&staging)?;
        if !v.is_valid() {
            return Err(BundleError::Staged(v.problems));
        }
        std::fs::rename(&staging, out).map_err(|source| BundleError::Io {
            path: out.to_path_buf(),
            source,
        })?;
        sync_dir(out.parent().filter(|p| !p.as_os_str().is_empty()));
        Ok(v)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    let mut v = result?;
    v.bundle = out.to_path_buf();
    Ok(v)
}

/// `.<name>.tmp-<pid>-<nanos>` beside `out`.
fn staging_name(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    out.with_file_name(format!(".{name}.tmp-{}-{nanos}", std::process::id()))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn stage(
    trace: &Path,
    run: &RunIdentity,
    derived: &[DerivedFile],
    staging: &Path,
) -> Result<(), BundleError> {
    std::fs::create_dir_all(staging).map_err(io(staging))?;
    let mut files = Vec::with_capacity(derived.len() + 1);
    let trace_out = staging.join(TRACE_FILE);
    std::fs::copy(trace, &trace_out).map_err(io(trace))?;
    File::open(&trace_out)
        .and_then(|f| f.sync_all())
        .map_err(io(&trace_out))?;
    let (bytes, sha256) = File::open(&trace_out)
        .and_then(digest_reader)
        .map_err(io(&trace_out))?;
    files.push(FileEntry {
        path: TRACE_FILE.into(),
        bytes,
        sha256,
    });
    for d in derived {
        let path = staging.join(&d.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        write_synced(&path, &d.bytes)?;
        let (bytes, sha256) = digest_reader(d.bytes.as_slice()).map_err(io(&path))?;
        files.push(FileEntry {
            path: d.path.clone(),
            bytes,
            sha256,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = Manifest {
        schema: BUNDLE_SCHEMA.into(),
        run: run.clone(),
        files,
    };
    let mut text = serde_json::to_vec_pretty(&manifest).map_err(|e| BundleError::Io {
        path: staging.join(MANIFEST_FILE),
        source: std::io::Error::other(e),
    })?;
    text.push(b'\n');
    write_synced(&staging.join(MANIFEST_FILE), &text)?;
    sync_dir(Some(staging));
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    let mut f = File::create(path).map_err(io(path))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(io(path))
}

/// Syncs a directory's entries (best effort: not every file system supports it).
fn sync_dir(dir: Option<&Path>) {
    if let Some(dir) = dir {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}
