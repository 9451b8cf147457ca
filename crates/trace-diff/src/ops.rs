//! Operations aligned by role: which ops make a pass's time gap between two traces — above all
//! a PyTorch original against its Candle port, whose op names never match.
//!
//! Each side's ops come from [`trace_ops::SideOps`] (measured op spans of an import: exact
//! top-level times; or a Candle capture's sampled estimate, with its 95% interval). Within each
//! pass, every op takes its role from the [`RoleMap`]; a role's time on a side is the sum of its
//! ops' times (for estimates, the interval bounds are summed too: a conservative interval).
//! Within each pass a sampled side's times are estimated from the pass's own samples
//! ([`crate::ops_account`]): per pass and side, roles + ops without a role + time outside any
//! op + the probe's own cost = the pass time ([`PassAccount`]), and no role exceeds its pass.
//! Rows are ranked by the size of their gap (candidate − baseline): the roles, **each op
//! without a role as a row of its own** (its time against nothing on the other side), and the
//! time outside any op; each with its share of the pass's gap without the probe's cost (the
//! user's work). A row whose sampled side has fewer than [`MIN_ROW_SAMPLES`] samples is not
//! ranked (`too_few_samples`): it follows the ranked rows. Ops without a role are also listed
//! per side; the probe's own frames are one row per pass, outside the ranking.
//!
//! # When times are compared
//! The median run by wall time of each side is compared. Times are compared unless a rule that
//! bears on op time refuses: an invalid, incomplete or failed capture, no timing, timing modes, devices or
//! warm-up that differ (a side that does not say its warm-up is a note: not verified),
//! identity conditions that differ, host time on an accelerator, hosts (os, arch, CPUs, memory)
//! or thread counts that both sides state and that differ. Between two frameworks the capture
//! contracts always differ (PyTorch's trace has no gradient facts) and the passes' spans are
//! named differently: neither bears on op time, so neither refuses here (the whole-run timing of
//! [`crate::identity`] still refuses them). What neither side states (a thread count, the host)
//! is a note: not verified.

use serde::Serialize;
use trace_ops::{Framework, RoleMap, SideOp, SideOps, TimeSource};
use trace_schema::{Pass, TraceDocument};

use crate::identity::{captured_steps, IdentityDiff, RefusalCode};
use crate::ops_account::{account, within_pass};
pub use crate::ops_account::{PassAccount, MIN_ROW_SAMPLES};
use crate::passes::pass_time_ns;
use crate::run::Run;

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
    /// Where the alloc-clocked time lies outside the sampled estimate's 95% interval: which
    /// way and why (the clock is an upper bound of the ops' own time: it runs from each
    /// allocating call to the next allocation on the thread, so it takes in the
    /// non-allocating work after it; it misses calls that allocate below the threshold).
    pub clock_disagrees: Option<String>,
}

/// Why the two time sources of a sampled side disagree, when they do beyond the interval.
fn clock_disagreement(s: &RoleSide) -> Option<String> {
    let (c, low, high) = (s.alloc_clocked_ns?, s.low_ns?, s.high_ns?);
    let ms = |ns: u64| format!("{:.2} ms", ns as f64 / 1e6);
    if c > high {
        Some(format!(
            "alloc-clocked {} above the sampled 95% interval {}–{}: the clock runs from each allocating call to the thread's next allocation, so it also takes in the non-allocating work after these ops (an upper bound of their own time)",
            ms(c),
            ms(low),
            ms(high)
        ))
    } else if c < low {
        Some(format!(
            "alloc-clocked {} below the sampled 95% interval {}–{}: calls that allocate below the sites' threshold, views and in-place work are not clocked",
            ms(c),
            ms(low),
            ms(high)
        ))
    } else {
        None
    }
}

/// What a row of a pass stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// A role of the map.
    Role,
    /// One op no role names (the row's name is the op's); both sides when both have it.
    Unmatched,
    /// The time outside any op (sampled stacks without an op frame; the pass time no measured
    /// top-level op covers).
    OutsideOps,
}

