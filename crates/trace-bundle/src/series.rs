//! A series across bundles of one run captured at different steps ([`build_series`]): every
//! bundle verified, one run (same entrypoint, phase, device, rank and world size), no step
//! twice; the steps sorted, each with its [`StepFigures`] (read from the bundle's
//! `figures.json`, its bytes checked against the manifest's digest as they are read).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trace_graph::StepFigures;

use crate::manifest::{digest_reader, RunIdentity, FIGURES_FILE};
use crate::verify::{verify, Problem};
use crate::BundleError;

/// Schema of the [`Series`].
pub const SERIES_SCHEMA: &str = "candle-graph/series/1";

/// Why bundles do not make a series (typed: `code` in JSON).
#[derive(Debug, thiserror::Error, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum SeriesError {
    /// No bundle given.
    #[error("a series needs at least one bundle")]
    Empty,
    /// A bundle failed verification.
    #[error("{}: fails verification: {}", bundle.display(), problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Unverified {
        /// The bundle.
        bundle: PathBuf,
        /// Its problems.
        problems: Vec<Problem>,
    },
    /// A bundle's trace declares no capture step.
    #[error("{}: the trace declares no capture_step", bundle.display())]
    NoStep {
        /// The bundle.
        bundle: PathBuf,
    },
    /// Two bundles are captures of different runs.
    #[error("{} and {} are different runs: {field} is {} in {} and {} in {}", first_bundle.display(), second_bundle.display(), said(first), first_bundle.display(), said(second), second_bundle.display())]
    DifferentRuns {
        /// The field that differs (`entrypoint`, `phase`, `device`, `rank`, `world_size`).
        field: &'static str,
        /// The first bundle (the series' reference).
        first_bundle: PathBuf,
        /// Its value (`null`: not declared).
        first: Option<String>,
        /// The bundle that differs.
        second_bundle: PathBuf,
        /// Its value (`null`: not declared).
        second: Option<String>,
    },
    /// Two bundles capture the same step.
    #[error("{} and {} both capture step {step}", first_bundle.display(), second_bundle.display())]
    RepeatedStep {
        /// The step.
        step: u64,
        /// One bundle.
        first_bundle: PathBuf,
        /// The other.
        second_bundle: PathBuf,
    },
    /// A bundle's `figures.json` is missing, changed while read, or not step figures of
    /// its run.
    #[error("{}: {FIGURES_FILE}: {reason}", bundle.display())]
    Figures {
        /// The bundle.
        bundle: PathBuf,
        /// Why.
        reason: String,
    },
    /// A bundle could not be read.
    #[error(transparent)]
    Bundle(
        #[from]
        #[serde(serialize_with = "display")]
        BundleError,
    ),
}

/// A run field's value as a refusal says it.
fn said(v: &Option<String>) -> String {
    v.as_ref()
        .map_or_else(|| "not declared".to_string(), |v| crate::quoted(v))
}

fn display<S: serde::Serializer>(e: &BundleError, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&e.to_string())
}

/// One capture of the series.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesStep {
    /// The captured step.
    pub step: u64,
    /// The bundle.
    pub bundle: PathBuf,
    /// The trace's run id.
    pub run_id: String,
    /// SHA-256 of the bundle's manifest.
    pub manifest_sha256: String,
    /// The step's figures.
    pub figures: StepFigures,
}

/// A series (`candle-graph/series/1`).
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// [`SERIES_SCHEMA`].
    pub schema: &'static str,
    /// The run's entrypoint.
    pub entrypoint: String,
    /// Its phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Its device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Its rank, for a rank of a multi-process job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// The captures, by step.
    pub steps: Vec<SeriesStep>,
}

/// The fields that make two captures one run (`None`: not declared, which no declared value
/// equals).
fn run_fields(r: &RunIdentity) -> [(&'static str, Option<String>); 5] {
    let n = |v: Option<u32>| v.map(|x| x.to_string());
    [
        ("entrypoint", Some(r.entrypoint.clone())),
        ("phase", r.phase.clone()),
        ("device", r.device.clone()),
        ("rank", n(r.rank)),
        ("world_size", n(r.world_size)),
    ]
}

/// Builds the series of `bundles` (see the module docs).
///
/// # Errors
/// Every [`SeriesError`]: the first bundle that fails, in the order given.
pub fn build_series(bundles: &[PathBuf]) -> Result<Series, SeriesError> {
    let mut steps: BTreeMap<u64, SeriesStep> = BTreeMap::new();
    let mut reference: Option<(PathBuf, RunIdentity)> = None;
    for bundle in bundles {
        let v = verify(bundle)?;
        let (Some(manifest), Some(sha), true) =
            (v.manifest.clone(), v.manifest_sha256.clone(), v.is_valid())
        else {
            return Err(SeriesError::Unverified {
                bundle: bundle.clone(),
                problems: v.problems,
            });
        };
        let run = manifest.run.clone();
        let step = run.capture_step.ok_or_else(|| SeriesError::NoStep {
            bundle: bundle.clone(),
        })?;
        match &reference {
            None => reference = Some((bundle.clone(), run.clone())),
            Some((first_bundle, first)) => {
                for ((field, a), (_, b)) in run_fields(first).into_iter().zip(run_fields(&run)) {
                    if a != b {
                        return Err(SeriesError::DifferentRuns {
                            field,
                            first_bundle: first_bundle.clone(),
                            first: a,
                            second_bundle: bundle.clone(),
                            second: b,
                        });
                    }
                }
            }
        }
        if let Some(prev) = steps.get(&step) {
            return Err(SeriesError::RepeatedStep {
                step,
                first_bundle: prev.bundle.clone(),
                second_bundle: bundle.clone(),
            });
        }
        let figures = read_figures(bundle, &manifest, &run)?;
        steps.insert(
            step,
            SeriesStep {
                step,
                bundle: bundle.clone(),
                run_id: run.run_id.clone(),
                manifest_sha256: sha,
                figures,
            },
        );
    }
    let Some((_, run)) = reference else {
        return Err(SeriesError::Empty);
    };
    Ok(Series {
        schema: SERIES_SCHEMA,
        entrypoint: run.entrypoint,
        phase: run.phase,
        device: run.device,
        rank: run.rank,
        steps: steps.into_values().collect(),
    })
}

/// Reads `figures.json` once and checks those very bytes against the manifest (a file changed
/// after verification is caught), then that they are the figures of `run`.
fn read_figures(
    bundle: &Path,
    manifest: &crate::Manifest,
    run: &RunIdentity,
) -> Result<StepFigures, SeriesError> {
    let fail = |reason: String| SeriesError::Figures {
        bundle: bundle.to_path_buf(),
        reason,
    };
    let entry = manifest
        .files
        .iter()
        .find(|f| f.path == FIGURES_FILE)
        .ok_or_else(|| fail("not in the bundle".into()))?;
    let bytes = std::fs::read(bundle.join(FIGURES_FILE)).map_err(|e| fail(e.to_string()))?;
    let (_, sha) = digest_reader(bytes.as_slice()).map_err(|e| fail(e.to_string()))?;
    if sha != entry.sha256 {
        return Err(fail("changed since it was verified".into()));
    }
    let figures: StepFigures =
        serde_json::from_slice(&bytes).map_err(|e| fail(format!("not step figures: {e}")))?;
    if figures.run_id != run.run_id {
        return Err(fail(format!(
            "figures of run {}, the bundle is run {}",
            crate::quoted(&figures.run_id),
            crate::quoted(&run.run_id)
        )));
    }
    Ok(figures)
}
