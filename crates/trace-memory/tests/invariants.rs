//! proptest invariants over arbitrary event streams, checked against a naive (quadratic)
//! reference replay written independently of the crate's single-pass one.

use std::collections::BTreeMap;

use proptest::prelude::*;
use trace_memory::{analyze_memory, node_memory_metrics, LogicalMemoryProfile};
use trace_schema::{MemoryAction, MemoryCategory, MemoryEvent, Pass, TraceEvent};
use trace_testkit::*;

#[derive(Debug, Clone)]
struct Ev {
    t: u64,
    dev: u8,
    storage: u8,
    tensor: u8,
    alloc: bool,
    bytes: u64,
    cat: u8,
    pre: bool,
}

fn ev_strategy() -> impl Strategy<Value = Ev> {
    (
        0u64..12,
        0u8..2,
        0u8..5,
        0u8..3,
        prop::bool::weighted(0.6),
        1u64..1000,
        0u8..5,
        prop::bool::weighted(0.1),
    )
        .prop_map(|(t, dev, storage, tensor, alloc, bytes, cat, pre)| Ev {
            t,
            dev,
            storage,
            tensor,
            alloc,
            bytes,
            cat,
            pre,
        })
}

fn to_event(e: &Ev) -> TraceEvent {
    let action = if e.alloc {
        MemoryAction::Alloc
    } else {
        MemoryAction::Free
    };
    let mut m: MemoryEvent = mem(
        e.t,
        action,
        &format!("dev{}", e.dev),
        &format!("s{}", e.storage),
        e.alloc.then_some(e.bytes),
    )
    .tensor(&format!("t{}", e.tensor))
    .cat(MemoryCategory::ALL[e.cat as usize])
    .body();
    m.pre_existing = e.pre && e.alloc;
    TraceEvent::Memory(m)
}

/// (time, total, per device, per category) after one event.
type RefPoint = (u64, u64, BTreeMap<u8, u64>, BTreeMap<u8, u64>);

/// Naive sequential replay: events in (time, file order), one at a time; after each, sum the
/// whole live map.
struct Reference {
    points: Vec<RefPoint>,
    allocated: u64,
    pre_existing: u64,
}

fn reference(events: &[Ev]) -> Reference {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| events[i].t); // stable: file order inside a tick
    let mut live: BTreeMap<(u8, u8), (u64, u8)> = BTreeMap::new();
    let mut points = Vec::new();
    let (mut allocated, mut pre_existing) = (0, 0);
    for &i in &order {
        let e = &events[i];
        let key = (e.dev, e.storage);
        if e.alloc {
            if let std::collections::btree_map::Entry::Vacant(v) = live.entry(key) {
                v.insert((e.bytes, e.cat));
                if e.pre {
                    pre_existing += e.bytes;
                } else {
                    allocated += e.bytes;
                }
            }
        } else {
            live.remove(&key);
        }
        let mut by_dev = BTreeMap::new();
        let mut by_cat = BTreeMap::new();
        let mut total = 0;
        for (&(d, _), &(b, c)) in &live {
            total += b;
            *by_dev.entry(d).or_insert(0) += b;
            *by_cat.entry(c).or_insert(0) += b;
        }
        points.push((e.t, total, by_dev, by_cat));
    }
    Reference {
        points,
        allocated,
        pre_existing,
    }
}

/// A span declaring a pass, `[start, end)`.
#[derive(Debug, Clone)]
struct PassSpan {
    start: u64,
    len: u64,
    pass: u8,
}

fn pass_span_strategy() -> impl Strategy<Value = PassSpan> {
    (0u64..12, 0u64..6, 0u8..3).prop_map(|(start, len, pass)| PassSpan { start, len, pass })
}

const PASSES: [Pass; 3] = [Pass::Forward, Pass::Backward, Pass::Optimizer];

fn logical_with(events: &[Ev], spans: &[PassSpan]) -> LogicalMemoryProfile {
    let mut all: Vec<TraceEvent> = Vec::new();
    for (k, s) in spans.iter().enumerate() {
        let id = format!("p{k}");
        all.push(span_start(
            &id,
            None,
            s.start,
            Some(PASSES[s.pass as usize]),
        ));
        all.push(span_end(&id, s.len));
    }
    all.extend(events.iter().map(to_event));
    analyze_memory(&document(all))
        .logical
        .expect("non-empty stream")
}

fn logical(events: &[Ev]) -> LogicalMemoryProfile {
    logical_with(events, &[])
}

