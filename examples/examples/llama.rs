//! Trains the built-in llama model for a few steps (CPU by default; `--device cuda` with the `cuda` feature) and writes a candle-graph trace of step 2.
//!
//! ```text
//! cargo run -p candle-graph-examples --example llama -- [--out DIR] [--steps N] [--seed S] [--batch N] [--device D] [--deterministic]
//! candle-graph summary out/llama
//! ```

use std::process::ExitCode;

use candle_graph_examples::cli::ExampleArgs;
use candle_graph_examples::train::train;
use candle_graph_examples::ModelKind;
use clap::Parser;

// The probe's tracking allocator: sees every Candle storage come and go (memory plane).
#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

fn main() -> ExitCode {
    let config = ExampleArgs::parse().config(ModelKind::Llama);
    match train(&config) {
        Ok(report) => {
            for (i, loss) in report.losses.iter().enumerate() {
                eprintln!("step {}: loss {loss:.4}", i + 1);
            }
            println!("{}", report.trace_path.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            let mut message = err.to_string();
            let mut source = std::error::Error::source(&err);
            while let Some(s) = source {
                message.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
