//! Project tasks: `cargo xtask fixtures [--check]`, `cargo xtask pytorch-fixtures`, `cargo xtask
//! conformance`, `cargo xtask synth`, `cargo xtask bench-scale [--events N]`, `cargo xtask
//! workspace-map [--check]`, `cargo xtask house [--check]`.
//!
//! `fixtures` regenerates the golden traces under `examples/fixtures/` by running the runnable
//! examples in the probe's deterministic mode (logical clock, sequential ids) with
//! `RAYON_NUM_THREADS=1` and seeded weights and data. `fixtures --check` regenerates into a
//! temporary directory and compares with the checked-in files, floats rounded to 6 significant
//! digits; it fails naming the first differing line.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use serde_json::Value;

mod bench;
mod conformance;
mod encoder;
mod encoder_model;
mod house;
mod pytorch;
mod workspace_map;

#[derive(Debug, Parser)]
#[command(name = "xtask", about = "candle-graph project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Regenerate the golden traces (or check them with --check).
    Fixtures {
        /// Regenerate into a temporary directory and compare instead of overwriting.
        #[arg(long)]
        check: bool,
    },
    /// Profile the MLP and a transformer layer with PyTorch (a virtual environment with torch
    /// from PyPI, several GB) and write the Kineto traces under
    /// crates/trace-import/tests/data/pytorch/.
    PytorchFixtures {
        /// The virtual environment to make or reuse (default target/pytorch-fixtures/venv).
        #[arg(long, value_name = "DIR")]
        venv: Option<PathBuf>,
        /// The Python that makes the environment.
        #[arg(long, value_name = "EXE", default_value = "python3")]
        python: String,
    },
    /// Re-record issue 43's conformance suite (scripts/conformance/run.sh: needs torch).
    Conformance {
        /// Families to record (default all: mlp cnn gru transformer).
        families: Vec<String>,
    },
    /// Write a large synthetic trace (trace-synth's generator, deterministic) for measuring the
    /// report and the export at scale.
    Synth {
        /// Memory events (exact).
        #[arg(long, default_value_t = 1_000_000)]
        memory_events: u64,
        /// Spans (exact, at least 4).
        #[arg(long, default_value_t = 10_000)]
        spans: u64,
        /// Op events.
        #[arg(long, default_value_t = 100_000)]
        ops: u64,
        /// Devices.
        #[arg(long, default_value_t = 2)]
        devices: u32,
        /// Output file.
        #[arg(short, long, default_value = "target/synth/trace.jsonl")]
        output: PathBuf,
    },
    /// Time `summary`, `memory`, `check` and `export --format parquet` against a bare typed
    /// parse of the same generated trace, side by side, with CPU and peak RSS (issue 16; see
    /// xtask/src/bench.rs).
    BenchScale(bench::BenchArgs),
    /// Write the README's workspace map from the Cargo.toml files (or check it with --check),
    /// and check the layering rules (only the capture side depends on Candle).
    WorkspaceMap {
        /// Compare instead of writing.
        #[arg(long)]
        check: bool,
    },
    /// The house rules kept by a tool: files of at most 800 lines, functions of at most 150,
    /// no circle of imports between the files of a crate (`--check` fails when one is broken).
    House {
        /// Fail when a rule is broken instead of only printing the table.
        #[arg(long)]
        check: bool,
    },
    /// The bare typed parse `bench-scale` compares with (one thread, nothing kept).
    #[command(hide = true)]
    BareParse {
        /// The trace.
        path: PathBuf,
    },
}

/// One golden trace: which example, with which arguments, written where.
struct Fixture {
    example: &'static str,
    args: &'static [&'static str],
    /// Directory under `examples/fixtures/` holding `trace.jsonl`.
    dir: &'static str,
}

