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
mod output;
mod output_file;
mod run;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;

// The probe's tracking allocator: `demo` needs it for the memory plane (disarmed it costs one
// relaxed atomic load per allocation), in counting mode (one relaxed add on a per-thread-shard
// counter more) so that every device sample carries the process heap (`used_bytes`): what
// `demo --every` compares across captures to find memory kept between them.
#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system_counting();

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run::run(cli) {
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
            eprintln!("candle-graph: error: {}", output::error_text(&err));
            ExitCode::from(2)
        }
    }
}

/// Serialises this binary's unit tests that run a captured Candle step: the tracking allocator
/// sees every thread of the process, so a capture window would count another test's tensors.
#[cfg(test)]
pub(crate) fn candle_serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
