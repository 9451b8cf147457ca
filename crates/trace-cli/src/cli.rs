//! Command-line arguments (clap derive): the "low" arguments as parsed. Each command converts
//! them once into what it runs on.

use std::path::PathBuf;

use candle_graph_examples::DeviceSpec;
use clap::{Args, Parser, Subcommand, ValueEnum};

use trace_views::query::QueryKind;

/// Profile a Candle training step and explain the trace: peak memory and what held it, slow
/// spans, gradient verdicts.
///
/// Exit status: 0 when the output was produced; 1 when `check --require-valid` found the
/// capture invalid or incomplete, or `device-check` a failing check (after printing); 2 when it
/// could not run (bad input, I/O).
#[derive(Debug, Parser)]
#[command(name = "candle-graph", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a built-in Candle model (CPU, or `--device cuda[:N]`), capture step 2 and print
    /// its summary.
    Demo(DemoArgs),
    /// Run identity, health, coverage, wall time, memory peak, slowest spans, gradients, findings.
    Summary(TraceArgs),
    /// The memory peak and what was live at it, per category and device, the timeline.
    Memory(MemoryArgs),
    /// Where the time went, per Candle operation (forward and backward), estimated from the
    /// trace's wall-clock stack samples: samples, estimated self time with its 95% interval,
    /// share of the measured region.
    Ops(OpsArgs),
    /// Health issues and the capability matrix.
    Check(CheckArgs),
    /// JSON slices for scripts (always JSON).
    Query(QueryArgs),
    /// What changed between runs: timing (or why it is not compared), memory peaks and the
    /// storages live at them, spans aligned by path, passes, gradient verdicts.
    Diff(DiffArgs),
    /// Convert a PyTorch profiler trace (Kineto Chrome-trace JSON, `.json` or `.json.gz`) into a
    /// candle-graph trace. The other commands also read such a file directly.
    Import(ImportArgs),
    /// One self-contained HTML report (no network): memory timelines, what held the peak,
    /// the span tree, gradients, health and findings; on a directory of rank traces, the
    /// ranks side by side, the straggler and the memory imbalance.
    Report(ReportArgs),
    /// Write the trace for another viewer: Chrome Trace Event Format (Perfetto UI,
    /// chrome://tracing).
    Export(ExportArgs),
    /// Verify the capture on a device: train each model there and on CPU from one seed, and
    /// print pass/fail with figures for storages, memory, synchronisation, gradients and overhead.
    DeviceCheck(DeviceCheckArgs),
    /// Publish a bundle: the trace, its derived outputs (`summary.json`, `memory.json`,
    /// `figures.json`) and `bundle.json`, a manifest of each file's size and SHA-256, written
    /// into a new directory (staged, verified, then renamed into place).
    Bundle(BundleArgs),
    /// Check a bundle against its manifest (exit 1 naming each file that does not match);
    /// `--semantic` also re-derives its outputs from its trace and compares them byte for byte.
    Verify(VerifyArgs),
    /// Per-step figures (wall time, pass times, peaks, tensor statistics) across bundles of one
    /// run captured at different steps; refuses different runs and repeated steps (exit 1).
    Series(SeriesArgs),
}

/// `bundle` arguments.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// A candle-graph trace file, or a directory holding `trace.jsonl`.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// The bundle directory to create (must not exist).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Print the verification receipt as JSON (`candle-graph/bundle/1` envelope).
    #[arg(long)]
    pub json: bool,
}

/// `verify` arguments.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The bundle directory.
    #[arg(value_name = "DIR")]
    pub bundle: PathBuf,
    /// Also re-derive the outputs from the bundle's trace and require exact equality.
    #[arg(long)]
    pub semantic: bool,
    /// Print JSON (`candle-graph/verify/1`).
    #[arg(long)]
    pub json: bool,
}

