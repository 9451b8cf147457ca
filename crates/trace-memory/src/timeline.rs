//! The logical timeline as a change list, and its downsampled display series.

use std::collections::BTreeMap;

use serde::Serialize;
use trace_schema::MemoryCategory;

use crate::replay::{category_index, CATEGORIES};

/// Total live bytes after one timestamp batch (emitted only for batches that changed a cell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TotalPoint {
    /// Batch time, ns.
    pub timestamp_ns: u64,
    /// Live bytes over all devices and categories after the batch.
    pub live_bytes: u64,
}

/// The new value of one device × category cell after a batch that changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CellChange {
    /// Batch time, ns.
    pub timestamp_ns: u64,
    /// Index into [`LogicalTimeline::devices`].
    pub device: u32,
    /// Category.
    pub category: MemoryCategory,
    /// Live bytes of this device × category after the batch.
    pub live_bytes: u64,
}

/// Live bytes over time as a change list: one [`TotalPoint`] per batch that changed anything and
/// one [`CellChange`] per changed device × category per batch (never a full copy per batch).
/// Both lists are in time order. A cell absent before its first change is 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogicalTimeline {
    /// Device labels; [`CellChange::device`] indexes this list (order of first appearance in time).
    pub devices: Vec<String>,
    /// Total live bytes after each changing batch.
    pub totals: Vec<TotalPoint>,
    /// Changed cells per batch.
    pub changes: Vec<CellChange>,
}

/// One point of the display series: the full breakdown after a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimelinePoint {
    /// Batch time, ns.
    pub timestamp_ns: u64,
    /// Live bytes over all devices.
    pub live_bytes: u64,
    /// Live bytes per device (devices with nothing live are omitted).
    pub by_device: BTreeMap<String, u64>,
    /// Live bytes per category (categories with nothing live are omitted).
    pub by_category: BTreeMap<MemoryCategory, u64>,
}

impl LogicalTimeline {
    /// Indices into `totals` kept by max-preserving downsampling to at most `points` points:
    /// the totals are cut into `points` equal runs (by index) and each run keeps its first
    /// highest point, so a one-batch spike survives and the first-reached global peak (the
    /// first maximum of its run) is always kept. All points when `points >= totals.len()`.
    pub fn downsample_indices(&self, points: usize) -> Vec<usize> {
        let n = self.totals.len();
        if points == 0 || n == 0 {
            return Vec::new();
        }
        if points >= n {
            return (0..n).collect();
        }
        let mut kept = Vec::with_capacity(points);
        for b in 0..points {
            let lo = b * n / points;
            let hi = (b + 1) * n / points;
            if lo >= hi {
                continue;
            }
            let mut best = lo;
            for i in lo + 1..hi {
                if self.totals[i].live_bytes > self.totals[best].live_bytes {
                    best = i;
                }
            }
            kept.push(best);
        }
        kept
    }

    /// A display series of at most `points` points (see [`Self::downsample_indices`]) with the
    /// full device and category breakdown at each kept point. O(changes + points × cells).
    pub fn downsampled(&self, points: usize) -> Vec<TimelinePoint> {
        let kept = self.downsample_indices(points);
        let mut cells = vec![0u64; self.devices.len() * CATEGORIES];
        let mut out = Vec::with_capacity(kept.len());
        let mut c = 0usize;
        for i in kept {
            let point = self.totals[i];
            while c < self.changes.len() && self.changes[c].timestamp_ns <= point.timestamp_ns {
                let ch = self.changes[c];
                cells[ch.device as usize * CATEGORIES + category_index(ch.category)] =
                    ch.live_bytes;
                c += 1;
            }
            let mut by_device = BTreeMap::new();
            let mut by_category = BTreeMap::new();
            for (d, name) in self.devices.iter().enumerate() {
                let row = &cells[d * CATEGORIES..(d + 1) * CATEGORIES];
                let sum: u64 = row.iter().sum();
                if sum > 0 {
                    by_device.insert(name.clone(), sum);
                }
                for (k, &v) in row.iter().enumerate() {
                    if v > 0 {
                        *by_category.entry(MemoryCategory::ALL[k]).or_insert(0) += v;
                    }
                }
            }
            out.push(TimelinePoint {
                timestamp_ns: point.timestamp_ns,
                live_bytes: point.live_bytes,
                by_device,
                by_category,
            });
        }
        out
    }

    /// Total live bytes after every batch up to and including `t` (0 before the first change).
    pub fn live_bytes_at(&self, t: u64) -> u64 {
        let i = self.totals.partition_point(|p| p.timestamp_ns <= t);
        if i == 0 {
            0
        } else {
            self.totals[i - 1].live_bytes
        }
    }
}
