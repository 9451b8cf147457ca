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
    replay_plans(doc, &[plan]).remove(0)
}

/// One plan's side of a replay of several ([`replay_plans`]).
struct PlanState<'p> {
    plan: &'p ReleasePlan,
    /// `(release time ns, alloc index)`, sorted.
    releases: Vec<(u64, u32)>,
    next_release: usize,
    /// Allocs the plan releases.
    planned: FxHashSet<u32>,
    /// Planned allocs still live: alloc index → key.
    by_index: FxHashMap<u32, StorageKey>,
    /// Live allocs this plan does not count (released or never allocated).
    uncounted: FxHashSet<u32>,
    passes: Vec<PassState>,
    total: u64,
    released_bytes: u64,
    peak: Option<(u64, u64)>,
}

impl<'p> PlanState<'p> {
    fn new(
        plan: &'p ReleasePlan,
        intervals: &[Option<crate::replay::record::PassIntervals>],
    ) -> Self {
        let mut releases = plan.at.clone();
        releases.sort_unstable();
        let planned: FxHashSet<u32> = releases.iter().map(|&(_, i)| i).collect();
        let passes = intervals
            .iter()
            .zip([Pass::Forward, Pass::Backward, Pass::Optimizer])
            .filter_map(|(iv, pass)| {
                iv.as_ref().map(|(intervals, _)| PassState {
                    pass,
                    intervals: intervals.clone(),
                    crossed: 0,
                    best: None,
                })
            })
            .collect();
        Self {
            plan,
            releases,
            next_release: 0,
            planned,
            by_index: FxHashMap::default(),
            uncounted: FxHashSet::default(),
            passes,
            total: 0,
            released_bytes: 0,
            peak: None,
        }
    }

    /// Releases due at or before `ts`, then pass intervals starting by then.
    fn before(&mut self, ts: u64, live: &StorageMap<(u32, u64)>) {
        while let Some(&(at, index)) = self.releases.get(self.next_release) {
            if at > ts {
                break;
            }
            self.next_release += 1;
            if let Some(k) = self.by_index.remove(&index) {
                if let Some(&(i, bytes)) = live.get(k.as_ref()) {
                    if i == index && self.uncounted.insert(index) {
                        self.total = self.total.saturating_sub(bytes);
                        self.released_bytes = self.released_bytes.saturating_add(bytes);
                    }
                }
            }
        }
        for p in &mut self.passes {
            while let Some(&(s, _)) = p.intervals.get(p.crossed) {
                if s > ts {
                    break;
                }
                p.crossed += 1;
                p.offer(s, self.total);
            }
        }
    }

    /// An alloc of a storage not live (`key`: its identity, when it has one).
    fn alloc(&mut self, index: u32, bytes: u64, key: Option<StorageRef<'_>>) {
        let counted = !self.plan.never.contains(&index);
        if counted {
            self.total = self.total.saturating_add(bytes);
        } else {
            self.released_bytes = self.released_bytes.saturating_add(bytes);
        }
        if let Some(k) = key {
            if self.planned.contains(&index) {
                self.by_index.insert(index, k.to_key());
            }
            if !counted {
                self.uncounted.insert(index);
            }
        }
    }

    /// The free of a live storage allocated by event `index`.
    fn free(&mut self, index: u32, bytes: u64) {
        if !self.by_index.is_empty() {
            self.by_index.remove(&index);
        }
        if self.uncounted.is_empty() || !self.uncounted.remove(&index) {
            self.total = self.total.saturating_sub(bytes);
        }
    }

    /// After an event that changed the live set, at `ts`.
    fn after(&mut self, ts: u64) {
        let total = self.total;
        if self.peak.is_none_or(|(_, b)| total > b) {
            self.peak = Some((ts, total));
        }
        for p in &mut self.passes {
            if p.inside(ts) {
                p.offer(ts, total);
            }
        }
    }

