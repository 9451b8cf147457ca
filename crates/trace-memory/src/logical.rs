//! The logical plane: storage lifetimes from `memory` events, simultaneous peaks, totals.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::{MemoryCategory, TraceDocument};

use crate::error::MemoryQueryError;
use crate::lifetime::{build_lifetimes, ranked_live, StorageLifetime};
use crate::replay::{category_index, replay, Life, CATEGORIES, OPEN};
use crate::steps::{findings_support, step_peaks, FindingsSupport, StepPeak};
use crate::strings::Resolver;
use crate::timeline::{LogicalTimeline, TimelinePoint};

/// The first-reached global simultaneous peak of live logical bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogicalPeak {
    /// Time of the batch after which the peak was first reached, ns.
    pub timestamp_ns: u64,
    /// Live bytes over all devices (pre-existing storages included).
    pub live_bytes: u64,
    /// Live bytes per device at the peak.
    pub by_device: BTreeMap<String, u64>,
    /// Live bytes per category at the peak.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// Every storage live at the peak, ranked by bytes (descending), then alloc time, device,
    /// storage id. Displays show the top N and "M more = X bytes"; nothing is dropped here.
    pub live_allocations: Vec<StorageLifetime>,
}

impl LogicalPeak {
    /// The top `n` live allocations and the count and bytes of the rest.
    pub fn top(&self, n: usize) -> (&[StorageLifetime], usize, u64) {
        let n = n.min(self.live_allocations.len());
        let rest = &self.live_allocations[n..];
        (
            &self.live_allocations[..n],
            rest.len(),
            rest.iter().map(|l| l.bytes).sum(),
        )
    }
}

/// The peak of one device (its own first-reached maximum; never another device's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicePeak {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Live bytes on this device.
    pub live_bytes: u64,
    /// Live bytes per category on this device at its peak.
    pub by_category: BTreeMap<MemoryCategory, u64>,
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

/// Compact data kept for per-node metrics and queries (not serialized).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Compact {
    pub lives: Vec<Life>,
}

/// Evidence derived only from `memory` events: storage lifetimes keyed by (device, storage id)
/// — trace/6: (device, tensor id), with `aliases_detectable = false`.
///
/// Semantics: events are applied in `(timestamp_ns, file order)`; all events of one timestamp
/// form a batch and every live figure (peaks, timeline) is read after the whole batch.
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
    /// Peaks inside forward, backward and optimizer spans (only steps with spans).
    pub step_peaks: Vec<StepPeak>,
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
    /// Every storage lifetime, by alloc time then file order.
    pub lifetimes: Vec<StorageLifetime>,
    #[serde(skip)]
    pub(crate) compact: Compact,
}

