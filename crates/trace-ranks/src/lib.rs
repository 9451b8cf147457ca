//! One step across the ranks of a multi-process job (data or tensor parallel, one process per
//! device, as Candle's NCCL examples run): each rank's figures side by side, the **straggler**
//! (the slowest rank, by how much, in which pass and which span) and the **imbalance of
//! memory** across ranks.
//!
//! Input: the traces one job wrote, one per rank — the probe names them
//! `trace.rank<N>.jsonl` ([`rank_files`] finds them in a directory) and records `rank`,
//! `local_rank` and `world_size` in the meta event (trace/13). A rank whose trace is missing,
//! cannot be read or was cut short is said in the report ([`RankReport::missing`],
//! [`RankReport::failed`], [`RankRow::truncated`]), never fatal; a cut-short rank is left out of
//! the straggler (its times are lower bounds).
//!
//! Figures per rank are [`trace_graph::StepFigures`]; the straggler compares each rank with the
//! median of the *other* ranks (so one slow rank does not move its own yardstick). Linear in the
//! spans of each trace; no recursion.

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trace_graph::{Analysis, StepFigures};
use trace_schema::{Pass, TraceDocument};

/// Schema of the [`RankReport`].
pub const RANKS_SCHEMA: &str = "candle-graph/ranks/1";

/// Most rank files read from one directory.
pub const MAX_RANKS: usize = 1 << 16;

/// The digits after `.rank` in a file name `<stem>.rank<N>.jsonl` (or `.jsonl.gz`), whether or
/// not the number fits a rank.
pub fn rank_digits_of_file_name(name: &str) -> Option<&str> {
    let base = name
        .strip_suffix(".jsonl.gz")
        .or_else(|| name.strip_suffix(".jsonl"))?;
    let (_, digits) = base.rsplit_once(".rank")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

/// The rank in a file name `<stem>.rank<N>.jsonl` (or `.jsonl.gz`); `None` also when `N` does
/// not fit a `u32` (the file is still a rank trace: [`rank_files`] lists it).
pub fn rank_of_file_name(name: &str) -> Option<u32> {
    rank_digits_of_file_name(name)?.parse().ok()
}

/// The rank traces in `dir` (`*.rank<N>.jsonl[.gz]`), sorted by rank then name, each with the
/// rank its name says — `None` when `N` does not fit a `u32`
/// (`trace.rank18446744073709551616.jsonl`): such a file is listed, never skipped, and
/// [`build`] reads its rank from its meta or names it unreadable.
///
/// # Errors
/// The directory cannot be listed; more than [`MAX_RANKS`] files.
pub fn rank_files(dir: &Path) -> std::io::Result<Vec<(Option<u32>, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if rank_digits_of_file_name(&name).is_some()
            && entry.file_type().map(|t| t.is_file()).unwrap_or(false)
        {
            out.push((rank_of_file_name(&name), entry.path()));
        }
        if out.len() > MAX_RANKS {
            return Err(std::io::Error::other(format!(
                "more than {MAX_RANKS} rank traces in {}",
                dir.display()
            )));
        }
    }
    out.sort();
    Ok(out)
}

/// One rank's input: its file, the rank its name says, and the loaded trace or why not.
pub struct RankInput<'a> {
    /// The trace file.
    pub file: PathBuf,
    /// The rank in the file name.
    pub rank_in_name: Option<u32>,
    /// The trace and its analysis, or the load error (one line).
    pub loaded: Result<(&'a TraceDocument, &'a Analysis), String>,
}

/// A span path's host self time in one rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpanTime {
    /// `/`-joined span path.
    pub path: String,
    /// Host self time summed over the closed spans with that path, ns.
    pub self_time_ns: u64,
}

/// One rank's row.
#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    /// The rank (meta `rank`, else the file name's).
    pub rank: u32,
    /// The trace file.
    pub file: PathBuf,
    /// The rank's local rank, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// The trace was cut short: figures are lower bounds and the rank is not ranked for the
    /// straggler.
    pub truncated: bool,
    /// The step's figures (step time = `outer_wall_time_ns`, pass times, peaks and what held
    /// the peak).
    pub figures: StepFigures,
    /// The span path with the largest host self time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest_span: Option<SpanTime>,
    /// Self time per span path (not serialized: the straggler's span is read from it).
    #[serde(skip)]
    pub span_self_ns: BTreeMap<String, u64>,
}

