//! Gates on a comparison (`candle-graph diff BASELINE CANDIDATE --fail-on 'peak>+5%'`): a
//! figure of the [`TraceDiff`] may not grow by more than a percentage.
//!
//! Gates read the diff's own verdicts ([`trace_diff::Verdict`]), so they follow its noise
//! rules: with two or more runs a side, a change inside the runs' ranges is noise and passes.
//! A time gate (`wall`, `pass.<pass>`) needs that spread: with one run on a side it is
//! unknown (the report says so and how to give more runs), never a guess; a timing the diff
//! refused to compare (different machines, builds, …) is unknown with the diff's reasons.
//! Memory figures are exact, so memory gates (`peak`, `pass.<pass>.peak`,
//! `pass.<pass>.allocated`) are decided from one run a side.
//!
//! The gate syntax: `METRIC>+N%` (the `+` is optional), METRIC one of `peak`, `wall`,
//! `pass.forward|backward|optimizer` (its time), `pass.<pass>.peak`, `pass.<pass>.allocated`.

use serde::Serialize;
use trace_diff::{Delta, TraceDiff, Verdict};
use trace_format::{bytes, duration, escape};
use trace_schema::Pass;

use crate::budget::{pct, Checked, Outcome, Subject};
use crate::Report;

/// A figure a gate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The global logical peak, bytes.
    Peak,
    /// The measured region's wall time.
    Wall,
    /// The time of a pass.
    PassTime(Pass),
    /// The peak inside a pass.
    PassPeak(Pass),
    /// The bytes allocated in a pass.
    PassAllocated(Pass),
}

impl Metric {
    /// Whether it is a time (needs the runs' spread).
    pub fn is_time(self) -> bool {
        matches!(self, Metric::Wall | Metric::PassTime(_))
    }

    /// As written in a gate.
    pub fn name(self) -> String {
        match self {
            Metric::Peak => "peak".into(),
            Metric::Wall => "wall".into(),
            Metric::PassTime(p) => format!("pass.{}", p.as_str()),
            Metric::PassPeak(p) => format!("pass.{}.peak", p.as_str()),
            Metric::PassAllocated(p) => format!("pass.{}.allocated", p.as_str()),
        }
    }

    fn show(self, v: u64) -> String {
        if self.is_time() {
            duration(v)
        } else {
            bytes(v)
        }
    }
}

/// One gate: `metric` may grow by at most `max_increase` (a ratio: 0.05 for `+5%`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gate {
    /// The figure.
    pub metric: Metric,
    /// The largest relative increase allowed.
    pub max_increase: f64,
}

/// A gate that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--fail-on {gate:?}: {message}")]
pub struct GateError {
    /// The gate as given.
    pub gate: String,
    /// What is wrong.
    pub message: String,
}

impl std::str::FromStr for Gate {
    type Err = GateError;

    fn from_str(s: &str) -> Result<Self, GateError> {
        let err = |message: String| GateError {
            gate: s.to_string(),
            message,
        };
        let Some((metric, limit)) = s.split_once('>') else {
            return Err(err(
                "a gate is METRIC>+N% (e.g. 'peak>+5%', 'pass.backward>+10%')".into(),
            ));
        };
        let metric = parse_metric(metric.trim()).ok_or_else(|| {
            err(format!(
                "unknown figure {:?} (known: peak, wall, pass.<forward|backward|optimizer>, pass.<pass>.peak, pass.<pass>.allocated)",
                metric.trim()
            ))
        })?;
        let limit = limit.trim();
        let limit = limit.strip_prefix('+').unwrap_or(limit);
        let Some(number) = limit.strip_suffix('%') else {
            return Err(err(format!(
                "the limit {limit:?} is not a percentage (e.g. +5%)"
            )));
        };
        let p: f64 = number
            .trim()
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| err(format!("the limit {limit:?} is not a percentage ≥ 0")))?;
        Ok(Gate {
            metric,
            max_increase: p / 100.0,
        })
    }
}

fn parse_metric(s: &str) -> Option<Metric> {
    let pass = |p: &str| match p {
        "forward" => Some(Pass::Forward),
        "backward" => Some(Pass::Backward),
        "optimizer" => Some(Pass::Optimizer),
        _ => None,
    };
    match s {
        "peak" => return Some(Metric::Peak),
        "wall" => return Some(Metric::Wall),
        _ => {}
    }
    let rest = s.strip_prefix("pass.")?;
    match rest.split_once('.') {
        None => pass(rest).map(Metric::PassTime),
        Some((p, "peak")) => pass(p).map(Metric::PassPeak),
        Some((p, "allocated")) => pass(p).map(Metric::PassAllocated),
        Some(_) => None,
    }
}

impl Gate {
    /// `peak > +5.0%`.
    pub fn describe(&self) -> String {
        format!("{} > +{}", self.metric.name(), pct(self.max_increase))
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse_and_name_what_is_wrong() {
        let g: Gate = "peak>+5%".parse().unwrap();
        assert_eq!(g.metric, Metric::Peak);
        assert!((g.max_increase - 0.05).abs() < 1e-12);
        assert_eq!(g.describe(), "peak > +5.0%");
        let g: Gate = "pass.backward > 10%".parse().unwrap();
        assert_eq!(g.metric, Metric::PassTime(Pass::Backward));
        assert!(g.metric.is_time());
        let g: Gate = "pass.optimizer.peak>+0%".parse().unwrap();
        assert_eq!(g.metric, Metric::PassPeak(Pass::Optimizer));
        let e = "pek>+5%".parse::<Gate>().unwrap_err();
        assert!(e.to_string().contains("unknown figure \"pek\""), "{e}");
        let e = "peak<5%".parse::<Gate>().unwrap_err();
        assert!(e.message.contains("METRIC>+N%"), "{e}");
        let e = "peak>5".parse::<Gate>().unwrap_err();
        assert!(e.message.contains("not a percentage"), "{e}");
        assert!("pass.sideways>+1%".parse::<Gate>().is_err());
        assert!("peak>-1%".parse::<Gate>().is_err());
    }
}
