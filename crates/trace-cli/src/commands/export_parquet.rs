//! `candle-graph export --format parquet TRACE_OR_DIR… -o DIR`: the traces as typed Parquet
//! tables (`trace_export`; the schema is in the README). A directory input is its
//! `trace.jsonl`, or every rank trace (`trace.rank<N>.jsonl`) in it. Traces are read one at a
//! time (each analysed in full detail, written, dropped), so memory holds one trace.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use trace_graph::Detail;

use crate::input;

/// The trace files of the inputs, in order: a file as is; a directory's `trace.jsonl` (or
/// `.gz`) or, without one, its rank traces by rank.
///
/// # Errors
/// A path that does not exist; a directory with neither.
pub fn trace_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        let is_plain_dir = p.is_dir()
            && !p.join(input::TRACE_FILE).exists()
            && !p.join(input::TRACE_FILE_GZ).exists();
        if is_plain_dir {
            let ranks = trace_ranks::rank_files(p)
                .with_context(|| format!("cannot list {}", p.display()))?;
            if !ranks.is_empty() {
                out.extend(ranks.into_iter().map(|(_, f)| f));
                continue;
            }
        }
        out.push(input::resolve(p)?);
    }
    Ok(out)
}

/// Exports every input into `dir`; returns what was written.
///
/// # Errors
/// A trace that cannot be loaded (named), or export errors naming the file; the temporary
/// files are removed.
pub fn run(inputs: &[PathBuf], dir: &Path) -> Result<trace_export::Written> {
    let files = trace_files(inputs)?;
    let mut export = trace_export::ParquetExport::create(dir)
        .with_context(|| format!("cannot write the tables into {}", dir.display()))?;
    for file in &files {
        let added = input::analyze(file, Detail::Full).and_then(|(trace, analysis)| {
            input::warn_import(&trace);
            let source = trace.path.display().to_string();
            export
                .add(&source, &trace.doc, &analysis)
                .with_context(|| format!("cannot export {source}"))
        });
        if let Err(e) = added {
            export.abandon();
            return Err(e);
        }
    }
    Ok(export.finish()?)
}