/// Naive pass peak: over the merged intervals of the pass's spans, the value carried into each
/// interval (after every event before its start) and the value after each event inside it.
fn reference_pass_peak(
    events: &[Ev],
    r: &Reference,
    spans: &[PassSpan],
    pass: u8,
) -> Option<(u64, u64)> {
    let _ = events;
    let mut best: Option<(u64, u64)> = None;
    let mut consider = |t: u64, v: u64| {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((t, v));
        }
    };
    let mut iv: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| s.pass == pass)
        .map(|s| (s.start, s.start + s.len))
        .collect();
    if iv.is_empty() {
        return None;
    }
    iv.sort();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in iv {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    for (s, e) in merged {
        let carried = r.points.iter().rev().find(|p| p.0 < s).map_or(0, |p| p.1);
        consider(s, carried);
        for p in r
            .points
            .iter()
            .filter(|p| p.0 >= s && (p.0 < e || (s == e && p.0 == s)))
        {
            consider(p.0, p.1);
        }
    }
    best
}

/// Every figure that must not depend on how events of different ticks are interleaved in the
/// file (inside one tick, file order is part of the input).
fn figures(l: &LogicalMemoryProfile) -> String {
    let mut lifetimes: Vec<_> = l
        .lifetimes
        .iter()
        .map(|x| {
            (
                x.device.clone(),
                x.storage_id.clone(),
                x.start_ns,
                x.end_ns,
                x.bytes,
            )
        })
        .collect();
    lifetimes.sort();
    let peak = l.peak.as_ref().map(|p| {
        let mut live: Vec<_> = p
            .live_allocations
            .iter()
            .map(|a| (a.bytes, a.device.clone(), a.storage_id.clone()))
            .collect();
        live.sort();
        (
            p.timestamp_ns,
            p.live_bytes,
            p.by_device.clone(),
            p.by_category.clone(),
            live,
        )
    });
    // Device indices follow first appearance, which may differ: compare by name.
    let changes: Vec<_> = l
        .timeline
        .changes
        .iter()
        .map(|c| {
            let device = &l.timeline.devices[c.device as usize];
            (c.timestamp_ns, device.clone(), c.category, c.live_bytes)
        })
        .collect();
    let totals: Vec<(u64, u64)> = l
        .timeline
        .totals
        .iter()
        .map(|p| (p.timestamp_ns, p.live_bytes))
        .collect();
    let mut by_device = l.by_device.clone();
    for d in &mut by_device {
        if let Some(p) = &mut d.peak {
            p.event_index = 0; // file positions differ between interleavings
        }
    }
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        serde_json::to_string(&l.totals).unwrap(),
        serde_json::to_string(&by_device).unwrap(),
        serde_json::to_string(&l.live_at_end).unwrap(),
        peak,
        lifetimes,
        totals,
        changes
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn logical_figures_equal_a_naive_sequential_replay(
        events in prop::collection::vec(ev_strategy(), 1..40),
        spans in prop::collection::vec(pass_span_strategy(), 0..4),
    ) {
        let l = logical_with(&events, &spans);
        let r = reference(&events);
        let dev_name = |d: u8| format!("dev{d}");

        // After every tick: totals; after every event: device and category sums.
        for (t, _, _, _) in &r.points {
            let last_of_tick = r.points.iter().rev().find(|p| p.0 == *t).unwrap().1;
            prop_assert_eq!(l.timeline.live_bytes_at(*t), last_of_tick);
        }
        // Every generated alloc has bytes > 0 and every matched free frees some: an event
        // changes the figures exactly when it changes the total. One change per such event.
        let mut prev = 0u64;
        let changing: Vec<&RefPoint> = r
            .points
            .iter()
            .filter(|p| std::mem::replace(&mut prev, p.1) != p.1)
            .collect();
        prop_assert_eq!(l.timeline.changes.len(), changing.len());
        let mut cells: BTreeMap<(u32, MemoryCategory), u64> = BTreeMap::new();
        for (i, ch) in l.timeline.changes.iter().enumerate() {
            cells.insert((ch.device, ch.category), ch.live_bytes);
            let (t, total, by_dev, by_cat) = changing[i];
            prop_assert_eq!((l.timeline.totals[i].timestamp_ns, l.timeline.totals[i].live_bytes), (*t, *total));
            prop_assert_eq!(cells.values().sum::<u64>(), *total);
            for (d, name) in l.timeline.devices.iter().enumerate() {
                let sum: u64 = cells.iter().filter(|((x, _), _)| *x as usize == d).map(|(_, v)| v).sum();
                let want = by_dev.iter().find(|(k, _)| dev_name(**k) == *name).map_or(0, |(_, v)| *v);
                prop_assert_eq!(sum, want);
            }
            for (j, cat) in MemoryCategory::ALL.iter().enumerate() {
                let sum: u64 = cells.iter().filter(|((_, x), _)| x == cat).map(|(_, v)| v).sum();
                prop_assert_eq!(sum, by_cat.get(&(j as u8)).copied().unwrap_or(0));
            }
        }

        // The peak: first maximum over every prefix of the naive replay.
        let any_alloc = events.iter().any(|e| e.alloc);
        if any_alloc {
            let p = l.peak.as_ref().unwrap();
            let ref_peak = r.points.iter().fold(None, |acc: Option<(u64, u64)>, x| match acc {
                Some((_, b)) if b >= x.1 => acc,
                _ => Some((x.0, x.1)),
            }).unwrap();
            prop_assert_eq!((p.timestamp_ns, p.live_bytes), ref_peak);
            prop_assert_eq!(p.by_device.values().sum::<u64>(), p.live_bytes);
            prop_assert_eq!(p.by_category.values().sum::<u64>(), p.live_bytes);
            prop_assert_eq!(p.live_allocations.iter().map(|a| a.bytes).sum::<u64>(), p.live_bytes);
            prop_assert!(p.live_bytes <= r.allocated + r.pre_existing);
            prop_assert_eq!(l.totals.total_allocated_bytes, r.allocated);
            prop_assert_eq!(l.totals.pre_existing_bytes, r.pre_existing);
            // Every storage was live after its own alloc: none exceeds the peak.
            for lt in &l.lifetimes {
                prop_assert!(p.live_bytes >= lt.bytes);
            }
            prop_assert!(p.live_allocations.windows(2).all(|w| w[0].bytes >= w[1].bytes));
            // Per-device peaks are the device's own maximum over every prefix.
            for dev in &l.by_device {
                let d: u8 = dev.device.trim_start_matches("dev").parse().unwrap();
                let want = r.points.iter().map(|x| x.2.get(&d).copied().unwrap_or(0)).max().unwrap_or(0);
                if let Some(dp) = &dev.peak {
                    prop_assert_eq!(dp.live_bytes, want);
                    prop_assert_eq!(dp.by_category.values().sum::<u64>(), dp.live_bytes);
                }
            }
            // The display series always contains the exact peak, at its time.
            for points in 1..6 {
                let series = l.display_timeline(points, None).unwrap();
                prop_assert!(series.len() <= points);
                prop_assert!(series.iter().any(|x| x.timestamp_ns == p.timestamp_ns && x.live_bytes == p.live_bytes));
            }
        } else {
            prop_assert!(l.peak.is_none());
        }

        // Pass peaks against the naive definition.
        for (j, pass) in PASSES.iter().enumerate() {
            let ours = l.pass_peaks.iter().find(|x| x.pass == *pass);
            let want = reference_pass_peak(&events, &r, &spans, j as u8);
            prop_assert_eq!(ours.map(|x| (x.peak.timestamp_ns, x.peak.live_bytes)), want);
            if let Some(x) = ours {
                prop_assert_eq!(x.peak.by_category.values().sum::<u64>(), x.peak.live_bytes);
            }
        }

        // Final live equals the sum of storages live at the end.
        let end_sum: u64 = l.live_at_end_lifetimes().map(|x| x.bytes).sum();
        prop_assert_eq!(l.live_at_end.bytes, end_sum);
        prop_assert_eq!(r.points.last().unwrap().1, end_sum);
        // Aliases never double count: one lifetime per (device, storage) at any time.
        let allocs_seen = l.totals.allocation_count + l.totals.pre_existing_count;
        prop_assert_eq!(allocs_seen as usize, l.lifetimes.len());
    }

    #[test]
    fn interleaving_ticks_changes_nothing(
        events in prop::collection::vec(ev_strategy(), 1..40),
        keys in prop::collection::vec(any::<u32>(), 40),
    ) {
        // Shuffle the file, then put each tick's events back in their own order into the
        // positions that tick occupies: a different file with the same (time, file order).
        let mut positions: Vec<usize> = (0..events.len()).collect();
        positions.sort_by_key(|&i| keys[i]);
        let shuffled_ticks: Vec<u64> = positions.iter().map(|&i| events[i].t).collect();
        let mut per_tick: BTreeMap<u64, std::collections::VecDeque<Ev>> = BTreeMap::new();
        for e in &events {
            per_tick.entry(e.t).or_default().push_back(e.clone());
        }
        let shuffled: Vec<Ev> = shuffled_ticks
            .iter()
            .map(|t| per_tick.get_mut(t).unwrap().pop_front().unwrap())
            .collect();
        prop_assert_eq!(figures(&logical(&events)), figures(&logical(&shuffled)));
    }
}

