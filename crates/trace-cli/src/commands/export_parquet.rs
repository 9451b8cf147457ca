//! `candle-graph export --format parquet TRACE_OR_DIR… -o DIR`: the traces as typed Parquet
//! tables (`trace_export`; the schema is in the README). A directory input is its
//! `trace.jsonl`, or every rank trace (`trace.rank<N>.jsonl`) in it. Traces are read one at a
//! time (each analysed in full detail, written, dropped), so memory holds one trace.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::input;

/// The trace files of the inputs, in order, each with whether it came from a directory of
/// rank traces: a file as is; a directory's `trace.jsonl` (or `.gz`) or, without one, its rank
/// traces by rank.
///
/// # Errors
/// A path that does not exist; a directory with neither.
pub fn trace_files(inputs: &[PathBuf]) -> Result<Vec<(PathBuf, bool)>> {
    let mut out = Vec::new();
    for p in inputs {
        let is_plain_dir = p.is_dir()
            && !p.join(input::TRACE_FILE).exists()
            && !p.join(input::TRACE_FILE_GZ).exists();
        if is_plain_dir {
            let ranks = trace_ranks::rank_files(p)
                .with_context(|| format!("cannot list {}", p.display()))?;
            if !ranks.is_empty() {
                out.extend(ranks.into_iter().map(|(_, f)| (f, true)));
                continue;
            }
        }
        out.push((input::resolve(p)?, false));
    }
    Ok(out)
}

/// Exports every input into `dir`; returns what was written. A rank trace of a directory that
/// cannot be read is skipped with a warning (as `summary` on the directory says it is
/// unreadable); a trace named on the command line that cannot be read is an error. A cut-short
/// trace is exported with a warning (`runs.truncated` says so).
///
/// # Errors
/// A trace that cannot be loaded (named), no readable trace at all, or export errors naming the
/// file; the temporary files are removed.
pub fn run(inputs: &[PathBuf], dir: &Path) -> Result<trace_export::Written> {
    let files = trace_files(inputs)?;
    let mut export = trace_export::ParquetExport::create(dir)
        .with_context(|| format!("cannot write the tables into {}", dir.display()))?;
    let mut skipped = 0usize;
    for (file, from_dir) in &files {
        let loaded = input::analyze_without_graph(file);
        let added = match loaded {
            Err(e) if *from_dir => {
                eprintln!(
                    "candle-graph: warning: skipping the rank trace {}: {}",
                    file.display(),
                    trace_format::escape(&format!("{e:#}"))
                );
                skipped += 1;
                continue;
            }
            loaded => loaded.and_then(|(trace, analysis)| {
                input::warn_import(&trace);
                crate::warn_truncated(&trace);
                let source = trace.path.display().to_string();
                export
                    .add(&source, &trace.doc, &analysis)
                    .with_context(|| format!("cannot export {source}"))
            }),
        };
        if let Err(e) = added {
            export.abandon();
            return Err(e);
        }
    }
    if skipped == files.len() {
        export.abandon();
        anyhow::bail!("no readable trace to export ({skipped} skipped)");
    }
    Ok(export.finish()?)
}
