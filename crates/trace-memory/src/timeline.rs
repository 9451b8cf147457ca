//! The logical timeline as a change list (one entry per event that changed live bytes), and
//! its display series: points spaced by time, each the highest value of its time bucket.

use std::collections::BTreeMap;

use serde::Serialize;
use trace_schema::MemoryCategory;

use crate::replay::{category_index, CATEGORIES};

/// Total live bytes after one event that changed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TotalPoint {
    /// Event time, ns.
    pub timestamp_ns: u64,
    /// Index of the event in `doc.memory`.
    pub event_index: u32,
    /// Live bytes over all devices and categories after the event.
    pub live_bytes: u64,
}

/// The new value of one device × category cell after an event that changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CellChange {
    /// Event time, ns.
    pub timestamp_ns: u64,
    /// Index of the event in `doc.memory`.
    pub event_index: u32,
    /// Index into [`LogicalTimeline::devices`].
    pub device: u32,
    /// Category.
    pub category: MemoryCategory,
    /// Live bytes of this device × category after the event.
    pub live_bytes: u64,
}

/// Live bytes over time as a change list: one [`TotalPoint`] and one [`CellChange`] per event
/// that allocated or freed a storage, in the order the events apply (`(timestamp_ns, file
/// order)`; several may share a timestamp). A cell absent before its first change is 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogicalTimeline {
    /// Device labels; [`CellChange::device`] indexes this list (order of first appearance in time).
    pub devices: Vec<String>,
    /// Total live bytes after each changing event.
    pub totals: Vec<TotalPoint>,
    /// The changed cell of each changing event (same length and order as `totals`).
    pub changes: Vec<CellChange>,
}

/// One point of the display series: the full breakdown at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimelinePoint {
    /// Time, ns (a bucket's start when the point is the value carried into it).
    pub timestamp_ns: u64,
    /// The event after which the value holds; `None` for a value carried into a bucket.
    pub event_index: Option<u32>,
    /// Live bytes of the series (all devices, or the selected device).
    pub live_bytes: u64,
    /// Live bytes per device (devices with nothing live are omitted).
    pub by_device: BTreeMap<String, u64>,
    /// Live bytes per category (categories with nothing live are omitted; of the selected
    /// device only, when one is selected).
    pub by_category: BTreeMap<MemoryCategory, u64>,
}

/// Where a display point comes from: the value carried into a bucket, or a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Carried,
    Change(usize),
}

impl LogicalTimeline {
    /// A display series of `points` points spaced by time over `[from_ns, last change]`: the
    /// range is cut into `points` equal time buckets and each bucket keeps its first highest
    /// value (the value carried into it counts, at the bucket's start), so a one-event spike
    /// survives and the first-reached peak of the series is always a point at its own time.
    /// `device` selects one device (index into [`Self::devices`]); `None` is the total. The
    /// range starts earlier than `from_ns` when the series' peak lies before it. Empty without
    /// changes or for `points == 0`. O(changes × cells + points × cells).
    pub fn display_series(
        &self,
        points: usize,
        from_ns: u64,
        device: Option<usize>,
    ) -> Vec<TimelinePoint> {
        let n = self.changes.len();
        if points == 0 || n == 0 {
            return Vec::new();
        }
        let nd = self.devices.len();
        // Pass 1: the series value after every change, and its first maximum.
        let mut cells = vec![0u64; nd * CATEGORIES];
        let mut dev = vec![0u64; nd];
        let mut values = Vec::with_capacity(n);
        for (i, ch) in self.changes.iter().enumerate() {
            let cell = ch.device as usize * CATEGORIES + category_index(ch.category);
            let d = ch.device as usize;
            dev[d] = dev[d] - cells[cell] + ch.live_bytes;
            cells[cell] = ch.live_bytes;
            values.push(match device {
                Some(sel) => dev.get(sel).copied().unwrap_or(0),
                None => self.totals[i].live_bytes,
            });
        }
        let peak = (0..n).fold(0usize, |b, i| if values[i] > values[b] { i } else { b });
        let start = from_ns.min(self.changes[peak].timestamp_ns);
        let end = self.changes[n - 1].timestamp_ns.max(start);
        // Buckets cut the inclusive range into equal parts of `width` ns (at least 1 ns each).
        let width = (end - start) as u128 + 1;
        let points = (points as u128).min(width) as usize;
        let bucket_of = |t: u64| ((t - start) as u128 * points as u128 / width) as usize;
        let bucket_start = |b: usize| start + (width * b as u128).div_ceil(points as u128) as u64;
        // Pass 2: each bucket's first maximum, the value carried into it included.
        let mut chosen: Vec<(u64, Source, u64)> = Vec::with_capacity(points);
        let mut carried = 0u64;
        let mut i = 0usize;
        while i < n && self.changes[i].timestamp_ns < start {
            carried = values[i];
            i += 1;
        }
        for b in 0..points {
            let mut best = (bucket_start(b), Source::Carried, carried);
            while i < n && bucket_of(self.changes[i].timestamp_ns) == b {
                if values[i] > best.2 {
                    best = (self.changes[i].timestamp_ns, Source::Change(i), values[i]);
                }
                carried = values[i];
                i += 1;
            }
            chosen.push(best);
        }
        // Pass 3: the breakdown at each chosen point.
        let mut cells = vec![0u64; nd * CATEGORIES];
        let mut c = 0usize;
        let mut out = Vec::with_capacity(chosen.len());
        for (t, source, value) in chosen {
            let upto = match source {
                Source::Change(k) => k + 1,
                Source::Carried => self.changes[c..]
                    .iter()
                    .position(|ch| ch.timestamp_ns >= t)
                    .map_or(n, |p| c + p),
            };
            while c < upto.max(c) && c < n {
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
                if device.is_some_and(|sel| sel != d) {
                    continue;
                }
                for (k, &v) in row.iter().enumerate() {
                    if v > 0 {
                        *by_category.entry(MemoryCategory::ALL[k]).or_insert(0) += v;
                    }
                }
            }
            out.push(TimelinePoint {
                timestamp_ns: t,
                event_index: match source {
                    Source::Change(k) => Some(self.changes[k].event_index),
                    Source::Carried => None,
                },
                live_bytes: value,
                by_device,
                by_category,
            });
        }
        out
    }

    /// Total live bytes after every event at or before `t` (0 before the first change).
    pub fn live_bytes_at(&self, t: u64) -> u64 {
        let i = self.totals.partition_point(|p| p.timestamp_ns <= t);
        if i == 0 {
            0
        } else {
            self.totals[i - 1].live_bytes
        }
    }

    /// Total live bytes after every event strictly before `t` (what an instant `t` begins with).
    pub fn live_bytes_entering(&self, t: u64) -> u64 {
        let i = self.totals.partition_point(|p| p.timestamp_ns < t);
        if i == 0 {
            0
        } else {
            self.totals[i - 1].live_bytes
        }
    }
}
