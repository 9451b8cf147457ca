//! `candle-graph ops TRACE [--by op|module|pass] [--pass P] [--sort S] [--top N] [--json]`:
//! where the time of the captured step went, per Candle operation, estimated from the trace's
//! wall-clock stack samples ([`trace_ops::OpProfile`]): op, pass, module, samples, estimated
//! self time with its 95% interval, share of the measured region. With allocation sites
//! (trace/13) the rows gain the exact allocating `calls` and the `alloc_clocked_ns` time
//! ([`trace_ops::SiteProfile`]), a second, measured time source; a trace with sites and no
//! samples shows those alone. A trace with neither says `operations: unavailable — <reason>`
//! (exit 0).

use std::fmt::Write as _;

use serde::Serialize;
use trace_format::duration;
use trace_ops::{
    GroupBy, OpProfile, OpRow, SampleTotals, SiteProfile, SiteTotals, SortBy, FEW_SAMPLES,
};
use trace_schema::Pass;

use crate::table::{Align, Table};

/// The ops a producer timed one by one, and the account of the samples the loader dropped
/// (trace-ops), re-exported for programs that depend on trace-views alone.
pub use trace_ops::{Dropped, MeasuredOps};

/// `--by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ByArg {
    /// One row per op, every pass and module together.
    Op,
    /// One row per module path.
    Module,
    /// One row per pass.
    Pass,
}

/// `--pass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum PassArg {
    /// The forward pass.
    Forward,
    /// The backward pass.
    Backward,
    /// The optimizer update.
    Optimizer,
}

impl PassArg {
    /// The pass.
    pub fn pass(self) -> Pass {
        match self {
            Self::Forward => Pass::Forward,
            Self::Backward => Pass::Backward,
            Self::Optimizer => Pass::Optimizer,
        }
    }
}

/// `--sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SortArg {
    /// Most samples first.
    #[default]
    Samples,
    /// By op name.
    Op,
    /// By pass (forward, backward, optimizer, none).
    Pass,
    /// By module path.
    Module,
}

/// The `ops` report (`candle-graph/ops/1`).
#[derive(Debug, Clone, Serialize)]
pub struct OpsReport {
    /// Samples were recorded and read.
    pub available: bool,
    /// Why not, when not available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `sampled_estimate`: `samples`, `self_ns` and `share` are estimates from samples, never
    /// measurements (with sites, `calls` are exact counts and `alloc_clocked_ns` a measured
    /// bound, see `alloc_sites`); `alloc_clocked` when the trace has sites but no samples
    /// (rows carry only `calls` and `alloc_clocked_ns`).
    pub figures: &'static str,
    /// The allocation sites' totals, when the trace has sites (trace/13): the second time
    /// source (`alloc_clocked_ns`: each allocating call's start to its thread's next
    /// allocation, clipped at span boundaries and the region's end; it includes the glue and
    /// non-allocating ops after the call; on CUDA it clocks the launch, not the kernel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_sites: Option<SiteTotals>,
    /// The grouping (`op_pass_module`, `op`, `module`, `pass`): fields that are not keys of it
    /// are `null` in the rows.
    pub by: &'static str,
    /// The `--pass` filter, when given (shares stay shares of the whole region).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass_filter: Option<Pass>,
    /// Totals of the samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub totals: Option<SampleTotals>,
    /// Rows before `--top` (the user's ops: the probe's rows are in `probe`).
    pub row_count: usize,
    /// The rows shown (at most `--top`), most samples first unless `--sort` says otherwise.
    pub rows: Vec<OpRow>,
    /// The probe's own frames ([`trace_ops::PROBE_OP`], one row per pass where the grouping
    /// has an op): the probe's cost, kept out of the user's ranking and of `--top`; their
    /// shares are of the whole region like the rows'.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probe: Vec<OpRow>,
}

/// What the command was asked.
#[derive(Debug, Clone, Copy)]
pub struct OpsQuery {
    /// `--by`.
    pub by: Option<ByArg>,
    /// `--pass`.
    pub pass: Option<PassArg>,
    /// `--sort`.
    pub sort: SortArg,
    /// `--top`.
    pub top: usize,
}

