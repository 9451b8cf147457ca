//! The `operations` section of `candle-graph diff`: per pass, the two sides' ops aligned by
//! role ([`trace_diff::OpsDiff`]), ranked by the size of their time gap, with each gap's share
//! of the pass's gap, and the ops of each side that have no role.

use std::fmt::Write as _;

use trace_diff::{OpsDiff, PassAccount, RoleRow, RoleSide, RowKind, TraceDiff};
use trace_format::{delta_duration, duration, elide, escape, opt_duration};
use trace_ops::{Framework, SideOp, TimeSource};

use crate::table::{Align, Table};

fn framework(f: Framework) -> &'static str {
    match f {
        Framework::Candle => "Candle",
        Framework::Pytorch => "PyTorch",
    }
}

fn source(s: TimeSource) -> &'static str {
    match s {
        TimeSource::Measured => "measured per call",
        TimeSource::Sampled => "estimated from samples (95% intervals)",
    }
}

/// `1.2 ms` or `1.2 ms (0.8–1.9 ms)`, with `; clocked 1.1 ms` when allocation sites clocked
/// the role's calls too; `-` when the side has no op in the role.
fn side_time(s: &RoleSide) -> String {
    if s.ops.is_empty() && s.ns.is_none() {
        return "-".to_string();
    }
    let t = match (s.low_ns, s.high_ns) {
        (Some(l), Some(h)) => format!("{} ({}–{})", opt_duration(s.ns), duration(l), duration(h)),
        _ => opt_duration(s.ns),
    };
    match s.alloc_clocked_ns {
        Some(c) if s.samples.is_some() => format!("{t}; clocked ≤ {}", duration(c)),
        _ => t,
    }
}

/// `384.0 KiB → 1.53 MiB`: the bytes each side's ops in the role allocated (`?` where a side
/// cannot say; `-` for a side without ops in the role).
fn allocated(b: &RoleSide, c: &RoleSide) -> String {
    let one = |s: &RoleSide| {
        if s.ops.is_empty() {
            "-".to_string()
        } else {
            s.allocated_bytes
                .map_or_else(|| "?".to_string(), trace_format::bytes)
        }
    };
    format!("{} → {}", one(b), one(c))
}

/// The side's op names, bounded.
fn names(s: &RoleSide) -> String {
    if s.ops.is_empty() {
        return "-".to_string();
    }
    let mut shown: Vec<String> = s.ops.iter().take(3).map(|n| short(n)).collect();
    if s.ops.len() > 3 {
        shown.push(format!("+{}", s.ops.len() - 3));
    }
    elide(&shown.join(", "), 48).into_owned()
}

/// A role's share of its pass's change: `34%` inside 0–100%; a role that moved against its
/// pass, or by more than it (other roles offsetting), says so instead of `-731%`.
pub(crate) fn share_of_gap(s: f64) -> String {
    if s < 0.0 {
        "against the pass".to_string()
    } else if s > 1.0 {
        "more than the pass".to_string()
    } else {
        format!("{:.0}%", 100.0 * s)
    }
}

/// PyTorch's autograd node names without the engine prefix.
fn short(name: &str) -> String {
    let n = name
        .strip_prefix("autograd::engine::evaluate_function: ")
        .unwrap_or(name);
    escape(n).into_owned()
}

fn unmatched(out: &mut String, side: &str, ops: &[SideOp], top: usize) {
    if ops.is_empty() {
        return;
    }
    let total: u64 = ops.iter().filter_map(|o| o.ns).fold(0, u64::saturating_add);
    let shown: Vec<String> = ops
        .iter()
        .take(top)
        .map(|o| {
            format!(
                "{}{} {}",
                short(&elide(&o.op, 60)),
                if o.probe { " (probe)" } else { "" },
                opt_duration(o.ns)
            )
        })
        .collect();
    let more = if ops.len() > top {
        format!(", … {} more", ops.len() - top)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "    no role on the {side} ({} ops, {}): {}{more}",
        ops.len(),
        duration(total),
        shown.join(", ")
    );
}

