//! Resolving, loading and analysing the trace a command reads: the one entry point every
//! command calls.
//!
//! [`analyze`] loads and runs every analysis with the detail a command needs: commands that show
//! figures (`summary`, `memory`, `check`) ask for [`Detail::Summary`]: the memory events stay in
//! a compact log on disk while loading and only the live set, the span tree and the answer are
//! held, so resident memory does not grow with the memory events; commands that read every
//! event or storage (`query`, `report`, `memory --group-by`) ask for [`Detail::Full`]; the
//! Parquet export ([`analyze_without_graph`]) asks for full memory detail over the spilled log
//! (it reads the memory events back in one pass) and a summary graph.
//!
//! A plain candle-graph trace is read in chunks parsed in parallel, with progress on stderr
//! (bytes read of total) when stderr is a terminal and the load takes more than a second; a
//! gzipped or PyTorch trace is read whole first.
//!
//! Accepted: a trace file (JSON Lines), or a directory that holds a `trace.jsonl` (or, without
//! one, a `trace.jsonl.gz`); a PyTorch
//! profiler trace (Kineto Chrome-trace JSON) is recognised by its content and imported
//! (trace-import); either may be gzipped (recognised by the gzip magic bytes). Every failure
//! is an [`anyhow::Error`] whose chain reads as one line with `{:#}`, naming the path and, for
//! content errors, the line and field (from [`trace_views::load::LoadError`]).

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use trace_views::load::{
    self as loader, Analysis, ContentKind, Detail, ImportReport, LoadOptions, TraceDocument,
};

/// Environment variable that forces the full-detail analysis for every command (tests compare
/// both paths with it): `CANDLE_GRAPH_DETAIL=full`.
pub const DETAIL_ENV: &str = "CANDLE_GRAPH_DETAIL";

/// A load shows progress once it has taken this long.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Bytes read first to tell a candle-graph trace (streamed) from the rest (read whole).
const SNIFF_BYTES: usize = 1 << 20;

/// The first bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// File name of the trace inside a directory input.
pub const TRACE_FILE: &str = "trace.jsonl";

/// File name of a gzipped trace inside a directory input, read when it holds no
/// [`TRACE_FILE`].
pub const TRACE_FILE_GZ: &str = "trace.jsonl.gz";

/// A loaded trace and where it came from.
pub struct LoadedTrace {
    /// The file read.
    pub path: PathBuf,
    /// The document.
    pub doc: TraceDocument,
    /// Set when the file was a PyTorch profiler trace: the account of its import.
    pub import: Option<ImportReport>,
}

/// The `--json` input record of a loaded trace.
pub trait InputRecordOf {
    /// The record of `trace`.
    fn of(trace: &LoadedTrace) -> Self;
}

impl InputRecordOf for trace_views::envelope::InputRecord {
    fn of(trace: &LoadedTrace) -> Self {
        Self::new(&trace.path, &trace.doc, trace.import.is_some())
    }
}