/// `series` arguments.
#[derive(Debug, Args)]
pub struct SeriesArgs {
    /// Bundle directories of one run, captured at different steps (any order); or one run
    /// directory (`demo --every`, `ProfileRun::every`: its `step-*` bundles and `run.json`),
    /// whose story is printed: per capture the step and pass times, the peak and where, what was
    /// live after the step, the op shares; the findings across captures.
    #[arg(value_name = "DIR", required = true, num_args = 1..)]
    pub bundles: Vec<PathBuf>,
    /// Print JSON (`candle-graph/series/1`; a run directory: `candle-graph/run-story/1`).
    #[arg(long)]
    pub json: bool,
    /// A run directory: also write its page (the series plotted, zoomable) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `import` arguments.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The PyTorch profiler trace (`export_chrome_trace` output, plain or gzipped).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Write the candle-graph trace here (and the import report to stdout); without it the
    /// trace goes to stdout and the report to stderr.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the import report as JSON (`candle-graph/import/1`); needs `--output`.
    #[arg(long, requires = "output")]
    pub json: bool,
}

/// Built-in models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModelArg {
    /// Small llama-style causal language model (default).
    Llama,
    /// 784-512-512-10 MLP, batch 64.
    Mlp,
}

/// `demo` arguments.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory to write `trace.jsonl` into (created if missing).
    #[arg(long, value_name = "DIR", default_value = "out/demo")]
    pub out: PathBuf,
    /// Model to train.
    #[arg(long, value_enum, default_value_t = ModelArg::Llama)]
    pub model: ModelArg,
    /// Training steps (at least 2: step 1 is the warm-up, steps 2 on are captured, see
    /// `--capture-steps`).
    #[arg(long, value_name = "N", default_value_t = DEMO_STEPS)]
    pub steps: u64,
    /// Consecutive steps captured from `--capture-step` on, in one trace (at most up to
    /// `--steps`): their samples together rank the ops (the llama step of about 12 ms gets
    /// about 12 samples at the library's 1 kHz; 16 steps give about 190).
    #[arg(long, value_name = "N", default_value_t = DEMO_CAPTURE_STEPS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub capture_steps: u64,
    /// Device to train on: `cpu`, `cuda[:N]` (built with `--features cuda`), `metal[:N]`
    /// (`--features metal`, macOS).
    #[arg(long, value_name = "D", default_value = "cpu", value_parser = parse_device)]
    pub device: DeviceSpec,
    /// Print the summary as JSON (`candle-graph/summary/1`).
    #[arg(long)]
    pub json: bool,
    /// Apply the `activations_retained_into_optimizer` advice: run backward, drop the loss,
    /// then step (instead of `backward_step`). Compare with `candle-graph diff`.
    #[arg(long)]
    pub drop_loss_before_step: bool,
    /// Apply the advice given when the gradient store holds activations: run backward, drop
    /// the loss, keep only the parameters' gradients (detached) in a new store and drop the
    /// original one before the step.
    #[arg(long, conflicts_with = "drop_loss_before_step")]
    pub detach_parameter_gradients: bool,
    /// Per-module backward spans: the probed modules mark their boundaries so the backward pass
    /// shows one `backward/<module path>` span per module, in Candle's processing order. Off by
    /// default: the markers cost more than the probe's 3% target (trace-probe README).
    #[arg(long)]
    pub backward_spans: bool,
    /// Wall-clock stack samples per second of the captured steps, for `operations: sampled`
    /// (`candle-graph ops`); 0 turns sampling off. The library's default, 1 kHz: the demo gets
    /// its samples from more steps (`--capture-steps`), not from a higher rate, which would make
    /// each step dearer (10 kHz: about 1.4x in thread CPU on the project's VM).
    #[arg(long, value_name = "N", default_value_t = DEMO_SAMPLE_HZ)]
    pub sample_hz: u32,
    /// Inference instead of training: candle-transformers' `llama2_c` (tiny, seeded weights,
    /// no download) generates 16 tokens after a 4-token prompt with its KV cache, the second
    /// generation captured (`prefill`, then one `decode` span per token); prints prefill vs
    /// decode time, the KV cache at the end and its growth per token, then the summary.
    #[arg(long, conflicts_with_all = ["drop_loss_before_step", "detach_parameter_gradients", "backward_spans"])]
    pub inference: bool,
    /// The optimizer update captured (one-based; the ones before it are warm-up; at most
    /// `--steps`). Captures of one run at several steps make a `series`.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub capture_step: u64,
    /// Run N ranks, each a separate process of this program with `RANK`, `LOCAL_RANK` and
    /// `WORLD_SIZE` set, its own seed (42 + rank) and, on the last rank, four times the batch
    /// (so it is the straggler); each writes `DIR/trace.rank<N>.jsonl` and the summary across ranks is
    /// printed. No NCCL: the ranks do not communicate.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub ranks: Option<u32>,
    /// Internal: this process is one rank of `--ranks` (reads `RANK` / `WORLD_SIZE`).
    #[arg(long, hide = true)]
    pub rank_worker: bool,
    /// Capture one step in N for the whole run (`ProfileRun::every`): `--out` becomes a run
    /// directory of bundles (`step-<NNNNNNNN>/`, `run.json`), then its `series` is printed.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          conflicts_with_all = ["inference", "ranks"])]
    pub every: Option<u64>,
    /// With `--every`: how many of the most recent bundles the run directory keeps (beside the
    /// highest peak, the slowest step and the first of a growth).
    #[arg(long, value_name = "K", requires = "every", value_parser = clap::value_parser!(u64).range(1..))]
    pub keep_last: Option<u64>,
    /// Seeded fault (for showing and testing the run view): every N steps the loop keeps one
    /// more 2 MiB tensor for the rest of the run.
    #[arg(long, hide = true, value_name = "N")]
    pub seed_leak_every: Option<u64>,
    /// Seeded fault: after step K the llama model's loss runs extra `exp`/`log` rounds on its
    /// logits (an op slowdown).
    #[arg(long, hide = true, value_name = "K")]
    pub seed_slowdown_after: Option<u64>,
}

