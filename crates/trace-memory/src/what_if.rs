//! What-if replays: the lifetimes replayed with some storages released earlier than the trace
//! frees them (or never allocated), to compute what a piece of advice would leave — the new
//! run peak, each pass's peak and where the run's peak moves — from the trace, not guessed.
//!
//! The rules are the logical replay's ([`crate`]'s semantics): events apply in
//! `(timestamp_ns, file order)`; a second alloc of a live storage is an alias (bytes once); a
//! free of a storage never seen changes nothing; an alloc without an identity stays live. A
//! release at `t` applies before every event at `t` or later (the storage is gone when the
//! point the advice names is reached), and before a pass's interval starting at `t` carries
//! its value in. With an empty plan the replay gives the trace's own peak and pass peaks.
//!
//! One sweep over the memory events with a sorted list of releases: O(n + k log k) after the
//! replay order, for n events and k releases.

use rustc_hash::{FxHashMap, FxHashSet};

use serde::Serialize;
use trace_schema::{MemoryAction, MemoryOrder, Pass, TraceDocument};

use crate::passes::pass_intervals;
use crate::storage_map::{StorageKey, StorageMap, StorageRef};

/// Which storages to release, and when. Storages are named by the file index of their alloc
/// event among the document's memory events ([`trace_schema::MemoryItem::index`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleasePlan {
    /// `(release time ns, alloc event index)`: the storage stops counting before every event
    /// at that time or later (no effect when the trace frees it earlier).
    at: Vec<(u64, u32)>,
    /// Allocs that never happen (their bytes never count).
    never: FxHashSet<u32>,
}

impl ReleasePlan {
    /// An empty plan (the replay reproduces the trace).
    pub fn new() -> Self {
        Self::default()
    }

    /// Releases the storage allocated by memory event `alloc_index` at `at_ns`.
    pub fn release_at(&mut self, alloc_index: u32, at_ns: u64) {
        self.at.push((at_ns, alloc_index));
    }

    /// Removes the storage allocated by memory event `alloc_index` altogether.
    pub fn never_allocate(&mut self, alloc_index: u32) {
        self.never.insert(alloc_index);
    }

    /// Storages in the plan.
    pub fn len(&self) -> usize {
        self.at.len() + self.never.len()
    }

    /// Nothing to release.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The peak of one pass in a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReplayedPassPeak {
    /// Forward, backward or optimizer.
    pub pass: Pass,
    /// Highest live bytes (all devices) inside the pass's spans, carried-in value included.
    pub live_bytes: u64,
    /// When first reached, ns since session start.
    pub timestamp_ns: u64,
}

/// What a replay with a [`ReleasePlan`] leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replayed {
    /// The run's peak (live bytes over all devices), bytes.
    pub run_peak_bytes: u64,
    /// When it is first reached, ns since session start.
    pub run_peak_ns: u64,
    /// The pass whose spans hold that moment (`None`: outside every pass).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_peak_pass: Option<Pass>,
    /// Each pass's peak, in pass order (passes without spans absent).
    pub pass_peaks: Vec<ReplayedPassPeak>,
    /// Bytes the plan released that were live when released (or never allocated).
    pub released_bytes: u64,
}

impl Replayed {
    /// The peak of `pass`, when the trace has that pass.
    pub fn pass_peak(&self, pass: Pass) -> Option<&ReplayedPassPeak> {
        self.pass_peaks.iter().find(|p| p.pass == pass)
    }
}

struct PassState {
    pass: Pass,
    intervals: Vec<(u64, u64)>,
    /// Intervals whose start was crossed.
    crossed: usize,
    best: Option<(u64, u64)>,
}

impl PassState {
    fn inside(&self, ts: u64) -> bool {
        let Some(&(s, e)) = self
            .crossed
            .checked_sub(1)
            .and_then(|j| self.intervals.get(j))
        else {
            return false;
        };
        ts >= s && (ts < e || (s == e && ts == s))
    }

