//! `candle-graph ops` on a trace whose producer measured every op call (a PyTorch profiler
//! trace: Kineto's `cpu_op` ranges, imported as `op` spans): the exact table of
//! [`trace_ops::MeasuredOps`] — calls, self and total time per op and pass, with PyTorch's own
//! definitions (`key_averages()`), and the time of the top-level calls (not inside another op).

use std::fmt::Write as _;

use serde::Serialize;
use trace_format::duration;
use trace_ops::{MeasuredOps, MeasuredRow};
use trace_schema::Pass;

use crate::table::{Align, Table};

/// The measured `ops` report (`candle-graph/ops/1` with `figures: "measured"`).
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredReport {
    /// Always true (a trace without op spans gets the sampled report).
    pub available: bool,
    /// Always `measured`: each figure sums measured durations.
    pub figures: &'static str,
    /// `op_pass` (one row per op and pass) or `op` (`--by op`: passes merged, the shape of
    /// `key_averages()`; `pass` is then `null` where an op ran in several).
    pub by: &'static str,
    /// The `--pass` filter, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass_filter: Option<Pass>,
    /// Op calls in the table (all rows, before `--top`).
    pub calls: u64,
    /// Op spans left out because they never closed.
    pub open_calls: u64,
    /// Rows before `--top`.
    pub row_count: usize,
    /// The rows shown, longest total first.
    pub rows: Vec<MeasuredRow>,
}

/// Builds the report; `by_op` merges the passes.
pub fn build(t: &MeasuredOps, by_op: bool, pass: Option<Pass>, top: usize) -> MeasuredReport {
    // the rows of the pass (or all), then merged over passes for `--by op`
    let kept = MeasuredOps {
        rows: t
            .rows
            .iter()
            .filter(|r| pass.is_none_or(|p| r.pass == Some(p)))
            .cloned()
            .collect(),
        open_calls: t.open_calls,
        has_memory: t.has_memory,
    };
    let mut rows = if by_op { kept.by_name() } else { kept.rows };
    let calls = rows.iter().map(|r| r.calls).sum();
    let row_count = rows.len();
    rows.truncate(top);
    MeasuredReport {
        available: true,
        figures: "measured",
        by: if by_op { "op" } else { "op_pass" },
        pass_filter: pass,
        calls,
        open_calls: t.open_calls,
        row_count,
        rows,
    }
}

/// Renders the report as text.
pub fn render(r: &MeasuredReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "operations   measured by the producer: {} op calls, each timed (PyTorch's profiler: self and total as `key_averages()` computes them)",
        r.calls
    );
    if r.open_calls > 0 {
        let _ = writeln!(
            out,
            "warning      {} op calls never closed and are not counted",
            r.open_calls
        );
    }
    if let Some(p) = r.pass_filter {
        let _ = writeln!(out, "pass         {} only", p.as_str());
    }
    out.push('\n');
    let mut table = Table::new(&[
        ("OPERATION", Align::Left),
        ("PASS", Align::Left),
        ("CALLS", Align::Right),
        ("SELF", Align::Right),
        ("TOTAL", Align::Right),
        ("TOP-LEVEL CALLS", Align::Right),
        ("TOP-LEVEL TIME", Align::Right),
    ]);
    for row in &r.rows {
        table.row([
            Table::path(&row.op),
            row.pass.map_or("-", |p| p.as_str()).to_string(),
            row.calls.to_string(),
            duration(row.self_ns),
            duration(row.total_ns),
            row.top_level_calls.to_string(),
            duration(row.top_level_ns),
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
    out.push_str("  top level: calls no other op encloses (what the model called); their time counts each op once\n");
    out
}
