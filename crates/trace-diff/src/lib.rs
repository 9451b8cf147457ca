//! # trace-diff
//!
//! What changed between two sets of candle-graph runs — a baseline and a candidate, one or more
//! traces each — in time, memory and gradients. One function, [`compare`], over already
//! analysed traces ([`trace_graph::analyze`]); rendering is the CLI's.
//!
//! In this order:
//! 1. **identity** ([`identity`]): what each run is, and every typed reason timing may not be
//!    compared (different timing modes, devices, passes, capture contracts, warm-up or
//!    comparison conditions; invalid or incomplete captures). Refused timing keeps each side's
//!    figures but draws no delta; memory and gradients are compared anyway;
//! 2. **alignment** ([`align`]): spans matched by their path of names, repeated siblings by
//!    occurrence order, never by id; spans on one side only listed by their top-most span. When
//!    too few spans align ([`AlignmentMode::Passes`]), the pass-level comparison carries the
//!    report and storages are matched by pass;
//! 3. **spans** ([`spans`]): per aligned span, total and self time, directly allocated bytes and
//!    subtree peak, ranked by impact;
//! 4. **passes** ([`passes`]): forward, backward, optimizer by role;
//! 5. **memory** ([`memory`]): the peak per device and per category at it, where each side
//!    peaked, storages live at the peak on one side only;
//! 6. **gradients** ([`gradients`]): verdict changes and norm ratios beyond a threshold.
//!
//! Every figure is a [`Delta`]: each side's median and range over its runs, the change, and a
//! [`Verdict`] — with two or more runs per side a difference inside the run-to-run range is
//! [`Verdict::WithinNoise`], not a speed-up ([`stats`]).
//!
//! ```
//! use trace_diff::{compare, DiffOptions, Run, Verdict};
//! let text = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","timing_mode":"host","device":"cpu"}
//! {"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}
//! {"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a","bytes":64,"span_id":"s1"}
//! {"kind":"span_end","id":"s1","duration_ns":10}
//! {"kind":"terminal","outcome":"complete","timestamp_ns":10}
//! "#;
//! let doc = trace_schema::load_str(text).unwrap();
//! let analysis = trace_graph::analyze(&doc);
//! let run = Run { doc: &doc, analysis: &analysis, label: "a.jsonl" };
//! let diff = compare(&[run], &[run], &DiffOptions::default()).unwrap();
//! assert!(diff.identity.timing_comparable);
//! assert_eq!(diff.spans[0].path, "step");
//! assert_eq!(diff.spans[0].total_time_ns.verdict, Verdict::Unchanged);
//! assert_eq!(diff.memory.unwrap().peak_bytes.delta, Some(0));
//! ```
//!
//! # Cost
//! O(n log n) in the events of all runs: alignment is one hash lookup per span, the live sets
//! are read once per device at its peak.

#![deny(missing_docs)]

pub mod align;
pub mod findings;
pub mod gradients;
pub mod identity;
pub mod memory;
pub mod ops;
pub mod ops_account;
pub mod passes;
pub mod run;
pub mod spans;
pub mod stats;

use serde::Serialize;

use crate::align::KeyTable;
pub use findings::{compare_findings, FindingChange, FindingDelta, FindingSide};
pub use gradients::{GradientDiff, GradientVerdict, NormChange, VerdictChange};
pub use identity::{captured_steps, IdentityDiff, RefusalCode, RunIdentity, TimingRefusal};
pub use memory::{
    CategoryDelta, DeviceDelta, LiveSetCategory, LiveSetDiff, MemoryDiff, PeakPlace, StorageGroup,
};
pub use ops::{
    compare_ops, framework_of, OpsDiff, PassAccount, PassOps, RoleRow, RoleSide, RowKind,
    MIN_ROW_SAMPLES, OUTSIDE_OPS,
};
pub use passes::PassDelta;
use run::{span_figures, Prepared};
pub use run::{AlignmentMode, Run};
pub use spans::{summarize, RestSummary, SpanDelta, SpanMetric, UnmatchedSpan};
pub use stats::{Delta, Stat, Verdict};

/// Options of [`compare`].
#[derive(Debug, Clone, PartialEq)]
pub struct DiffOptions {
    /// A gradient norm changed when candidate/baseline is above this or below its inverse
    /// (must be > 1). Default 2.
    pub norm_ratio_threshold: f64,
    /// Span alignment counts when at least this share of each side's non-root spans align
    /// (first runs); below it the comparison is pass-level. Default 0.5.
    pub min_aligned_share: f64,
    /// Which ops of the two sides do the same work (default: the built-in Candle ↔ PyTorch
    /// map, [`trace_ops::RoleMap::builtin`]).
    pub op_roles: trace_ops::RoleMap,
}

