//! `candle-graph`: profile a Candle training step and explain the trace.
//!
//! Exit status (ripgrep's convention): 0 when the output was produced; 1 when `check
//! --require-valid` found the capture invalid or incomplete, `device-check` found a failing
//! check, `verify` found a bundle that does not match (naming each file) or `series` refused its
//! bundles (with the typed reason) — after printing; 2 when it could not run (bad input, I/O), with the cause chain printed once to stderr. stdout carries only
//! data; a closed stdout (`| head`) exits 0.

#![deny(missing_docs)]

mod cli;
mod commands;
mod input;
mod output_file;

use trace_views::{envelope, slice};

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Parser;
use trace_graph::Detail;

use crate::cli::{Cli, Command};
use crate::commands::query::Filter;
use crate::envelope::to_json;
use crate::input::InputRecordOf as _;
use trace_views::envelope::InputRecord;

// The probe's tracking allocator: `demo` needs it for the memory plane (disarmed it costs one
// relaxed atomic load per allocation).
#[global_allocator]
static ALLOC: trace_probe::alloc::Tracking = trace_probe::alloc::Tracking::system();

/// Writes a command's output as it is produced.
type Stream = Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()>>;

/// What a command produced: text for stdout (or a writer of it) and the exit code.
struct Output {
    stdout: String,
    stream: Option<Stream>,
    code: u8,
}

impl Output {
    fn ok(stdout: String) -> Self {
        Self {
            stdout,
            stream: None,
            code: 0,
        }
    }

    /// Output written to stdout as it is made (nothing of it held).
    fn stream(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()> + 'static) -> Self {
        Self {
            stdout: String::new(),
            stream: Some(Box::new(write)),
            code: 0,
        }
    }
}

