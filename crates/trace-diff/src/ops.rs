//! Operations aligned by role: which ops make a pass's time gap between two traces — above all
//! a PyTorch original against its Candle port, whose op names never match.
//!
//! Each side's ops come from [`trace_ops::SideOps`] (measured op spans of an import: exact
//! top-level times; or a Candle capture's sampled estimate, with its 95% interval). Within each
//! pass, every op takes its role from the [`RoleMap`]; a role's time on a side is the sum of its
//! ops' times (for estimates, the interval bounds are summed too: a conservative interval).
//! Roles are ranked by the size of their gap (candidate − baseline), each with its share of the
//! pass's gap (the difference of the pass times, [`crate::passes`]). Ops without a role are
//! listed per side, never dropped; the probe's own frames are listed as such.
//!
//! # When times are compared
//! The median run by wall time of each side is compared. Times are compared unless a rule that
//! bears on op time refuses: an invalid, incomplete or failed capture, no timing, timing modes, devices or
//! warm-up that differ (a side that does not say its warm-up refuses: unknown is not equal),
//! identity conditions that differ, host time on an accelerator, hosts (os, arch, CPUs, memory)
//! or thread counts that both sides state and that differ. Between two frameworks the capture
//! contracts always differ (PyTorch's trace has no gradient facts) and the passes' spans are
//! named differently: neither bears on op time, so neither refuses here (the whole-run timing of
//! [`crate::identity`] still refuses them). What neither side states (a thread count, the host)
//! is a note: not verified.

use serde::Serialize;
use trace_ops::{Framework, RoleMap, SideOp, SideOps, TimeSource};
use trace_schema::{Pass, TraceDocument};

use crate::identity::{IdentityDiff, RefusalCode};
use crate::passes::pass_time_ns;
use crate::Run;

/// The tag a PyTorch import carries under `source` (trace-import's `SOURCE_KINETO`).
const KINETO_SOURCE_PREFIX: &str = "pytorch-profiler";

/// Tag keys holding a run's thread count, per framework.
const THREAD_TAGS: &[&str] = &["torch.intra_op_threads", "candle.threads"];

/// One side of a role.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleSide {
    /// Its ops (names as the trace has them).
    pub ops: Vec<String>,
    /// Time, ns: a measured sum or an estimate.
    pub ns: Option<u64>,
    /// The estimate's interval (sampled side), ns.
    pub low_ns: Option<u64>,
    /// See [`Self::low_ns`].
    pub high_ns: Option<u64>,
    /// Top-level calls (measured side).
    pub calls: Option<u64>,
    /// Samples (sampled side).
    pub samples: Option<u64>,
    /// Alloc-clocked time (a Candle side with allocation sites), ns: the second time source.
    pub alloc_clocked_ns: Option<u64>,
    /// Bytes the role's ops allocated (compared whatever the timing), when the side says.
    pub allocated_bytes: Option<u64>,
}

/// One role in one pass on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleRow {
    /// The role's name.
    pub role: String,
    /// What the pairing leaves unequal, from the map.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The baseline's ops in the role (empty: none).
    pub baseline: RoleSide,
    /// The candidate's.
    pub candidate: RoleSide,
    /// Candidate − baseline, ns; `None` when times are not compared or a side has no time.
    pub gap_ns: Option<i128>,
    /// The gap's interval from the sides' intervals (exact sides contribute their value).
    pub gap_low_ns: Option<i128>,
    /// See [`Self::gap_low_ns`].
    pub gap_high_ns: Option<i128>,
    /// `gap_ns` / the pass's gap, when both are known and the pass's gap is not 0.
    pub share_of_pass_gap: Option<f64>,
}

/// One pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassOps {
    /// The pass (`None`: ops outside every pass).
    pub pass: Option<Pass>,
    /// The pass's host time on the baseline, ns.
    pub baseline_pass_ns: Option<u64>,
    /// On the candidate.
    pub candidate_pass_ns: Option<u64>,
    /// Candidate − baseline pass time, ns (when times are compared).
    pub pass_gap_ns: Option<i128>,
    /// Roles ranked by the size of their gap (then by name).
    pub roles: Vec<RoleRow>,
    /// Baseline ops in no role, longest first.
    pub baseline_unmatched: Vec<SideOp>,
    /// Candidate ops in no role.
    pub candidate_unmatched: Vec<SideOp>,
}

/// The op-by-op comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpsDiff {
    /// Whose op names the baseline has.
    pub baseline_framework: Framework,
    /// And the candidate.
    pub candidate_framework: Framework,
    /// Where the baseline's times come from.
    pub baseline_source: TimeSource,
    /// And the candidate's.
    pub candidate_source: TimeSource,
    /// Op times are compared (no refusal below).
    pub timing_comparable: bool,
    /// Why op times are not compared (trace text: escape before display).
    pub refusals: Vec<String>,
    /// What could not be verified, or what the comparison assumes.
    pub notes: Vec<String>,
    /// Per pass, in pass order (outside every pass last).
    pub passes: Vec<PassOps>,
}

