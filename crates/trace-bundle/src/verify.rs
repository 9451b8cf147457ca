//! Checking a bundle against its manifest ([`verify`]) and its derived outputs against ones
//! re-derived from its trace ([`semantic_problems`]).
//!
//! [`verify`] checks, and reports every problem it finds (not only the first), each naming the
//! file:
//! - the manifest is a regular file, parses, and has the [`BUNDLE_SCHEMA`];
//! - every listed path is safe ([`check_relative_path`]), listed once, with a 64-hex SHA-256;
//! - the directory holds no symbolic link or special file;
//! - every regular file is listed and every listed file exists;
//! - each file's size and SHA-256 match;
//! - the trace is there and its `meta` event carries the manifest's run identity (a renamed
//!   run is a mismatch).
//!
//! The check holds at the moment it runs: a file changed afterwards is not covered.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::manifest::{
    check_relative_path, digest_reader, is_sha256_hex, Manifest, PathProblem, RunIdentity,
    BUNDLE_SCHEMA, MANIFEST_FILE, TRACE_FILE,
};
use crate::BundleError;

/// Longest manifest read, bytes (a manifest lists a handful of files).
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Longest `meta` line read from the trace, bytes.
pub const MAX_META_LINE_BYTES: u64 = 1 << 20;

/// Schema of the [`Verification`] receipt.
pub const VERIFICATION_SCHEMA: &str = "candle-graph/bundle-verification/1";

/// One way a bundle does not match its manifest (each names the file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Problem {
    /// No `bundle.json`.
    #[error("{MANIFEST_FILE}: missing")]
    ManifestMissing,
    /// `bundle.json` is not a regular file, cannot be read, or is not a manifest.
    #[error("{MANIFEST_FILE}: {reason}")]
    ManifestInvalid {
        /// Why.
        reason: String,
    },
    /// A path the manifest lists is not a safe relative path.
    #[error("{path}: unsafe path in the manifest: {problem}")]
    UnsafePath {
        /// The path, as listed.
        path: String,
        /// The rule it breaks.
        problem: String,
    },
    /// A path listed twice.
    #[error("{path}: listed twice in the manifest")]
    DuplicatePath {
        /// The path.
        path: String,
    },
    /// A listed digest is not 64 lowercase hex digits.
    #[error("{path}: the manifest's sha256 is not 64 lowercase hex digits")]
    BadDigest {
        /// The path.
        path: String,
    },
    /// Listed but absent.
    #[error("{path}: listed in the manifest but missing")]
    Missing {
        /// The path.
        path: String,
    },
    /// Present but not listed.
    #[error("{path}: in the bundle but not in the manifest")]
    Extra {
        /// The path, relative to the bundle.
        path: String,
    },
    /// A symbolic link or special file.
    #[error("{path}: a {what}, not a regular file")]
    NotRegular {
        /// The path, relative to the bundle.
        path: String,
        /// `symbolic link`, `special file`, `directory`.
        what: &'static str,
    },
    /// Size differs.
    #[error("{path}: {actual_bytes} bytes, the manifest says {manifest_bytes}")]
    SizeMismatch {
        /// The path.
        path: String,
        /// Size the manifest lists.
        manifest_bytes: u64,
        /// Size on disk.
        actual_bytes: u64,
    },
    /// Content differs.
    #[error("{path}: sha256 {actual}, the manifest says {manifest}")]
    DigestMismatch {
        /// The path.
        path: String,
        /// Digest the manifest lists.
        manifest: String,
        /// Digest of the file.
        actual: String,
    },
    /// A file or directory could not be read.
    #[error("{path}: cannot read: {reason}")]
    Unreadable {
        /// The path.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// The manifest does not list the trace.
    #[error("{TRACE_FILE}: not in the manifest")]
    NoTrace,
    /// The trace's first line is not a readable `meta` event.
    #[error("{TRACE_FILE}: {reason}")]
    TraceMeta {
        /// Why.
        reason: String,
    },
    /// The manifest's run identity differs from the trace's meta.
    #[error(
        "{TRACE_FILE}: meta {field} is {}, the manifest says {}",
        crate::quoted(trace),
        crate::quoted(manifest)
    )]
    IdentityMismatch {
        /// The field (`run_id`, `entrypoint`, …).
        field: &'static str,
        /// Value in the manifest.
        manifest: String,
        /// Value in the trace.
        trace: String,
    },
    /// A derived output differs from the one re-derived from the trace.
    #[error("{path}: differs from the output re-derived from the trace")]
    Rederived {
        /// The path.
        path: String,
    },
    /// A file the manifest lists that re-derivation does not produce (semantic verification
    /// fails closed on it).
    #[error("{path}: not re-derived from the trace (unknown output)")]
    NotRederived {
        /// The path.
        path: String,
    },
}

/// The result of [`verify`]: valid when `problems` is empty.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// [`VERIFICATION_SCHEMA`].
    pub schema: &'static str,
    /// The bundle directory.
    pub bundle: PathBuf,
    /// SHA-256 of `bundle.json`, when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<String>,
    /// The manifest's run identity, when it parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunIdentity>,
    /// Listed files whose size and digest matched.
    pub files_verified: u64,
    /// Their bytes.
    pub bytes_verified: u64,
    /// Everything that did not match, in the order checked.
    pub problems: Vec<Problem>,
    /// The parsed manifest (not serialized).
    #[serde(skip)]
    pub manifest: Option<Manifest>,
}