/// The golden traces. Small on purpose: the MLP with a batch of 8, the llama model as built;
/// and three MLP variants that `candle-graph diff` is tested on against `mlp`: the retention
/// fix (backward, drop the loss, then step), a model with one layer more, and a run where one
/// parameter loses its gradient (the bias of `fc3` used detached); the llama model with per-module
/// backward spans (`--backward-spans`, which the CLI's summary lists).
const FIXTURES: &[Fixture] = &[
    Fixture {
        example: "mlp",
        args: &["--steps", "3", "--batch", "8"],
        dir: "mlp",
    },
    Fixture {
        example: "mlp",
        args: &["--steps", "3", "--batch", "8", "--drop-loss-before-step"],
        dir: "mlp-drop-loss",
    },
    Fixture {
        example: "mlp",
        args: &["--steps", "3", "--batch", "8", "--hidden-layers", "3"],
        dir: "mlp-one-layer-more",
    },
    Fixture {
        example: "mlp",
        args: &["--steps", "3", "--batch", "8", "--detach-bias", "3"],
        dir: "mlp-detached-bias",
    },
    Fixture {
        example: "llama",
        args: &["--steps", "3"],
        dir: "llama",
    },
    Fixture {
        example: "llama",
        args: &["--steps", "3", "--backward-spans"],
        dir: "llama-backward-spans",
    },
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Task::Fixtures { check } => fixtures(check),
        Task::Conformance { families } => conformance::conformance(&workspace_root(), &families),
        Task::PytorchFixtures { venv, python } => {
            pytorch::pytorch_fixtures(&workspace_root(), venv, &python)
        }
        Task::Synth {
            memory_events,
            spans,
            ops,
            devices,
            output,
        } => synth(memory_events, spans, ops, devices, &output),
        Task::BenchScale(args) => bench::bench_scale(&workspace_root(), &args),
        Task::BareParse { path } => bench::bare_parse(&path),
        Task::WorkspaceMap { check } => workspace_map::run(&workspace_root(), check),
        Task::House { check } => house::run(&workspace_root(), check),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn fixtures(check: bool) -> Result<()> {
    let root = workspace_root();
    let golden_root = root.join("examples").join("fixtures");
    let scratch = tempfile::tempdir().context("cannot create a temporary directory")?;
    build_examples(&root)?;
    for f in FIXTURES {
        let out = if check {
            scratch.path().join(f.dir)
        } else {
            golden_root.join(f.dir)
        };
        generate(&root, f, &out)?;
        let fresh = out.join("trace.jsonl");
        if check {
            let golden = golden_root.join(f.dir).join("trace.jsonl");
            compare(&golden, &fresh)?;
            eprintln!("xtask: {} matches", golden.display());
        } else {
            eprintln!("xtask: wrote {}", fresh.display());
        }
    }
    Ok(())
}

fn synth(memory_events: u64, spans: u64, ops: u64, devices: u32, output: &Path) -> Result<()> {
    let config = trace_synth::SynthConfig {
        memory_events,
        spans,
        ops,
        devices,
        parameters: 256,
        device_memory_samples: (memory_events / 1000).max(10),
        ..trace_synth::SynthConfig::default()
    };
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let n = trace_synth::write_synth_trace(output, &config)
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!("xtask: wrote {} ({n} events)", output.display());
    Ok(())
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()))
}

/// Builds the example binaries with the workspace's feature set, so that after
/// `cargo test --workspace` (CI) Candle is not compiled a second time for another feature set.
fn build_examples(root: &Path) -> Result<()> {
    let status = cargo()
        .current_dir(root)
        .args(["build", "-q", "--workspace", "--examples"])
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        bail!("cargo build of the examples failed ({status})");
    }
    Ok(())
}

/// Where `cargo build --examples` put an example binary (honours `CARGO_TARGET_DIR`).
fn example_binary(root: &Path, example: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    target
        .join("debug")
        .join("examples")
        .join(format!("{example}{}", std::env::consts::EXE_SUFFIX))
}

fn generate(root: &Path, f: &Fixture, out: &Path) -> Result<()> {
    let status = Command::new(example_binary(root, f.example))
        .current_dir(root)
        .env("RAYON_NUM_THREADS", "1")
        .args(f.args)
        .args(["--deterministic", "--out"])
        .arg(out)
        .output()
        .with_context(|| format!("cannot run the {} example", f.example))?;
    if !status.status.success() {
        bail!(
            "the {} example failed ({}): {}",
            f.example,
            status.status,
            String::from_utf8_lossy(&status.stderr).trim()
        );
    }
    Ok(())
}