/// A rank's trace that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct FailedRank {
    /// The file.
    pub file: PathBuf,
    /// The rank its name says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Why (one line).
    pub reason: String,
}

/// How much more one figure of the straggler is than the other ranks' median.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excess {
    /// The straggler's value, ns.
    pub rank_ns: u64,
    /// The median of the other ranks, ns.
    pub others_median_ns: u64,
    /// `rank_ns - others_median_ns` (0 when not more), ns.
    pub excess_ns: u64,
}

impl Excess {
    fn new(rank_ns: u64, others: &mut [u64]) -> Option<Self> {
        let median = median(others)?;
        Some(Self {
            rank_ns,
            others_median_ns: median,
            excess_ns: rank_ns.saturating_sub(median),
        })
    }

    /// `rank_ns / others_median_ns`; `None` when the median is 0.
    pub fn ratio(&self) -> Option<f64> {
        (self.others_median_ns > 0).then(|| self.rank_ns as f64 / self.others_median_ns as f64)
    }
}

/// The slowest rank and where it lost its time.
#[derive(Debug, Clone, Serialize)]
pub struct Straggler {
    /// The slowest rank (largest step time; the lower rank on ties).
    pub rank: u32,
    /// Its step time against the median of the other ranks.
    pub step: Excess,
    /// The fastest rank.
    pub fastest_rank: u32,
    /// Its step time, ns.
    pub fastest_ns: u64,
    /// The pass with the largest excess over the other ranks' median, when a pass has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<(Pass, Excess)>,
    /// The span path (host self time) with the largest excess over the other ranks' median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span: Option<(String, Excess)>,
    /// Ranks compared (complete traces with a step time).
    pub ranks_compared: usize,
}

/// How unevenly the logical peak is spread over the ranks.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryImbalance {
    /// The rank with the highest logical peak.
    pub max_rank: u32,
    /// Its peak, bytes.
    pub max_bytes: u64,
    /// The rank with the lowest.
    pub min_rank: u32,
    /// Its peak, bytes.
    pub min_bytes: u64,
    /// `max_bytes - min_bytes`.
    pub spread_bytes: u64,
    /// `max_bytes / min_bytes`; `None` when the lowest is 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Ranks compared (with a logical peak).
    pub ranks_compared: usize,
}

/// The report across ranks (`candle-graph/ranks/1`).
#[derive(Debug, Clone, Serialize)]
pub struct RankReport {
    /// [`RANKS_SCHEMA`].
    pub schema: &'static str,
    /// The world size the traces declare (the largest, when they disagree), else the number of
    /// rank files.
    pub world_size: u32,
    /// The world size is declared by the traces (else counted from the files).
    pub world_size_declared: bool,
    /// One row per readable rank, by rank.
    pub ranks: Vec<RankRow>,
    /// Ranks `0..world_size` without a trace.
    pub missing: Vec<u32>,
    /// Traces that could not be read.
    pub failed: Vec<FailedRank>,
    /// Ranks whose trace was cut short.
    pub cut_short: Vec<u32>,
    /// Things the traces disagree on that should be one job's (entrypoint, capture step,
    /// world size, a rank twice, a file name against its meta).
    pub disagreements: Vec<String>,
    /// The straggler, with at least two complete ranks with a step time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub straggler: Option<Straggler>,
    /// The memory imbalance, with at least two ranks with a logical peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryImbalance>,
}

/// The median of `v` (sorted in place): the middle value, or the mean of the two middle ones
/// rounded down; `None` when empty.
pub fn median(v: &mut [u64]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        ((u128::from(v[n / 2 - 1]) + u128::from(v[n / 2])) / 2) as u64
    })
}