/// The name of the row of time outside any op.
pub const OUTSIDE_OPS: &str = "(outside any op)";

/// One role in one pass on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleRow {
    /// The role's name (an unmatched op's name; [`OUTSIDE_OPS`]).
    pub role: String,
    /// What the row stands for.
    pub kind: RowKind,
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
    /// `gap_ns` / the pass's gap without the probe's cost ([`PassOps::user_pass_gap_ns`]),
    /// when both are known and that gap is not 0.
    pub share_of_pass_gap: Option<f64>,
    /// The fewest samples of a sampled side with ops in the row, when below
    /// [`MIN_ROW_SAMPLES`]: the row is said ("too few samples (n)"), not ranked.
    pub too_few_samples: Option<u64>,
}

impl RoleRow {
    /// Whether the row takes part in the ranking: a known gap from enough samples.
    pub fn ranked(&self) -> bool {
        self.gap_ns.is_some() && self.too_few_samples.is_none()
    }
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
    /// Candidate − baseline pass time without each side's probe cost, ns: the gap of the
    /// user's work, the shares' denominator.
    pub user_pass_gap_ns: Option<i128>,
    /// What the baseline's pass time is made of (`None` without a pass time).
    pub baseline_account: Option<PassAccount>,
    /// The candidate's.
    pub candidate_account: Option<PassAccount>,
    /// The rows (roles, unmatched ops, time outside any op) ranked by the size of their gap
    /// (then by name); rows not ranked (too few samples, no gap) after them.
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
    /// The baseline's sampler totals (a sampled side): samples, lost ticks, few samples.
    pub baseline_sampling: Option<trace_ops::SampleTotals>,
    /// The candidate's.
    pub candidate_sampling: Option<trace_ops::SampleTotals>,
    /// The fewest samples a sampled side of a row needs to be ranked ([`MIN_ROW_SAMPLES`]).
    pub min_row_samples: u64,
    /// Which of the baseline's runs every figure of this section comes from (its pass times
    /// too): the median run by wall time, the one the findings use.
    pub baseline_run: RunChoice,
    /// The candidate's.
    pub candidate_run: RunChoice,
    /// Steps the baseline's chosen run captured ([`crate::captured_steps`]): every time of
    /// this section is a sum over them.
    pub baseline_steps: u64,
    /// The candidate's.
    pub candidate_steps: u64,
}

/// The one run of a side the op comparison (and the findings) read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RunChoice {
    /// 1-based number of the run among the side's traces, in the order given.
    pub run: usize,
    /// Runs on the side.
    pub of: usize,
}

impl RunChoice {
    /// The run at 0-based `index` of `of`.
    pub fn of(index: usize, of: usize) -> Self {
        Self { run: index + 1, of }
    }

    /// `run 2 of 3 (the median by wall time)`; `the only run`.
    pub fn describe(&self) -> String {
        if self.of <= 1 {
            "its only run".to_string()
        } else {
            format!("run {} of {} (the median by wall time)", self.run, self.of)
        }
    }
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
    // a warm-up a side does not state is not verified (a note), not a difference
    let unknown_warmup: Vec<&str> = [("baseline", b), ("candidate", c)]
        .into_iter()
        .filter(|(_, d)| d.meta.warmup_steps.is_none())
        .map(|(side, _)| side)
        .collect();
    let mut refusals: Vec<String> = identity
        .refusals
        .iter()
        .filter(|r| {
            let by_construction = cross
                && matches!(
                    r.code,
                    RefusalCode::CaptureContractDiffers | RefusalCode::PassesDiffer
                );
            let unknown = r.code == RefusalCode::WarmupDiffers && !unknown_warmup.is_empty();
            !by_construction && !unknown
        })
        .map(|r| format!("{}: {}", r.code.as_str(), r.message))
        .collect();
    let mut notes = Vec::new();
    if !unknown_warmup.is_empty() {
        notes.push(format!(
            "warm-up steps not stated by the {}: not verified (a PyTorch trace states it in its candle_graph metadata, a side file NAME.candle-graph.json, or its ProfilerStep#N)",
            unknown_warmup.join(" and the ")
        ));
    }
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
    let mut side = RoleSide {
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
        clock_disagrees: None,
    };
    side.clock_disagrees = clock_disagreement(&side);
    side
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
    let inputs = PassInputs {
        baseline_doc: baseline.doc,
        candidate_doc: candidate.doc,
        baseline_ops: &b.ops,
        candidate_ops: &c.ops,
        baseline_framework: bf,
        candidate_framework: cf,
        map,
        comparable,
    };
    let passes = passes_seen(&b.ops, &c.ops)
        .into_iter()
        .map(|pass| inputs.compare_pass(pass))
        .collect();
    Some(OpsDiff {
        baseline_framework: bf,
        candidate_framework: cf,
        baseline_source: b.source,
        candidate_source: c.source,
        timing_comparable: comparable,
        refusals,
        notes,
        passes,
        baseline_sampling: sampling(baseline, b.source),
        candidate_sampling: sampling(candidate, c.source),
        min_row_samples: MIN_ROW_SAMPLES,
        baseline_run: RunChoice::of(0, 1),
        candidate_run: RunChoice::of(0, 1),
        baseline_steps: captured_steps(baseline.doc),
        candidate_steps: captured_steps(candidate.doc),
    })
}