impl Default for DiffOptions {
    fn default() -> Self {
        Self {
            norm_ratio_threshold: 2.0,
            min_aligned_share: 0.5,
            op_roles: trace_ops::RoleMap::builtin(),
        }
    }
}

/// Why [`compare`] could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DiffError {
    /// A side has no run.
    #[error("the {side} has no trace")]
    EmptySide {
        /// `baseline` or `candidate`.
        side: &'static str,
    },
    /// The norm-ratio threshold is not a finite number above 1.
    #[error("the gradient norm ratio threshold must be a number above 1, not {0}")]
    InvalidThreshold(f64),
}

/// How the runs' spans aligned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alignment {
    /// The mode used.
    pub mode: AlignmentMode,
    /// Aligned span positions (on both sides).
    pub aligned: u64,
    /// Share of the first baseline run's non-root spans that align.
    pub baseline_aligned_share: f64,
    /// Share of the first candidate run's non-root spans that align.
    pub candidate_aligned_share: f64,
    /// Spans on the baseline only (top-most of each subtree).
    pub baseline_only: Vec<UnmatchedSpan>,
    /// Spans on the candidate only.
    pub candidate_only: Vec<UnmatchedSpan>,
}

/// The comparison (`candle-graph/diff/1` payload).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceDiff {
    /// Baseline runs.
    pub baseline_runs: u32,
    /// Candidate runs.
    pub candidate_runs: u32,
    /// Both sides have two or more runs: differences inside the run-to-run range are called
    /// noise. With one run on a side the spread is unknown.
    pub spread_known: bool,
    /// Identity and timing refusals.
    pub identity: IdentityDiff,
    /// Wall time of the measured region, ns.
    pub wall_time_ns: Delta,
    /// Span alignment.
    pub alignment: Alignment,
    /// Aligned spans ranked by impact (highest first; ties in tree order).
    pub spans: Vec<SpanDelta>,
    /// Per pass.
    pub passes: Vec<PassDelta>,
    /// Memory; absent when a side has no logical memory plane (see `memory_unavailable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryDiff>,
    /// Why memory is not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_unavailable: Option<String>,
    /// Gradients; absent when a side has no gradient facts (see `gradients_unavailable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gradients: Option<GradientDiff>,
    /// Why gradients are not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gradients_unavailable: Option<String>,
    /// Operations aligned by role, per pass; absent when a side has no op table (see
    /// `ops_unavailable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<OpsDiff>,
    /// Why operations are not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_unavailable: Option<String>,
    /// Findings compared (each side's median run by wall time): appeared, disappeared, changed
    /// with their figures, unchanged.
    pub findings: Vec<FindingDelta>,
    /// Why findings are not compared: a side's trace is not structurally valid, so the
    /// analyzer computed none for it (comparing would call every finding of the other side
    /// appeared or disappeared). `None` when they are compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings_unavailable: Option<String>,
}

