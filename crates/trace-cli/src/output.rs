//! What a command produced, and the arm every record command shares: `--json` prints the
//! record in its envelope with the trace's input record, the text goes through the terminal
//! guard.

use std::io::Write;

use anyhow::Result;
use serde::Serialize;
use trace_views::envelope::{to_json, InputRecord};
use trace_views::load::Analysis;

use crate::input::{InputRecordOf as _, LoadedTrace};

/// Writes a command's output as it is produced.
pub type Stream = Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()>>;

/// What a command produced: text for stdout (or a writer of it) and the exit code.
pub struct Output {
    /// The text for stdout (empty when `stream` writes it).
    pub stdout: String,
    /// Writes stdout as it is made, when set.
    pub stream: Option<Stream>,
    /// The exit code.
    pub code: u8,
}

impl Output {
    /// `stdout` with exit code 0.
    pub fn ok(stdout: String) -> Self {
        Self::with_code(stdout, 0)
    }

    /// `stdout` with exit code `code`.
    pub fn with_code(stdout: String, code: u8) -> Self {
        Self {
            stdout,
            stream: None,
            code,
        }
    }

    /// Output written to stdout as it is made (nothing of it held).
    pub fn stream(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()> + 'static) -> Self {
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
pub fn terminal_safe(text: String) -> String {
    if !text
        .chars()
        .any(|c| c != '\n' && trace_views::format::is_unsafe(c))
    {
        return text;
    }
    text.split('\n')
        .map(|line| trace_views::format::escape(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The record `command` prints: with `json`, `record` in the envelope named `command` (with
/// the input record of `trace`, when one was read); else `text(record)`, terminal-safe.
///
/// # Errors
/// Serialising the record.
pub fn record<R: Serialize>(
    command: &str,
    trace: Option<&LoadedTrace>,
    json: bool,
    record: &R,
    text: impl FnOnce(&R) -> String,
) -> Result<String> {
    Ok(if json {
        to_json(command, trace.map(InputRecord::of), record)?
    } else {
        terminal_safe(text(record))
    })
}

/// The `summary` of a loaded trace, as `summary` (and `demo` after training) prints it.
///
/// # Errors
/// Serialising the record.
pub fn summary(trace: &LoadedTrace, analysis: &Analysis, json: bool) -> Result<Output> {
    let summary = trace_views::summary(&trace.doc, analysis);
    let shown = trace.path.display().to_string();
    record("summary", Some(trace), json, &summary, |s| {
        s.render_text(&shown)
    })
    .map(Output::ok)
}

/// `1 trace`, `2 traces`.
pub fn count(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// An error and its causes for the terminal: each cause once, after a `: ` (a cause whose text
/// its error already quotes — `path: not a run log: …` over that same `not a run log: …` — is
/// not printed again), every line escaped as trace text is (errors quote trace text: an
/// unknown kind, a name), the lines of a multi-line report kept as lines.
pub fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text.lines()
        .map(|l| trace_views::format::escape(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_each_cause_once_and_keeps_its_lines() {
        let io = std::io::Error::other("not a run log: EOF at line 30");
        let err = anyhow::Error::new(io)
            .context("run/run.json: not a run log: EOF at line 30")
            .context("series refused");
        assert_eq!(
            error_text(&err),
            "series refused: run/run.json: not a run log: EOF at line 30"
        );
        let err = anyhow::anyhow!("NOT VERIFIED b: 1 problem\n  - trace.jsonl: sha256\x1b[31m");
        let text = error_text(&err);
        assert!(text.contains("1 problem\n  - trace.jsonl"), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
    }
}
