//! The logical plane: storage lifetimes from `memory` events, simultaneous peaks, totals.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{MemoryCategory, SharedStrings, TraceDocument};

use crate::context::{peak_context, PeakContext};
use crate::error::MemoryQueryError;
use crate::lifetime::{ranked, to_lifetime, StorageLifetime};
use crate::passes::{findings_support, pass_peaks, FindingsSupport, PassPeak};
use crate::replay::record::Replay;
use crate::replay::tracker::counts_breakdown;
use crate::replay::{Detail, Done, Life, CATEGORIES};
use crate::spans::SpanIndex;
use crate::timeline::{LogicalTimeline, TimelinePoint};

/// The first-reached global simultaneous peak of live logical bytes (summed over devices; with
/// more than one device the question "will it fit" is per device: see
/// [`LogicalDeviceStats::peak`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogicalPeak {
    /// Time of the event after which the peak was first reached, ns.
    pub timestamp_ns: u64,
    /// That event: its index in `doc.memory` (an allocation).
    pub event_index: usize,
    /// Live bytes over all devices (pre-existing storages included).
    pub live_bytes: u64,
    /// Live bytes per device at the peak.
    pub by_device: BTreeMap<String, u64>,
    /// Live bytes per category at the peak.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// The span, pass and dominant category holding the peak.
    #[serde(flatten)]
    pub context: PeakContext,
    /// Number of storages live at the peak.
    pub live_allocation_count: u64,
    /// The storages live at the peak, ranked by bytes (descending), then alloc time, device,
    /// storage id: every one ([`Detail::Full`]), or the first [`crate::SUMMARY_TOP`]
    /// ([`Detail::Summary`]). Displays show the top N and "M more = X bytes" from
    /// `live_allocation_count` and `live_bytes`.
    pub live_allocations: Vec<StorageLifetime>,
}

impl LogicalPeak {
    /// The top `n` live allocations (at most the listed ones) and the count and bytes of the
    /// rest (of every storage live at the peak, listed or not; the bytes are always known:
    /// `live_bytes` less the shown ones').
    pub fn top(&self, n: usize) -> (&[StorageLifetime], usize, Option<u64>) {
        let n = n.min(self.live_allocations.len());
        let shown = &self.live_allocations[..n];
        // bytes of distinct storages live at the peak: bounded by live_bytes
        let shown_bytes: u64 = shown.iter().map(|l| l.bytes).sum();
        (
            shown,
            (self.live_allocation_count - n as u64) as usize,
            Some(self.live_bytes - shown_bytes),
        )
    }
}

/// The peak of one device (its own first-reached maximum; never another device's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicePeak {
    /// Time of the event after which it was first reached, ns.
    pub timestamp_ns: u64,
    /// That event: its index in `doc.memory` (an allocation on this device).
    pub event_index: usize,
    /// Live bytes on this device.
    pub live_bytes: u64,
    /// Live bytes per category on this device at its peak.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// The span, pass and dominant category (of this device) holding the peak.
    #[serde(flatten)]
    pub context: PeakContext,
    /// Number of storages live on this device at its peak.
    pub live_allocation_count: u64,
}

/// Logical statistics of one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogicalDeviceStats {
    /// Device label.
    pub device: String,
    /// Allocations observed (pre-existing storages excluded).
    pub allocation_count: u64,
    /// Frees matched to a live storage (pre-existing ones included).
    pub matched_free_count: u64,
    /// Bytes of the observed allocations (pre-existing excluded).
    pub total_allocated_bytes: u64,
    /// Storages flagged `pre_existing`.
    pub pre_existing_count: u64,
    /// Their bytes.
    pub pre_existing_bytes: u64,
    /// Frees whose alloc was never seen.
    pub unpaired_free_count: u64,
    /// This device's peak; `None` when the device only has unmatched frees.
    pub peak: Option<DevicePeak>,
    /// Storages live at the end of the trace.
    pub live_at_end_count: u64,
    /// Their bytes.
    pub live_at_end_bytes: u64,
}

/// Totals of one category.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CategoryTotals {
    /// Allocations (pre-existing excluded).
    pub allocation_count: u64,
    /// Their bytes.
    pub total_allocated_bytes: u64,
    /// Pre-existing storages.
    pub pre_existing_count: u64,
    /// Their bytes.
    pub pre_existing_bytes: u64,
    /// Storages live at the end.
    pub live_at_end_count: u64,
    /// Their bytes.
    pub live_at_end_bytes: u64,
}