/// Compares the baseline runs with the candidate runs.
///
/// # Errors
/// [`DiffError::EmptySide`] when a side has no run; [`DiffError::InvalidThreshold`] for a norm
/// ratio threshold that is not a finite number above 1.
pub fn compare(
    baseline: &[Run<'_>],
    candidate: &[Run<'_>],
    options: &DiffOptions,
) -> Result<TraceDiff, DiffError> {
    if baseline.is_empty() {
        return Err(DiffError::EmptySide { side: "baseline" });
    }
    if candidate.is_empty() {
        return Err(DiffError::EmptySide { side: "candidate" });
    }
    let t = options.norm_ratio_threshold;
    if !(t.is_finite() && t > 1.0) {
        return Err(DiffError::InvalidThreshold(t));
    }
    let identity = identity::compare_identity(baseline, candidate);
    let comparable = identity.timing_comparable;

    let mut table = KeyTable::default();
    let mut prepare = |run: &Run<'_>| {
        let keys = table.key_run(run.doc, &run.analysis.spans);
        (keys, span_figures(run))
    };
    let b: Vec<Prepared<'_>> = baseline
        .iter()
        .map(|r| {
            let (keys, figures) = prepare(r);
            Prepared {
                run: *r,
                keys,
                figures,
            }
        })
        .collect();
    let c: Vec<Prepared<'_>> = candidate
        .iter()
        .map(|r| {
            let (keys, figures) = prepare(r);
            Prepared {
                run: *r,
                keys,
                figures,
            }
        })
        .collect();
    let paths = table.paths();

    let wall = |runs: &[Run<'_>]| -> Vec<u64> {
        runs.iter()
            .filter_map(|r| r.analysis.graph.as_ref()?.outer_wall_time_ns)
            .collect()
    };
    let wall_time_ns = Delta::of(wall(baseline), wall(candidate));
    let peak_of = |runs: &[Run<'_>]| {
        stats::Stat::of(runs.iter().filter_map(|r| {
            r.analysis
                .memory
                .logical
                .as_ref()?
                .peak
                .as_ref()
                .map(|p| p.live_bytes)
        }))
    };
    let scales = spans::Scales {
        time_ns: wall_time_ns
            .baseline
            .or(wall_time_ns.candidate)
            .map(|s| s.median),
        bytes: peak_of(baseline).or(peak_of(candidate)).map(|s| s.median),
    };

    let (rows, alignment) = align_spans(&table, &paths, &b, &c, comparable, scales, options);
    let passes = passes::compare_passes(baseline, candidate, comparable);
    let memory_unavailable = memory::unavailable(&b, &c);
    let memory = memory_unavailable
        .is_none()
        .then(|| memory::compare_memory(&b, &c, alignment.mode, &paths));
    let gradients_unavailable = gradients::unavailable(baseline, candidate);
    let gradients = gradients_unavailable
        .is_none()
        .then(|| gradients::compare_gradients(baseline, candidate, t));
    let wall_time_ns = if comparable {
        wall_time_ns
    } else {
        wall_time_ns.not_compared()
    };
    // One run stands for each side where a figure is not a median over the runs (the op
    // table, the findings): its median run by wall time, not its first.
    let (b0, c0) = (median_run(baseline), median_run(candidate));
    let valid = |r: &Run<'_>| r.analysis.health.structurally_valid;
    let findings_unavailable = match (valid(b0), valid(c0)) {
        (true, true) => None,
        (false, true) => Some("the baseline is not"),
        (true, false) => Some("the candidate is not"),
        (false, false) => Some("neither side is"),
    }
    .map(|side| {
        format!("{side} a valid trace (`candle-graph check` says why): the analyzer computed no findings for it")
    });
    let mut ops = ops::compare_ops(b0, c0, &identity, &options.op_roles);
    if let Some(o) = ops.as_mut() {
        o.baseline_run = ops::RunChoice::of(median_run_index(baseline), baseline.len());
        o.candidate_run = ops::RunChoice::of(median_run_index(candidate), candidate.len());
    }
    let ops_unavailable = ops.is_none().then(|| {
        let has = |r: &Run<'_>| ops::side_ops(r, ops::framework_of(r.doc)).is_some();
        let sides = match (has(b0), has(c0)) {
            (false, false) => "neither side has an",
            (false, true) => "the baseline has no",
            _ => "the candidate has no",
        };
        format!(
            "{sides} op table (stack samples of a Candle capture, or a PyTorch import's timed ops)"
        )
    });
    Ok(TraceDiff {
        baseline_runs: baseline.len() as u32,
        candidate_runs: candidate.len() as u32,
        spread_known: baseline.len() >= 2 && candidate.len() >= 2,
        identity,
        wall_time_ns,
        alignment,
        spans: rows,
        passes,
        memory,
        memory_unavailable,
        gradients,
        gradients_unavailable,
        ops,
        ops_unavailable,
        findings: if findings_unavailable.is_none() {
            findings::compare_findings(&b0.analysis.findings, &c0.analysis.findings)
        } else {
            Vec::new()
        },
        findings_unavailable,
    })
}

/// The run of a side whose measured wall time is the median (the lower median for an even
/// count; runs without a wall time sort last); the first run when none has one. `runs` is not
/// empty ([`compare`] checks).
fn median_run<'r, 'a>(runs: &'r [Run<'a>]) -> &'r Run<'a> {
    &runs[median_run_index(runs)]
}

/// The index of [`median_run`]'s run.
fn median_run_index(runs: &[Run<'_>]) -> usize {
    let mut order: Vec<(Option<u64>, usize)> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let wall = r.analysis.graph.as_ref().and_then(|g| g.outer_wall_time_ns);
            (wall, i)
        })
        .collect();
    if order.iter().all(|(w, _)| w.is_none()) {
        return 0;
    }
    order.sort_by_key(|&(w, i)| (w.is_none(), w, i));
    let known = order.iter().filter(|(w, _)| w.is_some()).count();
    order[(known - 1) / 2].1
}

/// Per-key figures of one side.
#[derive(Default, Clone)]
struct Acc {
    runs: u32,
    total: Vec<u64>,
    own: Vec<u64>,
    direct: Vec<u64>,
    subtree: Vec<u64>,
    pass: Option<trace_schema::Pass>,
    pass_set: bool,
}

