//! `candle-graph export --format parquet TRACE_OR_DIR… -o DIR`: the traces as typed Parquet
//! tables (`trace_export`; the schema is in the README). A directory input is its
//! `trace.jsonl`, or every rank trace (`trace.rank<N>.jsonl`) in it. Traces are read one at a
//! time (each analysed in full detail, written, dropped), so memory holds one trace. The tables
//! are written into a hidden directory beside the output and moved into it once all are
//! written ([`Staging`]): a failed export leaves the output as it was.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use trace_views::export::parquet::{ParquetExport, Staging, Written};

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
            let ranks = trace_views::ranks::rank_files(p)
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
/// file; what the export wrote is removed (tables it replaced are put back).
pub fn run(inputs: &[PathBuf], dir: &Path) -> Result<Written> {
    let runs = inputs
        .iter()
        .filter(|p| crate::run::bundle::is_run_directory(p))
        .count();
    if runs > 0 {
        anyhow::ensure!(
            runs == inputs.len(),
            "give either run directories (partitioned by run and step) or traces, not both"
        );
        return run_dirs(inputs, dir);
    }
    let files = trace_files(inputs)?;
    let cannot = || format!("cannot write the tables into {}", dir.display());
    let staging = Staging::new(dir).with_context(cannot)?;
    let mut export = ParquetExport::create(staging.dir()).with_context(cannot)?;
    let mut skipped = 0usize;
    for (file, from_dir) in &files {
        let loaded = input::analyze_without_graph(file);
        let added = match loaded {
            Err(e) if *from_dir => {
                eprintln!(
                    "candle-graph: warning: skipping the rank trace {}: {}",
                    file.display(),
                    trace_views::format::escape(&format!("{e:#}"))
                );
                skipped += 1;
                continue;
            }
            loaded => loaded.and_then(|(trace, analysis)| {
                input::warn_import(&trace);
                input::warn_truncated(&trace);
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
    let written = export.finish()?;
    let tables = written
        .tables
        .into_iter()
        .map(|(p, n)| (staging.final_path(&p), n))
        .collect();
    let replaced = staging.commit(true).with_context(cannot)?;
    if !replaced.is_empty() {
        // the tables of an earlier export there are gone: said, not silent
        let names: Vec<String> = replaced
            .iter()
            .map(|p| trace_views::format::escape(&p.display().to_string()).into_owned())
            .collect();
        eprintln!(
            "candle-graph: replaced the earlier export's {} in {}: {}",
            crate::output::count(names.len() as u64, "file"),
            dir.display(),
            names.join(", ")
        );
    }
    Ok(Written {
        tables,
        traces: written.traces,
    })
}

/// Run directories (`demo --every`, `ProfileRun::every`): every bundle's trace exported into
/// hive-style partitions `DIR/<table>/run=<run dir name>/step=<captured step>/part-0.parquet`,
/// so that DuckDB (`hive_partitioning = true`), DataFusion (`PARTITIONED BY (run, step)`) and
/// Spark read `run` and `step` as columns of every table. Returns the tables' directories with
/// their rows (summed) and the traces exported.
///
/// # Errors
/// Two run directories whose names give one partition (both named); a bundle that does not verify or load; a partition that
/// exists already; export errors. Nothing is left in `dir` on failure.
pub fn run_dirs(inputs: &[PathBuf], dir: &Path) -> Result<Written> {
    use trace_views::export::parquet::export_partition;
    let staging = Staging::new(dir)
        .with_context(|| format!("cannot write the tables into {}", dir.display()))?;
    // partition value → the run directory that gave it
    let mut names: std::collections::BTreeMap<String, &PathBuf> = Default::default();
    let mut traces = 0u64;
    let mut rows: std::collections::BTreeMap<PathBuf, u64> = Default::default();
    for run in inputs {
        let name = run
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".into());
        let value = trace_views::export::parquet::partition_value(&name);
        if let Some(earlier) = names.get(&value) {
            anyhow::bail!(
                "the run directories {} and {} both give the partition run={value}: rename one \
                 (a partition keeps ASCII letters, digits, '.', '_' and '-' of the directory's \
                 name, anything else becomes '_')",
                path_name(earlier),
                path_name(run)
            );
        }
        if value != name {
            eprintln!("candle-graph: note: {}", partition_note(run, &name, &value));
        }
        names.insert(value, run);
        for bundle in run_bundles(run)? {
            let v = trace_views::bundle::verify(&bundle)?;
            anyhow::ensure!(
                v.is_valid(),
                "{} fails verification: {}",
                bundle.display(),
                trace_views::bundle::render_verification(&v, None)
            );
            let file = bundle.join(trace_views::bundle::TRACE_FILE);
            let (trace, analysis) = input::analyze_without_graph(&file)?;
            let step = trace.doc.meta.capture_step.with_context(|| {
                format!("{}: the trace declares no capture step", file.display())
            })?;
            let source = file.display().to_string();
            let files = export_partition(
                staging.dir(),
                &[("run", &name), ("step", &step.to_string())],
                &source,
                &trace.doc,
                &analysis,
            )
            .with_context(|| format!("cannot export {source}"))?;
            for (f, n) in files {
                if let Some(table_dir) = f.ancestors().nth(3) {
                    *rows.entry(staging.final_path(table_dir)).or_default() += n;
                }
            }
            traces += 1;
        }
    }
    anyhow::ensure!(traces > 0, "no bundle in the run directories to export");
    staging
        .commit(false)
        .with_context(|| format!("cannot move the tables into {}", dir.display()))?;
    Ok(Written {
        tables: rows.into_iter().collect(),
        traces,
    })
}

/// A path as a message names it: elided in the middle to [`trace_views::format::NAME_COLUMNS`] and
/// escaped ([`trace_views::format::name`]).
fn path_name(p: &Path) -> String {
    trace_views::format::name(&p.display().to_string())
}

/// Why the run directory `run`, named `name`, is the partition `run=<value>`: its path and
/// name elided ([`path_name`]; the name said apart only when the path does not end in it), so
/// that the note stays a bounded line however long the names.
fn partition_note(run: &Path, name: &str, value: &str) -> String {
    let own = if run.file_name().is_some_and(|n| n.to_string_lossy() == name) {
        "its name".to_string()
    } else {
        format!("its name \"{}\"", trace_views::format::name(name))
    };
    format!(
        "the run directory {} is the partition run={value} ({own} made path-safe: ASCII \
         letters, digits, '.', '_' and '-' kept, anything else '_', at most 100 characters)",
        path_name(run)
    )
}

/// The bundles of the run directory `run` checked against its `run.json` (as `series` reads
/// them): each `step-*` entry that is not one of the run's bundles is left out with a warning
/// naming it and why.
///
/// # Errors
/// An unreadable or malformed `run.json`; a directory that cannot be listed.
fn run_bundles(run: &Path) -> Result<Vec<PathBuf>> {
    let log = trace_views::bundle::read_run_log(run)?;
    let contents = trace_views::bundle::scan_run_dir(run, log.as_ref())
        .with_context(|| format!("cannot read the run directory {}", run.display()))?;
    for l in &contents.left_out {
        eprintln!(
            "candle-graph: warning: {}: not exported: {}",
            path_name(&run.join(&l.name)),
            trace_views::format::escape(&l.reason)
        );
    }
    Ok(contents.bundles)
}
