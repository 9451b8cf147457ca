//! The logical timeline as a change list (one entry per event that changed live bytes), and
//! its display series: points spaced by time, each the highest value of its time bucket.
//!
//! A full-detail profile keeps the change list in memory ([`LogicalTimeline::totals`],
//! [`LogicalTimeline::changes`]); a summary profile keeps it in a `TimelineLog` (a
//! [`SpillWriter`]: a buffer, then an unnamed temporary file) and reads it back for each
//! query. Every query streams the list ([`LogicalTimeline::for_each`]), so both answer alike.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use serde::Serialize;
use trace_schema::MemoryCategory;

use trace_schema::spill_buffer::{SpillWriter, SpilledBytes};
use trace_schema::varint::{get, put};

/// Memory categories: the cells of a device's row.
const CATEGORIES: usize = MemoryCategory::ALL.len();

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
///
/// `totals` and `changes` hold the list in a full-detail profile and are empty in a summary
/// profile, which keeps it in a temporary log: read it with [`Self::for_each`] (both).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogicalTimeline {
    /// Device labels; [`CellChange::device`] indexes this list (order of first appearance in time).
    pub devices: Vec<String>,
    /// Total live bytes after each changing event (full detail).
    pub totals: Vec<TotalPoint>,
    /// The changed cell of each changing event (same length and order as `totals`; full
    /// detail).
    pub changes: Vec<CellChange>,
    /// The change list of a summary profile.
    #[serde(skip)]
    pub(crate) log: Option<SharedLog>,
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

/// Where a display point comes from: the value carried into a bucket, or the change with
/// this position in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Carried,
    Change(usize),
}

/// The series value of one device (or the total) along the change list.
struct Series {
    cells: Vec<u64>,
    dev: Vec<u64>,
    device: Option<usize>,
}

impl Series {
    fn new(devices: usize, device: Option<usize>) -> Self {
        Self {
            cells: vec![0; devices * CATEGORIES],
            dev: vec![0; devices],
            device,
        }
    }

    /// Applies a change; the series value after it.
    fn apply(&mut self, total: &TotalPoint, ch: &CellChange) -> u64 {
        let cell = ch.device as usize * CATEGORIES + ch.category.index();
        let d = ch.device as usize;
        self.dev[d] = self.dev[d] - self.cells[cell] + ch.live_bytes;
        self.cells[cell] = ch.live_bytes;
        match self.device {
            Some(sel) => self.dev.get(sel).copied().unwrap_or(0),
            None => total.live_bytes,
        }
    }
}

impl LogicalTimeline {
    /// Calls `f` on every change, in order.
    ///
    /// # Panics
    /// When the temporary log of a summary profile cannot be read back (the file vanished or
    /// the disk failed).
    pub fn for_each(&self, mut f: impl FnMut(&TotalPoint, &CellChange)) {
        match &self.log {
            Some(log) => {
                if let Err(e) = log.0.for_each(f) {
                    panic!("cannot read the memory timeline back: {e}");
                }
            }
            None => {
                for (t, c) in self.totals.iter().zip(&self.changes) {
                    f(t, c);
                }
            }
        }
    }

    /// Number of changes.
    pub fn len(&self) -> usize {
        self.log
            .as_ref()
            .map_or(self.totals.len(), |l| l.0.len as usize)
    }

    /// True without changes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Time of the last change, ns.
    pub fn last_change_ns(&self) -> Option<u64> {
        match &self.log {
            Some(l) => (l.0.len > 0).then_some(l.0.last_ns),
            None => self.totals.last().map(|p| p.timestamp_ns),
        }
    }