/// The framework whose names a trace's ops have: PyTorch for an import of its profiler.
pub fn framework_of(doc: &TraceDocument) -> Framework {
    let imported = doc
        .meta
        .tags
        .get("source")
        .is_some_and(|s| s.starts_with(KINETO_SOURCE_PREFIX));
    if imported {
        Framework::Pytorch
    } else {
        Framework::Candle
    }
}

fn threads_of(doc: &TraceDocument) -> Option<&str> {
    let tags = &doc.meta.tags;
    THREAD_TAGS
        .iter()
        .find_map(|k| tags.get(*k).map(String::as_str))
}

/// Why op times of the two runs may not be compared, and what is not verified.
fn op_timing(
    identity: &IdentityDiff,
    b: &TraceDocument,
    c: &TraceDocument,
) -> (Vec<String>, Vec<String>) {
    let cross = framework_of(b) != framework_of(c);
    let mut refusals: Vec<String> = identity
        .refusals
        .iter()
        .filter(|r| {
            !(cross
                && matches!(
                    r.code,
                    RefusalCode::CaptureContractDiffers | RefusalCode::PassesDiffer
                ))
        })
        .map(|r| format!("{}: {}", r.code.as_str(), r.message))
        .collect();
    let mut notes = Vec::new();
    if cross {
        notes.push(
            "two frameworks: capture contracts and span names differ by construction and do not bear on op times".to_string(),
        );
    }
    let host = |d: &TraceDocument| d.meta.host.clone();
    match (host(b), host(c)) {
        (Some(hb), Some(hc)) => {
            let pairs = [
                ("os", hb.os.clone(), hc.os.clone()),
                ("arch", hb.arch.clone(), hc.arch.clone()),
                (
                    "CPUs",
                    hb.cpu_count.map(|n| n.to_string()),
                    hc.cpu_count.map(|n| n.to_string()),
                ),
                // the same machine reads its memory a few pages apart from run to run: within
                // 1% it is the same host, shown in binary units, not raw byte counts
                match (hb.memory_bytes, hc.memory_bytes) {
                    (Some(x), Some(y)) if x.abs_diff(y) <= x.max(y) / 100 => {
                        ("memory", Some(String::new()), Some(String::new()))
                    }
                    (x, y) => (
                        "memory",
                        x.map(trace_format::bytes),
                        y.map(trace_format::bytes),
                    ),
                },
            ];
            for (what, x, y) in pairs {
                match (x, y) {
                    (Some(x), Some(y)) if x != y => {
                        refusals.push(format!("host_differs: {what} baseline {x}, candidate {y}"))
                    }
                    (Some(_), Some(_)) => {}
                    _ => notes.push(format!("host {what} not stated by both: not verified")),
                }
            }
        }
        _ => notes
            .push("the host is not stated by both traces: same machine not verified".to_string()),
    }
    match (threads_of(b), threads_of(c)) {
        (Some(x), Some(y)) if x != y => refusals.push(format!(
            "threads_differ: baseline {x} thread(s), candidate {y}"
        )),
        (Some(_), Some(_)) => {}
        _ => notes.push("thread counts not stated by both: not verified".to_string()),
    }
    (refusals, notes)
}

fn side_of(ops: &[&SideOp]) -> RoleSide {
    let sum = |f: &dyn Fn(&SideOp) -> Option<u64>| -> Option<u64> {
        ops.iter()
            .try_fold(0u64, |a, o| Some(a.saturating_add(f(o)?)))
    };
    let ns = if ops.is_empty() { None } else { sum(&|o| o.ns) };
    let sampled = ops.iter().any(|o| o.samples.is_some());
    RoleSide {
        ops: ops.iter().map(|o| o.op.clone()).collect(),
        ns,
        low_ns: if sampled { sum(&|o| o.low_ns) } else { None },
        high_ns: if sampled { sum(&|o| o.high_ns) } else { None },
        calls: if ops.is_empty() {
            None
        } else {
            sum(&|o| o.calls)
        },
        samples: if sampled { sum(&|o| o.samples) } else { None },
        alloc_clocked_ns: if ops.is_empty() {
            None
        } else {
            sum(&|o| o.alloc_clocked_ns)
        },
        allocated_bytes: if ops.is_empty() {
            None
        } else {
            sum(&|o| o.allocated_bytes)
        },
    }
}

/// A run's op table from its analysis (the sampled profile and sites are not made again).
pub(crate) fn side_ops(run: &Run<'_>, framework: Framework) -> Option<SideOps> {
    SideOps::of_analysis(
        run.doc,
        framework,
        run.analysis.operations.as_ref().ok(),
        run.analysis.sites.as_ref(),
    )
}

