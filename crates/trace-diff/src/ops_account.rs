//! What a pass's time is made of on one side of the op-by-op comparison: its roles, the ops no
//! role names, the time outside any op and the probe's own cost — summing to the pass time.
//!
//! A sampled side's op times are estimated **within their pass**: an op's time is its share
//! of the pass's samples (Wilson 95% interval, [`trace_ops::Share`]) × the pass's host time.
//! The profile's own estimate (share of the whole region × the region) is biased per pass when
//! the sampler lost ticks unevenly between passes; within the pass the parts cannot exceed
//! the whole. A measured side's ops are exact; the time of the pass no top-level op covers is
//! the time outside any op.

use serde::Serialize;
use trace_ops::{Share, SideOp};

/// Fewest samples a sampled side of a row needs for the row to be ranked; below it the row
/// reads "too few samples (n)".
pub const MIN_ROW_SAMPLES: u64 = 20;

/// One side of one pass, accounted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PassAccount {
    /// The pass's host time, ns.
    pub pass_ns: u64,
    /// Time of the ops with a role, ns.
    pub roles_ns: u64,
    /// Time of the ops no role names, ns.
    pub unmatched_ns: u64,
    /// Time outside any op, ns: a sampled side's stacks without an op frame; a measured side's
    /// pass time no top-level op covers.
    pub outside_ops_ns: u64,
    /// The probe's own cost (its frames' samples), ns; 0 on a measured side.
    pub probe_ns: u64,
    /// Samples in the pass (sampled side).
    pub samples: Option<u64>,
    /// The probe's samples in the pass (sampled side).
    pub probe_samples: Option<u64>,
    /// A measured side whose top-level ops add up to more than the pass (ops on several
    /// threads at once): by how much, ns. The parts are then not a partition of the pass.
    pub ops_exceed_pass_ns: Option<u64>,
}

impl PassAccount {
    /// The pass's time without the probe's cost: the user's work, ns.
    pub fn user_ns(&self) -> u64 {
        self.pass_ns.saturating_sub(self.probe_ns)
    }
}

/// `ops` (one side's ops of one pass) with a sampled side's times estimated within the pass
/// (`pass_ns`); a measured side, or an unknown pass time, keeps its times. The estimates are
/// the pass time apportioned by samples (largest remainders: the estimates of all the pass's
/// sampled ops add up to the pass exactly, none is off its share by more than 1 ns), each
/// with its share's 95% interval.
pub(crate) fn within_pass(ops: &[&SideOp], pass_ns: Option<u64>) -> Vec<SideOp> {
    let n: u64 = ops.iter().filter_map(|o| o.samples).sum();
    let mut out: Vec<SideOp> = ops
        .iter()
        .map(|&o| {
            let mut o = o.clone();
            if let (Some(k), Some(d)) = (o.samples, pass_ns) {
                if let Some(share) = Share::of(k, n) {
                    let (est, low, high) = share.of_duration(d);
                    o.ns = Some(est);
                    o.low_ns = Some(low);
                    o.high_ns = Some(high);
                }
            }
            o
        })
        .collect();
    if let (Some(d), true) = (pass_ns, n > 0) {
        apportion(&mut out, d, n);
    }
    out
}

/// Sets each sampled op's estimate to its share of `d` rounded down, then gives the ns left
/// over one each to the largest remainders (ties: the earlier op), so the estimates add up to
/// `d`; each stays inside its interval's bounds.
fn apportion(ops: &mut [SideOp], d: u64, n: u64) {
    let mut rems: Vec<(u128, usize)> = Vec::new();
    let mut given: u64 = 0;
    for (i, o) in ops.iter_mut().enumerate() {
        let Some(k) = o.samples else { continue };
        let num = u128::from(d) * u128::from(k);
        let floor = u64::try_from(num / u128::from(n)).unwrap_or(u64::MAX);
        o.ns = Some(floor);
        given = given.saturating_add(floor);
        rems.push((num % u128::from(n), i));
    }
    rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = d.saturating_sub(given);
    for &(_, i) in rems
        .iter()
        .take(usize::try_from(left).unwrap_or(usize::MAX))
    {
        let o = &mut ops[i];
        o.ns = o.ns.map(|v| v.saturating_add(1));
        if let (Some(v), Some(h)) = (o.ns, o.high_ns) {
            o.high_ns = Some(h.max(v));
        }
    }
    for o in ops.iter_mut() {
        if let (Some(v), Some(l)) = (o.ns, o.low_ns) {
            o.low_ns = Some(l.min(v));
        }
    }
}