/// Builds the report from the analysis' profile (or its absence).
pub fn build(
    operations: &Result<OpProfile, trace_ops::Unavailable>,
    sites: Option<&SiteProfile>,
    q: OpsQuery,
) -> OpsReport {
    let by = match q.by {
        None => GroupBy::OpPassModule,
        Some(ByArg::Op) => GroupBy::Op,
        Some(ByArg::Module) => GroupBy::Module,
        Some(ByArg::Pass) => GroupBy::Pass,
    };
    let pass_filter = q.pass.map(PassArg::pass);
    let alloc_sites = sites.map(|s| s.totals.clone());
    let p = match (operations, sites) {
        (Ok(p), _) => p,
        (Err(u), Some(s)) => return sites_only(s, u, by, pass_filter, q, alloc_sites),
        (Err(u), None) => {
            return OpsReport {
                available: false,
                reason: Some(u.reason.clone()),
                figures: "sampled_estimate",
                alloc_sites,
                by: by.as_str(),
                pass_filter,
                totals: None,
                row_count: 0,
                rows: Vec::new(),
                probe: Vec::new(),
            }
        }
    };
    // the finest rows of the pass, then grouped: `--by op --pass backward` groups backward only
    let mut rows = p.rows_by_where(by, |r| pass_filter.is_none_or(|pass| r.pass == Some(pass)));
    trace_ops::sort_rows(
        &mut rows,
        match q.sort {
            SortArg::Samples => SortBy::Samples,
            SortArg::Op => SortBy::Op,
            SortArg::Pass => SortBy::Pass,
            SortArg::Module => SortBy::Module,
        },
    );
    // the probe's own frames are its cost, not one of the user's ops: out of the ranking
    let (probe, mut rows): (Vec<OpRow>, Vec<OpRow>) = rows.into_iter().partition(|r| {
        r.kind == Some(trace_ops::OpKind::Probe) || r.op.as_deref() == Some(trace_ops::PROBE_OP)
    });
    let row_count = rows.len();
    rows.truncate(q.top);
    OpsReport {
        available: true,
        reason: None,
        figures: "sampled_estimate",
        alloc_sites,
        by: by.as_str(),
        pass_filter,
        totals: Some(p.totals.clone()),
        row_count,
        rows,
        probe,
    }
}

/// The report of a trace with allocation sites and no samples: rows of exact calls and
/// alloc-clocked time per op, pass and module (grouped as asked), most time first.
fn sites_only(
    s: &SiteProfile,
    u: &trace_ops::Unavailable,
    by: GroupBy,
    pass_filter: Option<Pass>,
    q: OpsQuery,
    alloc_sites: Option<SiteTotals>,
) -> OpsReport {
    let mut index: std::collections::HashMap<_, usize> = std::collections::HashMap::new();
    let mut rows: Vec<OpRow> = Vec::new();
    for r in s
        .rows
        .iter()
        .filter(|r| pass_filter.is_none_or(|p| r.pass == Some(p)))
    {
        // without its thread a site row has no counted calls and no clock (trace_ops::SiteOpRow)
        let Some(thread) = r.thread else {
            continue;
        };
        let (op, pass, module) = match by {
            GroupBy::OpPassModule => (true, true, true),
            GroupBy::OpPass => (true, true, false),
            GroupBy::Op => (true, false, false),
            GroupBy::Module => (false, false, true),
            GroupBy::Pass => (false, true, false),
        };
        let key = (
            thread,
            op.then(|| (r.op.clone(), r.kind)),
            if pass { r.pass } else { None },
            module.then(|| (r.module.clone(), r.module_source)),
        );
        let i = *index.entry(key.clone()).or_insert_with(|| {
            rows.push(OpRow {
                op: key.1.as_ref().map(|x| x.0.clone()),
                kind: key.1.as_ref().map(|x| x.1),
                pass: key.2,
                module: key.3.as_ref().and_then(|x| x.0.clone()),
                module_source: key.3.as_ref().and_then(|x| x.1),
                thread,
                samples: 0,
                share: 0.0,
                share_low: 0.0,
                share_high: 0.0,
                self_ns: None,
                self_ns_low: None,
                self_ns_high: None,
                inner_op: None,
                few_samples: false,
                calls: Some(0),
                alloc_clocked_ns: None,
            });
            rows.len() - 1
        });
        let row = &mut rows[i];
        row.calls = row.calls.map(|c| c + r.calls);
        row.alloc_clocked_ns = match (row.alloc_clocked_ns, r.alloc_clocked_ns) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        };
    }
    rows.sort_by(|a, b| {
        b.alloc_clocked_ns
            .cmp(&a.alloc_clocked_ns)
            .then_with(|| b.calls.cmp(&a.calls))
            .then_with(|| a.op.cmp(&b.op))
    });
    let row_count = rows.len();
    rows.truncate(q.top);
    OpsReport {
        available: true,
        reason: Some(format!(
            "no samples ({}): times are alloc-clocked only",
            u.reason
        )),
        figures: "alloc_clocked",
        alloc_sites,
        by: by.as_str(),
        pass_filter,
        totals: None,
        row_count,
        rows,
        probe: Vec::new(),
    }
}