/// Whole-trace totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogicalTotals {
    /// Observed allocations: new lifetimes, pre-existing excluded (an alias is not one).
    pub allocation_count: u64,
    /// Frees matched to a live storage (pre-existing ones included).
    pub matched_free_count: u64,
    /// Bytes of the observed allocations (pre-existing excluded).
    pub total_allocated_bytes: u64,
    /// Storages flagged `pre_existing`.
    pub pre_existing_count: u64,
    /// Their bytes.
    pub pre_existing_bytes: u64,
    /// Allocs of an already-live storage (aliases; bytes counted once).
    pub alias_event_count: u64,
    /// Frees whose alloc was never seen (pre-existing or unmatched; they change no total).
    pub unpaired_free_count: u64,
    /// Frees stating a size other than their alloc's (the alloc size is used).
    pub size_mismatch_count: u64,
    /// Allocs without a `bytes` field (counted as 0 bytes).
    pub alloc_without_bytes_count: u64,
    /// Allocs with neither storage id nor tensor id (cannot be freed; live to the end).
    pub unidentified_alloc_count: u64,
    /// Per category.
    pub by_category: BTreeMap<MemoryCategory, CategoryTotals>,
}

/// What was live when the trace ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveAtEnd {
    /// True when the trace was cut short: these storages were live *when the trace ended*,
    /// not necessarily leaked.
    pub trace_truncated: bool,
    /// Time of the last memory event, ns.
    pub timestamp_ns: u64,
    /// Storages live at the end.
    pub count: u64,
    /// Their bytes (equals the final total of the timeline).
    pub bytes: u64,
    /// Per category.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// Per device.
    pub by_device: BTreeMap<String, u64>,
}

/// A free whose alloc was never seen (storage pre-existing the capture, or an unmatched free).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnmatchedFree {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Device label.
    pub device: Arc<str>,
    /// Storage id.
    pub storage_id: Option<Arc<str>>,
    /// Tensor id.
    pub tensor_id: Option<Arc<str>>,
    /// Bytes stated by the free; `None` = unknown (never assumed).
    pub bytes: Option<u64>,
    /// 0-based index of the event in `doc.memory`.
    pub event_index: usize,
}

/// A free stating a size other than its alloc's (a warning; the alloc size is used).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeMismatch {
    /// Device label.
    pub device: Arc<str>,
    /// Storage id.
    pub storage_id: Option<Arc<str>>,
    /// Bytes stated by the alloc (the size used).
    pub alloc_bytes: u64,
    /// Bytes stated by the free.
    pub free_bytes: u64,
    /// Time of the free, ns.
    pub free_timestamp_ns: u64,
    /// Index into [`LogicalMemoryProfile::lifetimes`].
    pub lifetime_index: usize,
}

/// Compact data kept for per-node metrics and queries (not serialized): aligned with
/// [`LogicalMemoryProfile::lifetimes`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Compact {
    pub lives: Vec<Life>,
    /// Sequence number of each event (index into `doc.memory`): every event (full detail) or
    /// `(event, seq)` of the reported peaks, sorted (summary).
    pub seq_of_event: SeqOfEvent,
    /// Time of each sequence number (full detail only).
    pub time_of_seq: Vec<u64>,
}

/// Sequence numbers of events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SeqOfEvent {
    /// Indexed by event.
    Dense(Vec<u32>),
    /// Sorted `(event, seq)` pairs.
    Sparse(Vec<(u32, u32)>),
}

impl Default for SeqOfEvent {
    fn default() -> Self {
        SeqOfEvent::Dense(Vec::new())
    }
}

impl SeqOfEvent {
    fn get(&self, event: usize) -> Option<u32> {
        match self {
            SeqOfEvent::Dense(v) => v.get(event).copied(),
            SeqOfEvent::Sparse(v) => v
                .binary_search_by_key(&(event as u64), |&(e, _)| e as u64)
                .ok()
                .map(|i| v[i].1),
        }
    }
}