/// The file a command should read: `input` itself, or `input/trace.jsonl` (else
/// `input/trace.jsonl.gz`) for a directory.
///
/// # Errors
/// A missing path; a directory without `trace.jsonl` (naming the other `.jsonl` files found).
pub fn resolve(input: &Path) -> Result<PathBuf> {
    let meta =
        std::fs::metadata(input).with_context(|| format!("cannot open {}", input.display()))?;
    if meta.is_dir() && input.file_name().is_some_and(|n| n == TRACE_FILE) {
        bail!("{} is a directory, not a trace file", input.display());
    }
    if !meta.is_dir() {
        return Ok(input.to_path_buf());
    }
    let candidate = input.join(TRACE_FILE);
    if candidate.is_file() {
        return Ok(candidate);
    }
    // A gzipped trace: read it (gzip is recognised by its magic bytes wherever it is read).
    let gzipped = input.join(TRACE_FILE_GZ);
    if gzipped.is_file() && !candidate.is_dir() {
        return Ok(gzipped);
    }
    if candidate.is_dir() {
        bail!("{} is a directory, not a trace file", candidate.display());
    }
    let mut others: Vec<String> = std::fs::read_dir(input)
        .with_context(|| format!("cannot list directory {}", input.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl") || name.ends_with(".jsonl.gz"))
        .collect();
    others.sort();
    if others.is_empty() {
        bail!(
            "directory {} holds no {TRACE_FILE} (pass a trace file or a directory with one {TRACE_FILE})",
            input.display()
        );
    }
    if trace_views::ranks::rank_files(input).is_ok_and(|f| !f.is_empty()) {
        bail!(
            "directory {} holds rank traces ({}): `candle-graph summary {}` compares the ranks \
             (the straggler, the peak of each, the imbalance); pass one rank's file to read it \
             alone",
            input.display(),
            others.join(", "),
            input.display()
        );
    }
    bail!(
        "directory {} holds no {TRACE_FILE} (found {}; pass the trace file itself)",
        input.display(),
        others.join(", ")
    )
}

/// Resolves `input`, loads the trace and runs every analysis once in `detail` (forced to
/// [`Detail::Full`] by `CANDLE_GRAPH_DETAIL=full`); with [`Detail::Summary`] the memory events
/// are spilled while loading (see the module docs).
///
/// # Errors
/// As [`load_with`].
pub fn analyze(input: &Path, detail: Detail) -> Result<(LoadedTrace, Analysis)> {
    analyze_graph(input, detail, detail, detail == Detail::Summary)
}

/// As [`analyze`] in [`Detail::Full`] but with a summary execution graph (no nodes or edges,
/// see [`trace_views::load::analyze_with_graph`]): every storage and memory event for a consumer that
/// writes no graph (the Parquet export), without the per-tensor nodes. The memory events are
/// spilled while loading, as for [`Detail::Summary`]: the consumer reads them back in one pass
/// ([`TraceDocument::try_for_each_memory`]), and memory holds their compact log,
/// not their decoded records (peak RSS on `bench-scale`'s 10^7-event trace: 3,022 → 2,425 MiB).
///
/// # Errors
/// As [`load_with`].
pub fn analyze_without_graph(input: &Path) -> Result<(LoadedTrace, Analysis)> {
    analyze_graph(input, Detail::Full, Detail::Summary, true)
}

fn analyze_graph(
    input: &Path,
    detail: Detail,
    graph_detail: Detail,
    spill_memory: bool,
) -> Result<(LoadedTrace, Analysis)> {
    let (detail, graph_detail) = match std::env::var(DETAIL_ENV).as_deref() {
        Ok("full") => (Detail::Full, Detail::Full),
        _ => (detail, graph_detail),
    };
    let t0 = Instant::now();
    // `CANDLE_GRAPH_DETAIL=full` keeps every event in memory, as it always did.
    let spill_memory = spill_memory && graph_detail == Detail::Summary;
    let trace = load_with(input, spill_memory)?;
    let t1 = Instant::now();
    let analysis = loader::analyze_with_graph(&trace.doc, detail, graph_detail);
    if std::env::var_os("CANDLE_GRAPH_TIMING").is_some() {
        eprintln!(
            "load {:.3}s analyze {:.3}s",
            (t1 - t0).as_secs_f64(),
            t1.elapsed().as_secs_f64()
        );
    }
    Ok((trace, analysis))
}

/// Resolves `input` and loads the trace: every event in memory, or the memory events in
/// a compact log when `spill_memory` is set. A truncated trace loads (its
/// document says so); a PyTorch profiler trace is imported (a cut-short one too, truncated).
///
/// # Errors
/// See [`resolve`]; unreadable files; a gzip stream that yields nothing; bytes that are not
/// UTF-8 before the last line (a last line cut inside a character is truncation, not an error);
/// every [`trace_views::load::LoadError`] (not JSON, not a trace, unsupported schema) and
/// [`trace_views::load::ImportError`], prefixed with the path.
fn load_with(input: &Path, spill_memory: bool) -> Result<LoadedTrace> {
    let path = resolve(input)?;
    let mut file =
        std::fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut head = Vec::with_capacity(SNIFF_BYTES.min(total as usize));
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("cannot read {}", path.display()))?;
    // Read whole only what must be: gzip, and JSON that may be a Chrome trace (an object whose
    // `traceEvents` key may lie past the sniffed bytes). Anything else is streamed, so the
    // loader refuses it at its first line instead of reading an endless input (`/dev/zero`).
    let kind = loader::content_kind(&head);
    let maybe_json_object = head
        .strip_prefix(b"\xef\xbb\xbf".as_slice())
        .unwrap_or(&head)
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{');
    let streamed = !head.starts_with(&GZIP_MAGIC)
        && (kind == ContentKind::CandleTrace
            || (kind == ContentKind::Unknown && !maybe_json_object));
    let loaded = if streamed {
        // A plain candle-graph trace: read in chunks parsed in parallel, with progress.
        let progress = Progress::new(total);
        let report = |bytes: u64| progress.update(bytes);
        let options = LoadOptions {
            spill_memory,
            require_utf8: true,
            progress: Some(&report),
            ..LoadOptions::default()
        };
        let loaded = loader::load_reader_with(std::io::Cursor::new(head).chain(file), &options);
        progress.finish();
        loaded
    } else {
        // Gzip, a PyTorch profiler trace or something else: the whole file at once.
        let mut raw = head;
        file.read_to_end(&mut raw)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let decoded =
            loader::decode(&raw).with_context(|| format!("cannot load {}", path.display()))?;
        if loader::content_kind(&decoded.bytes) == ContentKind::ChromeTrace {
            let imported = loader::import_decoded_at(&decoded, &path)
                .with_context(|| format!("cannot import {}", path.display()))?;
            let doc = imported.document();
            return Ok(LoadedTrace {
                path,
                doc,
                import: Some(imported.report),
            });
        }
        let options = LoadOptions {
            spill_memory,
            require_utf8: true,
            ..LoadOptions::default()
        };
        loader::load_reader_with(decoded.bytes.as_ref(), &options)
    };
    let doc = loaded
        .map_err(|e| match e {
            loader::LoadError::NotUtf8 { .. } => anyhow::anyhow!(e.to_string()),
            loader::LoadError::Io { source, .. } => {
                anyhow::anyhow!(source).context(format!("cannot read {}", path.display()))
            }
            e => anyhow::anyhow!(not_a_trace_hint(&e)).context(e.to_string()),
        })
        .with_context(|| format!("cannot load {}", path.display()))?;
    Ok(LoadedTrace {
        path,
        doc,
        import: None,
    })
}

/// Prints an imported trace's warnings to stderr, one line each.
pub fn warn_import(trace: &LoadedTrace) {
    if let Some(report) = &trace.import {
        for w in &report.warnings {
            eprintln!(
                "candle-graph: warning: {} (PyTorch profiler trace): {w}",
                trace.path.display()
            );
        }
    }
}

/// Warns on stderr when the trace was cut short.
pub fn warn_truncated(trace: &LoadedTrace) {
    if trace.import.as_ref().is_some_and(|r| r.cut_short.is_some()) {
        return; // the import's own warning says what was cut
    }
    if let Some(t) = &trace.doc.truncation {
        let what = match t.partial_line {
            Some(line) => format!("its last line ({line}) is cut short"),
            None => "it has no terminal event".to_string(),
        };
        eprintln!(
            "candle-graph: warning: {} is truncated ({what}); analysing what was written, figures are lower bounds",
            trace.path.display()
        );
    }
}

/// Loads and analyses through the one entry point ([`analyze`]); warns on stderr when the
/// trace was cut short. The trace and its analysis live until the process exits (one command
/// per process): the OS takes the memory back at once, where dropping a large analysis record
/// by record would take a noticeable share of the run.
///
/// # Errors
/// As [`analyze`].
pub fn load(path: &Path, detail: Detail) -> Result<(&'static LoadedTrace, &'static Analysis)> {
    let (trace, analysis) = analyze(path, detail)?;
    warn_import(&trace);
    warn_truncated(&trace);
    Ok((Box::leak(Box::new(trace)), Box::leak(Box::new(analysis))))
}

/// Bytes read of total on stderr, once a load has taken [`PROGRESS_AFTER`] and only on a
/// terminal.
struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    shown: AtomicBool,
}

impl Progress {
    fn new(total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
            bar.set_style(
                ProgressStyle::with_template(
                    "loading {bar:30} {binary_bytes}/{binary_total_bytes} ({elapsed})",
                )
                .expect("valid template"),
            );
            bar
        });
        Self {
            bar,
            start: Instant::now(),
            shown: AtomicBool::new(false),
        }
    }

    fn update(&self, bytes: u64) {
        let Some(bar) = &self.bar else { return };
        if !self.shown.load(Ordering::Relaxed) && self.start.elapsed() >= PROGRESS_AFTER {
            self.shown.store(true, Ordering::Relaxed);
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_position(bytes);
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A short hint for errors that usually mean "this is not a candle-graph trace".
fn not_a_trace_hint(e: &loader::LoadError) -> String {
    use loader::LoadError;
    match e {
        LoadError::MissingMeta { .. }
        | LoadError::UnknownKind { line: 1, .. }
        | LoadError::Field { line: 1, .. } => {
            "not a candle-graph trace (the first line must be a `meta` event) nor a PyTorch profiler trace (no `traceEvents`)".to_string()
        }
        LoadError::UnsupportedSchema { .. } => {
            "written by another candle-graph version; upgrade candle-graph or re-capture"
                .to_string()
        }
        LoadError::Malformed { .. } => "a trace is JSON Lines, one event per line".to_string(),
        _ => "the trace breaks the candle-graph trace format".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(path: &Path) -> Result<LoadedTrace> {
        load_with(path, false)
    }

    #[test]
    fn utf8_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#;
        let write = |bytes: &[u8]| {
            let p = dir.path().join("t.jsonl");
            let mut all = format!("{meta}\n").into_bytes();
            all.extend_from_slice(bytes);
            std::fs::write(&p, all).unwrap();
            p
        };
        assert!(load(&write(b"")).is_ok());
        let err = load(&write(b"ok\n\xff\xfe\n")).err().unwrap();
        assert_eq!(
            format!("{err:#}").split_once(": ").unwrap().1,
            "not UTF-8 text: invalid byte at offset 114 (line 3); a trace is UTF-8 JSON Lines"
        );
        // a cut multi-byte character in the unterminated last line is truncation
        let doc = load(&write(b"{\"a\":\"\xc3")).unwrap().doc;
        assert!(doc.is_truncated());
    }
}
