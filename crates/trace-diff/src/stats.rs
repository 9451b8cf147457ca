//! One figure compared across runs: the median and range of each side ([`Stat`]), the change
//! between the medians and whether it is a change or run-to-run noise ([`Delta`], [`Verdict`]).
//!
//! # Rules
//! - The median of an even number of runs is the mean of the two middle values, rounded down
//!   (computed without overflow); the spread of a side is its range, `max − min`.
//! - `delta` is `candidate median − baseline median` as an `i128` (the difference of two `u64`
//!   always fits); `relative` is `delta / baseline median`, absent when the baseline median is 0.
//! - A difference is [`Verdict::WithinNoise`] when both sides have at least two runs and their
//!   ranges overlap: some baseline run was as high as some candidate run, so the runs do not
//!   separate the two sides. With one run on a side the spread is unknown and a difference is
//!   reported as a change (the report says the spread is unknown).

use serde::Serialize;

/// One figure over the runs of one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stat {
    /// Runs in which the figure was observed.
    pub runs: u32,
    /// Median over those runs (even count: mean of the two middle values, rounded down).
    pub median: u64,
    /// Smallest value.
    pub min: u64,
    /// Largest value.
    pub max: u64,
}

impl Stat {
    /// The stat of the observed values; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = u64>) -> Option<Self> {
        let mut it = values.into_iter();
        let first = it.next()?;
        let Some(second) = it.next() else {
            // one run: no allocation
            return Some(Self {
                runs: 1,
                median: first,
                min: first,
                max: first,
            });
        };
        let mut v: Vec<u64> = vec![first, second];
        v.extend(it);
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            let (lo, hi) = (v[n / 2 - 1], v[n / 2]);
            lo + (hi - lo) / 2
        };
        Some(Self {
            runs: n as u32,
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// Run-to-run spread: `max − min`.
    pub fn spread(&self) -> u64 {
        self.max - self.min
    }
}

/// What a difference between the sides means.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Verdict {
    /// Equal medians.
    Unchanged,
    /// The candidate's median is higher and the runs separate the sides (or the spread is
    /// unknown: one run on a side).
    Increased,
    /// The candidate's median is lower (same conditions).
    Decreased,
    /// The medians differ but the ranges of two or more runs per side overlap: run-to-run
    /// noise, not a change.
    WithinNoise,
    /// A side did not observe the figure.
    Unobserved,
    /// Not compared: a timing figure of runs whose timing may not be compared (see the
    /// refusals); each side's figures are kept.
    NotCompared,
}

impl Verdict {
    /// Increased or decreased.
    pub fn is_change(self) -> bool {
        matches!(self, Verdict::Increased | Verdict::Decreased)
    }
}

/// One figure on both sides and the change between them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Delta {
    /// Baseline runs; `None` when no baseline run observed it.
    pub baseline: Option<Stat>,
    /// Candidate runs.
    pub candidate: Option<Stat>,
    /// Candidate median − baseline median; absent when a side is missing or not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<i128>,
    /// `delta / baseline median`; absent when the baseline median is 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative: Option<f64>,
    /// What the difference means.
    pub verdict: Verdict,
}

impl Delta {
    /// Compares two sides' stats (see the module rules).
    pub fn new(baseline: Option<Stat>, candidate: Option<Stat>) -> Self {
        let (Some(b), Some(c)) = (baseline, candidate) else {
            return Self {
                baseline,
                candidate,
                delta: None,
                relative: None,
                verdict: Verdict::Unobserved,
            };
        };
        let delta = i128::from(c.median) - i128::from(b.median);
        let relative = (b.median > 0).then(|| delta as f64 / b.median as f64);
        let verdict = if delta == 0 {
            Verdict::Unchanged
        } else if b.runs >= 2 && c.runs >= 2 && b.min <= c.max && c.min <= b.max {
            Verdict::WithinNoise
        } else if delta > 0 {
            Verdict::Increased
        } else {
            Verdict::Decreased
        };
        Self {
            baseline,
            candidate,
            delta: Some(delta),
            relative,
            verdict,
        }
    }

    /// Compares the values of each side's runs.
    pub fn of(
        baseline: impl IntoIterator<Item = u64>,
        candidate: impl IntoIterator<Item = u64>,
    ) -> Self {
        Self::new(Stat::of(baseline), Stat::of(candidate))
    }

    /// The same figures, not compared (timing of runs that may not be compared).
    pub fn not_compared(self) -> Self {
        Self {
            delta: None,
            relative: None,
            verdict: Verdict::NotCompared,
            ..self
        }
    }

    /// `|delta|` when the verdict is a change, else 0.
    pub fn changed_by(&self) -> u128 {
        match self.delta {
            Some(d) if self.verdict.is_change() => d.unsigned_abs(),
            _ => 0,
        }
    }
}

trace_schema::wire_names!(Verdict);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ranges() {
        assert_eq!(Stat::of([]), None);
        let s = Stat::of([5, 1, 3]).unwrap();
        assert_eq!(
            (s.runs, s.median, s.min, s.max, s.spread()),
            (3, 3, 1, 5, 4)
        );
        assert_eq!(Stat::of([1, 4]).unwrap().median, 2);
        let big = Stat::of([u64::MAX, u64::MAX - 1]).unwrap();
        assert_eq!(big.median, u64::MAX - 1);
    }

    #[test]
    fn verdicts() {
        let d = Delta::of([100], [80]);
        assert_eq!((d.delta, d.verdict), (Some(-20), Verdict::Decreased));
        assert_eq!(d.relative, Some(-0.2));
        assert_eq!(Delta::of([7], [7]).verdict, Verdict::Unchanged);
        // overlapping ranges of several runs: noise
        let n = Delta::of([100, 110, 120], [105, 115, 125]);
        assert_eq!((n.delta, n.verdict), (Some(5), Verdict::WithinNoise));
        // separated ranges: a change
        let c = Delta::of([100, 101, 102], [90, 91, 92]);
        assert_eq!(c.verdict, Verdict::Decreased);
        assert_eq!(c.changed_by(), 10);
        assert_eq!(n.changed_by(), 0);
        let u = Delta::of([1], []);
        assert_eq!((u.delta, u.verdict), (None, Verdict::Unobserved));
        assert_eq!(Delta::of([0], [5]).relative, None);
        let extreme = Delta::of([0], [u64::MAX]);
        assert_eq!(extreme.delta, Some(i128::from(u64::MAX)));
        let nc = Delta::of([1], [2]).not_compared();
        assert_eq!((nc.delta, nc.verdict), (None, Verdict::NotCompared));
        assert_eq!(nc.baseline.unwrap().median, 1);
    }
}