/// Evidence derived only from `memory` events: storage lifetimes keyed by (device, storage id)
/// — trace/6: (device, tensor id), with `aliases_detectable = false`.
///
/// Semantics: events are applied one at a time in `(timestamp_ns, file order)` and every live
/// figure (peaks, timeline, pass peaks) is read after each event: the peak is the largest live
/// total any prefix of that order reaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogicalMemoryProfile {
    /// False when some event has no storage id (trace/6): identity is then (device, tensor id)
    /// and two tensors sharing one storage cannot be recognised as aliases (they count twice).
    pub aliases_detectable: bool,
    /// Totals.
    pub totals: LogicalTotals,
    /// The first-reached global simultaneous peak; `None` when no alloc was seen.
    pub peak: Option<LogicalPeak>,
    /// Per-device statistics, sorted by device label.
    pub by_device: Vec<LogicalDeviceStats>,
    /// Start of the measured region (the time origin of displays), or of the first memory event
    /// when the trace has no measured span, ns.
    pub time_origin_ns: u64,
    /// Peaks inside forward, backward and optimizer spans (only passes with spans).
    pub pass_peaks: Vec<PassPeak>,
    /// Figures for the memory findings.
    pub findings: FindingsSupport,
    /// What was live when the trace ended.
    pub live_at_end: LiveAtEnd,
    /// Frees whose alloc was never seen.
    pub unmatched_frees: Vec<UnmatchedFree>,
    /// Frees whose size differs from their alloc's.
    pub size_mismatches: Vec<SizeMismatch>,
    /// Change-list timeline.
    pub timeline: LogicalTimeline,
    /// Every storage lifetime, by alloc time then file order ([`Detail::Full`]); in a
    /// [`Detail::Summary`] profile only the ones the figures name — live at the global peak, at
    /// a device's peak, or at the end — in the same order.
    pub lifetimes: Vec<StorageLifetime>,
    /// How much per-event evidence this profile keeps (not serialized).
    #[serde(skip)]
    pub detail: Detail,
    #[serde(skip)]
    pub(crate) compact: Compact,
    /// Summary detail: the first [`crate::SUMMARY_TOP`] storages live at each device's peak,
    /// ranked: `(event index, device label, storages)`.
    #[serde(skip)]
    pub(crate) device_lists: Vec<(usize, String, Vec<StorageLifetime>)>,
}

impl LogicalMemoryProfile {
    /// Display series of at most `points` points spaced by time from [`Self::time_origin_ns`]
    /// to the last change, each its bucket's highest value; the exact peak of the series is
    /// always one of them (see [`LogicalTimeline::display_series`]). `device` selects one device
    /// (an error naming the known ones when it has no events).
    pub fn display_timeline(
        &self,
        points: usize,
        device: Option<&str>,
    ) -> Result<Vec<TimelinePoint>, MemoryQueryError> {
        let device = match device {
            None => None,
            Some(d) => {
                self.device(d)?;
                self.timeline.devices.iter().position(|x| x == d)
            }
        };
        Ok(self
            .timeline
            .display_series(points, self.time_origin_ns, device))
    }

