//! Findings across the captures of one run (pure functions of the per-capture figures):
//!
//! | code | fires when |
//! |---|---|
//! | `memory_growth_across_captures` | live memory at the step's end (the process heap when counted, else the logical bytes live at the trace's end) rises across at least three captures once a one-time jump is set aside (the largest rise between captures when it is ≥ 3× the median size of the other changes: a cache filled once is not a trend): on the rest, a positive Theil–Sen slope, at least ¾ of the pairs of captures rising, and the slope over the captured span ≥ 64 KiB, ≥ 1% of the median and ≥ 6 robust standard deviations of one capture's figure (1.4826 × the median absolute deviation of the changes between consecutive captures less the slope's, / √2) |
//! | `step_time_change` | the measured step's wall time changes by ≥ 10% at one capture, the ranges before and after do not overlap and lie apart by at least half the wider of them (a clean level shift, not a noisy machine), with ≥ 3 captures each side (2 in a run of fewer than 6) |
//! | `op_share_change` | an op's share of the sampled step changes by ≥ 2 points at one capture, the 95% intervals of its pooled shares before and after do not overlap, and neither do its per-capture shares (≥ 2 captures each side); at most 4, the surest first (the gap between the intervals over their summed widths) |
//! | `peak_moved` | the pass that holds the logical peak differs from the previous capture's |
//!
//! Each names the captures before and after the change. A figure a capture lacks leaves that
//! capture out of the finding (unobserved is not 0).

use std::collections::BTreeMap;

use serde::Serialize;
use trace_format::{bytes, duration};
use trace_ops::Share;
use trace_schema::Pass;

/// Least change of live memory across the run that [`memory_growth`] reports, bytes.
pub const GROWTH_MIN_BYTES: u64 = 64 * 1024;
/// Captures each side of a step-time change when the run has at least twice as many (else 2).
pub const STEP_TIME_SIDE: usize = 3;
/// Least relative change of the step time [`step_time_change`] reports.
pub const STEP_TIME_MIN_RATIO: f64 = 0.10;
/// Least change of an op's share [`op_share_changes`] reports (2 points).
pub const OP_SHARE_MIN_CHANGE: f64 = 0.02;
/// Most `op_share_change` findings (largest changes first).
pub const OP_SHARE_MAX_FINDINGS: usize = 4;

/// A finding across captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFinding {
    /// `memory_growth_across_captures`, `step_time_change`, `op_share_change`, `peak_moved`.
    pub code: &'static str,
    /// `warning` or `info`.
    pub severity: &'static str,
    /// One sentence with the figures.
    pub summary: String,
    /// The captured steps before the change (the last few).
    pub before_steps: Vec<u64>,
    /// The captured steps from the change on (the first few).
    pub after_steps: Vec<u64>,
}

/// The captures on one side of a change named in a finding (at most this many).
const SIDE_STEPS: usize = 3;

fn sides(steps: &[u64], split: usize) -> (Vec<u64>, Vec<u64>) {
    let before = steps[split.saturating_sub(SIDE_STEPS)..split].to_vec();
    let after = steps[split..(split + SIDE_STEPS).min(steps.len())].to_vec();
    (before, after)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Theil–Sen slope of `(x, y)` points (the median of the pairwise slopes), per unit of `x`.
pub fn theil_sen(points: &[(u64, u64)]) -> Option<f64> {
    let mut slopes = Vec::new();
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 as f64 - a.1 as f64) / (b.0 as f64 - a.0 as f64));
            }
        }
    }
    (!slopes.is_empty()).then(|| median(&mut slopes))
}

/// Least growth over the captured span, in robust standard deviations of one capture's figure
/// (from the changes between consecutive captures), that [`memory_growth`] reports.
pub const GROWTH_MIN_SIGMAS: f64 = 6.0;

/// Least ratio of the largest rise between consecutive captures to the median size of the other
/// changes for [`memory_growth`] to take it for a one-time jump and set it aside.
pub const JUMP_MIN_RATIO: f64 = 3.0;

/// A one-time jump set aside: the index of the capture it reaches and its size in bytes.
type Jump = (usize, u64);

