//! The memory comparison: the logical peak (all devices) and each device's own peak, the bytes
//! of every category at that device's peak, where each side's peak was reached (pass, span,
//! time), and which storages are live at the peak on one side only.
//!
//! # Storages live at the peak on one side only
//! Storage ids and addresses differ run to run, so storages are matched by what they are: the
//! allocating span's aligned position ([`crate::align`]; with pass-level alignment, the
//! allocating span's pass), shape, dtype and category. Per such key the first `min(b, c)`
//! storages of each side (largest first) match; the rest are on one side only, summed per key.
//! The live sets are those of each side's first run, at its device peak.
//!
//! Figures of a capture that ended early or dropped events are lower bounds
//! ([`MemoryDiff::lower_bound`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;
use trace_memory::{LogicalMemoryProfile, StorageLifetime};
use trace_schema::{MemoryCategory, Pass};

use crate::run::{AlignmentMode, Prepared};
use crate::stats::Delta;

/// Where one run reached a device's peak.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeakPlace {
    /// The run's label.
    pub run: String,
    /// Live bytes at the peak.
    pub live_bytes: u64,
    /// Time relative to the run's time origin (start of its measured region), ns; negative
    /// before it.
    pub at_ns: i128,
    /// Pass holding the peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Path of the span holding the peak (names joined by `/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_path: Option<String>,
    /// Category holding the most bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dominant_category: Option<MemoryCategory>,
}

/// One category at a device's peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryDelta {
    /// Category.
    pub category: MemoryCategory,
    /// Its live bytes at the device peak.
    pub bytes: Delta,
}

/// Storages of one key live at the peak on one side only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageGroup {
    /// Aligned path of the allocating span (span-path alignment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_path: Option<String>,
    /// Pass of the allocating span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Arc<[u64]>>,
    /// Dtype.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<Arc<str>>,
    /// Category.
    pub category: MemoryCategory,
    /// The first storage's label, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<Arc<str>>,
    /// Storages.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The first storage existed before the capture began (no allocating span).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pre_existing: bool,
}

impl StorageGroup {
    /// The allocating span's path, `before capture` for a pre-existing storage without one,
    /// else `-`.
    pub fn span_text(&self) -> &str {
        match &self.span_path {
            Some(p) => p,
            None if self.pre_existing => "before capture",
            None => "-",
        }
    }

    /// The allocating span's pass, `before capture` for a pre-existing storage without one,
    /// else `-`.
    pub fn pass_text(&self) -> &'static str {
        match self.pass {
            Some(p) => p.as_str(),
            None if self.pre_existing => "before capture",
            None => "-",
        }
    }
}

/// How one category's change at the peak adds up from the live sets (first runs): the bytes
/// that entered minus those that left plus the change of the storages live at both peaks
/// equals the category's change, to the byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveSetCategory {
    /// Category.
    pub category: MemoryCategory,
    /// Bytes live at the baseline's peak only (they left the set).
    pub left_bytes: u64,
    /// Bytes live at the candidate's peak only (they entered it).
    pub entered_bytes: u64,
    /// Bytes of the storages live at both peaks, on the baseline.
    pub matched_baseline_bytes: u64,
    /// Bytes of the same storages on the candidate (a storage without a shape may differ).
    pub matched_candidate_bytes: u64,
}

impl LiveSetCategory {
    /// Bytes at the baseline's peak: left + matched (baseline side).
    pub fn baseline_bytes(&self) -> u64 {
        self.left_bytes.saturating_add(self.matched_baseline_bytes)
    }

    /// Bytes at the candidate's peak: entered + matched (candidate side).
    pub fn candidate_bytes(&self) -> u64 {
        self.entered_bytes
            .saturating_add(self.matched_candidate_bytes)
    }

    /// Candidate − baseline bytes: entered − left + the matched storages' change.
    pub fn change_bytes(&self) -> i128 {
        i128::from(self.candidate_bytes()) - i128::from(self.baseline_bytes())
    }

    /// The matched storages' change (candidate − baseline bytes).
    pub fn matched_change_bytes(&self) -> i128 {
        i128::from(self.matched_candidate_bytes) - i128::from(self.matched_baseline_bytes)
    }
}

/// Storages live at a device's peak on one side only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveSetDiff {
    /// Storages live at both peaks (matched).
    pub matched_count: u64,
    /// Their bytes on the candidate side.
    pub matched_bytes: u64,
    /// Their bytes on the baseline side (a storage without a shape may differ in size).
    pub matched_baseline_bytes: u64,
    /// Live at the baseline's peak only: they left the live-at-peak set.
    pub baseline_only: Vec<StorageGroup>,
    /// Count of those storages.
    pub baseline_only_count: u64,
    /// Their bytes.
    pub baseline_only_bytes: u64,
    /// Live at the candidate's peak only: they entered it.
    pub candidate_only: Vec<StorageGroup>,
    /// Count.
    pub candidate_only_count: u64,
    /// Bytes.
    pub candidate_only_bytes: u64,
    /// Per category with bytes on either side (in [`MemoryCategory::ALL`] order): how its
    /// change at the peak adds up.
    pub by_category: Vec<LiveSetCategory>,
}