impl Verification {
    /// No problem was found.
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks `dir` against its manifest (see the module docs).
///
/// # Errors
/// [`BundleError::NotADirectory`] when `dir` is not a directory (every other failure is a
/// [`Problem`] of the returned verification).
pub fn verify(dir: &Path) -> Result<Verification, BundleError> {
    let meta = std::fs::metadata(dir).map_err(|source| BundleError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(BundleError::NotADirectory(dir.to_path_buf()));
    }
    let mut v = Verification {
        schema: VERIFICATION_SCHEMA,
        bundle: dir.to_path_buf(),
        manifest_sha256: None,
        run: None,
        files_verified: 0,
        bytes_verified: 0,
        problems: Vec::new(),
        manifest: None,
    };
    let on_disk = list_files(dir, &mut v.problems);
    let Some((manifest, sha)) = read_manifest(dir, &mut v.problems) else {
        return Ok(v);
    };
    v.manifest_sha256 = Some(sha);
    v.run = Some(manifest.run.clone());
    let mut listed = BTreeSet::new();
    let mut checkable = Vec::new();
    for entry in &manifest.files {
        if let Err(p) = check_relative_path(&entry.path) {
            v.problems.push(unsafe_path(&entry.path, &p));
            continue;
        }
        if !listed.insert(entry.path.as_str()) {
            v.problems.push(Problem::DuplicatePath {
                path: entry.path.clone(),
            });
            continue;
        }
        if !is_sha256_hex(&entry.sha256) {
            v.problems.push(Problem::BadDigest {
                path: entry.path.clone(),
            });
            continue;
        }
        checkable.push(entry);
    }
    for path in on_disk.keys() {
        if path != MANIFEST_FILE && !listed.contains(path.as_str()) {
            v.problems.push(Problem::Extra { path: path.clone() });
        }
    }
    for entry in checkable {
        if !on_disk.contains_key(&entry.path) {
            v.problems.push(Problem::Missing {
                path: entry.path.clone(),
            });
            continue;
        }
        let full = dir.join(&entry.path);
        match File::open(&full).and_then(digest_reader) {
            Err(e) => v.problems.push(Problem::Unreadable {
                path: entry.path.clone(),
                reason: e.to_string(),
            }),
            Ok((bytes, _)) if bytes != entry.bytes => v.problems.push(Problem::SizeMismatch {
                path: entry.path.clone(),
                manifest_bytes: entry.bytes,
                actual_bytes: bytes,
            }),
            Ok((_, sha)) if sha != entry.sha256 => v.problems.push(Problem::DigestMismatch {
                path: entry.path.clone(),
                manifest: entry.sha256.clone(),
                actual: sha,
            }),
            Ok((bytes, _)) => {
                v.files_verified += 1;
                v.bytes_verified = v.bytes_verified.saturating_add(bytes);
            }
        }
    }
    if !listed.contains(TRACE_FILE) {
        v.problems.push(Problem::NoTrace);
    } else if on_disk.contains_key(TRACE_FILE) {
        match read_trace_identity(&dir.join(TRACE_FILE)) {
            Ok(trace) => v
                .problems
                .extend(identity_mismatches(&manifest.run, &trace)),
            Err(reason) => v.problems.push(Problem::TraceMeta { reason }),
        }
    }
    v.manifest = Some(manifest);
    Ok(v)
}

fn unsafe_path(path: &str, problem: &PathProblem) -> Problem {
    Problem::UnsafePath {
        path: trace_schema_escape(path),
        problem: problem.to_string(),
    }
}

/// A path from a manifest as shown in a message: control characters escaped, at most 255
/// characters.
fn trace_schema_escape(path: &str) -> String {
    path.chars()
        .take(255)
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Every entry under `dir` by `/`-joined relative path (explicit stack, no recursion); regular
/// files kept, links and special files reported.
fn list_files(dir: &Path, problems: &mut Vec<Problem>) -> BTreeMap<String, u64> {
    let mut files = BTreeMap::new();
    let mut stack: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        let entries = match std::fs::read_dir(&path) {
            Ok(e) => e,
            Err(e) => {
                problems.push(Problem::Unreadable {
                    path: if rel.is_empty() { ".".into() } else { rel },
                    reason: e.to_string(),
                });
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    problems.push(Problem::Unreadable {
                        path: rel.clone(),
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            match entry.file_type() {
                Ok(t) if t.is_symlink() => problems.push(Problem::NotRegular {
                    path: trace_schema_escape(&child),
                    what: "symbolic link",
                }),
                Ok(t) if t.is_dir() => stack.push((entry.path(), child)),
                Ok(t) if t.is_file() => {
                    let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                    files.insert(child, len);
                }
                Ok(_) => problems.push(Problem::NotRegular {
                    path: trace_schema_escape(&child),
                    what: "special file",
                }),
                Err(e) => problems.push(Problem::Unreadable {
                    path: child,
                    reason: e.to_string(),
                }),
            }
        }
    }
    files
}

fn read_manifest(dir: &Path, problems: &mut Vec<Problem>) -> Option<(Manifest, String)> {
    let path = dir.join(MANIFEST_FILE);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            problems.push(Problem::ManifestMissing);
            return None;
        }
        Err(e) => {
            problems.push(Problem::ManifestInvalid {
                reason: format!("cannot read: {e}"),
            });
            return None;
        }
    };
    if !meta.is_file() {
        // a link is already reported by the listing
        if !meta.file_type().is_symlink() {
            problems.push(Problem::ManifestInvalid {
                reason: "not a regular file".into(),
            });
        }
        return None;
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        problems.push(Problem::ManifestInvalid {
            reason: format!("larger than {MAX_MANIFEST_BYTES} bytes"),
        });
        return None;
    }
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            problems.push(Problem::ManifestInvalid {
                reason: format!("cannot read: {e}"),
            });
            return None;
        }
    };
    let sha = digest_reader(bytes.as_slice())
        .map(|(_, s)| s)
        .unwrap_or_default();
    let manifest: Manifest = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            problems.push(Problem::ManifestInvalid {
                reason: format!("not a bundle manifest: {e}"),
            });
            return None;
        }
    };
    if manifest.schema != BUNDLE_SCHEMA {
        problems.push(Problem::ManifestInvalid {
            reason: format!(
                "schema {:?}, expected {BUNDLE_SCHEMA:?}",
                trace_schema_escape(&manifest.schema)
            ),
        });
        return None;
    }
    Some((manifest, sha))
}