fn accumulate(table: &KeyTable, runs: &[Prepared<'_>]) -> Vec<Acc> {
    let mut acc = vec![Acc::default(); table.len()];
    for p in runs {
        for (i, key) in p.keys.iter().enumerate() {
            let Some(k) = key else { continue };
            let a = &mut acc[*k as usize];
            let f = p.figures[i];
            a.runs += 1;
            a.total.extend(f.total_ns);
            a.own.extend(f.self_ns);
            a.direct.extend(f.direct_bytes);
            a.subtree.extend(f.subtree_peak_bytes);
            if !a.pass_set {
                a.pass = p.run.analysis.spans.pass[i];
                a.pass_set = true;
            }
        }
    }
    acc
}

fn share(p: Option<&Prepared<'_>>, aligned: &[bool]) -> f64 {
    let Some(p) = p else { return 0.0 };
    let spans = &p.run.analysis.spans;
    let (mut n, mut hit) = (0u64, 0u64);
    for (i, key) in p.keys.iter().enumerate() {
        if spans.parent[i].is_none() {
            continue;
        }
        n += 1;
        if key.is_some_and(|k| aligned[k as usize]) {
            hit += 1;
        }
    }
    if n == 0 {
        // only roots: they align or not
        return if p.keys.iter().flatten().any(|&k| aligned[k as usize]) {
            1.0
        } else {
            0.0
        };
    }
    hit as f64 / n as f64
}

fn align_spans(
    table: &KeyTable,
    paths: &[String],
    b: &[Prepared<'_>],
    c: &[Prepared<'_>],
    comparable: bool,
    scales: spans::Scales,
    options: &DiffOptions,
) -> (Vec<SpanDelta>, Alignment) {
    let (ab, ac) = (accumulate(table, b), accumulate(table, c));
    let aligned: Vec<bool> = (0..table.len())
        .map(|k| ab[k].runs > 0 && ac[k].runs > 0)
        .collect();
    let mut rows = Vec::new();
    for k in 0..table.len() {
        if !aligned[k] {
            continue;
        }
        let (x, y) = (&ab[k], &ac[k]);
        let time = |d: Delta| if comparable { d } else { d.not_compared() };
        let mut row = SpanDelta {
            path: paths[k].clone(),
            depth: table.depth(k as u32),
            pass: x.pass.or(y.pass),
            total_time_ns: time(Delta::of(x.total.iter().copied(), y.total.iter().copied())),
            self_time_ns: time(Delta::of(x.own.iter().copied(), y.own.iter().copied())),
            direct_allocated_bytes: Delta::of(x.direct.iter().copied(), y.direct.iter().copied()),
            subtree_peak_bytes: Delta::of(x.subtree.iter().copied(), y.subtree.iter().copied()),
            impact: 0.0,
            impact_metric: None,
        };
        spans::score(&mut row, scales);
        rows.push(row);
    }
    // Stable: ties keep the keys' tree order. Rows are large: sort their order, then move them.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&p, &q| rows[q].impact.total_cmp(&rows[p].impact));
    let mut slots: Vec<Option<SpanDelta>> = rows.into_iter().map(Some).collect();
    let rows: Vec<SpanDelta> = order.into_iter().filter_map(|i| slots[i].take()).collect();

    let one_sided = |mine: &[Acc], theirs: &[Acc]| -> Vec<UnmatchedSpan> {
        let only = |k: usize| mine[k].runs > 0 && theirs[k].runs == 0;
        // A parent's key id is below its children's: one pass finds each top-most span.
        let mut top: Vec<Option<usize>> = vec![None; table.len()];
        let mut descendants = vec![0u64; table.len()];
        let mut tops: Vec<usize> = Vec::new();
        for k in 0..table.len() {
            if !only(k) {
                continue;
            }
            match table.keys[k].parent.and_then(|p| top[p as usize]) {
                Some(t) => {
                    top[k] = Some(t);
                    descendants[t] += 1;
                }
                None => {
                    top[k] = Some(k);
                    tops.push(k);
                }
            }
        }
        tops.into_iter()
            .map(|k| UnmatchedSpan {
                path: paths[k].clone(),
                pass: mine[k].pass,
                runs: mine[k].runs,
                descendants: descendants[k],
                total_time_ns: Stat::of(mine[k].total.iter().copied()),
                subtree_peak_bytes: Stat::of(mine[k].subtree.iter().copied()),
            })
            .collect()
    };
    let baseline_only = one_sided(&ab, &ac);
    let candidate_only = one_sided(&ac, &ab);
    let (sb, sc) = (share(b.first(), &aligned), share(c.first(), &aligned));
    let mode = if sb >= options.min_aligned_share && sc >= options.min_aligned_share {
        AlignmentMode::SpanPaths
    } else {
        AlignmentMode::Passes
    };
    let alignment = Alignment {
        mode,
        aligned: rows.len() as u64,
        baseline_aligned_share: sb,
        candidate_aligned_share: sc,
        baseline_only,
        candidate_only,
    };
    (rows, alignment)
}

trace_schema::wire_names!(AlignmentMode);