// ---- node metrics over well-nested spans ----

#[derive(Debug, Clone)]
enum Act {
    Open,
    Close,
    Alloc(u64, bool),
    Free(usize, bool),
}

fn act_strategy() -> impl Strategy<Value = Act> {
    prop_oneof![
        2 => Just(Act::Open),
        2 => Just(Act::Close),
        4 => (1u64..500, any::<bool>()).prop_map(|(b, adv)| Act::Alloc(b, adv)),
        3 => (0usize..64, any::<bool>()).prop_map(|(i, adv)| Act::Free(i, adv)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn node_metrics_on_well_nested_spans(acts in prop::collection::vec(act_strategy(), 1..60)) {
        // Sequential execution: spans open/close on a stack (time advances on each), allocs
        // happen in the innermost span; everything inside one root.
        let mut ev = vec![span_start("root", None, 0, None)];
        let mut t = 0u64;
        let mut stack = vec![("root".to_string(), 0usize)];
        let mut parents: Vec<Option<usize>> = vec![None];
        let mut starts = vec![0u64];
        let mut ends = vec![0u64];
        let mut live: Vec<String> = Vec::new();
        // (span, alloc time, free time, bytes, name, alloc position, free position): positions
        // in the file, which is in time order, so also the order the events apply in.
        #[allow(clippy::type_complexity)]
        let mut lifetimes: Vec<(usize, u64, Option<u64>, u64, String, usize, Option<usize>)> = Vec::new();
        let mut n_storage = 0;
        for a in acts {
            match a {
                Act::Open => {
                    t += 1;
                    let id = format!("s{}", parents.len());
                    parents.push(Some(stack.last().unwrap().1));
                    starts.push(t);
                    ends.push(0);
                    ev.push(span_start(&id, Some(&stack.last().unwrap().0), t, None));
                    stack.push((id, parents.len() - 1));
                }
                Act::Close if stack.len() > 1 => {
                    t += 1;
                    let (id, i) = stack.pop().unwrap();
                    ends[i] = t;
                    ev.push(span_end(&id, t - starts[i]));
                }
                Act::Close => {}
                Act::Alloc(b, adv) => {
                    t += adv as u64;
                    let name = format!("st{n_storage}");
                    n_storage += 1;
                    let (sid, si) = stack.last().unwrap().clone();
                    lifetimes.push((si, t, None, b, name.clone(), ev.len(), None));
                    ev.push(alloc(t, &name, b).span(&sid).ev());
                    live.push(name);
                }
                Act::Free(k, adv) if !live.is_empty() => {
                    t += adv as u64;
                    let name = live.remove(k % live.len());
                    let l = lifetimes.iter_mut().find(|l| l.4 == name).unwrap();
                    l.2 = Some(t);
                    l.6 = Some(ev.len());
                    ev.push(free(t, &name).ev());
                }
                Act::Free(..) => {}
            }
        }
        while let Some((id, i)) = stack.pop() {
            t += 1;
            ends[i] = t;
            ev.push(span_end(&id, t - starts[i]));
        }
        let d = document(ev.clone());
        let l = analyze_memory(&d).logical;
        let n = node_memory_metrics(&d, l.as_ref());
        prop_assert_eq!(n.spans.len(), parents.len());

        // Brute force by subtree membership.
        let in_subtree = |mut x: usize, root: usize| loop {
            if x == root { return true; }
            match parents[x] { Some(p) => x = p, None => return false }
        };
        for x in 0..parents.len() {
            let (s, e) = (starts[x], ends[x]);
            let mine: Vec<_> = lifetimes.iter().filter(|lt| in_subtree(lt.0, x)).collect();
            // After every event applied at a time in [s, e), one at a time.
            let mut peak = 0;
            for (k, e_k) in ev.iter().enumerate() {
                let TraceEvent::Memory(m) = e_k else { continue };
                if m.timestamp_ns < s || m.timestamp_ns >= e {
                    continue;
                }
                let live: u64 = mine.iter().filter(|lt| lt.5 <= k && lt.6.is_none_or(|f| f > k)).map(|lt| lt.3).sum();
                peak = peak.max(live);
            }
            let residual: u64 = mine.iter().filter(|lt| lt.2.is_none_or(|f| f > e)).map(|lt| lt.3).sum();
            let m = &n.spans[x];
            if mine.is_empty() {
                prop_assert_eq!(m.subtree_peak_live_bytes, None);
            } else {
                prop_assert_eq!(m.subtree_peak_live_bytes, Some(peak));
                prop_assert_eq!(m.subtree_residual_bytes, Some(residual));
                prop_assert!(residual <= peak);
            }
            if let Some(p) = parents[x] {
                prop_assert!(n.spans[p].subtree_peak_live_bytes.unwrap_or(0) >= m.subtree_peak_live_bytes.unwrap_or(0));
            }
        }
        // Every allocation is inside the root: the root's subtree peak is the global peak.
        if let Some(l) = &l {
            if let Some(p) = &l.peak {
                prop_assert_eq!(n.spans[0].subtree_peak_live_bytes, Some(p.live_bytes));
            }
        }
    }
}