    /// A display series of `points` points spaced by time over `[from_ns, last change]`: the
    /// range is cut into `points` equal time buckets and each bucket keeps its first highest
    /// value (the value carried into it counts, at the bucket's start), so a one-event spike
    /// survives and the first-reached peak of the series is always a point at its own time.
    /// `device` selects one device (index into [`Self::devices`]); `None` is the total. The
    /// range starts earlier than `from_ns` when the series' peak lies before it. Empty without
    /// changes or for `points == 0`. Three passes over the change list, O(points × cells)
    /// memory.
    pub fn display_series(
        &self,
        points: usize,
        from_ns: u64,
        device: Option<usize>,
    ) -> Vec<TimelinePoint> {
        let n = self.len();
        if points == 0 || n == 0 {
            return Vec::new();
        }
        let nd = self.devices.len();
        // Pass 1: the series' first maximum, and the last change's time.
        let mut series = Series::new(nd, device);
        let (mut peak_value, mut peak_ts, mut last_ts) = (0u64, 0u64, 0u64);
        let mut first = true;
        self.for_each(|t, ch| {
            let v = series.apply(t, ch);
            if first || v > peak_value {
                (peak_value, peak_ts) = (v, ch.timestamp_ns);
                first = false;
            }
            last_ts = ch.timestamp_ns;
        });
        let start = from_ns.min(peak_ts);
        let end = last_ts.max(start);
        // Buckets cut the inclusive range into equal parts of `width` ns (at least 1 ns each).
        let width = (end - start) as u128 + 1;
        let points = (points as u128).min(width) as usize;
        let bucket_of = |t: u64| ((t - start) as u128 * points as u128 / width) as usize;
        let bucket_start = |b: usize| start + (width * b as u128).div_ceil(points as u128) as u64;
        // Pass 2: each bucket's first maximum, the value carried into it included.
        let mut chosen: Vec<(u64, Source, u64)> = Vec::with_capacity(points);
        let mut carried = 0u64;
        // The best point of bucket `chosen.len()`, once a change falls in it.
        let mut best: Option<(u64, Source, u64)> = None;
        let mut series = Series::new(nd, device);
        let mut i = 0usize;
        self.for_each(|t, ch| {
            let v = series.apply(t, ch);
            let ts = ch.timestamp_ns;
            if ts >= start {
                let b = bucket_of(ts);
                while chosen.len() < b {
                    let k = chosen.len();
                    let done = best
                        .take()
                        .unwrap_or((bucket_start(k), Source::Carried, carried));
                    chosen.push(done);
                }
                let cur = best.get_or_insert((bucket_start(b), Source::Carried, carried));
                if v > cur.2 {
                    *cur = (ts, Source::Change(i), v);
                }
            }
            carried = v;
            i += 1;
        });
        while chosen.len() < points {
            let k = chosen.len();
            let done = best
                .take()
                .unwrap_or((bucket_start(k), Source::Carried, carried));
            chosen.push(done);
        }
        // Pass 3: the breakdown at each chosen point.
        let mut cells = vec![0u64; nd * CATEGORIES];
        let mut out = Vec::with_capacity(chosen.len());
        let snapshot = |cells: &[u64], (t, _, value): (u64, Source, u64)| {
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
            TimelinePoint {
                timestamp_ns: t,
                event_index: None,
                live_bytes: value,
                by_device,
                by_category,
            }
        };
        let mut next = 0usize;
        let mut i = 0usize;
        self.for_each(|_, ch| {
            // Points before this change: carried values at times up to it.
            while let Some(&p) = chosen.get(next) {
                let before = match p.1 {
                    Source::Carried => ch.timestamp_ns >= p.0,
                    Source::Change(k) => k < i,
                };
                if !before {
                    break;
                }
                out.push(snapshot(&cells, p));
                next += 1;
            }
            cells[ch.device as usize * CATEGORIES + ch.category.index()] = ch.live_bytes;
            if let Some(&p) = chosen.get(next) {
                if p.1 == Source::Change(i) {
                    let mut point = snapshot(&cells, p);
                    point.event_index = Some(ch.event_index);
                    out.push(point);
                    next += 1;
                }
            }
            i += 1;
        });
        while let Some(&p) = chosen.get(next) {
            out.push(snapshot(&cells, p));
            next += 1;
        }
        out
    }