    fn offer(&mut self, ts: u64, total: u64) {
        if self.best.is_none_or(|(_, b)| total > b) {
            self.best = Some((ts, total));
        }
    }
}

/// Replays `doc`'s memory events with `plan` applied (see the module documentation).
pub fn replay_with_releases(doc: &TraceDocument, plan: &ReleasePlan) -> Replayed {
    let mut releases = plan.at.clone();
    releases.sort_unstable();
    let planned: FxHashSet<u32> = releases.iter().map(|&(_, i)| i).collect();
    let mut passes: Vec<PassState> = pass_intervals(doc)
        .into_iter()
        .zip([Pass::Forward, Pass::Backward, Pass::Optimizer])
        .filter_map(|(iv, pass)| {
            iv.map(|(intervals, _)| PassState {
                pass,
                intervals,
                crossed: 0,
                best: None,
            })
        })
        .collect();
    // live storages: key → (alloc index, bytes, counted)
    let mut live: StorageMap<(u32, u64, bool)> = StorageMap::new();
    // planned allocs still live: alloc index → key
    let mut by_index: FxHashMap<u32, StorageKey> = FxHashMap::default();
    let mut next_release = 0usize;
    let mut total = 0u64;
    let mut released_bytes = 0u64;
    let mut peak: Option<(u64, u64)> = None;

    doc.for_each_memory(MemoryOrder::Replay, |m| {
        let ts = m.timestamp_ns;
        // releases due at or before this event, then pass intervals starting by then
        while let Some(&(at, index)) = releases.get(next_release) {
            if at > ts {
                break;
            }
            next_release += 1;
            if let Some(k) = by_index.remove(&index) {
                if let Some(entry) = live.get_mut(k.as_ref()) {
                    if entry.0 == index && entry.2 {
                        entry.2 = false;
                        total = total.saturating_sub(entry.1);
                        released_bytes = released_bytes.saturating_add(entry.1);
                    }
                }
            }
        }
        for p in &mut passes {
            while let Some(&(s, _)) = p.intervals.get(p.crossed) {
                if s > ts {
                    break;
                }
                p.crossed += 1;
                p.offer(s, total);
            }
        }
        let key = StorageRef::of(m);
        match m.action {
            MemoryAction::Alloc => {
                if key.is_some_and(|k| live.contains(k)) {
                    return; // an alias: bytes once
                }
                let bytes = m.bytes.unwrap_or(0);
                let counted = !plan.never.contains(&m.index);
                if counted {
                    total = total.saturating_add(bytes);
                } else {
                    released_bytes = released_bytes.saturating_add(bytes);
                }
                if let Some(k) = key {
                    if planned.contains(&m.index) {
                        by_index.insert(m.index, k.to_key());
                    }
                    live.insert(k, (m.index, bytes, counted));
                }
            }
            MemoryAction::Free => {
                let Some(k) = key else { return };
                let Some((index, bytes, counted)) = live.remove(k) else {
                    return;
                };
                by_index.remove(&index);
                if counted {
                    total = total.saturating_sub(bytes);
                }
            }
        }
        if peak.is_none_or(|(_, b)| total > b) {
            peak = Some((ts, total));
        }
        for p in &mut passes {
            if p.inside(ts) {
                p.offer(ts, total);
            }
        }
    });
    // intervals starting after the last event carry the final value in
    for p in &mut passes {
        while let Some(&(s, _)) = p.intervals.get(p.crossed) {
            p.crossed += 1;
            p.offer(s, total);
        }
    }
    let (run_peak_ns, run_peak_bytes) = peak.unwrap_or((0, 0));
    let run_peak_pass = passes
        .iter()
        .find(|p| {
            p.intervals
                .iter()
                .any(|&(s, e)| run_peak_ns >= s && (run_peak_ns < e || s == e))
        })
        .map(|p| p.pass);
    Replayed {
        run_peak_bytes,
        run_peak_ns,
        run_peak_pass,
        pass_peaks: passes
            .iter()
            .filter_map(|p| {
                p.best.map(|(timestamp_ns, live_bytes)| ReplayedPassPeak {
                    pass: p.pass,
                    live_bytes,
                    timestamp_ns,
                })
            })
            .collect(),
        released_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_schema::load_str;

    const TRACE: &str = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}
{"kind":"span_start","id":"s1","name":"e","start_ns":0,"span_kind":"function","measured":true}
{"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":1,"span_kind":"function","step":"forward"}
{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"A","bytes":100,"category":"activation","span_id":"s2"}
{"kind":"memory","timestamp_ns":3,"action":"alloc","device":"cpu","storage_id":"L","bytes":10,"category":"activation","span_id":"s2"}
{"kind":"span_end","id":"s2","duration_ns":4}
{"kind":"span_start","id":"s3","parent_id":"s1","name":"optimizer","start_ns":6,"span_kind":"function","step":"optimizer"}
{"kind":"memory","timestamp_ns":7,"action":"alloc","device":"cpu","storage_id":"T","bytes":50,"category":"optimizer","span_id":"s3"}
{"kind":"memory","timestamp_ns":8,"action":"free","device":"cpu","storage_id":"T","span_id":"s3"}
{"kind":"span_end","id":"s3","duration_ns":3}
{"kind":"memory","timestamp_ns":9,"action":"free","device":"cpu","storage_id":"A","span_id":"s1"}
{"kind":"memory","timestamp_ns":9,"action":"free","device":"cpu","storage_id":"L","span_id":"s1"}
{"kind":"span_end","id":"s1","duration_ns":10}
{"kind":"terminal","outcome":"complete","timestamp_ns":10}
"#;

    #[test]
    fn an_empty_plan_reproduces_the_trace() {
        let doc = load_str(TRACE).unwrap();
        let r = replay_with_releases(&doc, &ReleasePlan::new());
        let logical = crate::analyze_memory(&doc).logical.unwrap();
        let peak = logical.peak.unwrap();
        assert_eq!(r.run_peak_bytes, peak.live_bytes);
        assert_eq!((r.run_peak_bytes, r.run_peak_ns), (160, 7));
        assert_eq!(r.run_peak_pass, Some(Pass::Optimizer));
        for p in &logical.pass_peaks {
            let q = r.pass_peak(p.pass).unwrap();
            assert_eq!(
                (q.live_bytes, q.timestamp_ns),
                (p.peak.live_bytes, p.peak.timestamp_ns)
            );
        }
        assert_eq!(r.released_bytes, 0);
    }

    #[test]
    fn a_release_at_the_optimizer_start_moves_the_peak() {
        let doc = load_str(TRACE).unwrap();
        let mut plan = ReleasePlan::new();
        plan.release_at(0, 6); // A (alloc event 0), released when the optimizer starts
        let r = replay_with_releases(&doc, &plan);
        // forward keeps its 110; the optimizer peaks at 10 + 50
        assert_eq!((r.run_peak_bytes, r.run_peak_ns), (110, 3));
        assert_eq!(r.run_peak_pass, Some(Pass::Forward));
        assert_eq!(r.pass_peak(Pass::Optimizer).unwrap().live_bytes, 60);
        assert_eq!(r.pass_peak(Pass::Forward).unwrap().live_bytes, 110);
        assert_eq!(r.released_bytes, 100);
    }

    #[test]
    fn never_allocating_removes_the_bytes_and_a_late_release_changes_nothing() {
        let doc = load_str(TRACE).unwrap();
        let mut plan = ReleasePlan::new();
        plan.never_allocate(2); // T
        plan.release_at(1, 100); // L, after its own free: no effect
        let r = replay_with_releases(&doc, &plan);
        assert_eq!(r.run_peak_bytes, 110);
        assert_eq!(r.pass_peak(Pass::Optimizer).unwrap().live_bytes, 110);
        assert_eq!(r.released_bytes, 50);
    }
}
