//! Checking `--fail-on` gates on a comparison: the delta each gate reads, judged with the
//! diff's noise rules (see [`crate::gate`]).

use trace_diff::{Delta, TraceDiff, Verdict};
use trace_format::escape;
use trace_schema::Pass;

use crate::gate::{Gate, Metric};
use crate::outcome::{Checked, Outcome, Subject};
use crate::units::pct;
use crate::Report;

impl Gate {
    /// The delta the gate reads, or why the diff has none.
    fn delta(&self, diff: &TraceDiff) -> Result<Delta, String> {
        let pass_delta = |p: Pass| {
            diff.passes
                .iter()
                .find(|d| d.pass == p)
                .ok_or_else(|| format!("no {} pass in the runs", p.as_str()))
        };
        let memory = || {
            diff.memory.as_ref().ok_or_else(|| {
                diff.memory_unavailable
                    .clone()
                    .unwrap_or_else(|| "memory is not compared".into())
            })
        };
        Ok(match self.metric {
            Metric::Peak => memory()?.peak_bytes,
            Metric::Wall => diff.wall_time_ns,
            Metric::PassTime(p) => pass_delta(p)?.time_ns,
            Metric::PassPeak(p) => pass_delta(p)?.peak_bytes,
            Metric::PassAllocated(p) => pass_delta(p)?.allocated_bytes,
        })
    }

    /// Checks the gate on `diff` (see the module docs).
    pub fn check(&self, diff: &TraceDiff) -> Checked {
        let subject = Subject::Gate(*self);
        let done = |figure: String, outcome: Outcome, message: String| Checked {
            subject: subject.clone(),
            figure,
            outcome,
            message,
        };
        let unknown = |why: String| {
            done(
                trace_format::UNKNOWN.into(),
                Outcome::Unknown(why.clone()),
                why,
            )
        };
        let d = match self.delta(diff) {
            Ok(d) => d,
            Err(why) => return unknown(escape(&why).into_owned()),
        };
        let name = self.metric.name();
        if d.verdict == Verdict::NotCompared {
            let why: Vec<String> = diff
                .identity
                .refusals
                .iter()
                .map(|r| escape(&r.message).into_owned())
                .collect();
            return unknown(format!(
                "{name}: timing is not compared between these runs: {}",
                why.join("; ")
            ));
        }
        let (Some(b), Some(c)) = (d.baseline, d.candidate) else {
            return unknown(format!("{name}: not observed on both sides"));
        };
        if self.metric.is_time() && !diff.spread_known {
            return unknown(format!(
                "{name}: {} baseline run(s) and {} candidate run(s): with one run on a side the run-to-run \
                 spread is unknown and a time change cannot be told from noise; give two or more runs a side \
                 (--baseline A B C --candidate D E F)",
                diff.baseline_runs, diff.candidate_runs
            ));
        }
        let rel = match (d.relative, d.delta) {
            (Some(r), _) => r,
            (None, Some(delta)) if delta > 0 => f64::INFINITY,
            _ => 0.0,
        };
        let figure = if rel.is_finite() {
            trace_format::percent(rel)
        } else {
            format!(
                "{} → {}",
                self.metric.show(b.median),
                self.metric.show(c.median)
            )
        };
        let side = |s: &trace_diff::Stat| {
            if s.runs == 1 {
                self.metric.show(s.median)
            } else {
                format!(
                    "{} ({}–{} over {} runs)",
                    self.metric.show(s.median),
                    self.metric.show(s.min),
                    self.metric.show(s.max),
                    s.runs
                )
            }
        };
        let medians = format!("{} → {}", side(&b), side(&c));
        if d.verdict == Verdict::WithinNoise {
            return done(
                format!("{figure} (noise)"),
                Outcome::Pass,
                format!("{name}: {medians}: inside the runs' spread"),
            );
        }
        if d.verdict == Verdict::Increased && rel > self.max_increase {
            let spread = if diff.spread_known {
                ", outside the runs' spread"
            } else {
                ""
            };
            return done(
                figure.clone(),
                Outcome::Fail,
                format!(
                    "{name} grew {figure}{spread}: {medians} > gate +{}",
                    pct(self.max_increase)
                ),
            );
        }
        done(figure, Outcome::Pass, String::new())
    }
}

/// Checks every gate on `diff`, in the order given.
pub fn check_all(gates: &[Gate], diff: &TraceDiff) -> Report {
    Report {
        checked: gates.iter().map(|g| g.check(diff)).collect(),
    }
}