/// The passes either side's ops are in, in pass order (no pass last), each once.
fn passes_seen(b: &[SideOp], c: &[SideOp]) -> Vec<Option<Pass>> {
    let mut passes: Vec<Option<Pass>> = b.iter().chain(c).map(|o| o.pass).collect();
    passes.sort_by_key(|p| p.map_or(u8::MAX, |p| p as u8));
    passes.dedup();
    passes
}

/// What one pass's comparison is made from: both sides' traces, op tables and frameworks.
struct PassInputs<'a> {
    baseline_doc: &'a TraceDocument,
    candidate_doc: &'a TraceDocument,
    baseline_ops: &'a [SideOp],
    candidate_ops: &'a [SideOp],
    baseline_framework: Framework,
    candidate_framework: Framework,
    map: &'a RoleMap,
    /// The op timings of the two runs may be compared (no refusal).
    comparable: bool,
}

/// A pass's ops grouped by row: row key → (baseline ops, candidate ops).
type Groups<'o> = Vec<(RowKey, Vec<&'o SideOp>, Vec<&'o SideOp>)>;

impl PassInputs<'_> {
    /// The role of `op` in `pass` on the side of `framework`; `None` for the probe's ops, time
    /// outside any op and ops the map has no role for.
    fn role_of(&self, framework: Framework, pass: Option<Pass>, op: &SideOp) -> Option<usize> {
        (!op.probe && !op.outside_op)
            .then(|| self.map.role_of(framework, pass, &op.op))
            .flatten()
    }

    /// One pass's rows, accounts and unmatched ops.
    fn compare_pass(&self, pass: Option<Pass>) -> PassOps {
        let (bf, cf) = (self.baseline_framework, self.candidate_framework);
        let bp = pass.and_then(|p| pass_time_ns(self.baseline_doc, p));
        let cp = pass.and_then(|p| pass_time_ns(self.candidate_doc, p));
        let pass_gap = match (self.comparable, bp, cp) {
            (true, Some(x), Some(y)) => Some(y as i128 - x as i128),
            _ => None,
        };
        let in_pass = |ops: &[SideOp], pass_ns| {
            let refs: Vec<&SideOp> = ops.iter().filter(|o| o.pass == pass).collect();
            within_pass(&refs, pass_ns)
        };
        let (b_ops, c_ops) = (
            in_pass(self.baseline_ops, bp),
            in_pass(self.candidate_ops, cp),
        );
        let ba = account(&b_ops, |o| self.role_of(bf, pass, o).is_some(), bp);
        let ca = account(&c_ops, |o| self.role_of(cf, pass, o).is_some(), cp);
        let user_pass_gap = user_gap(pass_gap, &ba, &ca);
        let (groups, mut unmatched) = self.group(pass, &b_ops, &c_ops);
        let mut rows: Vec<RoleRow> = groups
            .into_iter()
            .map(|(key, bo, co)| {
                let mut bs = side_of(&bo);
                let mut cs = side_of(&co);
                if key == RowKey::Outside {
                    // the remainder of the pass, not the sum of its (rounded) estimates
                    if let Some(a) = &ba {
                        bs.ns = Some(a.outside_ops_ns);
                    }
                    if let Some(a) = &ca {
                        cs.ns = Some(a.outside_ops_ns);
                    }
                }
                row(key, self.map, bs, cs, self.comparable, user_pass_gap)
            })
            .collect();
        // a role's note says how the frameworks differ: for two runs of one it is noise
        if bf == cf {
            rows.iter_mut().for_each(|r| r.note = None);
        }
        if !rows.iter().any(|r| r.kind == RowKind::OutsideOps) {
            rows.extend(self.measured_outside_row(&ba, &ca, user_pass_gap));
        }
        rank_rows(&mut rows);
        let by_time = |v: &mut Vec<SideOp>| {
            v.sort_by(|x, y| y.ns.cmp(&x.ns).then_with(|| x.op.cmp(&y.op)));
        };
        by_time(&mut unmatched.0);
        by_time(&mut unmatched.1);
        PassOps {
            pass,
            baseline_pass_ns: bp,
            candidate_pass_ns: cp,
            pass_gap_ns: pass_gap,
            user_pass_gap_ns: user_pass_gap,
            baseline_account: ba,
            candidate_account: ca,
            roles: rows,
            baseline_unmatched: unmatched.0,
            candidate_unmatched: unmatched.1,
        }
    }

    /// The pass's ops (the probe's left out) grouped by row, in order of first appearance,
    /// and the ops without a role on each side (baseline, candidate).
    fn group<'o>(
        &self,
        pass: Option<Pass>,
        b_ops: &'o [SideOp],
        c_ops: &'o [SideOp],
    ) -> (Groups<'o>, (Vec<SideOp>, Vec<SideOp>)) {
        let mut groups: Groups<'o> = Vec::new();
        let mut unmatched = (Vec::new(), Vec::new());
        let sides = [
            (0, b_ops, self.baseline_framework),
            (1, c_ops, self.candidate_framework),
        ];
        for (side, ops, framework) in sides {
            for op in ops.iter().filter(|o| !o.probe) {
                let key = match self.role_of(framework, pass, op) {
                    Some(r) => RowKey::Role(r),
                    None if op.outside_op => RowKey::Outside,
                    None => {
                        if side == 0 {
                            unmatched.0.push(op.clone());
                        } else {
                            unmatched.1.push(op.clone());
                        }
                        RowKey::Unmatched(op.op.clone())
                    }
                };
                let entry = match groups.iter().position(|x| x.0 == key) {
                    Some(i) => &mut groups[i],
                    None => {
                        groups.push((key, Vec::new(), Vec::new()));
                        groups.last_mut().expect("just pushed")
                    }
                };
                if side == 0 {
                    entry.1.push(op);
                } else {
                    entry.2.push(op);
                }
            }
        }
        (groups, unmatched)
    }

    /// A measured side's pass time no op covers is time outside any op too: its row, when a
    /// side has such time (a sampled side's remainder without such stacks is the estimates'
    /// rounding: no row).
    fn measured_outside_row(
        &self,
        ba: &Option<PassAccount>,
        ca: &Option<PassAccount>,
        user_pass_gap: Option<i128>,
    ) -> Option<RoleRow> {
        let side = |a: &Option<PassAccount>| RoleSide {
            ops: Vec::new(),
            ns: a.as_ref().map(|a| {
                if a.samples.is_some() {
                    0
                } else {
                    a.outside_ops_ns
                }
            }),
            ..side_of(&[])
        };
        let (bs, cs) = (side(ba), side(ca));
        (bs.ns.unwrap_or(0) > 0 || cs.ns.unwrap_or(0) > 0).then(|| {
            row(
                RowKey::Outside,
                self.map,
                bs,
                cs,
                self.comparable,
                user_pass_gap,
            )
        })
    }
}

