//! The gradient comparison: parameters (by `root/key`) whose verdict changed — present →
//! missing, finite → non-finite, … — and norms whose candidate/baseline ratio lies beyond a
//! threshold; parameters found on one side only.
//!
//! A side's verdict of a parameter is the set of states its runs report (`not_reported` when a
//! gradient manifest declares it and no event came); it changed when the two sets differ. A
//! side's norm is the median of its runs' norms (present gradients only); the ratio is
//! candidate / baseline, and it is beyond the threshold `t` when `ratio > t` or `ratio < 1/t`.

use std::collections::BTreeMap;

use serde::Serialize;
use trace_graph::CapabilityKind;
use trace_schema::GradientState;

use crate::run::Run;

/// A parameter's state as compared: a [`GradientState`] or not reported.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum GradientVerdict {
    /// Finite, non-zero.
    Present,
    /// No gradient in the store.
    Missing,
    /// All zero.
    Zero,
    /// NaN or ±inf elements.
    NonFinite,
    /// Declared by the gradient manifest, no gradient event.
    NotReported,
}

impl From<Option<GradientState>> for GradientVerdict {
    fn from(s: Option<GradientState>) -> Self {
        match s {
            Some(GradientState::Present) => GradientVerdict::Present,
            Some(GradientState::Missing) => GradientVerdict::Missing,
            Some(GradientState::Zero) => GradientVerdict::Zero,
            Some(GradientState::NonFinite) => GradientVerdict::NonFinite,
            None => GradientVerdict::NotReported,
        }
    }
}

/// A parameter whose verdict changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerdictChange {
    /// `root/key`.
    pub parameter: String,
    /// States over the baseline runs (sorted, distinct).
    pub baseline: Vec<GradientVerdict>,
    /// States over the candidate runs.
    pub candidate: Vec<GradientVerdict>,
}

/// A parameter whose norm changed by more than the threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NormChange {
    /// `root/key`.
    pub parameter: String,
    /// Median baseline norm.
    pub baseline_norm: f64,
    /// Median candidate norm.
    pub candidate_norm: f64,
    /// candidate / baseline.
    pub ratio: f64,
}

/// The gradient comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GradientDiff {
    /// Parameters reported on both sides.
    pub compared: u64,
    /// Of those, same verdict and norm ratio within the threshold.
    pub unchanged: u64,
    /// GradientVerdict changes, in the baseline's parameter order.
    pub verdict_changes: Vec<VerdictChange>,
    /// Norm ratios beyond the threshold (same verdict), largest change first.
    pub norm_changes: Vec<NormChange>,
    /// The threshold used.
    pub norm_ratio_threshold: f64,
    /// The ratio farthest from 1 among parameters with a norm on both sides (`max |ln r|`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extreme_norm_ratio: Option<f64>,
    /// Parameters on the baseline only.
    pub baseline_only: Vec<String>,
    /// Parameters on the candidate only.
    pub candidate_only: Vec<String>,
}

/// Why gradients cannot be compared, or `None`.
pub(crate) fn unavailable(baseline: &[Run<'_>], candidate: &[Run<'_>]) -> Option<String> {
    for (side, runs) in [("baseline", baseline), ("candidate", candidate)] {
        for r in runs {
            let level = r.analysis.capabilities.level(CapabilityKind::Gradients);
            if r.analysis.gradients.parameters.is_empty() && !level.is_available() {
                return Some(format!("{side} {}: no gradient facts", r.label));
            }
        }
    }
    None
}

#[derive(Default)]
struct Side {
    verdicts: Vec<GradientVerdict>,
    norms: Vec<f64>,
}

fn collect(runs: &[Run<'_>]) -> (Vec<String>, BTreeMap<String, Side>) {
    let mut order = Vec::new();
    let mut by: BTreeMap<String, Side> = BTreeMap::new();
    for r in runs {
        for p in &r.analysis.gradients.parameters {
            let name = format!("{}/{}", p.root, p.key);
            let side = by.entry(name.clone()).or_insert_with(|| {
                order.push(name);
                Side::default()
            });
            let v = GradientVerdict::from(p.state);
            if !side.verdicts.contains(&v) {
                side.verdicts.push(v);
            }
            if let Some(n) = p.norm.filter(|n| n.is_finite() && *n > 0.0) {
                side.norms.push(n);
            }
        }
    }
    for side in by.values_mut() {
        side.verdicts.sort();
    }
    (order, by)
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Compares the parameters of both sides (callers checked [`unavailable`]).
pub(crate) fn compare_gradients(
    baseline: &[Run<'_>],
    candidate: &[Run<'_>],
    threshold: f64,
) -> GradientDiff {
    let (order_b, mut b) = collect(baseline);
    let (order_c, mut c) = collect(candidate);
    let mut out = GradientDiff {
        compared: 0,
        unchanged: 0,
        verdict_changes: Vec::new(),
        norm_changes: Vec::new(),
        norm_ratio_threshold: threshold,
        extreme_norm_ratio: None,
        baseline_only: Vec::new(),
        candidate_only: order_c
            .iter()
            .filter(|n| !b.contains_key(*n))
            .cloned()
            .collect(),
    };
    for name in order_b {
        let Some(cs) = c.get_mut(&name) else {
            out.baseline_only.push(name);
            continue;
        };
        let bs = b.get_mut(&name).expect("collected above");
        out.compared += 1;
        if bs.verdicts != cs.verdicts {
            out.verdict_changes.push(VerdictChange {
                parameter: name,
                baseline: bs.verdicts.clone(),
                candidate: cs.verdicts.clone(),
            });
            continue;
        }
        let (Some(nb), Some(nc)) = (median(&mut bs.norms), median(&mut cs.norms)) else {
            out.unchanged += 1;
            continue;
        };
        let ratio = nc / nb;
        if out
            .extreme_norm_ratio
            .is_none_or(|r: f64| ratio.ln().abs() > r.ln().abs())
        {
            out.extreme_norm_ratio = Some(ratio);
        }
        if ratio > threshold || ratio < 1.0 / threshold || !ratio.is_finite() {
            out.norm_changes.push(NormChange {
                parameter: name,
                baseline_norm: nb,
                candidate_norm: nc,
                ratio,
            });
        } else {
            out.unchanged += 1;
        }
    }
    out.norm_changes
        .sort_by(|x, y| y.ratio.ln().abs().total_cmp(&x.ratio.ln().abs()));
    out
}

trace_schema::wire_names!(GradientVerdict);