/// The demo's sample rate: the library's default (`trace_probe::DEFAULT_SAMPLE_HZ`, 1 kHz).
pub const DEMO_SAMPLE_HZ: u32 = 1_000;

/// The demo's captured steps (2..=17): about 190 samples of the llama step at 1 kHz, more than
/// the 100 below which `ops` says "few samples".
pub const DEMO_CAPTURE_STEPS: u64 = 16;

/// The demo's training steps: one warm-up, the captured ones, then as many uncaptured, so that
/// the stderr line compares the captured steps' median time with the uncaptured steps' (the
/// first of them runs beside the probe's symbolisation of the samples).
pub const DEMO_STEPS: u64 = 2 * DEMO_CAPTURE_STEPS + 1;

/// `device-check` arguments.
#[derive(Debug, Args)]
pub struct DeviceCheckArgs {
    /// Device to verify (`cuda:0` on a GPU machine; `cpu` runs the same checks on CPU).
    #[arg(long, value_name = "D", default_value = "cuda:0", value_parser = parse_device)]
    pub device: DeviceSpec,
    /// Models to check (repeatable); default both.
    #[arg(long, value_enum, value_name = "M")]
    pub model: Vec<ModelArg>,
    /// Directory for the traces (`<model>/<device>/trace.jsonl`,
    /// `<model>/reference-cpu/trace.jsonl`) and the results (`checks.txt`, `checks.json`).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Armed/disarmed update pairs timed for the overhead figure.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub pairs: usize,
}

fn parse_device(s: &str) -> Result<DeviceSpec, String> {
    s.parse()
}

/// A trace input and `--json`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// A trace file, or a directory holding `trace.jsonl`.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Print JSON (`candle-graph/<command>/1`) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `memory` arguments.
#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// Trace input.
    #[command(flatten)]
    pub input: TraceArgs,
    /// Only this device (e.g. `cpu`, `cuda:0`).
    #[arg(long, value_name = "D")]
    pub device: Option<String>,
    /// Rows of the live-at-peak table (default 10; with `--json` every row: the JSON is for
    /// scripts).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Group what is live at the peak by allocating span path, shape/dtype, category, or —
    /// with allocation sites (trace/13) — allocating op or site (every storage counted; the
    /// top N groups shown).
    #[arg(long, value_enum, value_name = "BY")]
    pub group_by: Option<trace_views::live::GroupBy>,
    /// List identical storages held at the peak one by one (by default storages of the same
    /// allocation site, shape, dtype and category are one row with a count).
    #[arg(long)]
    pub ungrouped: bool,
}

