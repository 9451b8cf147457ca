//! The online state of the replay: one event applied at a time (an alloc or a free, see
//! `apply`), the time marks crossed before it, the peaks after it.

use super::entries::*;
use super::record::*;
use super::tracker::*;
use super::*;
use crate::timeline::{CellChange, TotalPoint};
use rustc_hash::FxHashMap;
use std::rc::Rc;
use std::sync::Arc;
use trace_schema::{MemoryAction, MemoryCategory, MemoryItem, Sym, TraceDocument};

/// The online state.
pub(super) struct State<'d> {
    pub(super) doc: &'d TraceDocument,
    pub(super) r: Replay,
    pub(super) device_of_sym: FxHashMap<Sym, u32>,
    pub(super) names: Vec<Arc<str>>,
    pub(super) live: LiveSet,
    pub(super) unidentified: Vec<Entry>,
    pub(super) cells: Vec<u64>,
    /// Storages live per device.
    pub(super) live_count: Vec<u64>,
    pub(super) total: u64,
    pub(super) alloc_sum: u64,
    pub(super) seq: u32,
    /// Time marks in order: `(time, what)`; what = pass (0..3) or finding span (3..5).
    pub(super) marks: Vec<(u64, u8)>,
    pub(super) next_mark: usize,
    /// Which list a device tracker keeps.
    pub(super) device_keep: Keep,
}