/// Host self time per span path: each closed span's duration less its closed children's
/// (saturating), summed by path. O(spans); no recursion.
pub fn span_self_times(doc: &TraceDocument, analysis: &Analysis) -> BTreeMap<String, u64> {
    let spans = &analysis.spans;
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for (i, s) in doc.spans.iter().enumerate() {
        let Some(d) = s.duration_ns else { continue };
        let children: u64 = spans
            .children
            .get(i)
            .map(|c| {
                c.iter()
                    .filter_map(|&j| doc.spans[j as usize].duration_ns)
                    .fold(0u64, u64::saturating_add)
            })
            .unwrap_or(0);
        let e = out.entry(spans.path(doc, i)).or_default();
        *e = e.saturating_add(d.saturating_sub(children));
    }
    out
}

/// Builds the report from every rank's input (see the module docs).
pub fn build(inputs: Vec<RankInput<'_>>, world_size_hint: Option<u32>) -> RankReport {
    let mut rows: Vec<RankRow> = Vec::new();
    let mut failed = Vec::new();
    let mut disagreements = Vec::new();
    let files = inputs.len();
    for input in inputs {
        match input.loaded {
            Err(reason) => failed.push(FailedRank {
                file: input.file,
                rank: input.rank_in_name,
                reason,
            }),
            Ok((doc, analysis)) => {
                let figures = StepFigures::of(doc, analysis);
                let rank = match (figures.rank, input.rank_in_name) {
                    (Some(m), Some(n)) if m != n => {
                        disagreements.push(format!(
                            "{} is named rank {n} but its meta says rank {m}",
                            input.file.display()
                        ));
                        m
                    }
                    (Some(m), _) => m,
                    (None, Some(n)) => n,
                    (None, None) => {
                        let name = input
                            .file
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let reason = match rank_digits_of_file_name(&name) {
                            Some(digits) => format!(
                                "its name's rank {} does not fit (ranks are below 2^32) and its meta gives no rank",
                                if digits.len() > 40 {
                                    format!("{}… ({} digits)", &digits[..20], digits.len())
                                } else {
                                    digits.to_string()
                                }
                            ),
                            None => "neither its meta nor its name gives a rank".to_string(),
                        };
                        failed.push(FailedRank {
                            file: input.file,
                            rank: None,
                            reason,
                        });
                        continue;
                    }
                };
                let span_self_ns = span_self_times(doc, analysis);
                let slowest_span = span_self_ns
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(p, &t)| SpanTime {
                        path: p.clone(),
                        self_time_ns: t,
                    });
                rows.push(RankRow {
                    rank,
                    file: input.file,
                    local_rank: doc.meta.local_rank,
                    truncated: figures.truncated,
                    figures,
                    slowest_span,
                    span_self_ns,
                });
            }
        }
    }
    rows.sort_by(|a, b| a.rank.cmp(&b.rank).then(a.file.cmp(&b.file)));
    for w in rows.windows(2) {
        if w[0].rank == w[1].rank {
            disagreements.push(format!(
                "rank {} has two traces: {} and {}",
                w[0].rank,
                w[0].file.display(),
                w[1].file.display()
            ));
        }
    }
    let declared: Vec<u32> = rows.iter().filter_map(|r| r.figures.world_size).collect();
    let mut sizes = declared.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() > 1 {
        disagreements.push(format!("the traces declare world sizes {sizes:?}"));
    }
    for (what, values) in [
        (
            "entrypoint",
            rows.iter()
                .map(|r| r.figures.entrypoint.clone())
                .collect::<Vec<_>>(),
        ),
        (
            "capture_step",
            rows.iter()
                .map(|r| {
                    r.figures
                        .capture_step
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "none".into())
                })
                .collect(),
        ),
    ] {
        let mut v = values;
        v.sort();
        v.dedup();
        if v.len() > 1 {
            disagreements.push(format!("the traces differ in {what}: {}", v.join(", ")));
        }
    }
    let world_size_declared = !declared.is_empty() || world_size_hint.is_some();
    let world_size = sizes
        .last()
        .copied()
        .or(world_size_hint)
        .unwrap_or(files as u32);
    let present: std::collections::BTreeSet<u32> = rows
        .iter()
        .map(|r| r.rank)
        .chain(failed.iter().filter_map(|f| f.rank))
        .collect();
    let missing = (0..world_size).filter(|r| !present.contains(r)).collect();
    let cut_short = rows
        .iter()
        .filter(|r| r.truncated)
        .map(|r| r.rank)
        .collect();
    let straggler = straggler(&rows);
    let memory = imbalance(&rows);
    RankReport {
        schema: RANKS_SCHEMA,
        world_size,
        world_size_declared,
        ranks: rows,
        missing,
        failed,
        cut_short,
        disagreements,
        straggler,
        memory,
    }
}

