//! The change-list timeline (one entry per changing event) and its time-spaced display series.

use trace_memory::analyze_memory;
use trace_schema::MemoryCategory;
use trace_testkit::*;

#[test]
fn change_list_has_one_entry_per_changing_event() {
    let d = document([
        alloc(1, "a", 10).ev(),
        alloc(1, "b", 5).cat(MemoryCategory::Gradient).ev(),
        alloc(1, "c", 1).ev(),
        alloc(2, "a", 10).tensor("alias").ev(), // alias: no change, no point
        free(3, "b").ev(),
        alloc(3, "d", 5).cat(MemoryCategory::Gradient).ev(),
        alloc(4, "e", 7).dev("cuda:0").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    let t = &l.timeline;
    assert_eq!(t.devices, vec!["cpu".to_string(), "cuda:0".to_string()]);
    let totals: Vec<(u64, u32, u64)> = t
        .totals
        .iter()
        .map(|p| (p.timestamp_ns, p.event_index, p.live_bytes))
        .collect();
    assert_eq!(
        totals,
        vec![
            (1, 0, 10),
            (1, 1, 15),
            (1, 2, 16),
            (3, 4, 11),
            (3, 5, 16),
            (4, 6, 23)
        ]
    );
    let changes: Vec<(u64, u32, MemoryCategory, u64)> = t
        .changes
        .iter()
        .map(|c| (c.timestamp_ns, c.device, c.category, c.live_bytes))
        .collect();
    assert_eq!(
        changes,
        vec![
            (1, 0, MemoryCategory::Activation, 10),
            (1, 0, MemoryCategory::Gradient, 5),
            (1, 0, MemoryCategory::Activation, 11),
            (3, 0, MemoryCategory::Gradient, 0),
            (3, 0, MemoryCategory::Gradient, 5),
            (4, 1, MemoryCategory::Activation, 7),
        ]
    );
    assert_eq!(t.live_bytes_at(0), 0);
    assert_eq!(t.live_bytes_at(3), 16);
    assert_eq!(t.live_bytes_entering(3), 16);
    assert_eq!(t.live_bytes_entering(4), 16);
    assert_eq!(t.live_bytes_at(4), 23);
}

#[test]
fn display_series_keeps_a_one_event_spike_and_is_spaced_by_time() {
    // 100 small allocations 10 ns apart with one spike in the middle.
    let mut ev = Vec::new();
    for i in 0..100u64 {
        ev.push(alloc(i * 10, &format!("s{i}"), 1).ev());
    }
    ev.push(alloc(505, "spike", 1_000_000).ev());
    ev.push(free(506, "spike").ev());
    let l = analyze_memory(&document(ev)).logical.unwrap();
    let peak = l.peak.as_ref().unwrap();
    assert_eq!((peak.timestamp_ns, peak.live_bytes), (505, 1_000_051));
    for points in [1, 2, 3, 7, 10, 50] {
        let s = l.display_timeline(points, None).unwrap();
        assert_eq!(s.len(), points);
        let spike = s.iter().find(|p| p.timestamp_ns == 505).unwrap();
        assert_eq!(spike.live_bytes, 1_000_051);
        assert_eq!(spike.by_device.get("cpu"), Some(&1_000_051));
        assert_eq!(
            spike.by_category.get(&MemoryCategory::Activation),
            Some(&1_000_051)
        );
        assert!(s.windows(2).all(|w| w[0].timestamp_ns < w[1].timestamp_ns));
    }
    // 10 buckets over [0, 990]: each covers 99.1 ns; the small steps are the bucket maxima.
    let s = l.display_timeline(10, None).unwrap();
    let values: Vec<(u64, u64)> = s.iter().map(|p| (p.timestamp_ns, p.live_bytes)).collect();
    assert_eq!(
        values,
        vec![
            (90, 10),
            (190, 20),
            (290, 30),
            (390, 40),
            (490, 50),
            (505, 1_000_051),
            (690, 70),
            (790, 80),
            (890, 90),
            (990, 100)
        ]
    );
    assert!(l.display_timeline(0, None).unwrap().is_empty());
}

#[test]
fn display_series_starts_at_the_measured_region_with_the_value_carried_into_it() {
    // Storages allocated before the measured region (at 0), the region starts at 1000.
    let mut ev = vec![alloc(0, "p", 500).cat(MemoryCategory::Parameter).pre().ev()];
    ev.extend(span("root", None, 1000, 2000, None));
    ev.push(alloc(1500, "a", 100).span("root").ev());
    ev.push(free(1600, "a").span("root").ev());
    ev.push(alloc(1999, "b", 10).span("root").ev());
    let l = analyze_memory(&document(ev)).logical.unwrap();
    assert_eq!(l.time_origin_ns, 1000);
    let s = l.display_timeline(4, None).unwrap();
    // [1000, 1999] in 4 buckets of 250 ns.
    let values: Vec<(u64, Option<u32>, u64)> = s
        .iter()
        .map(|p| (p.timestamp_ns, p.event_index, p.live_bytes))
        .collect();
    assert_eq!(
        values,
        vec![
            (1000, None, 500),
            (1250, None, 500),
            (1500, Some(1), 600),
            (1999, Some(3), 510),
        ]
    );
    // One device selected: its own series; an unknown device is an error.
    let cpu = l.display_timeline(4, Some("cpu")).unwrap();
    assert_eq!(cpu.iter().map(|p| p.live_bytes).max(), Some(600));
    assert!(l.display_timeline(4, Some("cuda:9")).is_err());
}

#[test]
fn live_allocations_at_rebuilds_the_ranked_live_set() {
    let d = document([
        alloc(1, "a", 10).ev(),
        alloc(2, "b", 30).ev(),
        alloc(2, "c", 30).ev(),
        free(3, "b").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    let ids = |t| -> Vec<String> {
        l.live_allocations_at(t)
            .iter()
            .map(|x| x.storage_id.as_deref().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(0), Vec::<String>::new());
    assert_eq!(ids(2), vec!["b", "c", "a"]);
    assert_eq!(ids(3), vec!["c", "a"]);
    // After one event inside a tick: only what that prefix holds.
    let after: Vec<&str> = l
        .live_allocations_after(1, None)
        .iter()
        .map(|x| x.storage_id.as_deref().unwrap())
        .collect();
    assert_eq!(after, vec!["b", "a"]);
}
