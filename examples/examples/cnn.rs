//! Trains a small CNN (conv2d → relu → max_pool2d ×2 → linear, AdamW, batch 64) as issue 20's
//! user did — the input batch (65,792 B: images `(64, 1, 16, 16)` f32 + labels `(64)` u32) made
//! before the captured step and never labelled — and writes a candle-graph trace of step 2.
//! `--drop-loss-before-step` runs backward, `drop((loss, logits))`, then the optimizer step;
//! `--detach-parameter-gradients` also keeps only the parameters' detached gradients and drops
//! the original gradient store before the step.
//!
//! ```text
//! cargo run -p candle-graph-examples --example cnn -- [--out DIR] [--steps N] [--seed S] [--batch N] [--mnist] [--sample-hz N] [--deterministic] [--drop-loss-before-step | --detach-parameter-gradients]
//! candle-graph summary out/cnn
//! ```

use std::process::ExitCode;

use candle_graph_examples::cli::ExampleArgs;
use candle_graph_examples::cnn::train_cnn;
use clap::Parser;

// The probe's tracking allocator: sees every Candle storage come and go (memory plane).
#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

fn main() -> ExitCode {
    let run = ExampleArgs::parse().cnn_run();
    match train_cnn(&run) {
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