    /// Total live bytes after every event at or before `t` (0 before the first change).
    pub fn live_bytes_at(&self, t: u64) -> u64 {
        if self.log.is_none() {
            let i = self.totals.partition_point(|p| p.timestamp_ns <= t);
            return if i == 0 {
                0
            } else {
                self.totals[i - 1].live_bytes
            };
        }
        let mut v = 0;
        self.for_each(|p, _| {
            if p.timestamp_ns <= t {
                v = p.live_bytes;
            }
        });
        v
    }

    /// Total live bytes after every event strictly before `t` (what an instant `t` begins with).
    pub fn live_bytes_entering(&self, t: u64) -> u64 {
        if self.log.is_none() {
            let i = self.totals.partition_point(|p| p.timestamp_ns < t);
            return if i == 0 {
                0
            } else {
                self.totals[i - 1].live_bytes
            };
        }
        let mut v = 0;
        self.for_each(|p, _| {
            if p.timestamp_ns < t {
                v = p.live_bytes;
            }
        });
        v
    }
}

// ---- the log of a summary profile ------------------------------------------------------------

/// Appends changes to a compact log (varints; times as deltas: changes come in time order), in a
/// [`SpillWriter`] (a buffer, then a temporary file).
#[derive(Debug, Default)]
pub(crate) struct TimelineLog {
    bytes: SpillWriter,
    len: u64,
    last_ns: u64,
    error: Option<io::Error>,
}

impl TimelineLog {
    pub fn push(&mut self, t: &TotalPoint, c: &CellChange) {
        if self.error.is_some() {
            // The log is lost; nothing more is kept (finish reports the error).
            return;
        }
        let buf = self.bytes.buffer();
        put(buf, t.timestamp_ns - self.last_ns);
        put(buf, t.event_index as u64);
        put(buf, t.live_bytes);
        put(buf, c.device as u64);
        buf.push(c.category.index() as u8);
        put(buf, c.live_bytes);
        self.last_ns = t.timestamp_ns;
        self.len += 1;
        if let Err(e) = self.bytes.end_record() {
            self.error = Some(e);
        }
    }

    /// The finished log.
    ///
    /// # Errors
    /// The first I/O error writing the temporary file.
    pub fn finish(self) -> io::Result<SharedLog> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok(SharedLog(Arc::new(Frozen {
            bytes: self.bytes.finish()?,
            len: self.len,
            last_ns: self.last_ns,
        })))
    }
}

#[derive(Debug)]
pub(crate) struct Frozen {
    bytes: SpilledBytes,
    len: u64,
    last_ns: u64,
}

impl Frozen {
    fn for_each(&self, mut f: impl FnMut(&TotalPoint, &CellChange)) -> io::Result<()> {
        let mut last = 0u64;
        // One record at `pos`; `None` (nothing consumed) when the window ends inside it.
        self.bytes
            .for_each_record(self.len, "timeline log", |buf, pos| {
                let mut p = *pos;
                let ts = last + get(buf, &mut p)?;
                let event = get(buf, &mut p)? as u32;
                let total = get(buf, &mut p)?;
                let device = get(buf, &mut p)? as u32;
                let k = *buf.get(p)? as usize;
                p += 1;
                let value = get(buf, &mut p)?;
                *pos = p;
                last = ts;
                f(
                    &TotalPoint {
                        timestamp_ns: ts,
                        event_index: event,
                        live_bytes: total,
                    },
                    &CellChange {
                        timestamp_ns: ts,
                        event_index: event,
                        device,
                        category: MemoryCategory::ALL[k.min(CATEGORIES - 1)],
                        live_bytes: value,
                    },
                );
                Some(())
            })
    }
}

/// A shared log (profiles are `Clone`); equal when their changes are.
#[derive(Debug, Clone)]
pub(crate) struct SharedLog(Arc<Frozen>);

impl PartialEq for SharedLog {
    fn eq(&self, other: &Self) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        let collect = |l: &SharedLog| {
            let mut v = Vec::new();
            let _ = l.0.for_each(|t, c| v.push((*t, *c)));
            v
        };
        collect(self) == collect(other)
    }
}

impl Eq for SharedLog {}