/// The run identity in the `meta` event on the first line of the trace at `path`.
///
/// # Errors
/// A message: unreadable file, no line, a line longer than [`MAX_META_LINE_BYTES`], not a
/// `meta` event.
pub fn read_trace_identity(path: &Path) -> Result<RunIdentity, String> {
    let file = File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut line = Vec::new();
    BufReader::new(file)
        .take(MAX_META_LINE_BYTES)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("cannot read: {e}"))?;
    if line.first() == Some(&0x1f) {
        return Err("gzip-compressed: a bundle holds a plain trace".into());
    }
    let meta: trace_schema::MetaEvent =
        serde_json::from_slice(&line).map_err(|e| format!("line 1 is not a meta event: {e}"))?;
    Ok(RunIdentity::of(&meta.run))
}

fn identity_mismatches(manifest: &RunIdentity, trace: &RunIdentity) -> Vec<Problem> {
    let show_u = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "none".into());
    let show_s = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    let fields: [(&'static str, String, String); 7] = [
        ("run_id", manifest.run_id.clone(), trace.run_id.clone()),
        (
            "entrypoint",
            manifest.entrypoint.clone(),
            trace.entrypoint.clone(),
        ),
        ("phase", show_s(&manifest.phase), show_s(&trace.phase)),
        (
            "capture_step",
            show_u(manifest.capture_step),
            show_u(trace.capture_step),
        ),
        ("device", show_s(&manifest.device), show_s(&trace.device)),
        (
            "rank",
            show_u(manifest.rank.map(u64::from)),
            show_u(trace.rank.map(u64::from)),
        ),
        (
            "world_size",
            show_u(manifest.world_size.map(u64::from)),
            show_u(trace.world_size.map(u64::from)),
        ),
    ];
    fields
        .into_iter()
        .filter(|(_, m, t)| m != t)
        .map(|(field, manifest, trace)| Problem::IdentityMismatch {
            field,
            manifest: trace_schema_escape(&manifest),
            trace: trace_schema_escape(&trace),
        })
        .collect()
}

/// Compares the derived outputs of the bundle at `dir` (listed in `manifest`) with `rederived`
/// (the same outputs made again from its trace), byte for byte: a listed file that differs, is
/// not re-derived, or a re-derived one the bundle lacks, is a problem. The trace itself is not
/// compared (it is the source).
pub fn semantic_problems(
    dir: &Path,
    manifest: &Manifest,
    rederived: &[crate::DerivedFile],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let fresh: BTreeMap<&str, &[u8]> = rederived
        .iter()
        .map(|d| (d.path.as_str(), d.bytes.as_slice()))
        .collect();
    let listed: BTreeSet<&str> = manifest.files.iter().map(|f| f.path.as_str()).collect();
    for path in &listed {
        if *path == TRACE_FILE {
            continue;
        }
        match fresh.get(path) {
            None => problems.push(Problem::NotRederived {
                path: path.to_string(),
            }),
            Some(bytes) => match std::fs::read(dir.join(path)) {
                Ok(kept) if kept.as_slice() == *bytes => {}
                Ok(_) => problems.push(Problem::Rederived {
                    path: path.to_string(),
                }),
                Err(e) => problems.push(Problem::Unreadable {
                    path: path.to_string(),
                    reason: e.to_string(),
                }),
            },
        }
    }
    for path in fresh.keys() {
        if !listed.contains(path) {
            problems.push(Problem::Missing {
                path: path.to_string(),
            });
        }
    }
    problems
}
