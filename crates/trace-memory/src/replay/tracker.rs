//! What a peak keeps: the counts at its moment and the storages live at it that were freed
//! since (all of them, or the largest few), cleared when a higher peak passes it.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use trace_schema::{MemoryCategory, Sym};

use super::entries::*;
use super::*;

/// A point of a running maximum: after which event (its sequence number and index), when, how
/// many bytes, and the span the event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeakPoint {
    pub seq: u32,
    pub event: u32,
    pub timestamp_ns: u64,
    pub live_bytes: u64,
    pub span: Option<Sym>,
}

/// The counts at a tracked moment: storages live per device, live bytes per device × category.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    pub per_device: Vec<u64>,
    pub cells: Vec<u64>,
}

impl Counts {
    /// Storages live on `device` (all devices: `None`).
    pub fn count(&self, device: Option<u32>) -> u64 {
        match device {
            Some(d) => self.per_device.get(d as usize).copied().unwrap_or(0),
            None => self.per_device.iter().sum(),
        }
    }

    /// Live bytes of one device × category cell (0 for a device not seen yet at the moment).
    pub fn cell(&self, cell: usize) -> u64 {
        self.cells.get(cell).copied().unwrap_or(0)
    }
}

/// Which storages a tracker lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// None: counts only.
    Counts,
    /// Every storage live at the moment.
    All,
    /// The first `n` in rank order.
    Top(usize),
}

/// The rank key of a finished lifetime.
pub(super) fn done_key<'a>(d: &'a Done, names: &'a [Arc<str>]) -> RankKey<'a> {
    RankKey {
        bytes: d.bytes,
        start_ns: d.start_ns,
        device: &names[d.device as usize],
        storage: d.storage.as_deref(),
        event: d.event,
    }
}

/// A candidate of a top list, ordered by rank (the heap's top is the last in rank order).
#[derive(Debug)]
pub(super) struct Cand {
    pub(super) done: Rc<Done>,
    pub(super) name: Arc<str>,
}

impl Cand {
    pub(super) fn key(&self) -> RankKey<'_> {
        RankKey {
            bytes: self.done.bytes,
            start_ns: self.done.start_ns,
            device: &self.name,
            storage: self.done.storage.as_deref(),
            event: self.done.event,
        }
    }
}

impl PartialEq for Cand {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Cand {}

impl PartialOrd for Cand {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cand {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// The storages live at one moment and what they hold, reconstructed at the end: live then
/// (their start sequence is below `applied`, the number of events applied at that moment) and
/// either still live at the end or freed since (the record: every one, or the best `n`).
#[derive(Debug)]
pub(crate) struct Tracker {
    /// Events applied at the tracked moment (`None` before there is one).
    pub applied: Option<u32>,
    /// Only storages of this device.
    pub device: Option<u32>,
    pub keep: Keep,
    /// The counts at the moment.
    pub counts: Counts,
    /// Storages live at the moment and freed since ([`Keep::All`]).
    pub(super) log: Vec<Rc<Done>>,
    /// The best of them ([`Keep::Top`]).
    pub(super) top: std::collections::BinaryHeap<Cand>,
    /// Summary detail: the listed storages, decided when the pass ended.
    pub(super) final_list: Option<Vec<Rc<Done>>>,
}

impl Tracker {
    pub(super) fn new(keep: Keep, device: Option<u32>) -> Self {
        Self {
            applied: None,
            device,
            keep,
            counts: Counts::default(),
            log: Vec::new(),
            top: std::collections::BinaryHeap::new(),
            final_list: None,
        }
    }

    pub(super) fn wants(&self, e: &Entry) -> bool {
        self.keep != Keep::Counts
            && self.applied.is_some_and(|a| e.start_seq < a)
            && self.device.is_none_or(|d| d == e.device())
    }

    /// Whether a freed `e` would enter the list (it was live at the moment and, for a top list,
    /// ranks among the best so far).
    pub(super) fn would_keep(&self, e: &Entry, names: &[Arc<str>]) -> bool {
        if !self.wants(e) {
            return false;
        }
        match self.keep {
            Keep::Top(n) if self.top.len() >= n => self
                .top
                .peek()
                .is_some_and(|worst| e.key(names).cmp(&worst.key()).is_lt()),
            Keep::Top(0) => false,
            _ => true,
        }
    }

    pub(super) fn keep(&mut self, done: &Rc<Done>, names: &[Arc<str>]) {
        match self.keep {
            Keep::Counts => {}
            Keep::All => self.log.push(done.clone()),
            Keep::Top(n) => {
                self.top.push(Cand {
                    done: done.clone(),
                    name: names[done.device as usize].clone(),
                });
                if self.top.len() > n {
                    self.top.pop();
                }
            }
        }
    }

    /// The listed storages: live ones at the end it wants, plus its record (unranked; for a
    /// top list, a superset of the best `n`).
    pub fn listed<'a>(&'a self, end: &'a [Rc<Done>]) -> Vec<&'a Done> {
        if let Some(list) = &self.final_list {
            return list.iter().map(|d| &**d).collect();
        }
        let Some(a) = self.applied.filter(|_| self.keep != Keep::Counts) else {
            return Vec::new();
        };
        let record: Vec<&Done> = match self.keep {
            Keep::All => self.log.iter().map(|d| &**d).collect(),
            _ => self.top.iter().map(|c| &*c.done).collect(),
        };
        end.iter()
            .map(|d| &**d)
            .filter(|d| d.start_seq < a && self.device.is_none_or(|x| x == d.device))
            .chain(record)
            .collect()
    }
}

/// Live bytes per device (devices with a storage live at the moment, even of 0 bytes) and per
/// category (non-zero) at a tracked moment, of one device or all.
pub(crate) fn counts_breakdown(
    counts: &Counts,
    device: Option<usize>,
    names: &[String],
) -> (BTreeMap<String, u64>, BTreeMap<MemoryCategory, u64>) {
    let mut by_device = BTreeMap::new();
    let mut cats = [0u64; CATEGORIES];
    for (d, name) in names.iter().enumerate() {
        if device.is_some_and(|x| x != d) {
            continue;
        }
        let row: Vec<u64> = (0..CATEGORIES)
            .map(|k| counts.cell(d * CATEGORIES + k))
            .collect();
        // sums of distinct storages' bytes: bounded by the checked total
        if counts.count(Some(d as u32)) > 0 {
            by_device.insert(name.clone(), row.iter().sum());
        }
        for (k, b) in row.into_iter().enumerate() {
            cats[k] += b;
        }
    }
    (by_device, category_map(&cats))
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
