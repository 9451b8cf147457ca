//! A directory of rank traces (`trace.rank<N>.jsonl`): recognised, loaded and reported across
//! ranks (`summary`, `memory` and `demo --ranks` print the table, `report` the page).

use std::path::Path;

use anyhow::{Context as _, Result};
use trace_views::load::Detail;
use trace_views::ranks::{self, RankInput, RankReport};

use crate::input::{self, load};
use crate::output::{self, Output};

/// A directory without `trace.jsonl` (or `.gz`) that holds rank traces (`*.rank<N>.jsonl`).
pub fn is_rank_directory(path: &Path) -> bool {
    path.is_dir()
        && !path.join(input::TRACE_FILE).exists()
        && !path.join(input::TRACE_FILE_GZ).exists()
        && ranks::rank_files(path).is_ok_and(|f| !f.is_empty())
}

/// The summary across the rank traces in `dir` (see [`report`]).
///
/// # Errors
/// As [`report`].
pub fn summary(dir: &Path, json: bool) -> Result<Output> {
    let report = report(dir)?;
    let shown = dir.display().to_string();
    output::record("ranks", None, json, &report, |r| ranks::render(r, &shown)).map(Output::ok)
}

/// The report across the rank traces in `dir`: each loaded (a rank that fails to load is
/// reported, not fatal), then built across ranks.
///
/// # Errors
/// A directory that cannot be listed or holds no rank trace.
pub fn report(dir: &Path) -> Result<RankReport> {
    let files = ranks::rank_files(dir)
        .with_context(|| format!("cannot list the rank traces in {}", dir.display()))?;
    anyhow::ensure!(
        !files.is_empty(),
        "{} holds no rank traces (`trace.rank<N>.jsonl`)",
        dir.display()
    );
    let inputs = files
        .into_iter()
        .map(|(rank, file)| RankInput {
            loaded: load(&file, Detail::Summary)
                .map(|(t, a)| (&t.doc, a))
                .map_err(|e| format!("{e:#}")),
            rank_in_name: rank,
            file,
        })
        .collect();
    Ok(ranks::build(inputs, None))
}