/// One device on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceDelta {
    /// Device label.
    pub device: String,
    /// The device's own peak live bytes.
    pub peak_bytes: Delta,
    /// Every category live at the device peak on some run (an absent category of a run with a
    /// peak is 0 bytes there).
    pub by_category: Vec<CategoryDelta>,
    /// Where each baseline run reached the peak.
    pub baseline_peaks: Vec<PeakPlace>,
    /// Where each candidate run reached it.
    pub candidate_peaks: Vec<PeakPlace>,
    /// The bytes at the device peak that do not change with the batch (parameters, gradients,
    /// optimizer state) — `trace_graph::batch_split`.
    pub fixed_bytes: Delta,
    /// The bytes at the device peak that scale with the batch (activations); `other` is
    /// neither.
    pub batch_scaled_bytes: Delta,
    /// Storages live at the peak on one side only (first runs; absent when a side has no peak
    /// on this device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_peak: Option<LiveSetDiff>,
    /// The device's live bytes over time in the baseline's first run, for the page's overlaid
    /// chart: `(ns from the run's measured-region start, live bytes)`, at most
    /// [`TIMELINE_POINTS`] points, each its time bucket's highest value (the run's exact peak is
    /// one of them); empty without memory events on the device. Not in `--json` (the peaks and
    /// live sets are).
    #[serde(skip)]
    pub baseline_timeline: Vec<(i64, u64)>,
    /// The same for the candidate's first run.
    #[serde(skip)]
    pub candidate_timeline: Vec<(i64, u64)>,
}

/// Points of each side's memory timeline in [`DeviceDelta`].
pub const TIMELINE_POINTS: usize = 200;

