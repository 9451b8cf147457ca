//! `export`: the trace for another viewer (Chrome Trace Event Format, speedscope) or the
//! Parquet tables of several traces; what was written is said on stderr.

use anyhow::Result;
use trace_views::format::{bytes, escape};
use trace_views::load::{Detail, TraceDocument};

use crate::cli::{ExportArgs, ExportFormat};
use crate::commands::export as write;
use crate::input::load;
use crate::output::{count, Output};

/// Runs `export` in `--format`.
///
/// # Errors
/// Reading the traces; options that do not apply to the format; writing the output.
pub fn run(args: &ExportArgs) -> Result<Output> {
    if args.format == ExportFormat::Parquet {
        return parquet(args);
    }
    let [trace_path] = args.traces.as_slice() else {
        anyhow::bail!(
            "--format {:?} exports one trace; several are for --format parquet",
            args.format
        );
    };
    let (trace, analysis) = load(trace_path, Detail::Full)?;
    if args.format == ExportFormat::Speedscope {
        if args.span.is_some() || args.window.is_some() {
            anyhow::bail!("--span and --window apply to --format chrome only; a speedscope export holds every sample");
        }
        let written = write::run_speedscope(&trace.doc, &args.output)?;
        warn_dropped_samples(&trace.doc);
        if let Some(file) = &written.file {
            let s = written.stats;
            eprintln!(
                "candle-graph: wrote {} ({}, {}, {} samples, {} frames); open it in speedscope (https://www.speedscope.app, or `speedscope FILE`)",
                file.path.display(),
                bytes(file.bytes),
                count(s.profiles as u64, "profile"),
                s.samples,
                s.frames
            );
        }
        return Ok(Output::ok(String::new()));
    }
    let written = write::run(
        &trace.doc,
        analysis,
        &args.output,
        args.span.clone(),
        args.window,
    )?;
    warn_dropped_samples(&trace.doc);
    if let Some(file) = &written.file {
        let s = written.stats;
        eprintln!(
            "candle-graph: wrote {} ({}, {} events: {} nested spans, {} spans apart, {} ops, {} counters, {} instants, {} samples); open it in Perfetto UI or chrome://tracing",
            file.path.display(),
            bytes(file.bytes),
            s.events,
            s.nested_spans,
            s.async_spans,
            s.ops,
            s.counters,
            s.instants,
            s.samples
        );
    }
    Ok(Output::ok(String::new()))
}

#[cfg(feature = "parquet")]
fn parquet(args: &ExportArgs) -> Result<Output> {
    anyhow::ensure!(
        args.span.is_none() && args.window.is_none(),
        "--span and --window apply to --format chrome only; a Parquet export holds every row"
    );
    anyhow::ensure!(
        args.output != std::path::Path::new("-")
            && args.output != std::path::Path::new("trace.json"),
        "--format parquet writes a directory of tables: give it with -o DIR"
    );
    let written = crate::commands::export_parquet::run(&args.traces, &args.output)?;
    let rows: Vec<String> = written
        .tables
        .iter()
        .map(|(p, n)| {
            format!(
                "{} {n}",
                p.file_stem()
                    .map(|s| s.to_string_lossy())
                    .unwrap_or_default()
            )
        })
        .collect();
    eprintln!(
        "candle-graph: wrote {} tables of {} into {} (rows: {}); query them with DuckDB, Polars, DataFusion or Spark",
        written.tables.len(),
        count(written.traces as u64, "trace"),
        args.output.display(),
        rows.join(", ")
    );
    Ok(Output::ok(String::new()))
}

#[cfg(not(feature = "parquet"))]
fn parquet(_: &ExportArgs) -> Result<Output> {
    anyhow::bail!("this candle-graph was built without the `parquet` feature (a default feature)")
}

/// The exports hold the kept samples: when the loader dropped some, a warning says how many and
/// where, as `ops` does (one rule, `trace_ops::availability`).
fn warn_dropped_samples(doc: &TraceDocument) {
    let kept = doc.samples.samples.len() as u64;
    if let Some(text) = trace_views::ops::Dropped::of(doc).describe(kept) {
        eprintln!("candle-graph: warning: {}", escape(&text));
    }
}