/// The last guard before a terminal: every control character but the line breaks the report
/// itself writes is shown escaped (trace text is escaped where it is inserted; this catches
/// anything that slipped through). JSON output does not pass here: serde escapes controls.
fn terminal_safe(text: String) -> String {
    if !text
        .chars()
        .any(|c| c != '\n' && trace_format::is_unsafe(c))
    {
        return text;
    }
    text.split('\n')
        .map(|line| trace_format::escape(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(out) => {
            let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            let written = match out.stream {
                Some(write) => write(&mut stdout),
                None => stdout.write_all(out.stdout.as_bytes()),
            };
            match written.and_then(|()| stdout.flush()) {
                Ok(()) => ExitCode::from(out.code),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("candle-graph: error: cannot write to stdout: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Err(err) => {
            // Errors quote trace text (an unknown kind, an enum value): escaped like every other
            // piece of trace text before it reaches a terminal.
            eprintln!(
                "candle-graph: error: {}",
                trace_format::escape(&format!("{err:#}"))
            );
            ExitCode::from(2)
        }
    }
}

/// `1 trace`, `2 traces`.
fn count(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Warns on stderr when the trace was cut short.
pub(crate) fn warn_truncated(trace: &input::LoadedTrace) {
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

/// Loads and analyses through the one entry point ([`input::analyze`]); warns on stderr when
/// the trace was cut short. The trace and its analysis live until the process exits (one
/// command per process): the OS takes the memory back at once, where dropping a large analysis
/// record by record would take a noticeable share of the run.
fn load(
    path: &std::path::Path,
    detail: trace_graph::Detail,
) -> Result<(&'static input::LoadedTrace, &'static trace_graph::Analysis)> {
    let (trace, analysis) = input::analyze(path, detail)?;
    input::warn_import(&trace);
    warn_truncated(&trace);
    Ok((Box::leak(Box::new(trace)), Box::leak(Box::new(analysis))))
}

/// Serialises this binary's unit tests that run a captured Candle step: the tracking allocator
/// sees every thread of the process, so a capture window would count another test's tensors.
#[cfg(test)]
pub(crate) fn candle_serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(cli: Cli) -> Result<Output> {
    match cli.command {
        Command::Demo(args) if args.inference => {
            let report = commands::demo::run_inference(&args)?;
            eprintln!("{}", commands::demo::describe_inference(&report));
            let (trace, analysis) = load(&report.trace_path, Detail::Summary)?;
            let figures = commands::demo::InferenceFigures::of(&trace.doc);
            let summary = commands::summary::build(&trace.doc, analysis);
            Ok(Output::ok(if args.json {
                to_json("summary", Some(InputRecord::of(trace)), &summary)?
            } else {
                terminal_safe(format!(
                    "{}\n{}",
                    figures.render(),
                    commands::summary::render(&summary, &trace.path.display().to_string())
                ))
            }))
        }
        Command::Demo(args) if args.rank_worker => {
            let report = commands::demo::run(&args, false)?;
            eprintln!("{}", commands::demo::describe(&args, &report));
            Ok(Output::ok(String::new()))
        }
        Command::Demo(args) if args.ranks.is_some() => {
            let ranks = args.ranks.unwrap_or(1);
            for o in commands::demo::run_ranks(&args, ranks)? {
                if o.status != Some(0) {
                    eprintln!(
                        "candle-graph: warning: rank {} exited with {}; the summary says what it lacks",
                        o.rank,
                        o.status.map(|c| c.to_string()).unwrap_or_else(|| "a signal".into())
                    );
                }
            }
            rank_summary(&args.out, args.json)
        }
        Command::Demo(args) => {
            let progress = !args.json && std::io::stderr().is_terminal();
            let report = commands::demo::run(&args, progress)?;
            eprintln!("{}", commands::demo::describe(&args, &report));
            let (trace, analysis) = load(&report.trace_path, Detail::Summary)?;
            let summary = commands::summary::build(&trace.doc, analysis);
            Ok(Output::ok(if args.json {
                to_json("summary", Some(InputRecord::of(trace)), &summary)?
            } else {
                terminal_safe(commands::summary::render(
                    &summary,
                    &trace.path.display().to_string(),
                ))
            }))
        }
        Command::Import(args) => commands::import::run(&args).map(|(stdout, code)| Output {
            stdout,
            stream: None,
            code,
        }),
        Command::Summary(args) if is_rank_directory(&args.trace) => {
            rank_summary(&args.trace, args.json)
        }
        Command::Summary(args) => {
            let (trace, analysis) = load(&args.trace, Detail::Summary)?;
            let summary = commands::summary::build(&trace.doc, analysis);
            Ok(Output::ok(if args.json {
                to_json("summary", Some(InputRecord::of(trace)), &summary)?
            } else {
                terminal_safe(commands::summary::render(
                    &summary,
                    &trace.path.display().to_string(),
                ))
            }))
        }
        // a directory of rank traces: the per-rank table (peak per device, what held it, the
        // imbalance) is the summary across ranks
        Command::Memory(args) if is_rank_directory(&args.input.trace) => {
            rank_summary(&args.input.trace, args.input.json)
        }
        Command::Memory(args) => {
            // A summary analysis lists the largest SUMMARY_TOP storages of each peak; grouping
            // reads every storage live at the peak: both need the full detail beyond that.
            let detail = if args.top > trace_memory::SUMMARY_TOP || args.group_by.is_some() {
                Detail::Full
            } else {
                Detail::Summary
            };
            let (mut trace, mut analysis) = load(&args.input.trace, detail)?;
            // With allocation sites, merged rows and the op coverage need every storage live
            // at the peak: past the summary's SUMMARY_TOP, read the trace again in full.
            let beyond_summary = analysis.memory.logical.as_ref().is_some_and(|l| {
                l.by_device.iter().any(|d| {
                    d.peak
                        .as_ref()
                        .is_some_and(|p| p.live_allocation_count > trace_memory::SUMMARY_TOP as u64)
                })
            });
            if detail == Detail::Summary && analysis.sites.is_some() && beyond_summary {
                (trace, analysis) = load(&args.input.trace, Detail::Full)?;
            }
            let report = commands::memory::build(
                &trace.doc,
                analysis,
                args.device.as_deref(),
                args.top,
                args.group_by,
                args.ungrouped,
            )?;
            Ok(Output::ok(if args.input.json {
                to_json("memory", Some(InputRecord::of(trace)), &report)?
            } else {
                terminal_safe(commands::memory::render(&report))
            }))
        }
        Command::Ops(args) => {
            let (trace, analysis) = load(&args.input.trace, Detail::Summary)?;
            if analysis.operations.is_err() {
                // A producer that timed every op (a PyTorch import) gets the exact table.
                if let Some(measured) = trace_ops::MeasuredOps::from_document(&trace.doc) {
                    let report = commands::ops_measured::build(
                        &measured,
                        args.by == Some(commands::ops::ByArg::Op),
                        args.pass.map(commands::ops::PassArg::pass),
                        args.top,
                    );
                    return Ok(Output::ok(if args.input.json {
                        to_json("ops", Some(InputRecord::of(trace)), &report)?
                    } else {
                        terminal_safe(commands::ops_measured::render(&report))
                    }));
                }
            }
            let report = commands::ops::build(
                &analysis.operations,
                analysis.sites.as_ref(),
                commands::ops::OpsQuery {
                    by: args.by,
                    pass: args.pass,
                    sort: args.sort,
                    top: args.top,
                },
            );
            Ok(Output::ok(if args.input.json {
                to_json("ops", Some(InputRecord::of(trace)), &report)?
            } else {
                terminal_safe(commands::ops::render(&report))
            }))
        }
        Command::Check(args) if args.budget.is_some() => check_budget(&args),
        Command::Check(args) => {
            let (trace, analysis) = load(&args.input.trace, Detail::Summary)?;
            let report = commands::check::build(analysis);
            let code = if args.require_valid && !report.valid_and_complete {
                1
            } else {
                0
            };
            let stdout = if args.input.json {
                to_json("check", Some(InputRecord::of(trace)), &report)?
            } else {
                terminal_safe(commands::check::render(&report))
            };
            Ok(Output {
                stdout,
                stream: None,
                code,
            })
        }
        Command::DeviceCheck(args) => {
            let report = commands::device_check::run(&args, |line| {
                eprintln!("candle-graph device-check: {line}");
            })?;
            let code = if report.all_passed() { 0 } else { 1 };
            Ok(Output {
                stdout: report.render(),
                stream: None,
                code,
            })
        }
        Command::Query(args) => {
            let (trace, analysis) = load(&args.trace, Detail::Full)?;
            let filter = match (args.label, args.label_prefix) {
                (Some(l), _) => Some(Filter::Label(l)),
                (None, Some(p)) => Some(Filter::LabelPrefix(p)),
                (None, None) => None,
            };
            let slice = slice::Slice {
                limit: args.limit,
                fields: args.fields,
            };
            let report = commands::query::run(&trace.doc, analysis, args.kind, filter, slice)?;
            let input = InputRecord::of(trace);
            Ok(Output::stream(move |w| {
                envelope::write_json(w, "query", Some(input), &report)
            }))
        }
        Command::Report(args) if is_rank_directory(&args.trace) => {
            let report = rank_report(&args.trace)?;
            let shown = args.trace.display().to_string();
            let html = trace_report::html::render(&commands::ranks_html::build(&report, &shown));
            output_file::write(&args.output, html.as_bytes(), "report.html")?;
            eprintln!(
                "candle-graph: wrote {} ({}, {}); open it in a browser (it loads nothing from the network)",
                args.output.display(),
                trace_format::bytes(html.len() as u64),
                count(report.ranks.len() as u64, "rank")
            );
            Ok(Output::ok(String::new()))
        }
        Command::Report(args) => {
            let (trace, analysis) = load(&args.trace, Detail::Full)?;
            let path = trace.path.display().to_string();
            let html = trace_views::report_html(&trace.doc, analysis, &path);
            output_file::write(&args.output, html.as_bytes(), "report.html")?;
            eprintln!(
                "candle-graph: wrote {} ({}); open it in a browser (it loads nothing from the network)",
                args.output.display(),
                trace_format::bytes(html.len() as u64)
            );
            Ok(Output::ok(String::new()))
        }
        Command::Export(args) if args.format == cli::ExportFormat::Parquet => export_parquet(&args),
        Command::Export(args) => {
            let [trace_path] = args.traces.as_slice() else {
                anyhow::bail!(
                    "--format {:?} exports one trace; several are for --format parquet",
                    args.format
                );
            };
            let (trace, analysis) = load(trace_path, Detail::Full)?;
            if args.format == cli::ExportFormat::Speedscope {
                if args.span.is_some() || args.window.is_some() {
                    anyhow::bail!("--span and --window apply to --format chrome only; a speedscope export holds every sample");
                }
                let written = commands::export::run_speedscope(&trace.doc, &args.output)?;
                warn_dropped_samples(&trace.doc);
                if let Some(file) = &written.file {
                    let s = written.stats;
                    eprintln!(
                        "candle-graph: wrote {} ({}, {}, {} samples, {} frames); open it in speedscope (https://www.speedscope.app, or `speedscope FILE`)",
                        file.path.display(),
                        trace_format::bytes(file.bytes),
                        count(s.profiles as u64, "profile"),
                        s.samples,
                        s.frames
                    );
                }
                return Ok(Output::ok(String::new()));
            }
            let written =
                commands::export::run(&trace.doc, analysis, &args.output, args.span, args.window)?;
            warn_dropped_samples(&trace.doc);
            if let Some(file) = &written.file {
                let s = written.stats;
                eprintln!(
                    "candle-graph: wrote {} ({}, {} events: {} nested spans, {} spans apart, {} ops, {} counters, {} instants, {} samples); open it in Perfetto UI or chrome://tracing",
                    file.path.display(),
                    trace_format::bytes(file.bytes),
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
        Command::Diff(args) => diff(&args),
        Command::Bundle(args) => bundle(&args),
        Command::Verify(args) => verify(&args),
        Command::Series(args) => series(&args),
    }
}

#[cfg(feature = "parquet")]
fn export_parquet(args: &cli::ExportArgs) -> Result<Output> {
    anyhow::ensure!(
        args.span.is_none() && args.window.is_none(),
        "--span and --window apply to --format chrome only; a Parquet export holds every row"
    );
    anyhow::ensure!(
        args.output != std::path::Path::new("-")
            && args.output != std::path::Path::new("trace.json"),
        "--format parquet writes a directory of tables: give it with -o DIR"
    );
    let written = commands::export_parquet::run(&args.traces, &args.output)?;
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
fn export_parquet(_: &cli::ExportArgs) -> Result<Output> {
    anyhow::bail!("this candle-graph was built without the `parquet` feature (a default feature)")
}

/// The exports hold the kept samples: when the loader dropped some, a warning says how many and
/// where, as `ops` does (one rule, `trace_ops::availability`).
fn warn_dropped_samples(doc: &trace_schema::TraceDocument) {
    let kept = doc.samples.samples.len() as u64;
    if let Some(text) = trace_ops::Dropped::of(doc).describe(kept) {
        eprintln!("candle-graph: warning: {}", trace_format::escape(&text));
    }
}

/// A directory without `trace.jsonl` (or `.gz`) that holds rank traces (`*.rank<N>.jsonl`).
fn is_rank_directory(path: &std::path::Path) -> bool {
    path.is_dir()
        && !path.join(input::TRACE_FILE).exists()
        && !path.join(input::TRACE_FILE_GZ).exists()
        && trace_ranks::rank_files(path).is_ok_and(|f| !f.is_empty())
}

/// The summary across the rank traces in `dir` (see [`rank_report`]).
fn rank_summary(dir: &std::path::Path, json: bool) -> Result<Output> {
    let report = rank_report(dir)?;
    let shown = dir.display().to_string();
    Ok(Output::ok(if json {
        to_json("ranks", None, &report)?
    } else {
        terminal_safe(commands::ranks::render(&report, &shown))
    }))
}

/// The report across the rank traces in `dir`: each loaded (a rank that fails to load is
/// reported, not fatal), then `trace_ranks::build`.
fn rank_report(dir: &std::path::Path) -> Result<trace_ranks::RankReport> {
    let files = trace_ranks::rank_files(dir)
        .with_context(|| format!("cannot list the rank traces in {}", dir.display()))?;
    anyhow::ensure!(
        !files.is_empty(),
        "{} holds no rank traces (`trace.rank<N>.jsonl`)",
        dir.display()
    );
    let inputs = files
        .into_iter()
        .map(|(rank, file)| trace_ranks::RankInput {
            loaded: load(&file, Detail::Summary)
                .map(|(t, a)| (&t.doc, a))
                .map_err(|e| format!("{e:#}")),
            rank_in_name: rank,
            file,
        })
        .collect();
    Ok(trace_ranks::build(inputs, None))
}

fn bundle(args: &cli::BundleArgs) -> Result<Output> {
    let (trace, analysis) = load(&args.trace, Detail::Full)?;
    anyhow::ensure!(
        trace.import.is_none(),
        "{} is a PyTorch profiler trace: bundle the candle-graph trace `candle-graph import` writes from it",
        trace.path.display()
    );
    let derived = commands::bundle::derive(&trace.doc, analysis)?;
    let run = trace_bundle::RunIdentity::of(&trace.doc.meta);
    let v = trace_bundle::publish(&trace.path, &run, &derived, &args.output)
        .with_context(|| format!("cannot publish the bundle {}", args.output.display()))?;
    Ok(Output::ok(if args.json {
        to_json("bundle", Some(InputRecord::of(trace)), &v)?
    } else {
        terminal_safe(format!(
            "published    {}\n{}",
            args.output.display(),
            commands::bundle::render_verification(&v, None)
        ))
    }))
}

fn verify(args: &cli::VerifyArgs) -> Result<Output> {
    let mut v = trace_bundle::verify(&args.bundle)?;
    let mut semantic = None;
    if args.semantic && v.is_valid() {
        let (trace, analysis) = load(&args.bundle.join(trace_bundle::TRACE_FILE), Detail::Full)?;
        let again = commands::bundle::derive(&trace.doc, analysis)?;
        if let Some(manifest) = &v.manifest {
            let problems = trace_bundle::semantic_problems(&args.bundle, manifest, &again);
            semantic = Some(problems.is_empty());
            v.problems.extend(problems);
        }
    } else if args.semantic {
        semantic = Some(false);
    }
    let code = if v.is_valid() { 0 } else { 1 };
    let stdout = if args.json {
        to_json(
            "verify",
            None,
            &commands::bundle::VerifyReport {
                verification: v,
                semantic_match: semantic,
            },
        )?
    } else {
        terminal_safe(commands::bundle::render_verification(&v, semantic))
    };
    Ok(Output {
        stdout,
        stream: None,
        code,
    })
}

fn series(args: &cli::SeriesArgs) -> Result<Output> {
    match trace_bundle::build_series(&args.bundles) {
        Ok(s) => Ok(Output::ok(if args.json {
            to_json("series", None, &s)?
        } else {
            terminal_safe(commands::bundle::render_series(&s))
        })),
        Err(trace_bundle::SeriesError::Bundle(e)) => Err(e.into()),
        Err(e) => {
            let stdout = if args.json {
                to_json("series", None, &commands::bundle::Refused { refused: &e })?
            } else {
                terminal_safe(commands::bundle::render_refusal(&e))
            };
            Ok(Output {
                stdout,
                stream: None,
                code: 1,
            })
        }
    }
}

/// The runs of one side, labelled by path.
fn runs<'a>(
    side: &'a [(&'static input::LoadedTrace, &'static trace_graph::Analysis)],
    labels: &'a [String],
) -> Vec<trace_diff::Run<'a>> {
    side.iter()
        .zip(labels)
        .map(|(&(t, a), l)| trace_diff::Run {
            doc: &t.doc,
            analysis: a,
            label: l,
        })
        .collect()
}

/// `check TRACE --budget FILE` (see [`commands::budget`]).
fn check_budget(args: &cli::CheckArgs) -> Result<Output> {
    let Some(budget) = &args.budget else {
        anyhow::bail!("check --budget needs a budget file");
    };
    // budgets read the live sets at the peak: full detail
    let (trace, analysis) = load(&args.input.trace, Detail::Full)?;
    let report = commands::budget::check_budgets(&trace.doc, analysis, budget)?;
    let shown = trace.path.display().to_string();
    let stdout = if args.input.json {
        to_json("budget", Some(InputRecord::of(trace)), &report)?
    } else {
        terminal_safe(commands::budget::render_budgets(
            &report,
            args.format,
            &shown,
        ))
    };
    // `--require-valid` still applies: an invalid or incomplete capture exits 1 too
    let invalid = args.require_valid && !commands::check::build(analysis).valid_and_complete;
    Ok(Output {
        stdout,
        stream: None,
        code: commands::budget::code(&report).max(u8::from(invalid)),
    })
}

fn diff(args: &cli::DiffArgs) -> Result<Output> {
    let (baseline, candidate) = args.sides().map_err(anyhow::Error::msg)?;
    for path in baseline.iter().chain(&candidate) {
        commands::budget::verify_if_bundle(path)?;
    }
    let load_side = |paths: &[std::path::PathBuf]| -> Result<Vec<_>> {
        // the comparison reads the execution graph and the live sets at the peaks: full detail
        paths.iter().map(|p| load(p, Detail::Full)).collect()
    };
    let (b, c) = (load_side(&baseline)?, load_side(&candidate)?);
    let labels = |side: &[(&input::LoadedTrace, &trace_graph::Analysis)]| -> Vec<String> {
        side.iter()
            .map(|(t, _)| t.path.display().to_string())
            .collect()
    };
    let (lb, lc) = (labels(&b), labels(&c));
    let mut options = trace_diff::DiffOptions {
        norm_ratio_threshold: args.norm_ratio,
        ..trace_diff::DiffOptions::default()
    };
    if let Some(path) = &args.op_map {
        // A role map is small; a file of more than 16 MiB is not one.
        let meta = std::fs::metadata(path)
            .with_context(|| format!("cannot read the op map {}", path.display()))?;
        anyhow::ensure!(
            meta.len() <= 16 << 20,
            "the op map {} is {} bytes: not a role map (at most 16 MiB)",
            path.display(),
            meta.len()
        );
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the op map {}", path.display()))?;
        let user = trace_ops::RoleMap::from_json(&text)
            .with_context(|| format!("the op map {}", path.display()))?;
        options.op_roles = trace_ops::RoleMap::builtin().extended_by(user);
    }
    let diff = trace_diff::compare(&runs(&b, &lb), &runs(&c, &lc), &options)?;
    if let Some(path) = &args.html {
        let html = trace_views::diff_html(&diff, args.top);
        output_file::write(path, html.as_bytes(), "diff.html")?;
        eprintln!(
            "candle-graph: wrote {} ({}); open it in a browser (it loads nothing from the network)",
            path.display(),
            trace_format::bytes(html.len() as u64)
        );
    }
    let gates = commands::budget::check_gates(&args.fail_on, &diff);
    let stdout = if args.json {
        let report = commands::diff::DiffReport {
            baseline_inputs: b.iter().map(|(t, _)| InputRecord::of(t)).collect(),
            candidate_inputs: c.iter().map(|(t, _)| InputRecord::of(t)).collect(),
            diff: &diff,
        };
        let report = commands::budget::WithGates {
            diff: report,
            gates: (!gates.checked.is_empty()).then_some(&gates),
        };
        to_json("diff", None, &report)?
    } else {
        terminal_safe(commands::budget::render_diff(
            &diff,
            &gates,
            args.format,
            || commands::diff::render(&diff, args.top),
        ))
    };
    Ok(Output {
        stdout,
        stream: None,
        code: commands::budget::code(&gates),
    })
}
