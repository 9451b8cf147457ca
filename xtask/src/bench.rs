//! `cargo xtask bench-scale [--events N]...`: how the analysis commands scale against the
//! simplest program that reads a trace at all (issue 16).
//!
//! For each size it writes a trace with trace-synth's benchmark mix (60% memory events, 30% ops,
//! 10% span events, two devices) under `target/bench-scale/`: by default as a multi-step capture
//! of alike steps of about 10^5 events each ([`trace_synth::SynthConfig::steady`], so that a
//! larger trace is a longer one and not a different one), or with `--trace one-step` as one
//! step of any size ([`trace_synth::SynthConfig::mix`], whose live set grows with its size).
//! Then it runs, as child processes of the same build,
//! `--pairs` rounds of: a bare typed parse (`xtask bare-parse`: one thread, `BufReader` lines,
//! `serde_json::from_str::<trace_schema::TraceEvent>` per line, nothing kept) immediately followed
//! by each of `candle-graph summary`, `memory`, `check` and `export --format parquet` (stdout
//! discarded; the tables go to a directory beside the trace, emptied before each export and
//! removed at the end). Each command's
//! ratio is the median over the rounds of (command wall time / wall time of the bare parse run
//! just before it), so the two sides of a ratio see the same machine load. Peak RSS and CPU time
//! (user and system apart: on a VM the kernel's cost of a page fault varies several-fold from
//! run to run) of each child come from `wait4`'s `rusage`. The table ends with the growth of
//! per-event time between the smallest and the largest size.
//!
//! `--profile release` (the default) builds the release binaries first and re-runs itself from
//! them; `--profile dev` uses the dev build as is (CI's smoke run: no timing is asserted).
//! The trace is deleted afterwards unless `--keep`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// `bench-scale` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Events in the generated trace (repeat for several sizes).
    #[arg(long = "events", default_values_t = [1_000_000u64])]
    pub events: Vec<u64>,
    /// Rounds of bare parse + command, per command (at least 1).
    #[arg(long, default_value_t = 5)]
    pub pairs: usize,
    /// `release` (timings worth reading) or `dev` (smoke test).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Keep the generated traces.
    #[arg(long)]
    pub keep: bool,
    /// The generated trace's shape: `steady` (steps of about 10^5 events each), `one-step`, or
    /// `encoder` (another shape by a generator of its own, see xtask/src/encoder.rs).
    #[arg(long, value_enum, default_value_t = TraceShape::Steady)]
    pub trace: TraceShape,
    /// Commands to time (repeat for several; default `summary`, `memory`, `check`, `export`).
    #[arg(long = "command", value_parser = ["summary", "memory", "check", "export"])]
    pub commands: Vec<String>,
    /// Run `summary`, `memory` and `check` with `--json` (what a script reads; `memory --json`
    /// lists every storage live at the peak).
    #[arg(long)]
    pub json: bool,
    /// Write the traces and stop (no timing; they are kept): for profiling or comparing
    /// outputs on the very traces the benchmark reads.
    #[arg(long)]
    pub write_only: bool,
    /// Directory for the traces (default `target/bench-scale`).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Set by the re-run from the built binaries.
    #[arg(long, hide = true)]
    pub built: bool,
}

/// The shape of the generated trace (`--trace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceShape {
    /// Alike steps of about 10^5 events each: the trace grows in length, not in shape.
    Steady,
    /// One step of any size (its live set grows with it).
    OneStep,
    /// Another shape, by a generator of its own (`crate::encoder`): a BERT-style encoder over
    /// many steps, deep module spans, many small storages, memory events out of time order,
    /// allocation sites and samples of nine threads, no op events.
    Encoder,
}

impl TraceShape {
    /// Writes the trace of about `events` events; returns the events and steps written.
    fn write(self, path: &Path, events: u64) -> Result<(u64, u64)> {
        let config = match self {
            TraceShape::Steady => trace_synth::SynthConfig::steady(events),
            TraceShape::OneStep => trace_synth::SynthConfig::mix(events),
            TraceShape::Encoder => {
                let t = crate::encoder::write_encoder_trace(path, events)?;
                return Ok((t.events, t.steps));
            }
        };
        let written = trace_synth::write_synth_trace(path, &config)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok((written, config.steps.max(1)))
    }