    fn finish(mut self) -> Replayed {
        // intervals starting after the last event carry the final value in
        for p in &mut self.passes {
            while let Some(&(s, _)) = p.intervals.get(p.crossed) {
                p.crossed += 1;
                p.offer(s, self.total);
            }
        }
        let (run_peak_ns, run_peak_bytes) = self.peak.unwrap_or((0, 0));
        let run_peak_pass = self
            .passes
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
            pass_peaks: self
                .passes
                .iter()
                .filter_map(|p| {
                    p.best.map(|(timestamp_ns, live_bytes)| ReplayedPassPeak {
                        pass: p.pass,
                        live_bytes,
                        timestamp_ns,
                    })
                })
                .collect(),
            released_bytes: self.released_bytes,
        }
    }
}

/// [`replay_with_releases`] for several plans in one pass over the memory events (each
/// plan's result as if replayed alone, in the order given): the events are read and the live
/// set kept once; each plan keeps only its totals and the storages it releases. A what-if and
/// its baseline (the empty plan) cost one replay, not two.
pub fn replay_plans(doc: &TraceDocument, plans: &[&ReleasePlan]) -> Vec<Replayed> {
    let intervals = pass_intervals(doc);
    let mut states: Vec<PlanState<'_>> = plans
        .iter()
        .map(|p| PlanState::new(p, &intervals))
        .collect();
    // live storages: key → (alloc index, bytes); the same for every plan (a plan changes
    // what counts, never what is live)
    let mut live: StorageMap<(u32, u64)> = StorageMap::new();
    doc.for_each_memory(MemoryOrder::Replay, |m| {
        let ts = m.timestamp_ns;
        for s in &mut states {
            s.before(ts, &live);
        }
        let key = StorageRef::of(m);
        match m.action {
            MemoryAction::Alloc => {
                if key.is_some_and(|k| live.contains(k)) {
                    return; // an alias: bytes once
                }
                let bytes = m.bytes.unwrap_or(0);
                for s in &mut states {
                    s.alloc(m.index, bytes, key);
                }
                if let Some(k) = key {
                    live.insert(k, (m.index, bytes));
                }
            }
            MemoryAction::Free => {
                let Some(k) = key else { return };
                let Some((index, bytes)) = live.remove(k) else {
                    return;
                };
                for s in &mut states {
                    s.free(index, bytes);
                }
            }
        }
        for s in &mut states {
            s.after(ts);
        }
    });
    states.into_iter().map(PlanState::finish).collect()
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

    #[test]
    fn plans_replayed_together_give_what_each_gives_alone() {
        use trace_synth::{synth_events, SynthConfig};
        // aliases, reused storage ids, frees without bytes, allocs without identity, three
        // passes, two devices, several steps
        let config = SynthConfig {
            steps: 3,
            ..SynthConfig::mix(30_000)
        };
        let doc = TraceDocument::from_events(synth_events(&config));
        let mut allocs: Vec<(u32, u64)> = Vec::new();
        doc.for_each_memory(MemoryOrder::File, |m| {
            if m.action == MemoryAction::Alloc {
                allocs.push((m.index, m.timestamp_ns));
            }
        });
        let last_ns = allocs.iter().map(|a| a.1).max().unwrap();
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut plans = vec![ReleasePlan::new()];
        for k in 0..4 {
            let mut plan = ReleasePlan::new();
            for _ in 0..(1 + 300 * k) {
                let (index, ts) = allocs[next(allocs.len() as u64) as usize];
                match next(3) {
                    0 => plan.never_allocate(index),
                    // before, at or after its own alloc and free
                    1 => plan.release_at(index, next(last_ns + 2)),
                    _ => plan.release_at(index, ts + next(1_000_000)),
                }
            }
            plans.push(plan);
        }
        let together = replay_plans(&doc, &plans.iter().collect::<Vec<_>>());
        for (plan, got) in plans.iter().zip(&together) {
            assert_eq!(got, &reference(&doc, plan));
        }
        assert!(together[1..].iter().any(|r| r.released_bytes > 0));
        assert!(together
            .iter()
            .any(|r| r.run_peak_bytes != together[0].run_peak_bytes));
    }

    /// The replay of one plan as it was written before [`replay_plans`] (a plan, its own live
    /// set): the reference the shared replay is checked against.
    fn reference(doc: &TraceDocument, plan: &ReleasePlan) -> Replayed {
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
}