/// The user's share of a pass gap: the gap less the change in the probe's own time.
fn user_gap(
    pass_gap: Option<i128>,
    ba: &Option<PassAccount>,
    ca: &Option<PassAccount>,
) -> Option<i128> {
    let probe = |a: &Option<PassAccount>| a.as_ref().map_or(0, |a| a.probe_ns as i128);
    pass_gap.map(|g| g - (probe(ca) - probe(ba)))
}

/// Rows in report order: ranked rows first, then by the gap's magnitude, then by role.
fn rank_rows(rows: &mut [RoleRow]) {
    rows.sort_by(|x, y| {
        let mag = |r: &RoleRow| r.gap_ns.map_or(0, |g| g.unsigned_abs());
        y.ranked()
            .cmp(&x.ranked())
            .then_with(|| mag(y).cmp(&mag(x)))
            .then_with(|| x.role.cmp(&y.role))
    });
}

/// A sampled side's sampler totals.
fn sampling(run: &Run<'_>, source: TimeSource) -> Option<trace_ops::SampleTotals> {
    (source == TimeSource::Sampled)
        .then(|| {
            run.analysis
                .operations
                .as_ref()
                .ok()
                .map(|p| p.totals.clone())
        })
        .flatten()
}

/// What a row groups: a role of the map, an op without one, the time outside any op.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RowKey {
    Role(usize),
    Unmatched(String),
    Outside,
}

