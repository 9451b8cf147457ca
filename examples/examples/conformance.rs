//! Issue 43's conformance suite, the Candle side (`scripts/conformance/run.sh` drives it with
//! the PyTorch twins): capture one family's training step with the probe, or time its ops
//! alone with a clock.
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run -p candle-graph-examples --example conformance -- capture FAMILY OUT_DIR [SAMPLE_HZ]
//! RAYON_NUM_THREADS=1 cargo run -p candle-graph-examples --example conformance -- clock FAMILY OUT.json [REPS]
//! ```
//! FAMILY: `mlp`, `cnn`, `gru`, `transformer`. Capture writes `OUT_DIR/trace.jsonl` (step 2 of
//! 3, stack samples at SAMPLE_HZ, default 5000); clock writes every repetition of every op
//! (REPS, default 30) as JSON.

use std::process::ExitCode;

use candle_graph_examples::conformance::{self, clock, Family};

// The probe's tracking allocator: sees every Candle storage come and go (memory plane).
#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

fn usage() -> ExitCode {
    eprintln!(
        "usage: conformance capture FAMILY OUT_DIR [SAMPLE_HZ] | clock FAMILY OUT.json [REPS]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(cmd), Some(family), Some(out)) = (args.first(), args.get(1), args.get(2)) else {
        return usage();
    };
    let Some(family) = Family::parse(family) else {
        return usage();
    };
    let n: Option<u32> = match args.get(3).map(|s| s.parse()) {
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => return usage(),
        None => None,
    };
    let result: Result<String, String> = match cmd.as_str() {
        "capture" => conformance::capture(family, out.as_ref(), n.unwrap_or(5000))
            .map(|p| p.display().to_string())
            .map_err(|e| {
                format!(
                    "{e}: {:?}",
                    std::error::Error::source(&e).map(|s| s.to_string())
                )
            }),
        "clock" => clock::time_family(family, n.unwrap_or(30) as usize)
            .map_err(|e| e.to_string())
            .and_then(|c| {
                std::fs::write(out, c.to_json(family.name()))
                    .map(|()| out.clone())
                    .map_err(|e| format!("{out}: {e}"))
            }),
        _ => return usage(),
    };
    match result {
        Ok(path) => {
            println!("{path}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