/// Compares one run of each side op by op (the caller passes each side's median run); `None`
/// when a side has no op table (neither measured op spans nor samples).
pub fn compare_ops(
    baseline: &Run<'_>,
    candidate: &Run<'_>,
    identity: &IdentityDiff,
    map: &RoleMap,
) -> Option<OpsDiff> {
    let bf = framework_of(baseline.doc);
    let cf = framework_of(candidate.doc);
    let b = side_ops(baseline, bf)?;
    let c = side_ops(candidate, cf)?;
    let (refusals, notes) = op_timing(identity, baseline.doc, candidate.doc);
    let comparable = refusals.is_empty();

    let mut passes_seen: Vec<Option<Pass>> = b.ops.iter().chain(&c.ops).map(|o| o.pass).collect();
    passes_seen.sort_by_key(|p| p.map_or(u8::MAX, |p| p as u8));
    passes_seen.dedup();
    let mut passes = Vec::new();
    for pass in passes_seen {
        let bp = pass.and_then(|p| pass_time_ns(baseline.doc, p));
        let cp = pass.and_then(|p| pass_time_ns(candidate.doc, p));
        let pass_gap = match (comparable, bp, cp) {
            (true, Some(x), Some(y)) => Some(y as i128 - x as i128),
            _ => None,
        };
        // role index → (baseline ops, candidate ops)
        let mut roles: Vec<(usize, Vec<&SideOp>, Vec<&SideOp>)> = Vec::new();
        let mut unmatched = (Vec::new(), Vec::new());
        for (side, ops, framework) in [(0, &b.ops, bf), (1, &c.ops, cf)] {
            for op in ops.iter().filter(|o| o.pass == pass) {
                let role = (!op.probe)
                    .then(|| map.role_of(framework, pass, &op.op))
                    .flatten();
                match role {
                    Some(r) => {
                        let entry = match roles.iter().position(|x| x.0 == r) {
                            Some(i) => &mut roles[i],
                            None => {
                                roles.push((r, Vec::new(), Vec::new()));
                                roles.last_mut().expect("just pushed")
                            }
                        };
                        if side == 0 {
                            entry.1.push(op);
                        } else {
                            entry.2.push(op);
                        }
                    }
                    None if side == 0 => unmatched.0.push(op.clone()),
                    None => unmatched.1.push(op.clone()),
                }
            }
        }
        let mut rows: Vec<RoleRow> = roles
            .into_iter()
            .map(|(r, bo, co)| {
                let bs = side_of(&bo);
                let cs = side_of(&co);
                let (gap, low, high) = match (
                    comparable,
                    bs.ns.or(bo.is_empty().then_some(0)),
                    cs.ns.or(co.is_empty().then_some(0)),
                ) {
                    (true, Some(x), Some(y)) => {
                        let lo = |s: &RoleSide, v: u64| s.low_ns.unwrap_or(v) as i128;
                        let hi = |s: &RoleSide, v: u64| s.high_ns.unwrap_or(v) as i128;
                        (
                            Some(y as i128 - x as i128),
                            Some(lo(&cs, y) - hi(&bs, x)),
                            Some(hi(&cs, y) - lo(&bs, x)),
                        )
                    }
                    _ => (None, None, None),
                };
                let share = match (gap, pass_gap) {
                    (Some(g), Some(p)) if p != 0 => Some(g as f64 / p as f64),
                    _ => None,
                };
                RoleRow {
                    role: map.roles[r].role.clone(),
                    // a role's note says how the frameworks differ: for two runs of one it is noise
                    note: (bf != cf).then(|| map.roles[r].note.clone()).flatten(),
                    baseline: bs,
                    candidate: cs,
                    gap_ns: gap,
                    gap_low_ns: low,
                    gap_high_ns: high,
                    share_of_pass_gap: share,
                }
            })
            .collect();
        rows.sort_by(|x, y| {
            let mag = |r: &RoleRow| r.gap_ns.map_or(0, |g| g.unsigned_abs());
            mag(y).cmp(&mag(x)).then_with(|| x.role.cmp(&y.role))
        });
        let by_time = |v: &mut Vec<SideOp>| {
            v.sort_by(|x, y| y.ns.cmp(&x.ns).then_with(|| x.op.cmp(&y.op)));
        };
        by_time(&mut unmatched.0);
        by_time(&mut unmatched.1);
        passes.push(PassOps {
            pass,
            baseline_pass_ns: bp,
            candidate_pass_ns: cp,
            pass_gap_ns: pass_gap,
            roles: rows,
            baseline_unmatched: unmatched.0,
            candidate_unmatched: unmatched.1,
        });
    }
    Some(OpsDiff {
        baseline_framework: bf,
        candidate_framework: cf,
        baseline_source: b.source,
        candidate_source: c.source,
        timing_comparable: comparable,
        refusals,
        notes,
        passes,
    })
}