/// `roles 5.20 ms + no role 0.30 ms + outside any op 1.10 ms + probe 0.40 ms = pass 7.00 ms`.
pub fn account_line(a: &PassAccount) -> String {
    let probe = match (a.probe_samples, a.samples) {
        (Some(k), Some(n)) if k > 0 => format!(
            " + probe {} ({k} of {n} samples, not the user's work)",
            duration(a.probe_ns)
        ),
        _ => String::new(),
    };
    let over = a
        .ops_exceed_pass_ns
        .map(|x| format!(" (the top-level ops add up to {} more than the pass: ops on several threads at once)", duration(x)))
        .unwrap_or_default();
    format!(
        "roles {} + no role {} + outside any op {}{probe} = pass {}{over}",
        duration(a.roles_ns),
        duration(a.unmatched_ns),
        duration(a.outside_ops_ns),
        duration(a.pass_ns)
    )
}

/// The GAP cell: the gap, or why it is not ranked.
pub fn gap_cell(r: &RoleRow) -> String {
    match (r.too_few_samples, r.gap_ns) {
        (Some(n), _) => format!("too few samples ({n})"),
        (None, Some(g)) => delta_duration(g),
        (None, None) => "-".to_string(),
    }
}

/// The ROLE cell: an op without a role is marked so.
fn role_cell(r: &RoleRow) -> String {
    let name = escape(&elide(&r.role, 32)).into_owned();
    match r.kind {
        RowKind::Unmatched => format!("{} (unmatched)", short(&elide(&r.role, 32))),
        _ => name,
    }
}

/// The warnings of a sampled side: few samples, many lost ticks.
fn sampling_warnings(out: &mut String, side: &str, t: Option<&trace_ops::SampleTotals>) {
    let Some(t) = t else { return };
    for l in crate::ops::few_samples_line(t)
        .into_iter()
        .chain(crate::ops::lost_samples_line(t))
    {
        let _ = writeln!(out, "  warning ({side}): {}", escape(&l));
    }
}

/// The headline's op line: the largest gap of the largest pass gap, with its interval.
pub fn largest_gap_line(d: &OpsDiff) -> Option<String> {
    let (p, r) = d.largest_gap()?;
    let pass = p.pass.map_or("outside every pass", |x| x.as_str());
    let interval = match (r.gap_low_ns, r.gap_high_ns) {
        (Some(l), Some(h)) if (l, h) != (r.gap_ns?, r.gap_ns?) => {
            format!(" (95% {} to {})", delta_duration(l), delta_duration(h))
        }
        _ => String::new(),
    };
    let share = r
        .share_of_pass_gap
        .filter(|s| (0.0..=1.0).contains(s))
        .map(|s| format!(", {:.0}% of the pass's gap", 100.0 * s))
        .unwrap_or_default();
    let pass_gap = p
        .user_pass_gap_ns
        .map(|g| format!(" (pass gap {})", delta_duration(g)))
        .unwrap_or_default();
    let what = match r.kind {
        RowKind::Unmatched => format!("{} (an op without a role)", short(&r.role)),
        _ => escape(&r.role).into_owned(),
    };
    Some(format!(
        "largest gap: {pass}{pass_gap}: {what} {}{interval}{share}: {} {} vs {} {}",
        delta_duration(r.gap_ns?),
        framework(d.candidate_framework),
        side_time(&r.candidate),
        framework(d.baseline_framework),
        side_time(&r.baseline),
    ))
}

