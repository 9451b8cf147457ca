//! Findings compared: which appeared, which disappeared, which changed with their figures
//! (bytes for memory findings, durations for time findings, the holders of retained
//! activations). Findings are matched by code, device and pass, in each side's median run by
//! wall time (the analyzer's findings are per run; coverage gaps are not findings a diff
//! compares).

use serde::Serialize;
use trace_graph::{Finding, FindingCode, Holder};
use trace_schema::Pass;

/// How a finding changed between the sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FindingChange {
    /// Only the candidate has it.
    Appeared,
    /// Only the baseline has it.
    Disappeared,
    /// Both have it with another figure or holder.
    Changed,
    /// Both have it with the same figure.
    Unchanged,
}

/// One side's figure of a finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingSide {
    /// Its severity.
    pub severity: trace_graph::Severity,
    /// Its bytes (memory findings), when it has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Its duration, ns (time findings), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// Who holds what it is about (retained activations), largest holding first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_by: Vec<Holder>,
    /// The run's peak its advice would leave (a replayed what-if), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if_run_peak_bytes: Option<u64>,
    /// Its summary.
    pub summary: String,
}

impl FindingSide {
    fn of(f: &Finding) -> Self {
        let mut held: Vec<&trace_graph::Holding> = f.evidence.held_by.iter().collect();
        held.sort_by_key(|h| std::cmp::Reverse(h.bytes));
        Self {
            severity: f.severity,
            bytes: f.evidence.bytes,
            duration_ns: f.evidence.duration_ns,
            held_by: held.iter().map(|h| h.holder).collect(),
            what_if_run_peak_bytes: f.evidence.what_if.as_ref().map(|w| w.run_peak_bytes),
            summary: f.summary.clone(),
        }
    }

    fn same(&self, other: &Self) -> bool {
        self.bytes == other.bytes
            && self.duration_ns == other.duration_ns
            && self.held_by == other.held_by
    }
}

/// A finding on either side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingDelta {
    /// Its code.
    pub code: FindingCode,
    /// The device it is about, when per device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The pass it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Appeared, disappeared, changed or unchanged.
    pub change: FindingChange,
    /// The baseline's figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<FindingSide>,
    /// The candidate's figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate: Option<FindingSide>,
}

impl FindingDelta {
    /// The byte change (candidate − baseline), when both sides have bytes.
    pub fn bytes_delta(&self) -> Option<i128> {
        let b = self.baseline.as_ref()?.bytes?;
        let c = self.candidate.as_ref()?.bytes?;
        Some(c as i128 - b as i128)
    }
}

fn key(f: &Finding) -> (FindingCode, Option<&str>, Option<&str>) {
    // operation findings are one per op: the op is part of the key; the pass is not (a peak
    // that moved to another pass is the same finding, changed)
    (
        f.code,
        f.evidence.device.as_deref(),
        f.evidence.operation.as_deref(),
    )
}

/// Compares the findings of two runs: memory findings first by the size of their byte change,
/// then the rest — changed and unchanged in the baseline's order, then disappeared, then
/// appeared; coverage gaps left out.
pub fn compare_findings(baseline: &[Finding], candidate: &[Finding]) -> Vec<FindingDelta> {
    let keep = |f: &&Finding| f.code != FindingCode::CoverageGap;
    let base: Vec<&Finding> = baseline.iter().filter(keep).collect();
    let cand: Vec<&Finding> = candidate.iter().filter(keep).collect();
    let mut used = vec![false; cand.len()];
    let mut both = Vec::new();
    let mut gone = Vec::new();
    for b in &base {
        let found = cand
            .iter()
            .enumerate()
            .find(|(i, c)| !used[*i] && key(c) == key(b));
        let delta = |change, candidate: Option<FindingSide>| FindingDelta {
            code: b.code,
            device: b.evidence.device.clone(),
            pass: b.evidence.pass,
            change,
            baseline: Some(FindingSide::of(b)),
            candidate,
        };
        match found {
            Some((i, c)) => {
                used[i] = true;
                let (bs, cs) = (FindingSide::of(b), FindingSide::of(c));
                let change = if bs.same(&cs) {
                    FindingChange::Unchanged
                } else {
                    FindingChange::Changed
                };
                both.push(delta(change, Some(cs)));
            }
            None => gone.push(delta(FindingChange::Disappeared, None)),
        }
    }
    let new = cand
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(c, _)| FindingDelta {
            code: c.code,
            device: c.evidence.device.clone(),
            pass: c.evidence.pass,
            change: FindingChange::Appeared,
            baseline: None,
            candidate: Some(FindingSide::of(c)),
        });
    let mut all: Vec<FindingDelta> = both.into_iter().chain(gone).chain(new).collect();
    // stable: the largest byte change first; findings without bytes keep their order after
    all.sort_by_key(|d| {
        let side_bytes = d
            .baseline
            .as_ref()
            .and_then(|s| s.bytes)
            .or(d.candidate.as_ref().and_then(|s| s.bytes));
        match (d.bytes_delta(), side_bytes) {
            (Some(x), _) => (0u8, std::cmp::Reverse(x.unsigned_abs())),
            (None, Some(b)) => (0u8, std::cmp::Reverse(u128::from(b))),
            (None, None) => (1u8, std::cmp::Reverse(0)),
        }
    });
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_graph::{Evidence, Severity};

    fn f(code: FindingCode, bytes: Option<u64>) -> Finding {
        Finding {
            code,
            severity: Severity::Warning,
            summary: String::new(),
            evidence: Evidence {
                bytes,
                ..Evidence::default()
            },
            requires: Vec::new(),
        }
    }

    #[test]
    fn appeared_disappeared_changed_and_unchanged() {
        let base = [
            f(FindingCode::ActivationsRetainedIntoOptimizer, Some(100)),
            f(FindingCode::MemoryPeak, Some(500)),
            f(FindingCode::OptimizerTemporaries, Some(7)),
            f(FindingCode::CoverageGap, None),
        ];
        let cand = [
            f(FindingCode::MemoryPeak, Some(500)),
            f(FindingCode::ActivationsRetainedIntoOptimizer, Some(60)),
            f(FindingCode::StoragesRetainedAtEnd, Some(3)),
        ];
        let d = compare_findings(&base, &cand);
        let changes: Vec<(FindingCode, FindingChange)> =
            d.iter().map(|x| (x.code, x.change)).collect();
        assert_eq!(
            changes,
            [
                (
                    FindingCode::ActivationsRetainedIntoOptimizer,
                    FindingChange::Changed
                ),
                (
                    FindingCode::OptimizerTemporaries,
                    FindingChange::Disappeared
                ),
                (FindingCode::StoragesRetainedAtEnd, FindingChange::Appeared),
                (FindingCode::MemoryPeak, FindingChange::Unchanged),
            ]
        );
        assert_eq!(d[0].bytes_delta(), Some(-40));
    }
}