/// `points` with a one-time jump taken out: the largest rise between consecutive captures, when
/// it is at least [`JUMP_MIN_RATIO`] times the median size of the other changes, lowers every
/// capture from it on. One jump (a cache filled once, a buffer grown once) is a level shift,
/// not a trend; a steady leak's rises are alike and none is set aside. Returns the points and,
/// when a jump was set aside, its index and size.
fn without_jump(points: &[(u64, u64)]) -> (Vec<(u64, u64)>, Option<Jump>) {
    let changes: Vec<(usize, i128)> = points
        .windows(2)
        .enumerate()
        .map(|(i, w)| (i + 1, i128::from(w[1].1) - i128::from(w[0].1)))
        .collect();
    let Some(&(at, rise)) = changes
        .iter()
        .max_by_key(|&&(i, c)| (c, std::cmp::Reverse(i)))
    else {
        return (points.to_vec(), None);
    };
    let mut others: Vec<f64> = changes
        .iter()
        .filter(|&&(i, _)| i != at)
        .map(|&(_, c)| c.unsigned_abs() as f64)
        .collect();
    let typical = if others.is_empty() {
        0.0
    } else {
        median(&mut others)
    };
    if rise <= 0 || (rise as f64) < JUMP_MIN_RATIO * typical {
        return (points.to_vec(), None);
    }
    let rise = rise as u64;
    let adjusted = points
        .iter()
        .enumerate()
        .map(|(i, &(x, y))| (x, if i >= at { y - rise } else { y }))
        .collect();
    (adjusted, Some((at, rise)))
}

/// Robust standard deviation of one capture's figure: from the changes between consecutive
/// captures less what the slope explains (each change carries two captures' noise, hence
/// `/ √2`), 1.4826 × their median absolute deviation. A trend does not hide in it: the changes
/// of a steady rise are alike whatever their order.
fn noise_of_one_capture(points: &[(u64, u64)], slope: f64) -> f64 {
    let mut changes: Vec<f64> = points
        .windows(2)
        .map(|w| (w[1].1 as f64 - w[0].1 as f64) - slope * (w[1].0 as f64 - w[0].0 as f64))
        .collect();
    if changes.is_empty() {
        return 0.0;
    }
    let centre = median(&mut changes);
    let mut deviations: Vec<f64> = changes.iter().map(|c| (c - centre).abs()).collect();
    1.4826 * median(&mut deviations) / std::f64::consts::SQRT_2
}

/// `memory_growth_across_captures` over `(step, live bytes at the step's end)`, by step;
/// `what` names the figure (`process heap`, `logical live`). Robust to a one-time jump and to
/// noise: a one-time jump is set aside (the largest rise between captures when it dwarfs the
/// other changes: every capture from it on is lowered by it), and on what remains the Theil–Sen slope must be positive, at least ¾ of the
/// pairs of captures must rise, and the slope over the captured span must reach
/// [`GROWTH_MIN_BYTES`], 1% of the median and [`GROWTH_MIN_SIGMAS`] robust standard deviations
/// of one capture's figure.
pub fn memory_growth(points: &[(u64, u64)], what: &str) -> Option<RunFinding> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let (first, last) = (points[0], points[n - 1]);
    let (adjusted, jump) = without_jump(points);
    let slope = theil_sen(&adjusted)?;
    if slope <= 0.0 {
        return None;
    }
    let mut pairs = 0usize;
    let mut rising = 0usize;
    for (i, a) in adjusted.iter().enumerate() {
        for b in &adjusted[i + 1..] {
            pairs += 1;
            rising += usize::from(b.1 > a.1);
        }
    }
    if rising * 4 < pairs * 3 {
        return None;
    }
    let span = last.0.saturating_sub(first.0);
    let grown = slope * span as f64;
    let mut values: Vec<f64> = points.iter().map(|p| p.1 as f64).collect();
    let typical = median(&mut values);
    let spread = noise_of_one_capture(&adjusted, slope);
    if grown < GROWTH_MIN_BYTES as f64
        || grown < 0.01 * typical
        || grown < GROWTH_MIN_SIGMAS * spread
    {
        return None;
    }
    // where the growth starts: the first rise
    let start = points.windows(2).position(|w| w[1].1 > w[0].1)?;
    let steps: Vec<u64> = points.iter().map(|p| p.0).collect();
    let (before, after) = sides(&steps, start + 1);
    let per_1000 = (slope * 1000.0).round() as u64;
    let set_aside = jump.map_or(String::new(), |(at, rise)| {
        format!(
            " with a one-time jump of +{} after step {} set aside",
            bytes(rise),
            points[at - 1].0
        )
    });
    Some(RunFinding {
        code: "memory_growth_across_captures",
        severity: "warning",
        summary: format!(
            "{what} at the step's end grows across captures: about +{} per 1,000 steps (Theil–Sen slope over {n} captures{set_aside}; {rising} of {pairs} pairs of captures rise), the fitted line +{} over the {span} steps from step {} to step {} (measured {} → {}, {}), +{} over 10,000 more steps; it first rose after step {} — memory one step cannot show is kept between captures",
            bytes(per_1000),
            bytes(grown.round() as u64),
            first.0,
            last.0,
            bytes(first.1),
            bytes(last.1),
            signed_bytes(i128::from(last.1) - i128::from(first.1)),
            bytes(per_1000.saturating_mul(10)),
            points[start].0,
        ),
        before_steps: before,
        after_steps: after,
    })
}