/// `ops` arguments.
#[derive(Debug, Args)]
pub struct OpsArgs {
    /// Trace input.
    #[command(flatten)]
    pub input: TraceArgs,
    /// Group rows by op, module or pass (default: one row per op, pass and module).
    #[arg(long, value_enum, value_name = "BY")]
    pub by: Option<trace_views::ops::ByArg>,
    /// Only the samples of this pass (shares stay shares of the whole measured region).
    #[arg(long, value_enum, value_name = "P")]
    pub pass: Option<trace_views::ops::PassArg>,
    /// Row order.
    #[arg(long, value_enum, value_name = "S", default_value_t = trace_views::ops::SortArg::Samples)]
    pub sort: trace_views::ops::SortArg,
    /// Rows shown (the rest summarised).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
}

/// `report` arguments.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A trace file, a directory holding `trace.jsonl`, or a directory of rank traces
    /// (`trace.rank<N>.jsonl`).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Output file.
    #[arg(short, long, value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Chrome Trace Event Format (JSON object form), for Perfetto UI and chrome://tracing.
    Chrome,
    /// speedscope's JSON file format: the sampled call stacks, one sampled profile per thread
    /// (weights in ns), for speedscope.app (`--span`/`--window` do not apply).
    Speedscope,
    /// Typed Parquet tables (runs, spans, storages, memory_events, ops, gradients, findings)
    /// of every input, keyed by run id and rank, into the directory `-o DIR` (DuckDB, Polars,
    /// DataFusion, Spark); needs the default `parquet` feature.
    Parquet,
}

/// `export` arguments.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A trace file, or a directory holding `trace.jsonl`; `--format parquet` takes several,
    /// and a directory of rank traces (`trace.rank<N>.jsonl`).
    #[arg(value_name = "TRACE", required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Output file; a name ending in `.gz` is gzip-compressed; `-` is stdout. For
    /// `--format parquet`: the directory of the tables (created).
    #[arg(short, long, value_name = "FILE", default_value = "trace.json")]
    pub output: PathBuf,
    /// Only the spans with this `/`-joined path (e.g. `llama::train_step/backward`) and their
    /// subtrees, with the counters and instants inside their time range.
    #[arg(long, value_name = "PATH")]
    pub span: Option<String>,
    /// Only what intersects START..END, times relative to the start of the measured region
    /// with a unit (ns, us, ms, s; e.g. `5ms..12.5ms`, `..2ms`, `30ms..`).
    #[arg(long, value_name = "START..END")]
    pub window: Option<trace_views::export::Window>,
}

/// `check` arguments.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Trace input.
    #[command(flatten)]
    pub input: TraceArgs,
    /// Exit 1 (after printing) when the trace is structurally invalid or the capture incomplete.
    #[arg(long)]
    pub require_valid: bool,
    /// Check the budgets of this file (TOML, version 1: see trace-budget's `file` docs) instead
    /// of printing the health report: exit 1 with a table of what failed or could not be checked.
    #[arg(long, value_name = "FILE")]
    pub budget: Option<PathBuf>,
    /// How `--budget`'s report is printed.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text, requires = "budget")]
    pub format: ReportFormat,
}

/// How a budget or gate report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// A table, then each failure's message.
    Text,
    /// Markdown for a CI job summary or a pull-request comment.
    Markdown,
    /// JUnit XML (one test case per budget or gate).
    Junit,
}

/// `query` arguments.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// A trace file, or a directory holding `trace.jsonl`.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// What to return.
    #[arg(long, value_enum)]
    pub kind: QueryKind,
    /// Keep rows whose label (span name, tensor label, gradient key) equals this.
    #[arg(long, value_name = "L", conflicts_with = "label_prefix")]
    pub label: Option<String>,
    /// Keep rows whose label starts with this.
    #[arg(long, value_name = "P")]
    pub label_prefix: Option<String>,
    /// Keep the first N elements of every array of the result.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Keep only these fields of the objects that are array elements (comma-separated).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub fields: Option<Vec<String>>,
}