/// The account of one side's pass: `ops` are its ops (times within the pass), `has_role` says
/// which have a role; `None` without a pass time.
pub(crate) fn account(
    ops: &[SideOp],
    has_role: impl Fn(&SideOp) -> bool,
    pass_ns: Option<u64>,
) -> Option<PassAccount> {
    let pass_ns = pass_ns?;
    let sum = |keep: &dyn Fn(&SideOp) -> bool| -> u64 {
        ops.iter()
            .filter(|o| keep(o))
            .filter_map(|o| o.ns)
            .fold(0u64, u64::saturating_add)
    };
    let roles_ns = sum(&|o| !o.probe && !o.outside_op && has_role(o));
    let unmatched_ns = sum(&|o| !o.probe && !o.outside_op && !has_role(o));
    let probe_ns = sum(&|o| o.probe);
    let sampled = ops.iter().any(|o| o.samples.is_some());
    let ops_ns = roles_ns
        .saturating_add(unmatched_ns)
        .saturating_add(probe_ns);
    // sampled: the rest is the stacks without an op (their estimates, up to rounding);
    // measured: the pass time no top-level op covers
    let outside_ops_ns = pass_ns.saturating_sub(ops_ns);
    let exceed = ops_ns.saturating_sub(pass_ns);
    Some(PassAccount {
        pass_ns,
        roles_ns,
        unmatched_ns,
        outside_ops_ns,
        probe_ns,
        samples: sampled.then(|| ops.iter().filter_map(|o| o.samples).sum()),
        probe_samples: sampled.then(|| {
            ops.iter()
                .filter(|o| o.probe)
                .filter_map(|o| o.samples)
                .sum()
        }),
        ops_exceed_pass_ns: (exceed > 0).then_some(exceed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, samples: Option<u64>, ns: Option<u64>) -> SideOp {
        SideOp {
            op: name.to_string(),
            pass: None,
            ns,
            low_ns: None,
            high_ns: None,
            calls: None,
            samples,
            alloc_clocked_ns: None,
            allocated_bytes: None,
            probe: name == trace_ops::PROBE_OP,
            outside_op: name == "step",
        }
    }

    #[test]
    fn a_sampled_pass_is_split_by_its_own_samples_and_adds_up() {
        // 12.84 ms of estimates from the whole region against a 6.79 ms pass: within the pass
        // the parts are the pass
        let ops = [
            op("mul", Some(30), Some(8_000_000)),
            op("sqrt", Some(10), Some(2_840_000)),
            op("weird", Some(5), Some(1_000_000)),
            op("step", Some(3), Some(600_000)),
            op(trace_ops::PROBE_OP, Some(2), Some(400_000)),
        ];
        let refs: Vec<&SideOp> = ops.iter().collect();
        let within = within_pass(&refs, Some(6_790_000));
        assert_eq!(within[0].ns, Some(6_790_000 * 30 / 50));
        assert!(within[0].low_ns < within[0].ns && within[0].ns < within[0].high_ns);
        let a = account(&within, |o| o.op != "weird", Some(6_790_000)).unwrap();
        assert_eq!(
            a.roles_ns + a.unmatched_ns + a.outside_ops_ns + a.probe_ns,
            a.pass_ns
        );
        assert_eq!(a.unmatched_ns, 6_790_000 * 5 / 50);
        assert_eq!(a.probe_ns, 6_790_000 * 2 / 50);
        assert!(a.roles_ns <= a.pass_ns);
        assert_eq!((a.samples, a.probe_samples), (Some(50), Some(2)));
        assert_eq!(a.user_ns(), 6_790_000 - a.probe_ns);
        assert_eq!(a.ops_exceed_pass_ns, None);
    }

    #[test]
    fn estimates_that_round_up_still_add_up_to_the_pass() {
        // 3 × 1/3 of 10 ns rounds to 3 + 3 + 3 (or 4 + 4 + 4 half-up): apportioned, 4 + 3 + 3
        let ops = [
            op("a", Some(1), None),
            op("b", Some(1), None),
            op("c", Some(1), None),
        ];
        let refs: Vec<&SideOp> = ops.iter().collect();
        let within = within_pass(&refs, Some(10));
        let ns: Vec<u64> = within.iter().map(|o| o.ns.unwrap()).collect();
        assert_eq!(ns, [4, 3, 3]);
        for o in &within {
            assert!(o.low_ns <= o.ns && o.ns <= o.high_ns, "{o:?}");
        }
        // and a pass of many ops with awkward counts adds up exactly
        let many: Vec<SideOp> = (1..=17u64)
            .map(|k| op(&format!("op{k}"), Some(k * 7 % 13 + 1), None))
            .collect();
        let refs: Vec<&SideOp> = many.iter().collect();
        let within = within_pass(&refs, Some(173_884_561));
        let sum: u64 = within.iter().map(|o| o.ns.unwrap()).sum();
        assert_eq!(sum, 173_884_561);
        let a = account(&within, |o| o.op != "op3", Some(173_884_561)).unwrap();
        assert_eq!(a.roles_ns + a.unmatched_ns + a.outside_ops_ns, a.pass_ns);
        assert_eq!(a.ops_exceed_pass_ns, None);
    }

    #[test]
    fn a_measured_pass_keeps_its_times_and_says_when_ops_exceed_it() {
        let ops = [
            op("aten::mm", None, Some(4_000)),
            op("aten::x", None, Some(1_000)),
        ];
        let refs: Vec<&SideOp> = ops.iter().collect();
        let within = within_pass(&refs, Some(10_000));
        assert_eq!(within[0].ns, Some(4_000));
        let a = account(&within, |o| o.op == "aten::mm", Some(10_000)).unwrap();
        assert_eq!(
            (a.roles_ns, a.unmatched_ns, a.outside_ops_ns),
            (4_000, 1_000, 5_000)
        );
        assert_eq!(a.samples, None);
        let a = account(&within, |_| true, Some(3_000)).unwrap();
        assert_eq!(a.ops_exceed_pass_ns, Some(2_000));
        assert_eq!(a.outside_ops_ns, 0);
        assert!(account(&within, |_| true, None).is_none());
    }
}