/// A change of bytes with its sign (`+19.64 MiB`, `-512 B`, `+0 B`).
fn signed_bytes(delta: i128) -> String {
    let magnitude = u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX);
    format!("{}{}", if delta < 0 { "-" } else { "+" }, bytes(magnitude))
}

/// The split `i` (≥ 2 points each side) that maximises `score(before, after)`.
fn best_split<T>(v: &[T], score: impl Fn(&[T], &[T]) -> Option<f64>) -> Option<(usize, f64)> {
    (2..=v.len().saturating_sub(2))
        .filter_map(|i| score(&v[..i], &v[i..]).map(|s| (i, s)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// `step_time_change` over `(step, wall ns)`, by step: the split with the largest change among
/// the clean level shifts (see the module table).
pub fn step_time_change(points: &[(u64, u64)]) -> Option<RunFinding> {
    let med = |s: &[(u64, u64)]| median(&mut s.iter().map(|p| p.1 as f64).collect::<Vec<_>>());
    let range = |s: &[(u64, u64)]| {
        let min = s.iter().map(|p| p.1).min().unwrap_or(0);
        let max = s.iter().map(|p| p.1).max().unwrap_or(0);
        (min, max)
    };
    // the split with the largest change among the clean level shifts: enough captures a side,
    // ranges apart by at least half the wider range (a noisy machine makes no finding)
    let side = if points.len() >= 2 * STEP_TIME_SIDE {
        STEP_TIME_SIDE
    } else {
        2
    };
    let (split, _) = best_split(points, |b, a| {
        let (mb, ma) = (med(b), med(a));
        let ((bmin, bmax), (amin, amax)) = (range(b), range(a));
        let gap = if amin > bmax {
            amin - bmax
        } else if amax < bmin {
            bmin - amax
        } else {
            return None;
        };
        let wider = (bmax - bmin).max(amax - amin);
        (mb > 0.0 && b.len() >= side && a.len() >= side && gap as f64 >= 0.5 * wider as f64)
            .then(|| ((ma - mb) / mb).abs())
    })?;
    let (b, a) = points.split_at(split);
    let (mb, ma) = (med(b), med(a));
    if ((ma - mb) / mb).abs() < STEP_TIME_MIN_RATIO {
        return None;
    }
    let ((bmin, bmax), (amin, amax)) = (range(b), range(a));
    let steps: Vec<u64> = points.iter().map(|p| p.0).collect();
    let (before, after) = sides(&steps, split);
    let word = if ma > mb { "slower" } else { "faster" };
    Some(RunFinding {
        code: "step_time_change",
        severity: if ma > mb { "warning" } else { "info" },
        summary: format!(
            "the step got {word} from step {}: median {} ({}–{}, {} captures up to step {}) → {} ({}–{}, {} captures from step {}), {:+.1}%; the ranges do not overlap",
            a[0].0,
            duration(mb as u64),
            duration(bmin),
            duration(bmax),
            b.len(),
            b[b.len() - 1].0,
            duration(ma as u64),
            duration(amin),
            duration(amax),
            a.len(),
            a[0].0,
            (ma - mb) / mb * 100.0
        ),
        before_steps: before,
        after_steps: after,
    })
}

/// One op's samples in one capture: `(step, its samples, the thread's samples)`.
pub type OpPoint = (u64, u64, u64);

fn pooled(s: &[OpPoint]) -> Option<Share> {
    let k: u64 = s.iter().map(|p| p.1).sum();
    let n: u64 = s.iter().map(|p| p.2).sum();
    trace_ops::wilson(k, n, trace_ops::Z_95)
}

/// `op_share_change` for each op (`(op, pass)` → its points by step): the rises before the
/// falls (shares sum to one: where new time went is the cause a user looks for, the others'
/// falls its echo), each the surest first (the gap between the pooled 95% intervals over their
/// summed widths: an op that appears from nothing is surer than a large op that moves by more
/// among large noise), at most [`OP_SHARE_MAX_FINDINGS`].
pub fn op_share_changes(ops: &BTreeMap<(String, Option<Pass>), Vec<OpPoint>>) -> Vec<RunFinding> {
    let mut found: Vec<((bool, f64), RunFinding)> = ops
        .iter()
        .filter_map(|((op, pass), points)| {
            let (split, delta) = best_split(points, |b, a| {
                Some((pooled(a)?.share - pooled(b)?.share).abs())
            })?;
            if delta < OP_SHARE_MIN_CHANGE {
                return None;
            }
            let (b, a) = points.split_at(split);
            let (sb, sa) = (pooled(b)?, pooled(a)?);
            if !(sa.low > sb.high || sa.high < sb.low) {
                return None;
            }
            // and beyond the variation between captures: every share after the change on one
            // side of every share before it
            let share = |p: &OpPoint| p.1 as f64 / p.2.max(1) as f64;
            let range = |s: &[OpPoint]| {
                s.iter().map(share).fold((f64::MAX, f64::MIN), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                })
            };
            let ((blo, bhi), (alo, ahi)) = (range(b), range(a));
            if !(alo > bhi || ahi < blo) {
                return None;
            }
            let steps: Vec<u64> = points.iter().map(|p| p.0).collect();
            let (before, after) = sides(&steps, split);
            let pass = pass.map(|p| format!(" ({} pass)", <&'static str>::from(p)));
            let up = sa.share > sb.share;
            let gap = if up { sa.low - sb.high } else { sb.low - sa.high };
            let widths = (sa.high - sa.low) + (sb.high - sb.low);
            let sureness = if widths > 0.0 { gap / widths } else { f64::MAX };
            Some((
                (up, sureness),
                RunFinding {
                    code: "op_share_change",
                    severity: if up { "warning" } else { "info" },
                    summary: format!(
                        "{}{} takes {} of the sampled step from step {} (95% interval {}–{}, {} captures) against {} up to step {} ({}–{}, {} captures): {:+.1} points, beyond the intervals and the spread between captures",
                        trace_format::escape(op),
                        pass.unwrap_or_default(),
                        pct(sa.share),
                        a[0].0,
                        pct(sa.low),
                        pct(sa.high),
                        a.len(),
                        pct(sb.share),
                        b[b.len() - 1].0,
                        pct(sb.low),
                        pct(sb.high),
                        b.len(),
                        (sa.share - sb.share) * 100.0
                    ),
                    before_steps: before,
                    after_steps: after,
                },
            ))
        })
        .collect();
    found.sort_by(|a, b| b.0 .0.cmp(&a.0 .0).then(b.0 .1.total_cmp(&a.0 .1)));
    found
        .into_iter()
        .take(OP_SHARE_MAX_FINDINGS)
        .map(|(_, f)| f)
        .collect()
}

/// A share as a percentage with one decimal.
pub fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// `peak_moved` over `(step, pass holding the peak, peak bytes)`, by step: one finding per
/// change of pass between consecutive captures that have one.
pub fn peak_moved(points: &[(u64, Pass, u64)]) -> Vec<RunFinding> {
    let steps: Vec<u64> = points.iter().map(|p| p.0).collect();
    points
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0].1 != w[1].1)
        .map(|(i, w)| {
            let (before, after) = sides(&steps, i + 1);
            let name = |p: Pass| <&'static str>::from(p);
            RunFinding {
                code: "peak_moved",
                severity: "info",
                summary: format!(
                    "the logical peak moved from the {} pass ({} at step {}) to the {} pass ({} at step {})",
                    name(w[0].1),
                    bytes(w[0].2),
                    w[0].0,
                    name(w[1].1),
                    bytes(w[1].2),
                    w[1].0
                ),
                before_steps: before,
                after_steps: after,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_slow_leak_fires_and_flat_or_noisy_memory_does_not() {
        // +1 MiB per 200 steps over a 40 MiB heap
        let leak: Vec<(u64, u64)> = (1..=10).map(|i| (i * 200, 40 * MIB + i * MIB)).collect();
        let f = memory_growth(&leak, "process heap").expect("fires");
        assert_eq!(f.code, "memory_growth_across_captures");
        assert!(
            f.summary
                .contains("the fitted line +9.00 MiB over the 1800 steps from step 200 to step 2000 (measured 41.00 MiB → 50.00 MiB, +9.00 MiB)"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("45 of 45 pairs"), "{}", f.summary);
        assert!(!f.summary.contains("set aside"), "{}", f.summary);
        assert!(
            f.summary.contains("about +5.00 MiB per 1,000 steps"),
            "{}",
            f.summary
        );
        assert_eq!(f.before_steps, [200]);
        assert_eq!(f.after_steps, [400, 600, 800]);
        let flat: Vec<(u64, u64)> = (1..=10).map(|i| (i * 200, 40 * MIB)).collect();
        assert_eq!(memory_growth(&flat, "process heap"), None);
        // noise of ±64 KiB around a flat heap
        let noisy: Vec<(u64, u64)> = (1..=10)
            .map(|i| (i * 200, 40 * MIB + if i % 2 == 0 { 64 << 10 } else { 0 }))
            .collect();
        assert_eq!(memory_growth(&noisy, "process heap"), None);
        // two captures are not a trend
        assert_eq!(memory_growth(&leak[..2], "process heap"), None);
        // a one-time jump (a cache filled after the first capture), then flat with noise
        let jump: Vec<(u64, u64)> = (1..=6)
            .map(|i| {
                (
                    i * 2,
                    if i == 1 {
                        4 * MIB
                    } else {
                        150 * MIB + (i % 3) * MIB
                    },
                )
            })
            .collect();
        assert_eq!(memory_growth(&jump, "process heap"), None);
        // the same jump with 2 MiB kept per capture on top of ±1 MiB of noise
        let leaky: Vec<(u64, u64)> = (1..=6)
            .map(|i| {
                (
                    i * 2,
                    if i == 1 {
                        4 * MIB
                    } else {
                        150 * MIB + 2 * i * MIB + (i % 2) * MIB
                    },
                )
            })
            .collect();
        let f = memory_growth(&leaky, "process heap").expect("fires");
        assert!(
            f.summary
                .contains("a one-time jump of +150.00 MiB after step 2 set aside"),
            "{}",
            f.summary
        );
        // heaps of plain demo runs (every 2 steps, before the probe's symbol cache was left out
        // of the heap figure): the cache filled after the first capture, then noise of the
        // bundler beside the loop; one such run fired under the old rule
        for plain in [
            [4.38, 140.44, 141.11, 139.21, 141.03, 140.32],
            [4.6, 145.9, 146.4, 146.2, 147.3, 146.9],
            [4.18, 4.24, 5.39, 5.67, 5.8, 5.32],
        ] {
            let points: Vec<(u64, u64)> = plain
                .iter()
                .enumerate()
                .map(|(i, m)| ((i as u64 + 1) * 2, (m * MIB as f64) as u64))
                .collect();
            assert_eq!(memory_growth(&points, "process heap"), None, "{plain:?}");
        }
    }

    #[test]
    fn a_step_time_regression_fires_with_its_captures_and_noise_does_not() {
        let ms = 1_000_000u64;
        let times = [15, 16, 14, 15, 15, 22, 23, 21, 22, 24];
        let points: Vec<(u64, u64)> = times
            .iter()
            .enumerate()
            .map(|(i, t)| ((i as u64 + 1) * 200, t * ms))
            .collect();
        let f = step_time_change(&points).expect("fires");
        assert_eq!(f.before_steps, [600, 800, 1000]);
        assert_eq!(f.after_steps, [1200, 1400, 1600]);
        assert!(f.summary.contains("slower from step 1200"), "{}", f.summary);
        let noise = [15, 19, 14, 18, 15, 19, 14, 18, 16, 15];
        let points: Vec<(u64, u64)> = noise
            .iter()
            .enumerate()
            .map(|(i, t)| ((i as u64 + 1) * 200, t * ms))
            .collect();
        assert_eq!(step_time_change(&points), None);
        // a plain demo run on a loaded machine: a drift, not a level shift
        let drift = [40.8, 55.9, 53.0, 60.3, 74.0, 82.1];
        let points: Vec<(u64, u64)> = drift
            .iter()
            .enumerate()
            .map(|(i, t)| ((i as u64 + 1) * 2, (t * ms as f64) as u64))
            .collect();
        assert_eq!(step_time_change(&points), None);
    }

    #[test]
    fn an_op_share_change_beyond_the_intervals_fires() {
        let mut ops = BTreeMap::new();
        // exp: 2 of 150 samples, then 30 of 150, from step 1200
        let exp: Vec<OpPoint> = (1..=10)
            .map(|i| (i * 200, if i > 5 { 30 } else { 2 }, 150))
            .collect();
        // matmul: 40 of 150 throughout, ± a few samples
        let matmul: Vec<OpPoint> = (1..=10).map(|i| (i * 200, 38 + i % 5, 150)).collect();
        ops.insert(("exp".to_string(), Some(Pass::Forward)), exp);
        ops.insert(("matmul".to_string(), Some(Pass::Forward)), matmul);
        let found = op_share_changes(&ops);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0]
            .summary
            .starts_with("exp (forward pass) takes 20.0%"));
        assert_eq!(found[0].after_steps, [1200, 1400, 1600]);

        // the surest first: `exp` from nothing (0 → 5 of 100) outranks four large ops that
        // move by more (19 → 30 of 100, by chance of a loaded machine) and takes one of the
        // four places
        let mut ops = BTreeMap::new();
        let exp: Vec<OpPoint> = (1..=6)
            .map(|i| (i * 2, if i > 3 { 5 } else { 0 }, 100))
            .collect();
        ops.insert(("exp".to_string(), Some(Pass::Forward)), exp);
        for big in ["a", "b", "c", "d"] {
            let moved: Vec<OpPoint> = (1..=6)
                .map(|i| (i * 2, if i > 3 { 25 + i } else { 17 + i }, 100))
                .collect();
            ops.insert((big.to_string(), Some(Pass::Backward)), moved);
        }
        let found = op_share_changes(&ops);
        assert_eq!(found.len(), OP_SHARE_MAX_FINDINGS, "{found:?}");
        assert!(
            found[0].summary.starts_with("exp (forward pass)"),
            "{found:?}"
        );

        // the rises first: four large ops whose shares fall surely (by the slowdown's new time)
        // do not push out the op that rose
        let mut ops = BTreeMap::new();
        let exp: Vec<OpPoint> = (1..=6)
            .map(|i| (i * 2, if i > 3 { 12 } else { 4 }, 100))
            .collect();
        ops.insert(("exp".to_string(), Some(Pass::Forward)), exp);
        for big in ["a", "b", "c", "d"] {
            let fell: Vec<OpPoint> = (1..=6)
                .map(|i| (i * 2, if i > 3 { 5 } else { 30 }, 100))
                .collect();
            ops.insert((big.to_string(), Some(Pass::Backward)), fell);
        }
        let found = op_share_changes(&ops);
        assert_eq!(found.len(), OP_SHARE_MAX_FINDINGS, "{found:?}");
        assert!(
            found[0].summary.starts_with("exp (forward pass)"),
            "{found:?}"
        );
        assert_eq!(found[0].severity, "warning");
    }

    #[test]
    fn a_peak_in_another_pass_is_named() {
        let points = [
            (200, Pass::Optimizer, 5 * MIB),
            (400, Pass::Optimizer, 5 * MIB),
            (600, Pass::Backward, 6 * MIB),
        ];
        let f = peak_moved(&points);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].before_steps, [200, 400]);
        assert!(f[0].summary.contains("from the optimizer pass"));
        assert!(peak_moved(&points[..2]).is_empty());
    }
}