    /// Statistics of one device; an error naming the known devices when the trace has no memory
    /// event for it (never zeros).
    pub fn device(&self, device: &str) -> Result<&LogicalDeviceStats, MemoryQueryError> {
        self.by_device
            .iter()
            .find(|d| d.device == device)
            .ok_or_else(|| MemoryQueryError::UnknownDevice {
                device: device.to_string(),
                known: self
                    .by_device
                    .iter()
                    .map(|d| d.device.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Storages live at the end of the trace (`end_ns == None`), in lifetime order.
    pub fn live_at_end_lifetimes(&self) -> impl Iterator<Item = &StorageLifetime> {
        self.lifetimes.iter().filter(|l| l.end_ns.is_none())
    }

    /// Frees whose alloc was never seen (for the health check's `unpaired_free`).
    pub fn unpaired_free_count(&self) -> u64 {
        self.totals.unpaired_free_count
    }

    /// Frees whose size differs from the alloc (for `allocation_size_mismatch`).
    pub fn size_mismatch_count(&self) -> u64 {
        self.totals.size_mismatch_count
    }

    /// Storages live after every event at or before `timestamp_ns`, ranked like
    /// [`LogicalPeak::live_allocations`]. O(L log L); nothing is cached per time. A
    /// [`Detail::Summary`] profile keeps no per-event times: empty.
    pub fn live_allocations_at(&self, timestamp_ns: u64) -> Vec<&StorageLifetime> {
        let seq = self
            .compact
            .time_of_seq
            .partition_point(|&t| t <= timestamp_ns);
        match seq.checked_sub(1) {
            Some(s) => self.ranked_after_seq(s as u32, None),
            None => Vec::new(),
        }
    }

    /// Storages live right after the event `event_index` (index into `doc.memory`) was applied,
    /// on `device` only when given, ranked like [`LogicalPeak::live_allocations`] — e.g. the
    /// live set of a [`DevicePeak`]. Empty for an index past the events. A [`Detail::Summary`]
    /// profile answers for a device's peak (with that device) and for the global peak (all
    /// devices), listing the first [`crate::SUMMARY_TOP`]; empty for any other question.
    pub fn live_allocations_after(
        &self,
        event_index: usize,
        device: Option<&str>,
    ) -> Vec<&StorageLifetime> {
        if self.detail == Detail::Summary {
            if let Some(d) = device {
                let list = self
                    .device_lists
                    .iter()
                    .find(|(e, name, _)| *e == event_index && name == d);
                return list.map_or(Vec::new(), |(_, _, l)| l.iter().collect());
            }
            return match &self.peak {
                Some(p) if p.event_index == event_index => p.live_allocations.iter().collect(),
                _ => Vec::new(),
            };
        }
        match self.compact.seq_of_event.get(event_index) {
            Some(seq) => self.ranked_after_seq(seq, device),
            None => Vec::new(),
        }
    }

    fn ranked_after_seq(&self, seq: u32, device: Option<&str>) -> Vec<&StorageLifetime> {
        // Ranking needs no document: bytes desc, start, device, storage id, alloc file order.
        let mut idx: Vec<usize> = (0..self.compact.lives.len())
            .filter(|&i| self.compact.lives[i].live_after(seq))
            .filter(|&i| device.is_none_or(|d| &*self.lifetimes[i].device == d))
            .collect();
        idx.sort_by(|&a, &b| {
            let (x, y) = (&self.lifetimes[a], &self.lifetimes[b]);
            y.bytes
                .cmp(&x.bytes)
                .then(x.start_ns.cmp(&y.start_ns))
                .then_with(|| x.device.cmp(&y.device))
                .then_with(|| x.storage_id.cmp(&y.storage_id))
                .then(
                    self.compact.lives[a]
                        .event
                        .cmp(&self.compact.lives[b].event),
                )
        });
        idx.into_iter().map(|i| &self.lifetimes[i]).collect()
    }
}

/// Builds the logical plane from a replay that did not overflow.
pub(crate) fn analyze_logical(
    doc: &TraceDocument,
    spans: &SpanIndex,
    mut r: Replay,
    summary_top: usize,
) -> LogicalMemoryProfile {
    let mut res = SharedStrings::new(doc);
    let devices = std::mem::take(&mut r.devices);
    let device_names: Vec<String> = devices.iter().map(|&d| doc.str(d).to_string()).collect();
    let nd = devices.len();
    let detail = r.detail;
    let lt = |d: &Done, res: &mut SharedStrings<'_>| to_lifetime(d, &devices, res);

    let listed =
        |t: &crate::replay::tracker::Tracker, n: Option<usize>, res: &mut SharedStrings<'_>| {
            let set = match n {
                None => ranked(doc, &devices, t.listed(&r.end)),
                Some(n) => crate::lifetime::top(doc, &devices, t.listed(&r.end), n),
            };
            set.iter().map(|d| lt(d, res)).collect::<Vec<_>>()
        };
    let top = match detail {
        Detail::Full => None,
        Detail::Summary => Some(summary_top),
    };

    // Global peak: its figures from the counts at that moment, the storages live at it ranked.
    let peak = r.peak.map(|p| {
        let counts = &r.peak_set.counts;
        let (by_device, by_category) = counts_breakdown(counts, None, &device_names);
        LogicalPeak {
            timestamp_ns: p.timestamp_ns,
            event_index: p.event as usize,
            live_bytes: p.live_bytes,
            context: peak_context(doc, spans, &mut res, p.span, p.timestamp_ns, &by_category),
            by_device,
            by_category,
            live_allocation_count: counts.count(None),
            live_allocations: listed(&r.peak_set, top, &mut res),
        }
    });

    // Category totals and what was live at the end. Every sum below is a sum of distinct
    // lifetimes' bytes: it fits (the caller checked the total).
    let mut totals = category_totals(&r);
    let dev_end = &r.end_stats.device;
    let live_at_end = live_at_end(doc, &r, &device_names);
    let mut by_device: Vec<LogicalDeviceStats> = Vec::with_capacity(nd);
    let mut device_lists = Vec::new();
    for (d, acc) in r.device_acc.iter().enumerate() {
        totals.allocation_count += acc.allocation_count;
        totals.matched_free_count += acc.matched_free_count;
        totals.total_allocated_bytes += acc.total_allocated_bytes;
        totals.pre_existing_count += acc.pre_existing_count;
        totals.pre_existing_bytes += acc.pre_existing_bytes;
        let peak = acc.peak.map(|p| {
            let counts = &r.device_sets[d].counts;
            let (_, by_category) = counts_breakdown(counts, Some(d), &device_names);
            DevicePeak {
                timestamp_ns: p.timestamp_ns,
                event_index: p.event as usize,
                live_bytes: p.live_bytes,
                context: peak_context(doc, spans, &mut res, p.span, p.timestamp_ns, &by_category),
                by_category,
                live_allocation_count: counts.count(Some(d as u32)),
            }
        });
        if let (Some(p), Detail::Summary) = (acc.peak, detail) {
            let list = listed(&r.device_sets[d], top, &mut res);
            device_lists.push((p.event as usize, device_names[d].clone(), list));
        }
        by_device.push(LogicalDeviceStats {
            device: device_names[d].clone(),
            allocation_count: acc.allocation_count,
            matched_free_count: acc.matched_free_count,
            total_allocated_bytes: acc.total_allocated_bytes,
            pre_existing_count: acc.pre_existing_count,
            pre_existing_bytes: acc.pre_existing_bytes,
            unpaired_free_count: acc.unpaired_free_count,
            peak,
            live_at_end_count: dev_end[d].0,
            live_at_end_bytes: dev_end[d].1,
        });
    }
    by_device.sort_by(|a, b| a.device.cmp(&b.device));
    totals.alias_event_count = r.alias_event_count;
    totals.unpaired_free_count = r.unmatched.len() as u64;
    totals.size_mismatch_count = r.mismatches.len() as u64;
    totals.alloc_without_bytes_count = r.alloc_without_bytes_count;
    totals.unidentified_alloc_count = r.unidentified_alloc_count;

    let (unmatched_frees, size_mismatches) = unpaired(&r, &devices, &mut res);

    let pass_peaks = pass_peaks(doc, spans, &r, &devices, &device_names, &mut res);
    let findings = findings_support(doc, spans, &r, &mut res);
    let time_origin_ns = spans
        .measured_region(doc)
        .map_or(r.first_ns, |(start, _)| start);

    // What stays per event (full) or per reported storage (summary).
    let (lifetimes, compact, timeline) =
        kept_evidence(doc, &mut r, &devices, device_names, &mut res);
    LogicalMemoryProfile {
        aliases_detectable: r.aliases_detectable,
        totals,
        peak,
        by_device,
        time_origin_ns,
        pass_peaks,
        findings,
        live_at_end,
        unmatched_frees,
        size_mismatches,
        timeline,
        lifetimes,
        detail,
        compact,
        device_lists,
    }
}

/// The totals by category (allocations, bytes, before the capture, live at the end) of the
/// categories the replay saw; the device figures are added by the caller.
fn category_totals(r: &Replay) -> LogicalTotals {
    let mut cat_totals: [CategoryTotals; CATEGORIES] = Default::default();
    for (k, c) in r.categories.iter().enumerate() {
        let t = &mut cat_totals[k];
        t.allocation_count = c.allocation_count;
        t.total_allocated_bytes = c.total_allocated_bytes;
        t.pre_existing_count = c.pre_existing_count;
        t.pre_existing_bytes = c.pre_existing_bytes;
    }
    for (k, &(count, bytes)) in r.end_stats.category.iter().enumerate() {
        cat_totals[k].live_at_end_count = count;
        cat_totals[k].live_at_end_bytes = bytes;
    }
    let mut totals = LogicalTotals::default();
    for (k, c) in cat_totals.into_iter().enumerate() {
        if r.categories[k].seen {
            totals.by_category.insert(MemoryCategory::ALL[k], c);
        }
    }
    totals
}

/// What was live when the trace ended: counts and bytes, by device and by category.
fn live_at_end(doc: &TraceDocument, r: &Replay, device_names: &[String]) -> LiveAtEnd {
    let stats = &r.end_stats;
    let nd = device_names.len();
    let dev_end = &stats.device;
    let dev_end_cat: Vec<&[u64]> = (0..nd)
        .map(|d| &stats.cells[d * CATEGORIES..(d + 1) * CATEGORIES])
        .collect();
    let mut live_at_end = LiveAtEnd {
        trace_truncated: doc.is_truncated(),
        timestamp_ns: r.last_ns,
        ..LiveAtEnd::default()
    };
    for d in 0..nd {
        live_at_end.count += dev_end[d].0;
        live_at_end.bytes += dev_end[d].1;
        if dev_end[d].1 > 0 {
            live_at_end
                .by_device
                .insert(device_names[d].clone(), dev_end[d].1);
        }
        for (k, &b) in dev_end_cat[d].iter().enumerate() {
            if b > 0 {
                *live_at_end
                    .by_category
                    .entry(MemoryCategory::ALL[k])
                    .or_insert(0) += b;
            }
        }
    }
    live_at_end
}

/// The frees that matched no live storage, and the frees whose bytes differ from their
/// alloc's.
fn unpaired(
    r: &Replay,
    devices: &[trace_schema::Sym],
    res: &mut SharedStrings<'_>,
) -> (Vec<UnmatchedFree>, Vec<SizeMismatch>) {
    let unmatched_frees: Vec<UnmatchedFree> = r
        .unmatched
        .iter()
        .map(|u| UnmatchedFree {
            timestamp_ns: u.timestamp_ns,
            device: res.get(u.device),
            storage_id: u.storage.clone(),
            tensor_id: u.tensor.clone(),
            bytes: u.bytes,
            event_index: u.event as usize,
        })
        .collect();
    let size_mismatches: Vec<SizeMismatch> = r
        .mismatches
        .iter()
        .map(|m| SizeMismatch {
            device: res.get(devices[m.device as usize]),
            storage_id: m.storage.clone(),
            alloc_bytes: m.alloc_bytes,
            free_bytes: m.free_bytes,
            free_timestamp_ns: m.free_timestamp_ns,
            lifetime_index: m.life as usize,
        })
        .collect();
    (unmatched_frees, size_mismatches)
}

/// What stays per event ([`Detail::Full`]: every lifetime, the event order, the timeline in
/// memory) or per reported storage ([`Detail::Summary`]: the storages live at the end, the
/// timeline's log).
fn kept_evidence(
    doc: &TraceDocument,
    r: &mut Replay,
    devices: &[trace_schema::Sym],
    device_names: Vec<String>,
    res: &mut SharedStrings<'_>,
) -> (Vec<StorageLifetime>, Compact, LogicalTimeline) {
    match r.detail {
        Detail::Full => {
            let lifetimes: Vec<StorageLifetime> = r
                .lifetimes
                .iter()
                .map(|d| {
                    to_lifetime(
                        d.as_ref().expect("every lifetime is finished"),
                        devices,
                        res,
                    )
                })
                .collect();
            let mut seq_of_event = vec![0u32; doc.memory_len()];
            for (seq, &e) in r.order.iter().enumerate() {
                seq_of_event[e as usize] = seq as u32;
            }
            let compact = Compact {
                lives: std::mem::take(&mut r.lives),
                seq_of_event: SeqOfEvent::Dense(seq_of_event),
                time_of_seq: std::mem::take(&mut r.times),
            };
            let timeline = LogicalTimeline {
                devices: device_names,
                totals: std::mem::take(&mut r.totals),
                changes: std::mem::take(&mut r.changes),
                log: None,
            };
            (lifetimes, compact, timeline)
        }
        Detail::Summary => {
            // The storages live at the end (the device peaks' lists are kept apart).
            let lifetimes = std::mem::take(&mut r.end_lifetimes);
            let compact = Compact {
                lives: Vec::new(),
                seq_of_event: SeqOfEvent::Sparse(Vec::new()),
                time_of_seq: Vec::new(),
            };
            let log = r.log.take().map(|l| match l.finish() {
                Ok(log) => log,
                Err(e) => panic!("cannot write the memory timeline log: {e}"),
            });
            let timeline = LogicalTimeline {
                devices: device_names,
                totals: Vec::new(),
                changes: Vec::new(),
                log,
            };
            (lifetimes, compact, timeline)
        }
    }
}