    fn flag(self) -> &'static str {
        match self {
            TraceShape::Steady => "steady",
            TraceShape::OneStep => "one-step",
            TraceShape::Encoder => "encoder",
        }
    }
}

/// One child process: wall time, CPU time in user space and in the kernel (page faults: their
/// cost per page varies several-fold between runs on a VM), and peak resident set.
#[derive(Debug, Clone, Copy)]
struct Measured {
    wall: Duration,
    user: Duration,
    sys: Duration,
    max_rss_bytes: u64,
}

/// Runs `cmd` with stdout discarded and measures it; fails on a non-zero exit unless `ok_codes`
/// holds the code.
fn measure(mut cmd: Command, ok_codes: &[i32]) -> Result<Measured> {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("cannot run {what}"))?;
    let stderr = child.stderr.take();
    // read stderr on a thread so a chatty child cannot block on a full pipe
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut e) = stderr {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    });
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain data (integers), valid when zeroed.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (std's Child is not waited on
    // afterwards); `status` and `usage` are valid for wait4 to fill.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    if rc != pid {
        bail!("wait4 on {what}: {}", std::io::Error::last_os_error());
    }
    let stderr = errors.join().unwrap_or_default();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    if code != 0 && !ok_codes.contains(&code) {
        bail!("{what} exited with {code}: {}", stderr.trim());
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Ok(Measured {
        wall,
        user: tv(usage.ru_utime),
        sys: tv(usage.ru_stime),
        // Linux reports ru_maxrss in KiB
        max_rss_bytes: (usage.ru_maxrss as u64).saturating_mul(1024),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The typed parse every analysis is compared with: one thread, one line at a time, nothing
/// kept. Prints the number of events.
///
/// # Errors
/// I/O errors; a line that is not a trace event.
pub fn bare_parse(path: &Path) -> Result<()> {
    use std::io::BufRead;
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut line = String::new();
    let (mut n, mut memory) = (0u64, 0u64);
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let event: trace_schema::TraceEvent =
            serde_json::from_str(&line).with_context(|| format!("line {}", n + 1))?;
        if matches!(event, trace_schema::TraceEvent::Memory(_)) {
            memory += 1;
        }
        n += 1;
    }
    println!("{n} events, {memory} memory events");
    Ok(())
}

/// Row of the table.
struct Row {
    events: u64,
    file_bytes: u64,
    name: &'static str,
    wall_s: f64,
    bare_s: f64,
    ratio: f64,
    user_s: f64,
    sys_s: f64,
    rss: u64,
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// Runs the benchmark (see the module docs).
///
/// # Errors
/// Build, generation or child failures.
pub fn bench_scale(root: &Path, args: &BenchArgs) -> Result<()> {
    if args.pairs == 0 {
        bail!("--pairs must be at least 1");
    }
    let profile_dir = match args.profile.as_str() {
        "release" => "release",
        "dev" => "debug",
        p => bail!("--profile is release or dev, not {p}"),
    };
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join(profile_dir);
    if !args.built {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let status = Command::new(&cargo)
            .current_dir(root)
            .args(["build", "--profile", &args.profile])
            .args(["-p", "trace-cli", "--bin", "candle-graph"])
            // The release run re-runs itself from the release xtask (`--bin` filters every
            // selected package, so it is named); the dev run keeps the running binary
            // (rebuilding it would replace the file it spawns `bare-parse` from).
            .args(if profile_dir == "release" {
                &["-p", "xtask", "--bin", "xtask"][..]
            } else {
                &[][..]
            })
            .status()
            .context("cannot run cargo build")?;
        if !status.success() {
            bail!("cargo build --profile {} failed", args.profile);
        }
        if profile_dir == "release" {
            let mut cmd = Command::new(bin.join("xtask"));
            cmd.current_dir(root).arg("bench-scale").arg("--built");
            for n in &args.events {
                cmd.arg("--events").arg(n.to_string());
            }
            cmd.args([
                "--pairs",
                &args.pairs.to_string(),
                "--profile",
                &args.profile,
                "--trace",
                args.trace.flag(),
            ]);
            if args.keep {
                cmd.arg("--keep");
            }
            if args.json {
                cmd.arg("--json");
            }
            if args.write_only {
                cmd.arg("--write-only");
            }
            for c in &args.commands {
                cmd.arg("--command").arg(c);
            }
            if let Some(d) = &args.dir {
                cmd.arg("--dir").arg(d);
            }
            let status = cmd.status().context("cannot run the release xtask")?;
            if !status.success() {
                bail!("bench-scale (release) failed");
            }
            return Ok(());
        }
    }
    let cli = bin.join("candle-graph");
    let xtask = std::env::current_exe().context("cannot find the xtask binary")?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| target.join("bench-scale"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!(
        "bench-scale: {} build, {threads} threads available, {} pairs, {} trace",
        args.profile,
        args.pairs,
        args.trace.flag()
    );
    let mut rows = Vec::new();
    for &n in &args.events {
        let path = match args.trace {
            TraceShape::Steady => dir.join(format!("trace-{n}.jsonl")),
            shape => dir.join(format!("trace-{}-{n}.jsonl", shape.flag())),
        };
        let t = Instant::now();
        let (events, steps) = args.trace.write(&path, n)?;
        let file_bytes = std::fs::metadata(&path)?.len();
        eprintln!(
            "bench-scale: wrote {} ({events} events in {steps} step(s), {}) in {:.1}s",
            path.display(),
            mib(file_bytes),
            t.elapsed().as_secs_f64()
        );
        if args.write_only {
            continue;
        }
        let size = Size {
            path: &path,
            events,
            file_bytes,
        };
        let result = run_size(&cli, &xtask, &size, args);
        if !args.keep {
            let _ = std::fs::remove_file(&path);
        }
        rows.extend(result?);
    }
    if !args.write_only {
        print_table(&rows, args);
    }
    Ok(())
}

/// One generated trace.
struct Size<'a> {
    path: &'a Path,
    events: u64,
    file_bytes: u64,
}

/// The commands `args` asks for, in the table's order.
fn commands(args: &BenchArgs) -> Vec<&'static str> {
    const ALL: [&str; 4] = ["summary", "memory", "check", "export"];
    ALL.into_iter()
        .filter(|c| args.commands.is_empty() || args.commands.iter().any(|a| a == c))
        .collect()
}

fn run_size(cli: &Path, xtask: &Path, size: &Size<'_>, args: &BenchArgs) -> Result<Vec<Row>> {
    let (path, events, file_bytes, pairs) = (size.path, size.events, size.file_bytes, args.pairs);
    let names = commands(args);
    let json = args.json;
    let tables = path.with_extension("tables");
    let bare = || {
        let mut c = Command::new(xtask);
        c.arg("bare-parse").arg(path);
        c
    };
    let command = |name: &str| {
        let mut c = Command::new(cli);
        if name == "export" {
            // The Parquet tables of the trace (issue 34), into a directory emptied first.
            let _ = std::fs::remove_dir_all(&tables);
            c.args(["export", "--format", "parquet"])
                .arg(path)
                .arg("-o")
                .arg(&tables);
        } else {
            c.arg(name).arg(path);
            if json {
                c.arg("--json");
            }
        }
        c.env_remove("CANDLE_GRAPH_DETAIL");
        c
    };
    let mut bares: Vec<Measured> = Vec::new();
    let mut runs: Vec<Vec<(Measured, Measured)>> = vec![Vec::new(); names.len()];
    for round in 0..pairs {
        for (i, name) in names.iter().enumerate() {
            let b = measure(bare(), &[])?;
            // check exits 1 when it finds a problem: still a full analysis
            let c = measure(command(name), &[1])?;
            eprintln!(
                "bench-scale: {events} events, round {}: bare {:.2}s, {name} {:.2}s ({:.2}x)",
                round + 1,
                b.wall.as_secs_f64(),
                c.wall.as_secs_f64(),
                c.wall.as_secs_f64() / b.wall.as_secs_f64()
            );
            bares.push(b);
            runs[i].push((b, c));
        }
    }
    let _ = std::fs::remove_dir_all(&tables);
    let mut rows = vec![Row {
        events,
        file_bytes,
        name: "bare typed parse",
        wall_s: median(bares.iter().map(|m| m.wall.as_secs_f64()).collect()),
        bare_s: median(bares.iter().map(|m| m.wall.as_secs_f64()).collect()),
        ratio: 1.0,
        user_s: median(bares.iter().map(|m| m.user.as_secs_f64()).collect()),
        sys_s: median(bares.iter().map(|m| m.sys.as_secs_f64()).collect()),
        rss: bares.iter().map(|m| m.max_rss_bytes).max().unwrap_or(0),
    }];
    for (name, r) in names.iter().zip(&runs) {
        rows.push(Row {
            events,
            file_bytes,
            name,
            wall_s: median(r.iter().map(|(_, c)| c.wall.as_secs_f64()).collect()),
            bare_s: median(r.iter().map(|(b, _)| b.wall.as_secs_f64()).collect()),
            ratio: median(
                r.iter()
                    .map(|(b, c)| c.wall.as_secs_f64() / b.wall.as_secs_f64())
                    .collect(),
            ),
            user_s: median(r.iter().map(|(_, c)| c.user.as_secs_f64()).collect()),
            sys_s: median(r.iter().map(|(_, c)| c.sys.as_secs_f64()).collect()),
            rss: r.iter().map(|(_, c)| c.max_rss_bytes).max().unwrap_or(0),
        });
    }
    Ok(rows)
}

fn print_table(rows: &[Row], args: &BenchArgs) {
    println!(
        "| events | file | command | wall (median) | bare parse (median, same rounds) | ratio (median of pairs) | CPU user (median) | CPU sys (median) | peak RSS (max) | RSS B/event | wall ns/event |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.2} s | {:.2} s | {:.2}x | {:.2} s | {:.2} s | {} | {:.0} | {:.0} |",
            r.events,
            mib(r.file_bytes),
            r.name,
            r.wall_s,
            r.bare_s,
            r.ratio,
            r.user_s,
            r.sys_s,
            mib(r.rss),
            r.rss as f64 / r.events.max(1) as f64,
            r.wall_s * 1e9 / r.events.max(1) as f64
        );
    }
    // growth of per-event time from the smallest to the largest size
    let sizes: Vec<u64> = {
        let mut s: Vec<u64> = rows.iter().map(|r| r.events).collect();
        s.dedup();
        s
    };
    if let (Some(&lo), Some(&hi)) = (sizes.iter().min(), sizes.iter().max()) {
        if lo != hi {
            println!();
            println!("per-event growth, {hi} vs {lo} events (wall time; user CPU):");
            for r in rows.iter().filter(|r| r.events == hi) {
                if let Some(s) = rows.iter().find(|s| s.events == lo && s.name == r.name) {
                    let growth = |f: fn(&Row) -> f64| {
                        let per = |x: &Row| f(x) / x.events.max(1) as f64;
                        (per(r) / per(s) - 1.0) * 100.0
                    };
                    println!(
                        "  {}: {:+.0}%; {:+.0}%",
                        r.name,
                        growth(|x| x.wall_s),
                        growth(|x| x.user_s)
                    );
                }
            }
        }
    }
    println!();
    println!(
        "({} build, {} pairs, {} trace; reproduce: cargo xtask bench-scale{} --pairs {} --profile {} --trace {}{}{})",
        args.profile,
        args.pairs,
        args.trace.flag(),
        args.events
            .iter()
            .map(|n| format!(" --events {n}"))
            .collect::<String>(),
        args.pairs,
        args.profile,
        args.trace.flag(),
        args.commands
            .iter()
            .map(|c| format!(" --command {c}"))
            .collect::<String>(),
        if args.json { " --json" } else { "" }
    );
}