impl LogicalMemoryProfile {
    /// Display series of at most `points` points that always contains the exact global peak
    /// (see [`LogicalTimeline::downsample_indices`]).
    pub fn downsampled_timeline(&self, points: usize) -> Vec<TimelinePoint> {
        self.timeline.downsampled(points)
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

    /// Storages live after the batch at `timestamp_ns`, ranked like [`LogicalPeak::live_allocations`].
    /// O(L log L) for the live set; rebuilds from lifetimes (nothing is cached per time).
    pub fn live_allocations_at(&self, timestamp_ns: u64) -> Vec<&StorageLifetime> {
        // Ranking needs no document: bytes desc, start, device, storage id, lifetime order.
        let mut idx: Vec<usize> = (0..self.compact.lives.len())
            .filter(|&i| self.compact.lives[i].live_after(timestamp_ns))
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

/// Builds the logical plane; `None` when the trace has no memory event.
pub(crate) fn analyze_logical(doc: &TraceDocument) -> Option<LogicalMemoryProfile> {
    if doc.memory.is_empty() {
        return None;
    }
    let r = replay(doc);
    let mut res = Resolver::new(doc);
    let lifetimes = build_lifetimes(doc, &r, &mut res);
    let device_names: Vec<String> = r.devices.iter().map(|&d| doc.str(d).to_string()).collect();

    // Global peak: rebuild the live set once, at the peak time.
    let peak = r.peak.map(|(ts, live_bytes)| {
        let idx = ranked_live(doc, &r.lives, |l| l.live_after(ts));
        let (by_device, by_category) = breakdown(idx.iter().map(|&i| &lifetimes[i as usize]));
        LogicalPeak {
            timestamp_ns: ts,
            live_bytes,
            by_device,
            by_category,
            live_allocations: idx.iter().map(|&i| lifetimes[i as usize].clone()).collect(),
        }
    });

    // Device peaks, live at end and category totals in one pass over lifetimes.
    let nd = r.devices.len();
    let mut dev_peak_cat = vec![[0u64; CATEGORIES]; nd];
    let mut dev_peak_count = vec![0u64; nd];
    let mut dev_end = vec![(0u64, 0u64); nd];
    let mut dev_end_cat = vec![[0u64; CATEGORIES]; nd];
    let mut cat_totals: [CategoryTotals; CATEGORIES] = Default::default();
    let mut seen_cat = [false; CATEGORIES];
    for (l, lt) in r.lives.iter().zip(&lifetimes) {
        let d = l.device as usize;
        let k = category_index(lt.category);
        seen_cat[k] = true;
        let cat = &mut cat_totals[k];
        if lt.pre_existing {
            cat.pre_existing_count += 1;
            cat.pre_existing_bytes = cat.pre_existing_bytes.saturating_add(l.bytes);
        } else {
            cat.allocation_count += 1;
            cat.total_allocated_bytes = cat.total_allocated_bytes.saturating_add(l.bytes);
        }
        if l.end_ns == OPEN {
            cat.live_at_end_count += 1;
            cat.live_at_end_bytes = cat.live_at_end_bytes.saturating_add(l.bytes);
            dev_end[d].0 += 1;
            dev_end[d].1 = dev_end[d].1.saturating_add(l.bytes);
            dev_end_cat[d][k] = dev_end_cat[d][k].saturating_add(l.bytes);
        }
        if let Some((ts, _)) = r.device_acc[d].peak {
            if l.live_after(ts) {
                dev_peak_cat[d][k] = dev_peak_cat[d][k].saturating_add(l.bytes);
                dev_peak_count[d] += 1;
            }
        }
    }
    let mut totals = LogicalTotals::default();
    for (k, c) in cat_totals.into_iter().enumerate() {
        if seen_cat[k] {
            totals.by_category.insert(MemoryCategory::ALL[k], c);
        }
    }
    let mut live_at_end = LiveAtEnd {
        trace_truncated: doc.is_truncated(),
        timestamp_ns: r.last_ns,
        ..LiveAtEnd::default()
    };
    for d in 0..nd {
        live_at_end.count += dev_end[d].0;
        live_at_end.bytes = live_at_end.bytes.saturating_add(dev_end[d].1);
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
    let mut by_device: Vec<LogicalDeviceStats> = r
        .device_acc
        .iter()
        .enumerate()
        .map(|(d, acc)| {
            totals.allocation_count += acc.allocation_count;
            totals.matched_free_count += acc.matched_free_count;
            totals.total_allocated_bytes = totals
                .total_allocated_bytes
                .saturating_add(acc.total_allocated_bytes);
            totals.pre_existing_count += acc.pre_existing_count;
            totals.pre_existing_bytes = totals
                .pre_existing_bytes
                .saturating_add(acc.pre_existing_bytes);
            LogicalDeviceStats {
                device: device_names[d].clone(),
                allocation_count: acc.allocation_count,
                matched_free_count: acc.matched_free_count,
                total_allocated_bytes: acc.total_allocated_bytes,
                pre_existing_count: acc.pre_existing_count,
                pre_existing_bytes: acc.pre_existing_bytes,
                unpaired_free_count: acc.unpaired_free_count,
                peak: acc.peak.map(|(ts, live_bytes)| DevicePeak {
                    timestamp_ns: ts,
                    live_bytes,
                    by_category: category_map(&dev_peak_cat[d]),
                    live_allocation_count: dev_peak_count[d],
                }),
                live_at_end_count: dev_end[d].0,
                live_at_end_bytes: dev_end[d].1,
            }
        })
        .collect();
    by_device.sort_by(|a, b| a.device.cmp(&b.device));
    totals.alias_event_count = r.alias_event_count;
    totals.unpaired_free_count = r.unmatched_frees.len() as u64;
    totals.size_mismatch_count = r.size_mismatches.len() as u64;
    totals.alloc_without_bytes_count = r.alloc_without_bytes_count;
    totals.unidentified_alloc_count = r.unidentified_alloc_count;

    let unmatched_frees = r
        .unmatched_frees
        .iter()
        .map(|&ei| {
            let e = &doc.memory[ei as usize];
            UnmatchedFree {
                timestamp_ns: e.timestamp_ns,
                device: res.s(e.device),
                storage_id: e.storage.map(|x| res.fresh(x)),
                tensor_id: e.tensor.map(|x| res.fresh(x)),
                bytes: e.bytes,
                event_index: ei as usize,
            }
        })
        .collect();
    let size_mismatches = r
        .size_mismatches
        .iter()
        .map(|&(li, ei)| {
            let life = &r.lives[li as usize];
            let alloc = &doc.memory[life.event as usize];
            let free = &doc.memory[ei as usize];
            SizeMismatch {
                device: res.s(alloc.device),
                storage_id: alloc.storage.map(|x| res.fresh(x)),
                alloc_bytes: life.bytes,
                free_bytes: free.bytes.unwrap_or(0),
                free_timestamp_ns: free.timestamp_ns,
                lifetime_index: li as usize,
            }
        })
        .collect();

    let timeline = LogicalTimeline {
        devices: device_names,
        totals: r.totals,
        changes: r.changes,
    };
    let step_peaks = step_peaks(doc, &r.lives, &lifetimes, &timeline);
    let findings = findings_support(doc, &r.lives, &mut res);
    Some(LogicalMemoryProfile {
        aliases_detectable: r.aliases_detectable,
        totals,
        peak,
        by_device,
        step_peaks,
        findings,
        live_at_end,
        unmatched_frees,
        size_mismatches,
        timeline,
        lifetimes,
        compact: Compact { lives: r.lives },
    })
}

/// Non-zero categories of a per-category array.
pub(crate) fn category_map(cells: &[u64; CATEGORIES]) -> BTreeMap<MemoryCategory, u64> {
    cells
        .iter()
        .enumerate()
        .filter(|(_, &b)| b > 0)
        .map(|(k, &b)| (MemoryCategory::ALL[k], b))
        .collect()
}

/// Bytes per device (by label) and per category of a set of lifetimes; O(k + devices).
pub(crate) fn breakdown<'a>(
    lifetimes: impl Iterator<Item = &'a StorageLifetime>,
) -> (BTreeMap<String, u64>, BTreeMap<MemoryCategory, u64>) {
    let mut by_device: BTreeMap<&str, u64> = BTreeMap::new();
    let mut cats = [0u64; CATEGORIES];
    for l in lifetimes {
        let slot = by_device.entry(&*l.device).or_insert(0);
        *slot = slot.saturating_add(l.bytes);
        let k = category_index(l.category);
        cats[k] = cats[k].saturating_add(l.bytes);
    }
    (
        by_device
            .into_iter()
            .map(|(d, b)| (d.to_string(), b))
            .collect(),
        category_map(&cats),
    )
}