/// The line on the second time source, when the trace has sites.
pub fn alloc_sites_line(t: &SiteTotals) -> String {
    let threshold = t
        .threshold_bytes
        .map(|b| format!(" at least {}", trace_format::bytes(b)))
        .unwrap_or_default();
    let lost = match t.lost {
        Some(n) if n > 0 => format!("; {n} allocations lost their stack and are not counted"),
        _ => String::new(),
    };
    format!(
        "CALLS: exact, calls that allocate{threshold} (from {} storages with an allocation site); ALLOC-CLOCKED: measured, each allocating call's start to its thread's next allocation (it includes non-allocating ops and glue after it; on CUDA the launch, not the kernel){lost}",
        t.storages
    )
}

/// `a–b` of an interval in ns, `-` when unknown.
fn interval(low: Option<u64>, high: Option<u64>) -> String {
    match (low, high) {
        (Some(l), Some(h)) => format!("{}–{}", duration(l), duration(h)),
        _ => "-".to_string(),
    }
}

/// `34.2%`.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// The header line: an estimate from N samples at H Hz with L lost.
pub fn header(t: &SampleTotals) -> String {
    let rate = t.hz.map(|h| format!(" at {h} Hz")).unwrap_or_default();
    let lost = match t.lost {
        Some(l) => format!(", {l} lost"),
        None => String::new(),
    };
    format!(
        "estimated from {} wall-clock samples{rate}{lost}; 95% intervals from the sample counts",
        t.counted
    )
}

/// The "few samples" warning line, when the profile rests on fewer than [`FEW_SAMPLES`].
pub fn few_samples_line(t: &SampleTotals) -> Option<String> {
    t.few_samples.then(|| {
        let least = t.threads.iter().map(|x| x.samples).min().unwrap_or(0);
        format!(
            "few samples ({least} < {FEW_SAMPLES}): shares are rough and ranks may be wrong; capture a longer step or sample at a higher rate (`ProfileRun::sample_hz`)"
        )
    })
}

/// Share of the timer's expirations lost above which every view warns.
pub const MANY_LOST_SHARE: f64 = 0.1;

/// The "many samples lost" warning line, when more than [`MANY_LOST_SHARE`] of the timer's
/// expirations (samples plus lost ones) gave no sample.
pub fn lost_samples_line(t: &SampleTotals) -> Option<String> {
    let lost = t.lost?;
    let ticks = t.samples.checked_add(lost)?;
    let share = lost as f64 / ticks as f64;
    (ticks > 0 && share > MANY_LOST_SHARE).then(|| {
        format!(
            "{lost} of {ticks} timer expirations gave no sample ({}): the thread could not take the signal that often (a loaded machine, a high rate); if the losses fall more in some ops than others, their shares are biased — compare with a lower rate",
            pct(share)
        )
    })
}

