//! The op budgets: exact allocating calls (from the allocation sites) and an op's share of a
//! pass's samples, checked on its 95% Wilson interval (trace-ops' [`trace_ops::Share`]).

use std::fmt::Write as _;

use trace_format::escape;
use trace_ops::{Share, FEW_SAMPLES};
use trace_schema::Pass;

use crate::budget::{Budget, Cmp};
use crate::figures::Figures;
use crate::outcome::{fail, pass, unknown, Checked};
use crate::units::{in_pass, pct};

pub(crate) fn calls(
    budget: &Budget,
    figures: &Figures,
    op: &str,
    which: Option<Pass>,
    cmp: Cmp,
    limit: u64,
) -> Checked {
    let Some(rows) = &figures.call_rows else {
        return unknown(
            budget,
            format!(
                "{} needs allocation sites (exact calls); the trace has none \
                 (a deterministic capture, or sites turned off with alloc_site_threshold_bytes(0))",
                budget.describe()
            ),
        );
    };
    let mine: Vec<_> = rows
        .iter()
        .filter(|r| r.op == op && which.is_none_or(|p| r.pass == Some(p)))
        .collect();
    let n: u64 = mine.iter().map(|r| r.calls).sum();
    let figure = n.to_string();
    if cmp.holds(n, limit) {
        return pass(budget, figure);
    }
    let mut msg = format!(
        "calls of {}{}: {n}, budget {} {limit} (allocating calls, exact, from the allocation sites)",
        escape(op),
        in_pass(which),
        cmp.symbol()
    );
    if mine.is_empty() {
        let _ = write!(msg, "\n  no allocating call of {} in the trace", escape(op));
    }
    for r in mine.iter().take(8) {
        let mut key = vec![r.op.clone()];
        key.extend(r.module.clone());
        key.extend(r.pass.map(|p| p.as_str().to_string()));
        let _ = write!(
            msg,
            "\n    {:>6} calls  {}",
            r.calls,
            trace_format::cell(&key.join(" · "), 80)
        );
    }
    fail(budget, figure, msg)
}

pub(crate) fn share(
    budget: &Budget,
    figures: &Figures,
    op: &str,
    which: Option<Pass>,
    max: f64,
) -> Checked {
    let table = match &figures.ops {
        Ok(t) => t,
        Err(why) => {
            return unknown(
                budget,
                format!(
                    "{} needs the stack sampler's samples: {why}",
                    budget.describe()
                ),
            )
        }
    };
    let in_scope = |p: Option<Pass>| which.is_none_or(|w| p == Some(w));
    let n: u64 = table
        .rows
        .iter()
        .filter(|r| in_scope(r.pass))
        .map(|r| r.samples)
        .sum();
    let k: u64 = table
        .rows
        .iter()
        .filter(|r| in_scope(r.pass) && r.op.as_deref() == Some(op))
        .map(|r| r.samples)
        .sum();
    let scope = which.map_or_else(
        || "the measured region".to_string(),
        |p| format!("the {} pass", p.as_str()),
    );
    let Some(s) = Share::of(k, n) else {
        return unknown(
            budget,
            format!("no samples in {scope}: the share is unknown"),
        );
    };
    let figure = format!("{} ({}–{})", pct(s.share), pct(s.low), pct(s.high));
    if s.low <= max {
        return pass(budget, figure);
    }
    let mut msg = format!(
        "{}: {} of {scope} (95% interval {}–{}, {k} of {n} samples) > budget {}: \
         the interval's low end is above it, so the share is over the budget, not noise",
        escape(op),
        pct(s.share),
        pct(s.low),
        pct(s.high),
        pct(max)
    );
    if n < FEW_SAMPLES {
        let _ = write!(
            msg,
            "\n  few samples ({n} < {FEW_SAMPLES}): the interval is wide; sample faster (ProfileRun::sample_hz) for a tighter one"
        );
    }
    fail(budget, figure, msg)
}