/// Compares two traces line by line; non-integer numbers agree within a relative 1e-5 (see
/// [`FLOAT_REL_TOLERANCE`]).
fn compare(golden: &Path, fresh: &Path) -> Result<()> {
    let read = |p: &Path| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let (a, b) = (read(golden)?, read(fresh)?);
    if let Some(diff) = first_difference(&a, &b) {
        bail!(
            "{} differs from a fresh run at line {}:\n  golden: {}\n  fresh:  {}\n(run `cargo xtask fixtures` to regenerate, then review the change)",
            golden.display(),
            diff.line,
            diff.golden,
            diff.fresh
        );
    }
    Ok(())
}

#[derive(Debug, PartialEq)]
struct Difference {
    line: usize,
    golden: String,
    fresh: String,
}

fn first_difference(golden: &str, fresh: &str) -> Option<Difference> {
    let mut a = golden.lines();
    let mut b = fresh.lines();
    let mut line = 0;
    loop {
        line += 1;
        match (a.next(), b.next()) {
            (None, None) => return None,
            (x, y) => {
                let same = match (x, y) {
                    (Some(x), Some(y)) => same_line(x, y),
                    _ => false,
                };
                if !same {
                    return Some(Difference {
                        line,
                        golden: x.unwrap_or("<end of file>").to_string(),
                        fresh: y.unwrap_or("<end of file>").to_string(),
                    });
                }
            }
        }
    }
}

/// Relative tolerance for non-integer numbers. Gradient norms and statistics are f64 sums over
/// f32 tensors whose last bits depend on the CPU's SIMD kernels (gemm picks AVX2 or AVX-512 at
/// run time): seen here, a norm of 0.6188674825 on one machine and 0.6188677095 on another
/// (3.7e-7 relative). Rounding both to 6 significant digits was not enough — two values that
/// close can round apart (0.618867 vs 0.618868) — so floats are compared by their distance.
/// Integers (bytes, counts, times in the deterministic clock) stay exact.
const FLOAT_REL_TOLERANCE: f64 = 1e-5;

/// Whether two lines are the same trace line: equal JSON with floats within the tolerance, or
/// equal text when either is not JSON.
fn same_line(golden: &str, fresh: &str) -> bool {
    match (
        serde_json::from_str::<Value>(golden),
        serde_json::from_str::<Value>(fresh),
    ) {
        (Ok(a), Ok(b)) => close(&a, &b),
        _ => golden == fresh,
    }
}

fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let integer = |n: &serde_json::Number| n.is_i64() || n.is_u64();
            if integer(x) || integer(y) {
                return x == y;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => {
                    x == y || (x - y).abs() <= FLOAT_REL_TOLERANCE * x.abs().max(y.abs())
                }
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_compare_within_a_relative_tolerance() {
        assert_eq!(
            first_difference("{\"x\":1.0000001}\n", "{\"x\":1.0000002}\n"),
            None
        );
        // the pair seen across two CPUs: 6-digit rounding put them apart
        assert_eq!(
            first_difference(
                "{\"norm\":0.6188674825316939}",
                "{\"norm\":0.6188677094615638}"
            ),
            None
        );
        assert!(first_difference("{\"x\":[1.5,2.5]}", "{\"x\":[1.5]}").is_some());
        assert!(first_difference("{\"x\":1.5}", "{\"x\":1.5,\"y\":1}").is_some());
        let d = first_difference("{\"x\":1}\n{\"y\":1.5}\n", "{\"x\":1}\n{\"y\":1.6}\n").unwrap();
        assert_eq!(d.line, 2);
        assert_eq!(d.golden, "{\"y\":1.5}");
        // integers are exact
        assert!(first_difference("{\"n\":1000001}", "{\"n\":1000002}").is_some());
        // a missing line is a difference
        assert_eq!(
            first_difference("a\nb\n", "a\n").unwrap().fresh,
            "<end of file>"
        );
    }
}