/// Renders the section (`top` roles per pass at most).
pub fn render(out: &mut String, diff: &TraceDiff, top: usize) {
    let Some(d): Option<&OpsDiff> = diff.ops.as_ref() else {
        let _ = writeln!(
            out,
            "operations   not compared: {}",
            escape(diff.ops_unavailable.as_deref().unwrap_or("no op table"))
        );
        return;
    };
    let _ = writeln!(
        out,
        "operations   by role (which ops do the same work), per pass: baseline {} ops {}, candidate {} ops {}",
        framework(d.baseline_framework),
        source(d.baseline_source),
        framework(d.candidate_framework),
        source(d.candidate_source)
    );
    if d.baseline_run.of > 1 || d.candidate_run.of > 1 {
        let _ = writeln!(
            out,
            "  one run a side for every figure here, pass times included: baseline {}, candidate {} (the passes table above gives medians over the runs)",
            d.baseline_run.describe(),
            d.candidate_run.describe()
        );
    }
    if d.baseline_steps > 1 || d.candidate_steps > 1 {
        let _ = writeln!(
            out,
            "  every time is a sum over the captured steps: baseline {}, candidate {}",
            trace_format::count(d.baseline_steps, "step", "steps"),
            trace_format::count(d.candidate_steps, "step", "steps")
        );
    }
    out.push_str("  ALLOCATED: bytes each side's ops allocated in the role (compared whatever the timing; a Candle side counts storages with an allocation site, at least its threshold)\n");
    if d.timing_comparable {
        out.push_str("  op times compared\n");
    } else {
        out.push_str("  op times NOT compared:\n");
        for r in &d.refusals {
            let _ = writeln!(out, "    - {}", escape(r));
        }
    }
    for n in &d.notes {
        let _ = writeln!(out, "  note: {}", escape(n));
    }
    sampling_warnings(out, "baseline", d.baseline_sampling.as_ref());
    sampling_warnings(out, "candidate", d.candidate_sampling.as_ref());
    if d.baseline_sampling.is_some() || d.candidate_sampling.is_some() {
        let _ = writeln!(
            out,
            "  a sampled side's times are its share of the pass's samples × the pass time; a row with fewer than {} samples on a side is not ranked; shares are of the pass gap without the probe's cost",
            d.min_row_samples
        );
    }
    if d.passes
        .iter()
        .flat_map(|p| &p.roles)
        .any(|r| r.candidate.alloc_clocked_ns.is_some() || r.baseline.alloc_clocked_ns.is_some())
    {
        out.push_str("  clocked ≤: the allocation sites' second time source, an upper bound of the clocked calls' own time (each allocating call to the next allocation on its thread: the non-allocating work after it counts too); gaps use the sampled estimate; where it leaves the sampled interval the row says why\n");
    }
    for p in &d.passes {
        let pass = p.pass.map_or("outside every pass", |p| p.as_str());
        let gap = p
            .pass_gap_ns
            .map(|g| format!(", gap {}", delta_duration(g)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {pass}: {} → {}{gap}",
            opt_duration(p.baseline_pass_ns),
            opt_duration(p.candidate_pass_ns)
        );
        for (side, a) in [
            ("baseline", &p.baseline_account),
            ("candidate", &p.candidate_account),
        ] {
            if let Some(a) = a {
                let _ = writeln!(out, "    {side}: {}", account_line(a));
            }
        }
        if !p.roles.is_empty() {
            let mut t = Table::new(&[
                ("ROLE", Align::Left),
                ("BASELINE OPS", Align::Left),
                ("BASELINE", Align::Right),
                ("CANDIDATE OPS", Align::Left),
                ("CANDIDATE", Align::Right),
                ("GAP", Align::Right),
                ("OF PASS GAP", Align::Right),
                ("ALLOCATED", Align::Right),
            ]);
            for r in p.roles.iter().take(top) {
                t.row([
                    role_cell(r),
                    names(&r.baseline),
                    side_time(&r.baseline),
                    names(&r.candidate),
                    side_time(&r.candidate),
                    gap_cell(r),
                    r.share_of_pass_gap
                        .map_or_else(|| "-".to_string(), share_of_gap),
                    allocated(&r.baseline, &r.candidate),
                ]);
            }
            out.push_str(&t.render("    "));
            for r in p.roles.iter().take(top) {
                for (who, side) in [("baseline", &r.baseline), ("candidate", &r.candidate)] {
                    if let Some(why) = &side.clock_disagrees {
                        let _ = writeln!(out, "    {} ({who}): {}", escape(&r.role), escape(why));
                    }
                }
            }
            if p.roles.len() > top {
                let _ = writeln!(out, "    … {} more roles (--top)", p.roles.len() - top);
            }
        }
        unmatched(out, "baseline", &p.baseline_unmatched, top.min(5));
        unmatched(out, "candidate", &p.candidate_unmatched, top.min(5));
    }
    if let Some(l) = largest_gap_line(d) {
        let _ = writeln!(out, "  {l}");
    }
}

#[cfg(test)]
mod tests {
    use super::share_of_gap;

    #[test]
    fn a_share_outside_its_pass_says_so_instead_of_a_percentage() {
        assert_eq!(share_of_gap(0.34), "34%");
        assert_eq!(share_of_gap(1.0), "100%");
        assert_eq!(share_of_gap(-7.31), "against the pass");
        assert_eq!(share_of_gap(3.2), "more than the pass");
    }
}