/// A row from its sides: the gap and its interval (an empty side is 0, exactly), its share of
/// the user's pass gap, and whether a sampled side has too few samples to rank it.
fn row(
    key: RowKey,
    map: &RoleMap,
    bs: RoleSide,
    cs: RoleSide,
    comparable: bool,
    user_pass_gap: Option<i128>,
) -> RoleRow {
    let (gap, low, high) = match (
        comparable,
        bs.ns.or(bs.ops.is_empty().then_some(0)),
        cs.ns.or(cs.ops.is_empty().then_some(0)),
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
    let share = match (gap, user_pass_gap) {
        (Some(g), Some(p)) if p != 0 => Some(g as f64 / p as f64),
        _ => None,
    };
    let too_few = [&bs, &cs]
        .iter()
        .filter(|s| !s.ops.is_empty())
        .filter_map(|s| s.samples)
        .min()
        .filter(|&n| n < MIN_ROW_SAMPLES);
    let (role, kind, note) = match key {
        RowKey::Role(r) => (
            map.roles[r].role.clone(),
            RowKind::Role,
            map.roles[r].note.clone(),
        ),
        RowKey::Unmatched(op) => (
            op,
            RowKind::Unmatched,
            Some("no role in the map: this op against nothing on the other side".to_string()),
        ),
        RowKey::Outside => (OUTSIDE_OPS.to_string(), RowKind::OutsideOps, None),
    };
    RoleRow {
        role,
        kind,
        note,
        baseline: bs,
        candidate: cs,
        gap_ns: gap,
        gap_low_ns: low,
        gap_high_ns: high,
        share_of_pass_gap: share,
        too_few_samples: too_few,
    }
}

impl OpsDiff {
    /// The headline's gap: in the pass whose time gap is largest (in size, the user's work:
    /// the probe's cost left out), its ranked row whose gap is largest; `None` when op times
    /// are not compared or no pass has a ranked row.
    pub fn largest_gap(&self) -> Option<(&PassOps, &RoleRow)> {
        if !self.timing_comparable {
            return None;
        }
        let pass = self
            .passes
            .iter()
            .filter(|p| p.roles.iter().any(RoleRow::ranked))
            .filter_map(|p| Some((p, p.user_pass_gap_ns.or(p.pass_gap_ns)?)))
            .max_by_key(|(_, g)| g.unsigned_abs())?
            .0;
        let row = pass
            .roles
            .iter()
            .filter(|r| r.ranked())
            .max_by_key(|r| r.gap_ns.map_or(0, i128::unsigned_abs))?;
        Some((pass, row))
    }
}