/// Renders the report as text.
pub fn render(r: &OpsReport) -> String {
    let mut out = String::new();
    if r.available && r.totals.is_none() {
        return render_sites_only(r);
    }
    let Some(t) = r.totals.as_ref().filter(|_| r.available) else {
        let _ = writeln!(
            out,
            "operations: unavailable — {}",
            trace_format::escape(r.reason.as_deref().unwrap_or("not captured"))
        );
        return out;
    };
    let _ = writeln!(out, "operations   {}", header(t));
    let region = t
        .threads
        .first()
        .and_then(|x| x.region_ns)
        .map(|d| {
            if t.region.is_some() {
                format!("{} (the measured region)", duration(d))
            } else {
                format!(
                    "{} (the sampled window: no closed measured region)",
                    duration(d)
                )
            }
        })
        .unwrap_or_else(|| "unknown: no time estimates, shares only".to_string());
    let _ = writeln!(out, "region       {region}");
    if let Some(a) = &r.alloc_sites {
        let _ = writeln!(out, "sites        {}", alloc_sites_line(a));
    }
    for line in few_samples_line(t).into_iter().chain(lost_samples_line(t)) {
        let _ = writeln!(out, "warning      {line}");
    }
    if let Some(p) = r.pass_filter {
        let _ = writeln!(
            out,
            "pass         {} only (shares of the whole region)",
            p.as_str()
        );
    }
    out.push('\n');
    let threads = t.threads.len() > 1;
    let (show_op, show_pass, show_module) = match r.by {
        "op" | "op_pass" => (true, r.by == "op_pass", false),
        "module" => (false, false, true),
        "pass" => (false, true, false),
        _ => (true, true, true),
    };
    let mut cols: Vec<(&str, Align)> = Vec::new();
    if threads {
        cols.push(("THREAD", Align::Right));
    }
    if show_op {
        cols.push(("OPERATION", Align::Left));
    }
    if show_pass {
        cols.push(("PASS", Align::Left));
    }
    if show_module {
        cols.push(("MODULE", Align::Left));
    }
    cols.extend([
        ("SAMPLES", Align::Right),
        ("EST. SELF", Align::Right),
        ("95% INTERVAL", Align::Right),
        ("SHARE", Align::Right),
    ]);
    let site_cols = r.alloc_sites.is_some();
    if site_cols {
        cols.extend([("CALLS", Align::Right), ("ALLOC-CLOCKED", Align::Right)]);
    }
    let mut table = Table::new(&cols);
    for row in &r.rows {
        let mut cells: Vec<String> = Vec::new();
        if threads {
            cells.push(row.thread.to_string());
        }
        if show_op {
            // The probe's row is named `(probe)` already (its own frames, one row per pass).
            cells.push(Table::path(row.op.as_deref().unwrap_or("-")));
        }
        if show_pass {
            cells.push(row.pass.map_or("-", |p| p.as_str()).to_string());
        }
        if show_module {
            let m = row
                .module
                .as_deref()
                .map_or_else(|| "-".to_string(), Table::path);
            cells.push(match row.module_source {
                Some(trace_ops::ModuleSource::Stack) => format!("{m} (stack)"),
                _ => m,
            });
        }
        cells.push(row.samples.to_string());
        cells.push(trace_format::opt_duration(row.self_ns));
        cells.push(interval(row.self_ns_low, row.self_ns_high));
        cells.push(pct(row.share));
        if site_cols {
            cells.push(row.calls.map_or_else(|| "-".to_string(), |c| c.to_string()));
            cells.push(trace_format::opt_duration(row.alloc_clocked_ns));
        }
        table.row(cells);
    }
    out.push_str(&table.render("  "));
    if r.rows.is_empty() {
        out.push_str("  (no samples match)\n");
    }
    probe_lines(&mut out, &r.probe);
    if r.row_count > r.rows.len() {
        let shown: u64 = r.rows.iter().chain(&r.probe).map(|x| x.samples).sum();
        let _ = writeln!(
            out,
            "  … {} more rows ({} of the counted samples not shown; --top to see more)",
            r.row_count - r.rows.len(),
            t.counted.saturating_sub(shown)
        );
    }
    if t.outside_region > 0 {
        let _ = writeln!(
            out,
            "  {} outside the measured region {} not counted",
            trace_format::count(t.outside_region, "sample", "samples"),
            if t.outside_region == 1 { "is" } else { "are" }
        );
    }
    if let Some(d) = t.dropped.describe(t.samples) {
        let _ = writeln!(out, "  {d}");
    }
    if t.backward_line_unknown > 0 {
        let _ = writeln!(
            out,
            "  {} backward samples without a readable arm (no line tables, or not candle-core 0.11.1) are counted as `backward`",
            t.backward_line_unknown
        );
    }
    if r.rows
        .iter()
        .any(|x| x.module_source == Some(trace_ops::ModuleSource::Stack))
    {
        out.push_str("  (stack): module from the stack's forward frames (no module span)\n");
    }
    out
}

/// The table of a trace with sites and no samples: calls and alloc-clocked time only.
/// The probe's rows, one line each under the table: its cost, not one of the user's ops.
fn probe_lines(out: &mut String, probe: &[OpRow]) {
    for row in probe {
        let _ = writeln!(
            out,
            "  {}{}: {}, {} ({}), {} of the region: the probe's own frames, its cost, not one of your ops",
            trace_ops::PROBE_OP,
            row.pass.map_or(String::new(), |p| format!(" in {}", p.as_str())),
            trace_format::count(row.samples, "sample", "samples"),
            trace_format::opt_duration(row.self_ns),
            interval(row.self_ns_low, row.self_ns_high),
            pct(row.share)
        );
    }
}

fn render_sites_only(r: &OpsReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "operations   from allocation sites only — {}",
        trace_format::escape(r.reason.as_deref().unwrap_or("no samples"))
    );
    if let Some(a) = &r.alloc_sites {
        let _ = writeln!(out, "sites        {}", alloc_sites_line(a));
    }
    out.push('\n');
    let mut table = Table::new(&[
        ("OPERATION", Align::Left),
        ("PASS", Align::Left),
        ("MODULE", Align::Left),
        ("CALLS", Align::Right),
        ("ALLOC-CLOCKED", Align::Right),
    ]);
    for row in &r.rows {
        let m = row
            .module
            .as_deref()
            .map_or_else(|| "-".to_string(), Table::path);
        table.row([
            Table::path(row.op.as_deref().unwrap_or("-")),
            row.pass.map_or("-", |p| p.as_str()).to_string(),
            match row.module_source {
                Some(trace_ops::ModuleSource::Stack) => format!("{m} (stack)"),
                _ => m,
            },
            row.calls.map_or_else(|| "-".to_string(), |c| c.to_string()),
            trace_format::opt_duration(row.alloc_clocked_ns),
        ]);
    }
    out.push_str(&table.render("  "));
    if r.row_count > r.rows.len() {
        let _ = writeln!(
            out,
            "  … {} more rows (--top to see more)",
            r.row_count - r.rows.len()
        );
    }
    out
}