/// `diff` arguments: `BASELINE CANDIDATE`, or `--baseline A B C --candidate D E F`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// BASELINE and CANDIDATE: a trace file or a directory holding `trace.jsonl` each.
    #[arg(value_name = "TRACE", num_args = 0..=2)]
    pub traces: Vec<PathBuf>,
    /// Baseline traces (several runs: their run-to-run spread separates changes from noise).
    #[arg(long, value_name = "TRACE", num_args = 1.., conflicts_with = "traces", requires = "candidate")]
    pub baseline: Vec<PathBuf>,
    /// Candidate traces.
    #[arg(long, value_name = "TRACE", num_args = 1.., conflicts_with = "traces", requires = "baseline")]
    pub candidate: Vec<PathBuf>,
    /// Print JSON (`candle-graph/diff/1`) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Span rows shown (ranked by impact; the rest summarised) and list entries.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// A gradient norm changed when candidate/baseline is above R or below 1/R.
    #[arg(long, value_name = "R", default_value_t = 2.0)]
    pub norm_ratio: f64,
    /// Also write the comparison as one offline HTML page (the report's renderer: no network,
    /// strict Content-Security-Policy, sortable tables).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// A role map (JSON, the format of trace-ops' `rules/op-roles.json`) whose roles are tried
    /// before the built-in Candle ↔ PyTorch ones when ops are aligned.
    #[arg(long, value_name = "FILE")]
    pub op_map: Option<PathBuf>,
    /// Exit 1 when a figure grew by more than a percentage: `peak>+5%`, `pass.backward>+10%`,
    /// `wall`, `pass.<pass>.peak`, `pass.<pass>.allocated` (repeatable). Time gates follow the
    /// diff's noise rules and need two or more runs a side; a gate that cannot be decided
    /// also exits 1, saying why.
    #[arg(long = "fail-on", value_name = "GATE")]
    pub fail_on: Vec<trace_budget::Gate>,
    /// How the comparison is printed: `markdown` (the headline, the gates, the table of
    /// changes) or `junit` (the gates) for CI.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text, conflicts_with = "json")]
    pub format: ReportFormat,
}

