//! `candle-graph summary DIR` on a directory of rank traces (`trace.rank<N>.jsonl`, as the
//! probe writes them for `RANK`/`WORLD_SIZE` or `ProfileRun::rank`): the per-rank table, the
//! straggler and the memory imbalance (`trace_ranks` builds them; this module renders).

use std::fmt::Write as _;

use trace_format::{bytes, duration, opt_duration};
use trace_ranks::Excess;
use trace_schema::Pass;

use crate::table::{Align, Table};

pub use trace_ranks::RankReport;
/// The rank traces of a directory and the report across them (trace-ranks), re-exported for
/// programs that depend on trace-views alone.
pub use trace_ranks::{build, rank_files, RankInput};

/// The memory imbalance across ranks as one sentence (the text and the page say the same).
pub(crate) fn imbalance_line(m: &trace_ranks::MemoryImbalance) -> String {
    let ratio = m.ratio.map(|x| format!(", {x:.2}×")).unwrap_or_default();
    format!(
        "logical peaks from {} (rank {}) to {} (rank {}): spread {}{ratio} over {} ranks",
        bytes(m.min_bytes),
        m.min_rank,
        bytes(m.max_bytes),
        m.max_rank,
        bytes(m.spread_bytes),
        m.ranks_compared
    )
}

/// `X against a median of Y on the other ranks (+Z, r×)`.
pub fn excess_line(e: &Excess) -> String {
    let ratio = e.ratio().map(|r| format!(", {r:.2}×")).unwrap_or_default();
    format!(
        "{} against a median of {} on the other ranks (+{}{ratio})",
        duration(e.rank_ns),
        duration(e.others_median_ns),
        duration(e.excess_ns)
    )
}

/// The text of the report; `dir` is the directory read.
pub fn render(r: &RankReport, dir: &str) -> String {
    let mut out = String::new();
    let first = r.ranks.first().map(|x| &x.figures);
    let _ = writeln!(
        out,
        "ranks        {} of {} ranks read ({}) · {} · step {} · {}",
        r.ranks.len(),
        r.world_size,
        if r.world_size_declared {
            "world size declared"
        } else {
            "world size counted from the files"
        },
        first
            .map(|f| trace_format::name(&f.entrypoint))
            .unwrap_or_else(|| "-".into()),
        first
            .and_then(|f| f.capture_step)
            .map(|s| s.to_string())
            .unwrap_or_else(|| "-".into()),
        trace_format::escape(dir)
    );
    let mut t = Table::new(&[
        ("RANK", Align::Right),
        ("STEP", Align::Right),
        ("FORWARD", Align::Right),
        ("BACKWARD", Align::Right),
        ("OPTIMIZER", Align::Right),
        ("PEAK", Align::Right),
        ("PEAK IN", Align::Left),
        ("HELD MOSTLY BY", Align::Left),
        ("SLOWEST SPAN (SELF)", Align::Left),
    ]);
    for row in &r.ranks {
        let f = &row.figures;
        let pass = |p: Pass| opt_duration(f.pass_time_ns.get(&p).copied());
        let mut rank = row.rank.to_string();
        if row.truncated {
            rank.push_str(" (cut)");
        }
        let devices = if f.device_peak_bytes.len() > 1 {
            format!(
                " ({})",
                f.device_peak_bytes
                    .iter()
                    .map(|(d, b)| format!("{d} {}", bytes(*b)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        };
        t.row([
            rank,
            opt_duration(f.outer_wall_time_ns),
            pass(Pass::Forward),
            pass(Pass::Backward),
            pass(Pass::Optimizer),
            f.logical_peak_bytes
                .map(|b| format!("{}{devices}", bytes(b)))
                .unwrap_or_else(|| "-".into()),
            f.logical_peak_pass
                .map(|p| <&'static str>::from(p).to_string())
                .unwrap_or_else(|| "-".into()),
            f.logical_peak_dominant_category
                .map(|c| <&'static str>::from(c).to_string())
                .unwrap_or_else(|| "-".into()),
            row.slowest_span
                .as_ref()
                .map(|s| format!("{} {}", Table::path(&s.path), duration(s.self_time_ns)))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&t.render("  "));
    match &r.straggler {
        Some(s) => {
            let _ = writeln!(
                out,
                "\nstraggler    rank {}: step {}; the fastest is rank {} at {} (of {} complete ranks)",
                s.rank,
                excess_line(&s.step),
                s.fastest_rank,
                duration(s.fastest_ns),
                s.ranks_compared
            );
            if let Some((pass, e)) = &s.pass {
                let _ = writeln!(
                    out,
                    "  in pass    {}: {}",
                    <&'static str>::from(*pass),
                    excess_line(e)
                );
            }
            if let Some((path, e)) = &s.span {
                let _ = writeln!(
                    out,
                    "  in span    {} (host self time): {}",
                    Table::path(path),
                    excess_line(e)
                );
            }
        }
        None => out.push_str(
            "\nstraggler    not ranked: fewer than two complete ranks with a measured step\n",
        ),
    }
    if let Some(m) = &r.memory {
        let _ = writeln!(out, "memory       {}", imbalance_line(m));
    }
    for rank in &r.missing {
        let _ = writeln!(out, "missing      rank {rank}: no trace in the directory");
    }
    for f in &r.failed {
        let _ = writeln!(
            out,
            "unreadable   {}{}: {}",
            trace_format::escape(&f.file.display().to_string()),
            f.rank.map(|r| format!(" (rank {r})")).unwrap_or_default(),
            trace_format::escape(&f.reason)
        );
    }
    for rank in &r.cut_short {
        let _ = writeln!(
            out,
            "cut short    rank {rank}: its figures are lower bounds; not ranked for the straggler"
        );
    }
    for d in &r.disagreements {
        let _ = writeln!(out, "disagreement {}", trace_format::escape(d));
    }
    out
}
