//! Which bundles a run directory keeps ([`plan`]): the last K captures, and beyond them the ones
//! that mattered — the highest logical peak, the slowest step, the first capture of the latest
//! growth of live memory at the step's end. A pure function of the capture records.

use std::collections::BTreeMap;

use super::record::{CaptureRecord, CaptureState};

/// Why a bundle stays: one of the reasons below.
pub const KEPT_LAST: &str = "one of the last captures";
/// The capture with the highest logical peak so far.
pub const KEPT_PEAK: &str = "highest peak";
/// The capture with the longest measured step so far.
pub const KEPT_SLOWEST: &str = "slowest step";
/// The first capture of the latest run of captures whose live memory at the step's end grew.
pub const KEPT_GROWTH: &str = "first of a growth";

/// The plan: for each capture that stays, why (steps sorted); the captures to drop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Step → the reasons it stays.
    pub keep: BTreeMap<u64, Vec<&'static str>>,
    /// Steps whose bundles go.
    pub drop: Vec<u64>,
}

/// The first capture of the latest growth: the start of the trailing run of captures whose
/// [`CaptureRecord::live_end_bytes`] strictly increases (at least one increase), among the
/// captures that have the figure, by step.
pub fn growth_start(records: &[CaptureRecord]) -> Option<u64> {
    let series: Vec<(u64, u64)> = records
        .iter()
        .filter_map(|r| r.live_end_bytes().map(|v| (r.step, v)))
        .collect();
    let last = series.len().checked_sub(1)?;
    let mut start = last;
    while start > 0 && series[start - 1].1 < series[start].1 {
        start -= 1;
    }
    (start < last).then(|| series[start].0)
}

/// What to keep of `records` (by step; only [`CaptureState::Kept`] ones have a bundle) with
/// `keep_last` recent bundles (at least 1).
pub fn plan(records: &[CaptureRecord], keep_last: usize) -> Plan {
    let mut kept: Vec<&CaptureRecord> = records
        .iter()
        .filter(|r| r.state == CaptureState::Kept)
        .collect();
    kept.sort_by_key(|r| r.step);
    let mut plan = Plan::default();
    let mut why = |step: u64, reason: &'static str| {
        plan.keep.entry(step).or_default().push(reason);
    };
    for r in kept.iter().rev().take(keep_last.max(1)) {
        why(r.step, KEPT_LAST);
    }
    // the highest and the slowest: the earliest of equals
    if let Some(r) = kept
        .iter()
        .filter(|r| r.logical_peak_bytes.is_some())
        .max_by_key(|r| (r.logical_peak_bytes, std::cmp::Reverse(r.step)))
    {
        why(r.step, KEPT_PEAK);
    }
    if let Some(r) = kept
        .iter()
        .filter(|r| r.wall_time_ns.is_some())
        .max_by_key(|r| (r.wall_time_ns, std::cmp::Reverse(r.step)))
    {
        why(r.step, KEPT_SLOWEST);
    }
    if let Some(step) = growth_start(records) {
        if kept.iter().any(|r| r.step == step) {
            why(step, KEPT_GROWTH);
        }
    }
    plan.drop = kept
        .iter()
        .map(|r| r.step)
        .filter(|s| !plan.keep.contains_key(s))
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(step: u64, peak: u64, wall: u64, live: u64) -> CaptureRecord {
        CaptureRecord {
            logical_peak_bytes: Some(peak),
            wall_time_ns: Some(wall),
            heap_end_bytes: Some(live),
            ..CaptureRecord::new(step, CaptureState::Kept)
        }
    }

    #[test]
    fn keeps_the_last_and_the_ones_that_mattered() {
        // step 2 has the highest peak, step 4 is the slowest, live memory grows from step 6
        let records = vec![
            rec(1, 10, 5, 100),
            rec(2, 50, 5, 100),
            rec(3, 10, 5, 90),
            rec(4, 10, 9, 90),
            rec(5, 10, 5, 80),
            rec(6, 10, 5, 80),
            rec(7, 10, 5, 85),
            rec(8, 10, 5, 95),
        ];
        let p = plan(&records, 2);
        assert_eq!(p.keep[&2], [KEPT_PEAK]);
        assert_eq!(p.keep[&4], [KEPT_SLOWEST]);
        assert_eq!(p.keep[&6], [KEPT_GROWTH]);
        assert_eq!(p.keep[&8], [KEPT_LAST]);
        assert_eq!(p.keep[&7], [KEPT_LAST]);
        assert_eq!(p.drop, [1, 3, 5]);
        assert_eq!(growth_start(&records), Some(6));
    }

    #[test]
    fn flat_memory_pins_no_growth_and_dropped_captures_stay_dropped() {
        let mut records: Vec<_> = (1..=5).map(|s| rec(s, 10, 5, 100)).collect();
        assert_eq!(growth_start(&records), None);
        records[0].state = CaptureState::Dropped;
        let p = plan(&records, 1);
        // equal peaks and walls: the earliest kept one stands for them
        assert_eq!(p.keep[&2], [KEPT_PEAK, KEPT_SLOWEST]);
        assert_eq!(p.keep[&5], [KEPT_LAST]);
        assert_eq!(p.drop, [3, 4]);
        assert!(!p.drop.contains(&1));
    }
}