impl State<'_> {
    pub(super) fn device(&mut self, sym: Sym) -> u32 {
        if let Some(&d) = self.device_of_sym.get(&sym) {
            return d;
        }
        let d = self.r.devices.len() as u32;
        self.r.devices.push(sym);
        self.names.push(Arc::from(self.doc.str(sym)));
        self.r.device_acc.push(DeviceAcc::default());
        self.r
            .device_sets
            .push(Tracker::new(self.device_keep, Some(d)));
        self.device_of_sym.insert(sym, d);
        self.cells.resize(self.cells.len() + CATEGORIES, 0);
        self.live_count.push(0);
        d
    }

    pub(super) fn add(&mut self, a: u64, b: u64) -> u64 {
        a.checked_add(b).unwrap_or_else(|| {
            self.r.overflowed = true;
            a
        })
    }

    pub(super) fn sub(&mut self, a: u64, b: u64) -> u64 {
        a.checked_sub(b).unwrap_or_else(|| {
            self.r.overflowed = true;
            a
        })
    }

    /// Starts tracking the moment after `applied` events: snapshot the counts, clear the record.
    pub(super) fn set(t: &mut Tracker, applied: u32, cells: &[u64], live_count: &[u64]) {
        t.applied = Some(applied);
        t.log.clear();
        t.top.clear();
        t.counts.cells.clear();
        t.counts.per_device.clear();
        match t.device {
            None => {
                t.counts.cells.extend_from_slice(cells);
                t.counts.per_device.extend_from_slice(live_count);
            }
            Some(d) => {
                let d = d as usize;
                t.counts.cells.resize(d * CATEGORIES, 0);
                t.counts
                    .cells
                    .extend_from_slice(&cells[d * CATEGORIES..(d + 1) * CATEGORIES]);
                t.counts.per_device.resize(d, 0);
                t.counts.per_device.push(live_count[d]);
            }
        }
    }

    /// Crosses the time marks at or before `t` (`None`: all, at the end), before the event at
    /// `t` applies.
    pub(super) fn cross(&mut self, t: Option<u64>) {
        while let Some(&(at, what)) = self.marks.get(self.next_mark) {
            if t.is_some_and(|t| at > t) {
                break;
            }
            self.next_mark += 1;
            let applied = self.seq;
            let total = self.total;
            if (what as usize) < 3 {
                let p = self.r.passes[what as usize].as_mut().expect("marked");
                p.crossed += 1;
                if p.best.is_none_or(|b| total > b.2) {
                    p.best = Some((at, PassPos::Carried, total));
                    Self::set(&mut p.tracker, applied, &self.cells, &self.live_count);
                }
            } else {
                let k = what as usize - 3;
                let w = self.r.spans[k].as_mut().expect("marked");
                w.crossed = true;
                let bit = 1u8 << k;
                for e in self.live.iter_mut().chain(self.unidentified.iter_mut()) {
                    if e.desc.category == MemoryCategory::Activation {
                        w.count += 1;
                        // distinct lifetimes: bounded by the checked total (wrapping only once
                        // the total overflowed, when every figure is refused)
                        w.bytes = w.bytes.wrapping_add(e.bytes);
                        e.marks |= bit;
                    }
                }
                w.kept_count = w.count;
                w.kept_bytes = w.bytes;
            }
        }
    }

    /// Records the change of `cell` by the event `seq` at `ts`, and any new peak.
    pub(super) fn changed(
        &mut self,
        ts: u64,
        event: u32,
        cell: usize,
        span: Option<Sym>,
        alloc: bool,
    ) {
        let seq = self.seq;
        let device = cell / CATEGORIES;
        let total = self.total;
        let value = self.cells[cell];
        let total_point = TotalPoint {
            timestamp_ns: ts,
            event_index: event,
            live_bytes: total,
        };
        let change = CellChange {
            timestamp_ns: ts,
            event_index: event,
            device: device as u32,
            category: MemoryCategory::ALL[cell % CATEGORIES],
            live_bytes: value,
        };
        match self.r.detail {
            Detail::Full => {
                self.r.totals.push(total_point);
                self.r.changes.push(change);
            }
            Detail::Summary => {
                if let Some(log) = self.r.log.as_mut() {
                    log.push(&total_point, &change);
                }
            }
        }
        // Pass peaks: an event inside the current interval of a pass.
        for p in self.r.passes.iter_mut().flatten() {
            let Some(&(s, e)) = p.crossed.checked_sub(1).and_then(|j| p.intervals.get(j)) else {
                continue;
            };
            let inside = ts >= s && (ts < e || (s == e && ts == s));
            if inside && p.best.is_none_or(|b| total > b.2) {
                p.best = Some((ts, PassPos::Event(event, span), total));
                Self::set(&mut p.tracker, seq + 1, &self.cells, &self.live_count);
            }
        }
        if !alloc {
            return;
        }
        let point = |live_bytes| PeakPoint {
            seq,
            event,
            timestamp_ns: ts,
            live_bytes,
            span,
        };
        if self.r.peak.is_none_or(|p| total > p.live_bytes) {
            self.r.peak = Some(point(total));
            Self::set(&mut self.r.peak_set, seq + 1, &self.cells, &self.live_count);
        }
        let acc = &mut self.r.device_acc[device];
        if acc.peak.is_none_or(|p| acc.live_bytes > p.live_bytes) {
            acc.peak = Some(point(acc.live_bytes));
            Self::set(
                &mut self.r.device_sets[device],
                seq + 1,
                &self.cells,
                &self.live_count,
            );
        }
    }

    /// Applies one memory event (`seq` is its sequence number): crosses the time marks before
    /// it, then applies the alloc or the free.
    pub(super) fn apply(&mut self, m: &MemoryItem<'_>) {
        let ts = m.timestamp_ns;
        self.cross(Some(ts));
        if self.seq == 0 {
            self.r.first_ns = ts;
        }
        self.r.last_ns = ts;
        if self.r.detail == Detail::Full {
            self.r.order.push(m.index);
            self.r.times.push(ts);
        }
        let device = self.device(m.device);
        if m.storage.is_none() {
            self.r.aliases_detectable = false;
        }
        let key: Option<(bool, &str)> = match (m.storage, m.tensor) {
            (Some(s), _) => Some((false, s)),
            (None, Some(t)) => Some((true, t)),
            (None, None) => None,
        };
        let at = Identity {
            device,
            key,
            hash: key.map(|(by_tensor, id)| hash_key(device, by_tensor, id)),
        };
        match m.action {
            MemoryAction::Alloc => self.alloc(m, &at),
            MemoryAction::Free => self.free(m, &at),
        }
        self.seq += 1;
    }

    /// An alloc: a second alloc of a live storage is an alias (or a duplicate), else a new
    /// lifetime.
    fn alloc(&mut self, m: &MemoryItem<'_>, at: &Identity<'_>) {
        self.alloc_sum = match self.alloc_sum.checked_add(m.bytes.unwrap_or(0)) {
            Some(s) => s,
            None => {
                self.r.overflowed = true;
                self.alloc_sum
            }
        };
        if let (Some(k), Some(h)) = (at.key, at.hash) {
            if let Some(slot) = self.live.find(h, |e| at.matches(e, k)) {
                self.alias(m, slot);
                return;
            }
        }
        self.new_lifetime(m, at);
    }

    /// A second alloc of the live storage in `slot`: an alias from another tensor, or a
    /// duplicate of an alloc already seen.
    fn alias(&mut self, m: &MemoryItem<'_>, slot: u32) {
        let entry = self.live.get_mut(slot);
        self.r.alias_event_count += 1;
        let extra = entry.extra.get_or_insert_with(Default::default);
        let alloc_tensor = if entry.flags & HAS_TENSOR != 0 {
            Some(&entry.ids[entry.split as usize..])
        } else {
            None
        };
        if let Some(t) = m.tensor {
            if alloc_tensor != Some(t) {
                extra.tensors.push(Box::from(t));
            }
        }
        let again = alloc_tensor == m.tensor
            || match m.tensor {
                Some(t) => extra.allocs_by.contains(t),
                None => extra.alloc_by_untensored,
            };
        if again {
            self.r.duplicates.push(Duplicate {
                event: m.index,
                device: m.device,
                id: Arc::from(entry.id()),
                tensor: m.tensor.map(Arc::from),
            });
        } else {
            match m.tensor {
                Some(t) => {
                    extra.allocs_by.insert(Box::from(t));
                }
                None => extra.alloc_by_untensored = true,
            }
        }
    }

    /// An alloc that starts a lifetime: its entry in the live set, the counts by category and
    /// device, the live bytes and any new peak.
    fn new_lifetime(&mut self, m: &MemoryItem<'_>, at: &Identity<'_>) {
        let (ts, seq, device, key, hash) = (m.timestamp_ns, self.seq, at.device, at.key, at.hash);
        let bytes = match m.bytes {
            Some(b) => b,
            None => {
                self.r.alloc_without_bytes_count += 1;
                0
            }
        };
        let life = self.r.life_count;
        self.r.life_count += 1;
        let k = category_index(m.category);
        let cell = device as usize * CATEGORIES + k;
        let mut ids =
            String::with_capacity(m.storage.map_or(0, str::len) + m.tensor.map_or(0, str::len));
        ids.push_str(m.storage.unwrap_or(""));
        let split = ids.len() as u32;
        ids.push_str(m.tensor.unwrap_or(""));
        let mut flags = 0;
        if m.storage.is_some() {
            flags |= HAS_STORAGE;
        }
        if m.tensor.is_some() {
            flags |= HAS_TENSOR;
        }
        if matches!(key, Some((true, _))) {
            flags |= BY_TENSOR;
        }
        let entry = Entry {
            ids: ids.into_boxed_str(),
            split,
            flags,
            marks: 0,
            life,
            start_seq: seq,
            event: m.index,
            cell: cell as u32,
            start_ns: ts,
            bytes,
            desc: Desc {
                span: m.span,
                op_name: m.op_name,
                label: m.label,
                shape: m.shape,
                dtype: m.dtype,
                category: m.category,
                category_source: m.category_source,
                source: m.source,
                pre_existing: m.pre_existing,
            },
            extra: None,
        };
        if self.r.detail == Detail::Full {
            self.r.lives.push(Life {
                start_ns: ts,
                end_ns: OPEN,
                start_seq: seq,
                end_seq: OPEN_SEQ,
                bytes,
                event: m.index,
                device,
                span: m.span,
                op_name: m.op_name,
                category: m.category,
                pre_existing: m.pre_existing,
            });
            self.r.lifetimes.push(None);
        }
        match hash {
            Some(h) => {
                self.live.insert(h, entry);
            }
            None => {
                self.r.unidentified_alloc_count += 1;
                self.unidentified.push(entry);
            }
        }
        self.live_count[device as usize] += 1;
        let cat = &mut self.r.categories[k];
        cat.seen = true;
        if m.pre_existing {
            cat.pre_existing_count += 1;
            cat.pre_existing_bytes = cat.pre_existing_bytes.wrapping_add(bytes);
        } else {
            cat.allocation_count += 1;
            cat.total_allocated_bytes = cat.total_allocated_bytes.wrapping_add(bytes);
            if let Some(span) = m.span {
                let a = self.r.span_alloc.entry(span).or_insert((0, 0));
                a.0 += 1;
                a.1 = a.1.wrapping_add(bytes); // bounded by the checked total
            }
        }
        let acc = &self.r.device_acc[device as usize];
        let (pb, ab, lb) = (
            acc.pre_existing_bytes,
            acc.total_allocated_bytes,
            acc.live_bytes,
        );
        let (pb, ab) = if m.pre_existing {
            (self.add(pb, bytes), ab)
        } else {
            (pb, self.add(ab, bytes))
        };
        let lb = self.add(lb, bytes);
        let cellv = self.add(self.cells[cell], bytes);
        let total = self.add(self.total, bytes);
        let acc = &mut self.r.device_acc[device as usize];
        if m.pre_existing {
            acc.pre_existing_count += 1;
        } else {
            acc.allocation_count += 1;
        }
        acc.pre_existing_bytes = pb;
        acc.total_allocated_bytes = ab;
        acc.live_bytes = lb;
        self.cells[cell] = cellv;
        self.total = total;
        self.changed(ts, m.index, cell, m.span, true);
    }

    /// A free: ends the lifetime of the live storage it names (an unmatched free is recorded),
    /// keeps it in the records of the peaks it was live at, then the live bytes.
    fn free(&mut self, m: &MemoryItem<'_>, at: &Identity<'_>) {
        let (ts, seq, device) = (m.timestamp_ns, self.seq, at.device);
        let removed = match (at.key, at.hash) {
            (Some(k), Some(h)) => self.live.remove(h, |e| at.matches(e, k)),
            _ => None,
        };
        let Some(mut entry) = removed else {
            self.r.unmatched.push(Unmatched {
                event: m.index,
                timestamp_ns: ts,
                device: m.device,
                storage: m.storage.map(Arc::from),
                tensor: m.tensor.map(Arc::from),
                bytes: m.bytes,
            });
            self.r.device_acc[device as usize].unpaired_free_count += 1;
            return;
        };
        let bytes = entry.bytes;
        if let Some(b) = m.bytes.filter(|&b| b != bytes) {
            self.r.mismatches.push(Mismatch {
                life: entry.life,
                device: entry.device(),
                storage: entry.storage().map(Arc::from),
                alloc_bytes: bytes,
                free_bytes: b,
                free_timestamp_ns: ts,
            });
        }
        if let Some(t) = m.tensor {
            if entry.tensor() != Some(t) {
                let extra = entry.extra.get_or_insert_with(Default::default);
                extra.tensors.push(Box::from(t));
            }
        }
        for (k, w) in self.r.spans.iter_mut().enumerate() {
            if let Some(w) = w.as_mut() {
                let kept = w.end_ns.is_some_and(|e| ts > e);
                if entry.marks & (1 << k) != 0 && !kept {
                    w.kept_count -= 1;
                    w.kept_bytes = w.kept_bytes.wrapping_sub(bytes);
                }
            }
        }
        // The lists whose moment it was live at, before any new peak clears them.
        let names = &self.names;
        let d = device as usize;
        let global = self.r.peak_set.would_keep(&entry, names);
        let dev = self.r.device_sets[d].would_keep(&entry, names);
        let mut passes = [false; 3];
        for (i, p) in self.r.passes.iter().enumerate() {
            passes[i] = p
                .as_ref()
                .is_some_and(|p| p.tracker.would_keep(&entry, names));
        }
        let full = self.r.detail == Detail::Full;
        if global || dev || passes.iter().any(|&x| x) || full {
            let done = Rc::new(entry.done(ts));
            if global {
                self.r.peak_set.keep(&done, names);
            }
            if dev {
                self.r.device_sets[d].keep(&done, names);
            }
            for (i, p) in self.r.passes.iter_mut().enumerate() {
                if passes[i] {
                    p.as_mut().expect("kept").tracker.keep(&done, names);
                }
            }
            if full {
                let l = &mut self.r.lives[entry.life as usize];
                l.end_ns = ts;
                l.end_seq = seq;
                self.r.lifetimes[entry.life as usize] = Some(done);
            }
        }
        self.live_count[d] -= 1;
        let cell = entry.cell as usize;
        let lb = self.sub(self.r.device_acc[d].live_bytes, bytes);
        let cellv = self.sub(self.cells[cell], bytes);
        let total = self.sub(self.total, bytes);
        let acc = &mut self.r.device_acc[d];
        acc.matched_free_count += 1;
        acc.live_bytes = lb;
        self.cells[cell] = cellv;
        self.total = total;
        self.changed(ts, m.index, cell, m.span, false);
    }

    pub(super) fn finish(mut self) -> Replay {
        self.cross(None);
        let entries = by_life(self.live.drain().chain(self.unidentified.drain(..)));
        let nd = self.r.devices.len();
        let stats = &mut self.r.end_stats;
        stats.device = vec![(0, 0); nd];
        stats.cells = vec![0; nd * CATEGORIES];
        for e in &entries {
            // sums of distinct storages' bytes: bounded by the checked total (wrapping only
            // once it overflowed, when every figure is refused)
            let d = &mut stats.device[e.device() as usize];
            d.0 += 1;
            d.1 = d.1.wrapping_add(e.bytes);
            let c = &mut stats.cells[e.cell as usize];
            *c = c.wrapping_add(e.bytes);
            let k = &mut stats.category[e.cell as usize % CATEGORIES];
            k.0 += 1;
            k.1 = k.1.wrapping_add(e.bytes);
        }
        match self.r.detail {
            Detail::Full => {
                let end: Vec<Rc<Done>> = entries.iter().map(|e| Rc::new(e.done(OPEN))).collect();
                for d in &end {
                    self.r.lifetimes[d.life as usize] = Some(d.clone());
                }
                self.r.end = end;
            }
            Detail::Summary => {
                // Each list: the best of its record and of the end's storages it wants, without
                // building every end storage twice.
                let names = &self.names;
                let decide = |t: &mut Tracker| {
                    let (Keep::Top(n), Some(a)) = (t.keep, t.applied) else {
                        return;
                    };
                    // (bytes, start, index): the rank key's leading fields side by side, so
                    // the selection over millions of end storages compares in cache and looks
                    // at an entry only on a tie; streamed, so it holds O(n) keys, not O(live)
                    let wanted = entries
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| {
                            e.start_seq < a && t.device.is_none_or(|d| d == e.device())
                        })
                        .map(|(i, e)| (e.bytes, e.start_ns, i as u32));
                    let idx = crate::select::first_k_by(wanted, n, |x, y| {
                        y.0.cmp(&x.0).then(x.1.cmp(&y.1)).then_with(|| {
                            entries[x.2 as usize]
                                .key(names)
                                .cmp(&entries[y.2 as usize].key(names))
                        })
                    });
                    let mut list: Vec<Rc<Done>> = idx
                        .into_iter()
                        .map(|(_, _, i)| Rc::new(entries[i as usize].done(OPEN)))
                        .chain(t.top.drain().map(|c| c.done))
                        .collect();
                    list.sort_by(|a, b| done_key(a, names).cmp(&done_key(b, names)));
                    list.truncate(n);
                    t.final_list = Some(list);
                };
                decide(&mut self.r.peak_set);
                for t in &mut self.r.device_sets {
                    decide(t);
                }
                for p in self.r.passes.iter_mut().flatten() {
                    decide(&mut p.tracker);
                }
                let mut res = trace_schema::SharedStrings::new(self.doc);
                let devices = &self.r.devices;
                self.r.end_lifetimes = entries
                    .iter()
                    .map(|e| crate::lifetime::to_lifetime(&e.done(OPEN), devices, &mut res))
                    .collect();
            }
        }
        self.r.events = self.seq;
        self.r
    }
}

/// The identity of an event's storage: its device, the id it is found by (`(by tensor, id)`;
/// `None` when it names neither a storage nor a tensor) and that id's hash.
pub(super) struct Identity<'a> {
    device: u32,
    key: Option<(bool, &'a str)>,
    hash: Option<u64>,
}

impl Identity<'_> {
    /// Whether `e` is the live entry of this identity's `(by_tensor, id)` on its device.
    fn matches(&self, e: &Entry, (by_tensor, id): (bool, &str)) -> bool {
        e.device() == self.device && e.by_tensor() == by_tensor && e.id() == id
    }
}
