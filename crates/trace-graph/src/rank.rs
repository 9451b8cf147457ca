//! Findings ranked by what acting on them changes: errors first, then by the share of the
//! run's peak (a finding's replayed what-if) or of the measured time (an estimated or
//! measured duration of the user's own work) that its advice would remove, then warnings
//! without a figure, then the descriptive rest. Coverage gaps are not ranked (a report states
//! coverage once, on its own line). The rule reads only a finding's severity and evidence:
//! a new finding kind ranks by the same figures.

use crate::findings::{Finding, FindingCode};
use crate::health::Severity;

/// What acting on a finding would change, as a share of the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Impact {
    /// The share of the run's peak the advice removes (a replayed what-if), in [0, 1].
    Peak(f64),
    /// The share of the measured time the finding's work takes, in [0, 1].
    Time(f64),
}

impl Impact {
    /// The share, whichever the plane.
    pub fn share(self) -> f64 {
        match self {
            Impact::Peak(s) | Impact::Time(s) => s,
        }
    }
}

/// The impact of acting on `f`, when its evidence has one: its what-if's saving on the run's
/// peak; or, for a warning or error about time, its duration's share of the measured region.
/// Descriptive findings (the peak, the largest self time) and the probe's own cost (a run
/// without the probe does not pay it) have none.
pub fn impact(f: &Finding) -> Option<Impact> {
    if let Some(w) = &f.evidence.what_if {
        return Some(Impact::Peak(w.saving_share()));
    }
    if f.severity == Severity::Info {
        return None;
    }
    if f.evidence.operation_kind == Some(trace_ops::OpKind::Probe) {
        return None;
    }
    let (d, of) = (f.evidence.duration_ns?, f.evidence.of_duration_ns?);
    (of > 0).then(|| Impact::Time(d as f64 / of as f64))
}

/// Indices of `findings` in rank order (coverage gaps left out); stable for equal ranks.
pub fn ranked(findings: &[Finding]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..findings.len())
        .filter(|&i| findings[i].code != FindingCode::CoverageGap)
        .collect();
    let class = |f: &Finding| -> u8 {
        match (f.severity, impact(f)) {
            (Severity::Error, _) => 0,
            (_, Some(i)) if i.share() > 0.0 => 1,
            (Severity::Warning, None) => 2,
            _ => 3,
        }
    };
    order.sort_by(|&a, &b| {
        let (fa, fb) = (&findings[a], &findings[b]);
        class(fa).cmp(&class(fb)).then_with(|| {
            let s = |f: &Finding| impact(f).map_or(0.0, Impact::share);
            s(fb).total_cmp(&s(fa))
        })
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Evidence;

    fn finding(code: FindingCode, severity: Severity, evidence: Evidence) -> Finding {
        Finding {
            code,
            severity,
            summary: String::new(),
            evidence,
            requires: Vec::new(),
        }
    }

    #[test]
    fn errors_then_the_largest_saving_then_warnings_then_the_rest() {
        let time = |d| Evidence {
            duration_ns: Some(d),
            of_duration_ns: Some(100),
            ..Evidence::default()
        };
        let findings = vec![
            finding(FindingCode::LargestHostSelfTime, Severity::Info, time(90)),
            finding(FindingCode::FileIoInOperation, Severity::Warning, time(4)),
            finding(
                FindingCode::CoverageGap,
                Severity::Warning,
                Evidence::default(),
            ),
            finding(
                FindingCode::StoragesRetainedAtEnd,
                Severity::Warning,
                Evidence::default(),
            ),
            finding(
                FindingCode::LargeOperationShare,
                Severity::Warning,
                time(20),
            ),
            finding(
                FindingCode::ParametersWithoutGradient,
                Severity::Error,
                Evidence::default(),
            ),
        ];
        // the descriptive self time (info) ranks last despite its 90%; the gap is left out
        assert_eq!(ranked(&findings), [5, 4, 1, 3, 0]);
        assert_eq!(impact(&findings[0]), None);
        assert_eq!(impact(&findings[1]), Some(Impact::Time(0.04)));
    }
}