fn straggler(rows: &[RankRow]) -> Option<Straggler> {
    let timed: Vec<(&RankRow, u64)> = rows
        .iter()
        .filter(|r| !r.truncated)
        .filter_map(|r| r.figures.outer_wall_time_ns.map(|t| (r, t)))
        .collect();
    if timed.len() < 2 {
        return None;
    }
    let (slow, slow_ns) = timed
        .iter()
        .copied()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.rank.cmp(&a.0.rank)))?;
    let (fast, fast_ns) = timed
        .iter()
        .copied()
        .min_by(|a, b| a.1.cmp(&b.1).then(a.0.rank.cmp(&b.0.rank)))?;
    let others: Vec<&RankRow> = timed
        .iter()
        .filter(|(r, _)| !std::ptr::eq(*r, slow))
        .map(|(r, _)| *r)
        .collect();
    let mut other_steps: Vec<u64> = timed
        .iter()
        .filter(|(r, _)| !std::ptr::eq(*r, slow))
        .map(|(_, t)| *t)
        .collect();
    let step = Excess::new(slow_ns, &mut other_steps)?;
    let pass = slow
        .figures
        .pass_time_ns
        .iter()
        .filter_map(|(&p, &t)| {
            let mut v: Vec<u64> = others
                .iter()
                .filter_map(|o| o.figures.pass_time_ns.get(&p).copied())
                .collect();
            Excess::new(t, &mut v).map(|e| (p, e))
        })
        .filter(|(_, e)| e.excess_ns > 0)
        .max_by(|a, b| a.1.excess_ns.cmp(&b.1.excess_ns).then(b.0.cmp(&a.0)));
    let span = slow
        .span_self_ns
        .iter()
        .filter_map(|(path, &t)| {
            let mut v: Vec<u64> = others
                .iter()
                .filter_map(|o| o.span_self_ns.get(path).copied())
                .collect();
            Excess::new(t, &mut v).map(|e| (path.clone(), e))
        })
        .filter(|(_, e)| e.excess_ns > 0)
        .max_by(|a, b| a.1.excess_ns.cmp(&b.1.excess_ns).then(b.0.cmp(&a.0)));
    Some(Straggler {
        rank: slow.rank,
        step,
        fastest_rank: fast.rank,
        fastest_ns: fast_ns,
        pass,
        span,
        ranks_compared: timed.len(),
    })
}

fn imbalance(rows: &[RankRow]) -> Option<MemoryImbalance> {
    let peaks: Vec<(u32, u64)> = rows
        .iter()
        .filter_map(|r| r.figures.logical_peak_bytes.map(|b| (r.rank, b)))
        .collect();
    if peaks.len() < 2 {
        return None;
    }
    let max = peaks
        .iter()
        .copied()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?;
    let min = peaks
        .iter()
        .copied()
        .min_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))?;
    Some(MemoryImbalance {
        max_rank: max.0,
        max_bytes: max.1,
        min_rank: min.0,
        min_bytes: min.1,
        spread_bytes: max.1 - min.1,
        ratio: (min.1 > 0).then(|| max.1 as f64 / min.1 as f64),
        ranks_compared: peaks.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_names_are_read() {
        assert_eq!(rank_of_file_name("trace.rank3.jsonl"), Some(3));
        assert_eq!(rank_of_file_name("trace.rank12.jsonl.gz"), Some(12));
        assert_eq!(rank_of_file_name("trace.jsonl"), None);
        assert_eq!(rank_of_file_name("trace.rank.jsonl"), None);
        assert_eq!(rank_of_file_name("trace.rank-1.jsonl"), None);
        assert_eq!(rank_of_file_name("trace.rank1x.jsonl"), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [5]), Some(5));
        assert_eq!(median(&mut [9, 1, 5]), Some(5));
        assert_eq!(median(&mut [4, 1]), Some(2));
        assert_eq!(median(&mut [u64::MAX, u64::MAX]), Some(u64::MAX));
    }
}