/// The memory timeline of `device` in run `p` (see [`DeviceDelta::baseline_timeline`]).
fn timeline(p: &Prepared<'_>, device: &str) -> Vec<(i64, u64)> {
    let Some(l) = logical(p) else {
        return Vec::new();
    };
    let origin = i128::from(p.run.analysis.time_origin_ns);
    l.display_timeline(TIMELINE_POINTS, Some(device))
        .map(|series| {
            series
                .iter()
                .map(|pt| {
                    let t = (i128::from(pt.timestamp_ns) - origin)
                        .clamp(i128::from(i64::MIN), i128::from(i64::MAX));
                    (t as i64, pt.live_bytes)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The memory comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryDiff {
    /// Global logical peak (sum over devices at the first-reached simultaneous maximum).
    pub peak_bytes: Delta,
    /// Per device, sorted by label; a device seen on one side only has an unobserved side.
    pub devices: Vec<DeviceDelta>,
    /// How storages were matched.
    pub storages_matched_by: AlignmentMode,
    /// Some run's capture ended early or dropped events: its figures are lower bounds.
    pub lower_bound: bool,
}

fn logical<'a>(p: &'a Prepared<'_>) -> Option<&'a LogicalMemoryProfile> {
    p.run.analysis.memory.logical.as_ref()
}

/// Why memory cannot be compared, or `None`.
pub(crate) fn unavailable(baseline: &[Prepared<'_>], candidate: &[Prepared<'_>]) -> Option<String> {
    for (side, runs) in [("baseline", baseline), ("candidate", candidate)] {
        for p in runs {
            let m = &p.run.analysis.memory;
            if m.logical_overflow.is_some() {
                return Some(format!(
                    "{side} {}: allocation sizes add up past 2^64 bytes (no logical figure)",
                    p.run.label
                ));
            }
            if m.logical.is_none() {
                return Some(format!("{side} {}: no memory events", p.run.label));
            }
        }
    }
    None
}

fn place(p: &Prepared<'_>, device: &str) -> Option<PeakPlace> {
    let l = logical(p)?;
    let peak = l.device(device).ok()?.peak.as_ref()?;
    let doc = p.run.doc;
    let span_path = peak
        .context
        .span_id
        .as_deref()
        .and_then(|id| p.run.analysis.spans.indexed_path_of_id(doc, id));
    Some(PeakPlace {
        run: p.run.label.to_string(),
        live_bytes: peak.live_bytes,
        at_ns: i128::from(peak.timestamp_ns) - i128::from(p.run.analysis.time_origin_ns),
        pass: peak.context.pass,
        span_path,
        dominant_category: peak.context.dominant_category,
    })
}

/// Matching key of a storage: aligned span position (or pass), shape, dtype, category.
type StorageKey = (
    Option<u32>,
    Option<Arc<[u64]>>,
    Option<Arc<str>>,
    MemoryCategory,
);

/// Resolves the allocating span of a run's storages once per distinct span: storages share
/// their span id's `Arc` (trace-memory's shared strings), so the pointer is the cache key.
struct SpanResolver<'p, 'a> {
    p: &'p Prepared<'a>,
    mode: AlignmentMode,
    cache: FxHashMap<usize, (Option<u32>, Option<Pass>)>,
}

impl<'p, 'a> SpanResolver<'p, 'a> {
    fn new(p: &'p Prepared<'a>, mode: AlignmentMode) -> Self {
        Self {
            p,
            mode,
            cache: FxHashMap::default(),
        }
    }

    /// (matching position, pass) of a storage's allocating span.
    fn resolve(&mut self, l: &StorageLifetime) -> (Option<u32>, Option<Pass>) {
        let Some(id) = l.span_id.as_ref() else {
            return (None, None);
        };
        let (p, mode) = (self.p, self.mode);
        *self
            .cache
            .entry(Arc::as_ptr(id) as *const u8 as usize)
            .or_insert_with(|| {
                let doc = p.run.doc;
                let span = doc.sym(id).and_then(|s| doc.span_index(s));
                let pass = span.and_then(|i| p.run.analysis.spans.pass[i]);
                let position = match mode {
                    AlignmentMode::SpanPaths => span.and_then(|i| p.keys[i]),
                    AlignmentMode::Passes => pass.map(|x| x as u32),
                };
                (position, pass)
            })
    }
}

fn live_set_diff<'p, 'a>(
    b: &'p Prepared<'a>,
    c: &'p Prepared<'a>,
    device: &str,
    mode: AlignmentMode,
    paths: &[String],
) -> Option<LiveSetDiff> {
    let live = |p: &'p Prepared<'a>| -> Option<Vec<&'p StorageLifetime>> {
        let l = logical(p)?;
        let peak = l.device(device).ok()?.peak.as_ref()?;
        Some(l.live_allocations_after(peak.event_index, Some(device)))
    };
    let (lb, lc) = (live(b)?, live(c)?);
    type Sides<'x> = (Vec<&'x StorageLifetime>, Vec<&'x StorageLifetime>);
    let mut groups: FxHashMap<StorageKey, Sides<'p>> = FxHashMap::default();
    let mut order: Vec<StorageKey> = Vec::new();
    let mut resolvers = [SpanResolver::new(b, mode), SpanResolver::new(c, mode)];
    for (side, set) in [(0, &lb), (1, &lc)] {
        for &l in set {
            let position = resolvers[side].resolve(l).0;
            let key = (position, l.shape.clone(), l.dtype.clone(), l.category);
            let entry = groups.entry(key).or_insert_with_key(|k| {
                order.push(k.clone());
                (Vec::new(), Vec::new())
            });
            if side == 0 {
                entry.0.push(l);
            } else {
                entry.1.push(l);
            }
        }
    }
    let mut out = LiveSetDiff {
        matched_count: 0,
        matched_bytes: 0,
        matched_baseline_bytes: 0,
        baseline_only: Vec::new(),
        baseline_only_count: 0,
        baseline_only_bytes: 0,
        candidate_only: Vec::new(),
        candidate_only_count: 0,
        candidate_only_bytes: 0,
        by_category: Vec::new(),
    };
    let mut by_category: BTreeMap<MemoryCategory, LiveSetCategory> = BTreeMap::new();
    // Sums below are of distinct storages live at one moment on one device: bounded by that
    // device's peak, a checked figure of trace-memory.
    for key in order {
        let (bs, cs) = &groups[&key];
        let matched = bs.len().min(cs.len());
        out.matched_count += matched as u64;
        let matched_c: u64 = cs[..matched].iter().map(|l| l.bytes).sum();
        let matched_b: u64 = bs[..matched].iter().map(|l| l.bytes).sum();
        out.matched_bytes += matched_c;
        out.matched_baseline_bytes += matched_b;
        let category = by_category.entry(key.3).or_insert_with(|| LiveSetCategory {
            category: key.3,
            left_bytes: 0,
            entered_bytes: 0,
            matched_baseline_bytes: 0,
            matched_candidate_bytes: 0,
        });
        category.matched_baseline_bytes += matched_b;
        category.matched_candidate_bytes += matched_c;
        category.left_bytes += bs[matched..].iter().map(|l| l.bytes).sum::<u64>();
        category.entered_bytes += cs[matched..].iter().map(|l| l.bytes).sum::<u64>();
        for (side, rest) in [(0, &bs[matched..]), (1, &cs[matched..])] {
            let Some(first) = rest.first() else { continue };
            let bytes: u64 = rest.iter().map(|l| l.bytes).sum();
            let (span_path, pass) = match mode {
                AlignmentMode::SpanPaths => (
                    key.0.map(|k| paths[k as usize].clone()),
                    resolvers[side].resolve(first).1,
                ),
                AlignmentMode::Passes => (None, key.0.and_then(pass_of_index)),
            };
            let group = StorageGroup {
                span_path,
                pass,
                shape: key.1.clone(),
                dtype: key.2.clone(),
                category: key.3,
                label: first.label.clone(),
                count: rest.len() as u64,
                bytes,
                pre_existing: first.pre_existing,
            };
            if side == 0 {
                out.baseline_only_count += group.count;
                out.baseline_only_bytes += bytes;
                out.baseline_only.push(group);
            } else {
                out.candidate_only_count += group.count;
                out.candidate_only_bytes += bytes;
                out.candidate_only.push(group);
            }
        }
    }
    out.by_category = by_category.into_values().collect();
    let rank = |g: &StorageGroup, h: &StorageGroup| h.bytes.cmp(&g.bytes);
    out.baseline_only.sort_by(rank);
    out.candidate_only.sort_by(rank);
    Some(out)
}

fn pass_of_index(i: u32) -> Option<Pass> {
    [Pass::Forward, Pass::Backward, Pass::Optimizer]
        .into_iter()
        .find(|p| *p as u32 == i)
}

/// Compares the memory of both sides (callers checked [`unavailable`]).
pub(crate) fn compare_memory(
    baseline: &[Prepared<'_>],
    candidate: &[Prepared<'_>],
    mode: AlignmentMode,
    paths: &[String],
) -> MemoryDiff {
    let peak = |runs: &[Prepared<'_>]| -> Vec<u64> {
        runs.iter()
            .filter_map(|p| logical(p)?.peak.as_ref().map(|x| x.live_bytes))
            .collect()
    };
    let devices: BTreeSet<String> = baseline
        .iter()
        .chain(candidate)
        .filter_map(logical)
        .flat_map(|l| l.by_device.iter().map(|d| d.device.clone()))
        .collect();
    let mut out = Vec::new();
    for device in devices {
        let device_peak = |p: &Prepared<'_>| {
            logical(p)
                .and_then(|l| l.device(&device).ok())
                .and_then(|d| d.peak.clone())
        };
        let peaks = |runs: &[Prepared<'_>]| -> Vec<u64> {
            runs.iter()
                .filter_map(|p| device_peak(p).map(|x| x.live_bytes))
                .collect()
        };
        let mut categories: BTreeMap<MemoryCategory, ()> = BTreeMap::new();
        for p in baseline.iter().chain(candidate) {
            if let Some(d) = device_peak(p) {
                categories.extend(d.by_category.keys().map(|&c| (c, ())));
            }
        }
        let by_category = categories
            .into_keys()
            .map(|category| {
                let bytes = |runs: &[Prepared<'_>]| -> Vec<u64> {
                    runs.iter()
                        .filter_map(|p| {
                            device_peak(p)
                                .map(|d| d.by_category.get(&category).copied().unwrap_or(0))
                        })
                        .collect()
                };
                CategoryDelta {
                    category,
                    bytes: Delta::of(bytes(baseline), bytes(candidate)),
                }
            })
            .collect();
        let split = |runs: &[Prepared<'_>]| -> (Vec<u64>, Vec<u64>) {
            runs.iter()
                .filter_map(|p| device_peak(p).map(|d| trace_graph::batch_split(&d.by_category)))
                .unzip()
        };
        let ((bf, bs), (cf, cs)) = (split(baseline), split(candidate));
        let live_at_peak = match (baseline.first(), candidate.first()) {
            (Some(b), Some(c)) => live_set_diff(b, c, &device, mode, paths),
            _ => None,
        };
        out.push(DeviceDelta {
            peak_bytes: Delta::of(peaks(baseline), peaks(candidate)),
            by_category,
            fixed_bytes: Delta::of(bf, cf),
            batch_scaled_bytes: Delta::of(bs, cs),
            baseline_peaks: baseline.iter().filter_map(|p| place(p, &device)).collect(),
            candidate_peaks: candidate.iter().filter_map(|p| place(p, &device)).collect(),
            live_at_peak,
            baseline_timeline: baseline
                .first()
                .map_or_else(Vec::new, |p| timeline(p, &device)),
            candidate_timeline: candidate
                .first()
                .map_or_else(Vec::new, |p| timeline(p, &device)),
            device,
        });
    }
    MemoryDiff {
        peak_bytes: Delta::of(peak(baseline), peak(candidate)),
        devices: out,
        storages_matched_by: mode,
        lower_bound: baseline
            .iter()
            .chain(candidate)
            .any(|p| p.run.analysis.health.memory_lower_bound),
    }
}