impl DiffArgs {
    /// The baseline and candidate inputs.
    ///
    /// # Errors
    /// Neither two positional traces nor both `--baseline` and `--candidate`.
    pub fn sides(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
        match (self.traces.as_slice(), self.baseline.is_empty()) {
            ([b, c], true) => Ok((vec![b.clone()], vec![c.clone()])),
            ([], false) => Ok((self.baseline.clone(), self.candidate.clone())),
            _ => {
                Err("diff needs BASELINE CANDIDATE, or --baseline TRACE… --candidate TRACE…".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn parser_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn demo_defaults() {
        let cli = Cli::try_parse_from(["candle-graph", "demo"]).unwrap();
        let Command::Demo(d) = cli.command else {
            panic!()
        };
        assert_eq!(
            (
                d.model,
                d.steps,
                d.out,
                d.device,
                d.drop_loss_before_step,
                d.backward_spans
            ),
            (
                ModelArg::Llama,
                33,
                PathBuf::from("out/demo"),
                DeviceSpec::Cpu,
                false,
                false
            )
        );
        let cli = Cli::try_parse_from(["candle-graph", "demo", "--device", "cuda:1"]).unwrap();
        let Command::Demo(d) = cli.command else {
            panic!()
        };
        assert_eq!(d.device, DeviceSpec::Cuda(1));
        assert!(Cli::try_parse_from(["candle-graph", "demo", "--device", "tpu"]).is_err());
        let cli = Cli::try_parse_from(["candle-graph", "demo", "--drop-loss-before-step"]).unwrap();
        let Command::Demo(d) = cli.command else {
            panic!()
        };
        assert!(d.drop_loss_before_step);
        let cli =
            Cli::try_parse_from(["candle-graph", "demo", "--detach-parameter-gradients"]).unwrap();
        let Command::Demo(d) = cli.command else {
            panic!()
        };
        assert!(d.detach_parameter_gradients && !d.drop_loss_before_step);
        assert!(Cli::try_parse_from([
            "candle-graph",
            "demo",
            "--drop-loss-before-step",
            "--detach-parameter-gradients"
        ])
        .is_err());
        let cli = Cli::try_parse_from(["candle-graph", "demo", "--backward-spans"]).unwrap();
        let Command::Demo(d) = cli.command else {
            panic!()
        };
        assert!(d.backward_spans);
        assert!(Cli::try_parse_from(["candle-graph", "demo", "--no-backward-spans"]).is_err());
    }

    #[test]
    fn ops_arguments() {
        use trace_views::ops::{ByArg, PassArg, SortArg};
        let cli = Cli::try_parse_from(["candle-graph", "ops", "t"]).unwrap();
        let Command::Ops(o) = cli.command else {
            panic!()
        };
        assert_eq!(
            (o.by, o.pass, o.sort, o.top, o.input.json),
            (None, None, SortArg::Samples, 20, false)
        );
        let cli = Cli::try_parse_from([
            "candle-graph",
            "ops",
            "t",
            "--by",
            "module",
            "--pass",
            "backward",
            "--sort",
            "op",
            "--top",
            "3",
            "--json",
        ])
        .unwrap();
        let Command::Ops(o) = cli.command else {
            panic!()
        };
        assert_eq!(
            (o.by, o.pass, o.sort, o.top, o.input.json),
            (
                Some(ByArg::Module),
                Some(PassArg::Backward),
                SortArg::Op,
                3,
                true
            )
        );
        assert!(Cli::try_parse_from(["candle-graph", "ops", "t", "--pass", "update"]).is_err());
        assert!(Cli::try_parse_from(["candle-graph", "ops", "t", "--by", "thread"]).is_err());
    }

    #[test]
    fn device_check_defaults() {
        let cli = Cli::try_parse_from(["candle-graph", "device-check", "--out", "o"]).unwrap();
        let Command::DeviceCheck(d) = cli.command else {
            panic!()
        };
        assert_eq!(
            (d.device, d.model, d.pairs),
            (DeviceSpec::Cuda(0), vec![], 20)
        );
        assert!(Cli::try_parse_from(["candle-graph", "device-check"]).is_err());
    }

    #[test]
    fn label_filters_conflict() {
        let r = Cli::try_parse_from([
            "candle-graph",
            "query",
            "t",
            "--kind",
            "spans",
            "--label",
            "a",
            "--label-prefix",
            "b",
        ]);
        assert!(r.is_err());
        let q = Cli::try_parse_from(["candle-graph", "query", "t", "--kind", "tensor-stats"]);
        assert!(q.is_ok());
    }

    fn diff_sides(args: &[&str]) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.kind().to_string())?;
        let Command::Diff(d) = cli.command else {
            panic!()
        };
        d.sides()
    }

    #[test]
    fn diff_takes_two_traces_or_two_lists() {
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            diff_sides(&["candle-graph", "diff", "a", "b"]),
            Ok((p(&["a"]), p(&["b"])))
        );
        assert_eq!(
            diff_sides(&[
                "candle-graph",
                "diff",
                "--baseline",
                "a1",
                "a2",
                "--candidate",
                "b1",
                "b2",
                "b3"
            ]),
            Ok((p(&["a1", "a2"]), p(&["b1", "b2", "b3"])))
        );
        assert!(diff_sides(&["candle-graph", "diff", "a"]).is_err());
        assert!(diff_sides(&["candle-graph", "diff", "a", "b", "c"]).is_err());
        assert!(diff_sides(&["candle-graph", "diff", "--baseline", "a"]).is_err());
        assert!(diff_sides(&[
            "candle-graph",
            "diff",
            "a",
            "--baseline",
            "b",
            "--candidate",
            "c"
        ])
        .is_err());
        let cli = Cli::try_parse_from(["candle-graph", "diff", "a", "b", "--top", "3", "--json"])
            .unwrap();
        let Command::Diff(d) = cli.command else {
            panic!()
        };
        assert_eq!((d.top, d.json, d.norm_ratio), (3, true, 2.0));
    }
}
