//! `candle-graph export TRACE --format chrome [-o trace.json[.gz]] [--span PATH] [--window
//! START..END]`: the trace in Chrome Trace Event Format for Perfetto UI and chrome://tracing
//! (see `trace_views::export` for what goes where); `--format speedscope`: the sampled call
//! stacks in speedscope's JSON file format (see `trace_views::export`). A `.gz` output is gzip-compressed; `-o -`
//! writes to stdout. The file is written under a temporary name and renamed when complete, so
//! a failed export never leaves a half-written file behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use flate2::write::GzEncoder;
use flate2::Compression;
use trace_views::envelope::TOOL;
use trace_views::export::{
    finding_texts, write_chrome, write_speedscope, ChromeOptions, ExportStats, SpeedscopeError,
    SpeedscopeStats, Window,
};
use trace_views::load::{Analysis, TraceDocument};

use crate::output_file;

/// The file an export wrote.
pub struct OutputFile {
    /// Where.
    pub path: PathBuf,
    /// Bytes of the file (compressed size for `.gz`).
    pub bytes: u64,
}

/// What an export wrote.
pub struct Written<S> {
    /// The file (`None`: stdout, whose byte count is not kept).
    pub file: Option<OutputFile>,
    /// The writer's counts.
    pub stats: S,
}

/// Writes the Chrome export of `doc` to `output` (`-` for stdout).
///
/// # Errors
/// I/O errors naming the file; a `--span` that matches nothing.
pub fn run(
    doc: &TraceDocument,
    analysis: &Analysis,
    output: &Path,
    span: Option<String>,
    window: Option<Window>,
) -> Result<Written<ExportStats>> {
    let opts = ChromeOptions {
        span_path: span,
        window,
        findings: finding_texts(analysis),
        tool: (TOOL.name.to_string(), TOOL.version.to_string()),
    };
    export_to(output, |w| Ok(write_chrome(doc, analysis, &opts, w)?))
}

/// Writes the speedscope export of `doc`'s samples to `output` (`-` for stdout; `.gz`
/// compressed), under a temporary name renamed when complete.
///
/// # Errors
/// A trace without samples (before any file is created); I/O errors naming the file.
pub fn run_speedscope(doc: &TraceDocument, output: &Path) -> Result<Written<SpeedscopeStats>> {
    if doc.samples.samples.is_empty() {
        return Err(SpeedscopeError::no_samples(doc).into());
    }
    let exporter = format!("{}@{}", TOOL.name, TOOL.version);
    export_to(output, |w| Ok(write_speedscope(doc, &exporter, w)?))
}

/// True for a `.gz` file name.
pub fn gzip_by_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// Runs `write` into stdout (`-`) or into a temporary file beside `output` (gzip for `.gz`)
/// that is renamed over `output` when complete and removed when anything fails.
fn export_to<S>(
    output: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<S>,
) -> Result<Written<S>> {
    if output == Path::new("-") {
        let mut w = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        let stats = write(&mut w)?;
        w.flush().context("cannot write to stdout")?;
        return Ok(Written { file: None, stats });
    }
    let tmp = output_file::temporary_name(output, "export");
    let stats = match write_file(&tmp, gzip_by_extension(output), write) {
        Ok(stats) => stats,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.context(format!("cannot write {}", output.display())));
        }
    };
    output_file::commit(&tmp, output)?;
    let bytes = std::fs::metadata(output)
        .with_context(|| format!("cannot read the size of {}", output.display()))?
        .len();
    Ok(Written {
        file: Some(OutputFile {
            path: output.to_path_buf(),
            bytes,
        }),
        stats,
    })
}

fn write_file<S>(
    tmp: &Path,
    gzip: bool,
    write: impl FnOnce(&mut dyn Write) -> Result<S>,
) -> Result<S> {
    let file = File::create(tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let buffered = BufWriter::with_capacity(1 << 20, file);
    let context = || format!("cannot write {}", tmp.display());
    if gzip {
        // Level 1: an export is large and read once; the default level costs ~10× the time.
        // The writers make many small writes; each reaching the encoder costs a compressor
        // call, so buffer in front of it as well as behind it (10x faster).
        let mut gz =
            BufWriter::with_capacity(1 << 18, GzEncoder::new(buffered, Compression::fast()));
        let stats = write(&mut gz)?;
        gz.into_inner()
            .map_err(|e| e.into_error())
            .and_then(|gz| gz.finish())
            .and_then(|mut w| w.flush())
            .with_context(context)?;
        Ok(stats)
    } else {
        let mut w = buffered;
        let stats = write(&mut w)?;
        w.flush().with_context(context)?;
        Ok(stats)
    }
}
