//! proptest invariants over arbitrary event streams, checked against a naive (quadratic)
//! reference replay written independently of the crate's single-pass one.

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use trace_memory::{analyze_memory, node_memory_metrics, LogicalMemoryProfile};
use trace_schema::{MemoryAction, MemoryCategory, MemoryEvent, TraceEvent};

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
    .cat(MemoryCategory::ALL[e.cat as usize]);
    m.pre_existing = e.pre && e.alloc;
    TraceEvent::Memory(m)
}

/// (time, total, per device, per category) after one batch.
type RefPoint = (u64, u64, BTreeMap<u8, u64>, BTreeMap<u8, u64>);

/// Naive replay: after each batch, sum the whole live map.
struct Reference {
    points: Vec<RefPoint>,
    allocated: u64,
    pre_existing: u64,
}

fn reference(events: &[Ev]) -> Reference {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| events[i].t);
    let mut live: BTreeMap<(u8, u8), (u64, u8)> = BTreeMap::new();
    let mut points = Vec::new();
    let (mut allocated, mut pre_existing) = (0, 0);
    let mut i = 0;
    while i < order.len() {
        let t = events[order[i]].t;
        while i < order.len() && events[order[i]].t == t {
            let e = &events[order[i]];
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
            i += 1;
        }
        let mut by_dev = BTreeMap::new();
        let mut by_cat = BTreeMap::new();
        let mut total = 0;
        for (&(d, _), &(b, c)) in &live {
            total += b;
            *by_dev.entry(d).or_insert(0) += b;
            *by_cat.entry(c).or_insert(0) += b;
        }
        points.push((t, total, by_dev, by_cat));
    }
    Reference {
        points,
        allocated,
        pre_existing,
    }
}

fn logical(events: &[Ev]) -> LogicalMemoryProfile {
    analyze_memory(&doc(events.iter().map(to_event)))
        .logical
        .expect("non-empty stream")
}

/// Every figure that must not depend on the order of independent events inside a batch.
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
    let mut changes: Vec<_> = l
        .timeline
        .changes
        .iter()
        .map(|c| {
            let device = &l.timeline.devices[c.device as usize];
            (c.timestamp_ns, device.clone(), c.category, c.live_bytes)
        })
        .collect();
    changes.sort();
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        serde_json::to_string(&l.totals).unwrap(),
        serde_json::to_string(&l.by_device).unwrap(),
        serde_json::to_string(&l.live_at_end).unwrap(),
        peak,
        lifetimes,
        l.timeline.totals,
        changes
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn logical_invariants(events in prop::collection::vec(ev_strategy(), 1..40)) {
        let l = logical(&events);
        let r = reference(&events);
        let dev_name = |d: u8| format!("dev{d}");

        // Against the naive replay, after every batch: totals, device and category sums.
        let mut cells: BTreeMap<(u32, MemoryCategory), u64> = BTreeMap::new();
        let mut c = 0;
        for (t, total, by_dev, by_cat) in &r.points {
            prop_assert_eq!(l.timeline.live_bytes_at(*t), *total);
            while c < l.timeline.changes.len() && l.timeline.changes[c].timestamp_ns <= *t {
                let ch = l.timeline.changes[c];
                cells.insert((ch.device, ch.category), ch.live_bytes);
                c += 1;
            }
            // Category sums and device sums equal the total.
            prop_assert_eq!(cells.values().sum::<u64>(), *total);
            for (d, name) in l.timeline.devices.iter().enumerate() {
                let sum: u64 = cells.iter().filter(|((x, _), _)| *x as usize == d).map(|(_, v)| v).sum();
                let want = by_dev.iter().find(|(k, _)| dev_name(**k) == *name).map_or(0, |(_, v)| *v);
                prop_assert_eq!(sum, want);
            }
            for (k, cat) in MemoryCategory::ALL.iter().enumerate() {
                let sum: u64 = cells.iter().filter(|((_, x), _)| x == cat).map(|(_, v)| v).sum();
                prop_assert_eq!(sum, by_cat.get(&(k as u8)).copied().unwrap_or(0));
            }
        }

        // The peak: first maximum of the reference, its breakdowns, bounds.
        let ref_peak = r.points.iter().fold(None, |acc: Option<(u64, u64)>, p| match acc {
            Some((_, b)) if b >= p.1 => acc,
            _ => Some((p.0, p.1)),
        });
        let any_alloc = events.iter().any(|e| e.alloc);
        if any_alloc {
            let p = l.peak.as_ref().unwrap();
            // The reference starts counting at the first batch; ours once a lifetime exists.
            let first_alloc_t = events.iter().filter(|e| e.alloc).map(|e| e.t).min().unwrap();
            let ref_peak = r.points.iter().filter(|x| x.0 >= first_alloc_t).fold(None, |acc: Option<(u64, u64)>, x| match acc {
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
            for lt in &l.lifetimes {
                if lt.end_ns != Some(lt.start_ns) {
                    prop_assert!(p.live_bytes >= lt.bytes);
                }
            }
            // Ranked by bytes, descending.
            prop_assert!(p.live_allocations.windows(2).all(|w| w[0].bytes >= w[1].bytes));
            // Per-device peaks are the device's own maximum.
            for dev in &l.by_device {
                let d: u8 = dev.device.trim_start_matches("dev").parse().unwrap();
                let want = r.points.iter().map(|x| x.2.get(&d).copied().unwrap_or(0)).max().unwrap_or(0);
                if let Some(dp) = &dev.peak {
                    prop_assert_eq!(dp.live_bytes, want);
                }
            }
            // The display series always contains the exact peak.
            for points in 1..6 {
                let series = l.downsampled_timeline(points);
                prop_assert!(series.len() <= points);
                prop_assert!(series.iter().any(|x| x.timestamp_ns == p.timestamp_ns && x.live_bytes == p.live_bytes));
            }
        } else {
            prop_assert!(l.peak.is_none());
            let _ = ref_peak;
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
    fn shuffling_independent_events_inside_a_batch_changes_nothing(
        events in prop::collection::vec(ev_strategy(), 1..40),
        seed in any::<u64>(),
    ) {
        // Keep, per batch, only the first event touching each (device, storage).
        let mut seen = std::collections::BTreeSet::new();
        let events: Vec<Ev> = events.into_iter().filter(|e| seen.insert((e.t, e.dev, e.storage))).collect();
        prop_assume!(!events.is_empty());
        let mut shuffled = events.clone();
        // Deterministic shuffle (xorshift) of the whole file: batches keep their members.
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
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
        let mut lifetimes: Vec<(usize, u64, Option<u64>, u64, String)> = Vec::new();
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
                    ev.push(alloc(t, &name, b).span(&sid).ev());
                    lifetimes.push((si, t, None, b, name.clone()));
                    live.push(name);
                }
                Act::Free(k, adv) if !live.is_empty() => {
                    t += adv as u64;
                    let name = live.remove(k % live.len());
                    ev.push(free(t, &name).ev());
                    lifetimes.iter_mut().find(|l| l.4 == name).unwrap().2 = Some(t);
                }
                Act::Free(..) => {}
            }
        }
        while let Some((id, i)) = stack.pop() {
            t += 1;
            ends[i] = t;
            ev.push(span_end(&id, t - starts[i]));
        }
        let d = doc(ev);
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
            let mut peak = 0;
            for tt in s..e {
                let live: u64 = mine.iter().filter(|lt| lt.1 <= tt && lt.2.is_none_or(|f| f > tt)).map(|lt| lt.3).sum();
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
