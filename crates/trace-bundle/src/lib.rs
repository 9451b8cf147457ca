//! Evidence you can hand on: a **bundle** is a directory holding a trace, the outputs derived
//! from it (the `summary` and `memory` JSON, the [`trace_graph::StepFigures`]) and a manifest
//! (`bundle.json`, `candle-graph/bundle/1`) with the run's identity and each file's size and
//! SHA-256. [`verify`] checks a bundle against its manifest (every mismatch named by file);
//! [`semantic_problems`] compares its derived outputs with ones re-derived from its trace, byte
//! for byte; [`build_series`] reads bundles of one run captured at different steps side by side,
//! refusing different runs and repeated steps with a typed [`SeriesError`].
//!
//! Layout of a bundle:
//!
//! | path           | what                                                               |
//! |----------------|--------------------------------------------------------------------|
//! | `bundle.json`  | the manifest: `{schema, run, files[{path, bytes, sha256}]}` by path |
//! | `trace.jsonl`  | the trace, byte for byte                                           |
//! | `figures.json` | [`trace_graph::StepFigures`] (`candle-graph/step-figures/1`)         |
//! | others         | derived outputs the publisher adds (the CLI: `summary.json`, `memory.json`) |
//!
//! This crate does not derive the outputs besides the figures: the caller (the CLI) passes
//! them as [`DerivedFile`]s, to [`publish`] and again, re-derived, to [`semantic_problems`].
//! Paths inside a bundle are safe relative paths ([`check_relative_path`]).
//!
//! A **run directory** ([`run`]) holds the bundles of one run captured on a schedule (one step
//! in `n`), bounded on disk, and its log `run.json` of every capture (kept, dropped, failed).

#![deny(missing_docs)]

mod manifest;
mod publish;
pub mod run;
mod series;
mod verify;

use std::path::PathBuf;

pub use manifest::{
    check_relative_path, digest_reader, hex, is_sha256_hex, FileEntry, Manifest, PathProblem,
    RunIdentity, BUNDLE_SCHEMA, FIGURES_FILE, MANIFEST_FILE, MAX_PATH_BYTES, TRACE_FILE,
};
pub use publish::publish;
pub use series::{build_series, Series, SeriesError, SeriesStep, SERIES_SCHEMA};
pub use verify::{
    read_trace_identity, semantic_problems, verify, Problem, Verification, MAX_MANIFEST_BYTES,
    MAX_META_LINE_BYTES, VERIFICATION_SCHEMA,
};

/// A name read from a trace, a manifest or `run.json` as a message quotes it: elided in the
/// middle to [`trace_format::NAME_COLUMNS`] and escaped for a terminal ([`trace_format::name`]),
/// in double quotes — never Rust's `Debug` form, which neither bounds nor escapes it the way the
/// rest of the output does.
pub(crate) fn quoted(s: &str) -> String {
    format!("\"{}\"", trace_format::name(s))
}

/// One derived output: its path inside the bundle and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedFile {
    /// Safe relative path ([`check_relative_path`]).
    pub path: String,
    /// Content.
    pub bytes: Vec<u8>,
}

/// The step figures of a trace as the bundle's [`FIGURES_FILE`] (pretty JSON, newline-ended).
///
/// # Errors
/// Serialisation errors (none for finite figures; non-finite ones are written `null`).
pub fn figures_file(figures: &trace_graph::StepFigures) -> Result<DerivedFile, serde_json::Error> {
    let mut bytes = serde_json::to_vec_pretty(figures)?;
    bytes.push(b'\n');
    Ok(DerivedFile {
        path: FIGURES_FILE.into(),
        bytes,
    })
}

/// What stops a bundle from being read or written (problems of its content are
/// [`Problem`]s of a [`Verification`] instead).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Not a directory.
    #[error("{} is not a bundle directory", .0.display())]
    NotADirectory(PathBuf),
    /// The destination exists.
    #[error("{} exists: a bundle is written into a new directory", .0.display())]
    Exists(PathBuf),
    /// A derived output's path cannot be in a bundle.
    #[error("derived output {path:?}: {problem}")]
    DerivedPath {
        /// The path.
        path: String,
        /// Why.
        problem: String,
    },
    /// The staged bundle failed its own verification.
    #[error("the staged bundle fails verification: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Staged(Vec<Problem>),
    /// An I/O error.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}
