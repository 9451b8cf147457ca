//! `candle-graph import TRACE.json[.gz] [-o trace.jsonl] [--json]`: a PyTorch profiler trace
//! (Kineto Chrome-trace JSON) → a candle-graph trace, with an account of what was imported.
//!
//! Without `-o` the trace goes to stdout and the account to stderr; with `-o` the trace goes to
//! the file and the account to stdout (`--json`: the `candle-graph/import/1` envelope).

use std::io::Write as _;

use anyhow::{Context, Result};

use crate::cli::ImportArgs;
use trace_views::envelope::to_json;
use trace_views::import::{render, ImportOutput};

/// Runs the command; returns stdout and the exit code.
///
/// # Errors
/// Unreadable input, an input that is not a PyTorch profiler trace, write errors.
pub fn run(args: &ImportArgs) -> Result<(String, u8)> {
    let imported = trace_views::load::import_path(&args.trace)
        .with_context(|| format!("cannot import {}", args.trace.display()))?;
    let source = args.trace.display().to_string();
    match &args.output {
        None => {
            let mut text = Vec::new();
            imported.write_jsonl(&mut text)?;
            eprint!("{}", render(&source, None, &imported));
            Ok((String::from_utf8(text).context("trace is UTF-8")?, 0))
        }
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = imported
                .write_jsonl(std::io::BufWriter::new(file))
                .with_context(|| format!("cannot write {}", path.display()))?;
            out.flush()
                .with_context(|| format!("cannot write {}", path.display()))?;
            let output = path.display().to_string();
            let stdout = if args.json {
                to_json(
                    "import",
                    None,
                    &ImportOutput {
                        source,
                        output,
                        events_written: imported.events.len() as u64,
                        report: &imported.report,
                    },
                )?
            } else {
                render(&source, Some(&output), &imported)
            };
            Ok((stdout, 0))
        }
    }
}
