//! Gates on a comparison (`candle-graph diff BASELINE CANDIDATE --fail-on 'peak>+5%'`): a
//! figure of the [`trace_diff::TraceDiff`] may not grow by more than a percentage.
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
use trace_format::{bytes, duration};
use trace_schema::Pass;

use crate::units::pct;

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

    pub(crate) fn show(self, v: u64) -> String {
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
