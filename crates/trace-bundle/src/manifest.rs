//! The bundle manifest (`bundle.json`, [`BUNDLE_SCHEMA`]): the run's identity and every file
//! of the bundle with its size and SHA-256, sorted by path; and the rule for the paths inside a
//! bundle ([`check_relative_path`]).

use std::io::Read;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Schema of the manifest.
pub const BUNDLE_SCHEMA: &str = "candle-graph/bundle/1";

/// File name of the manifest at the bundle's root (not listed in itself).
pub const MANIFEST_FILE: &str = "bundle.json";

/// File name of the trace inside a bundle.
pub const TRACE_FILE: &str = "trace.jsonl";

/// File name of the step figures ([`trace_graph::StepFigures`]) inside a bundle.
pub const FIGURES_FILE: &str = "figures.json";

/// Longest path accepted inside a bundle, bytes.
pub const MAX_PATH_BYTES: usize = 255;

/// The identity of the captured run, copied from the trace's `meta` event (verification checks
/// that they still agree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIdentity {
    /// The trace's run id.
    pub run_id: String,
    /// Its entrypoint.
    pub entrypoint: String,
    /// `train` or `infer`, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The one-based step captured, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_step: Option<u64>,
    /// Device label, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Global rank, when declared (trace/13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// World size, when declared (trace/13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
}

impl RunIdentity {
    /// The identity recorded in a trace's run meta.
    pub fn of(meta: &trace_schema::RunMeta) -> Self {
        Self {
            run_id: meta.run_id.clone(),
            entrypoint: meta.entrypoint.clone(),
            phase: meta.phase.map(|p| <&'static str>::from(p).to_string()),
            capture_step: meta.capture_step,
            device: meta.device.clone(),
            rank: meta.rank,
            world_size: meta.world_size,
        }
    }
}

/// One file of the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Safe relative path, `/`-separated (see [`check_relative_path`]).
    pub path: String,
    /// Size, bytes.
    pub bytes: u64,
    /// SHA-256 of the content, 64 lowercase hex digits.
    pub sha256: String,
}

/// The manifest (`bundle.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`BUNDLE_SCHEMA`].
    pub schema: String,
    /// The run captured.
    pub run: RunIdentity,
    /// Every file but the manifest, sorted by path.
    pub files: Vec<FileEntry>,
}

/// Why a path cannot be inside a bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    /// Empty.
    #[error("the path is empty")]
    Empty,
    /// Longer than [`MAX_PATH_BYTES`].
    #[error("the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// Absolute, or with a root or drive prefix.
    #[error("the path is absolute")]
    Absolute,
    /// A `..`, `.` or empty component.
    #[error("the path has a `.`, `..` or empty component")]
    NotNormal,
    /// A backslash or a control character.
    #[error("the path has a backslash or a control character")]
    BadCharacter,
    /// The manifest's own name.
    #[error("the path is reserved for the manifest")]
    Reserved,
}

/// Checks that `path` is a safe relative path inside a bundle: not empty, at most
/// [`MAX_PATH_BYTES`], `/`-separated normal components only (no `..`, `.`, empty component or
/// root), no backslash or control character, not [`MANIFEST_FILE`].
///
/// # Errors
/// The first rule broken.
pub fn check_relative_path(path: &str) -> Result<(), PathProblem> {
    if path.is_empty() {
        return Err(PathProblem::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathProblem::TooLong);
    }
    if path.chars().any(|c| c == '\\' || c.is_control()) {
        return Err(PathProblem::BadCharacter);
    }
    if path.starts_with('/') || Path::new(path).has_root() {
        return Err(PathProblem::Absolute);
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(PathProblem::NotNormal);
    }
    if !Path::new(path)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(PathProblem::Absolute);
    }
    if path == MANIFEST_FILE {
        return Err(PathProblem::Reserved);
    }
    Ok(())
}

/// True for 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Size and SHA-256 (lowercase hex) of everything `reader` yields, read in 64 KiB blocks.
///
/// # Errors
/// The reader's I/O errors.
pub fn digest_reader(mut reader: impl Read) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        total = total.saturating_add(n as u64);
    }
    Ok((total, hex(&hasher.finalize())))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_are_refused() {
        assert_eq!(check_relative_path("trace.jsonl"), Ok(()));
        assert_eq!(check_relative_path("nsight/a.csv"), Ok(()));
        assert_eq!(check_relative_path(""), Err(PathProblem::Empty));
        assert_eq!(
            check_relative_path("/etc/passwd"),
            Err(PathProblem::Absolute)
        );
        assert_eq!(check_relative_path("../x"), Err(PathProblem::NotNormal));
        assert_eq!(check_relative_path("a/./b"), Err(PathProblem::NotNormal));
        assert_eq!(check_relative_path("a//b"), Err(PathProblem::NotNormal));
        assert_eq!(check_relative_path("a\\b"), Err(PathProblem::BadCharacter));
        assert_eq!(check_relative_path("a\nb"), Err(PathProblem::BadCharacter));
        assert_eq!(
            check_relative_path("bundle.json"),
            Err(PathProblem::Reserved)
        );
        assert_eq!(
            check_relative_path(&"a".repeat(256)),
            Err(PathProblem::TooLong)
        );
    }

    #[test]
    fn digests_match_known_values() {
        // SHA-256 of "abc" (FIPS 180-2, appendix B.1)
        let (n, d) = digest_reader(&b"abc"[..]).unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            d,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_sha256_hex(&d));
        assert!(!is_sha256_hex(&d.to_uppercase()));
    }
}
