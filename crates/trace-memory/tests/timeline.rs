//! The change-list timeline and its display series.

mod common;

use common::*;
use trace_memory::analyze_memory;
use trace_schema::MemoryCategory;

#[test]
fn change_list_has_one_entry_per_changed_cell_per_batch() {
    let d = doc([
        alloc(1, "a", 10).ev(),
        alloc(1, "b", 5).cat(MemoryCategory::Gradient).ev(),
        alloc(1, "c", 1).ev(),
        alloc(2, "a", 10).tensor("alias").ev(), // alias: no change, no point
        free(3, "b").ev(),
        alloc(3, "d", 5).cat(MemoryCategory::Gradient).ev(), // net zero for the gradient cell
        alloc(4, "e", 7).dev("cuda:0").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    let t = &l.timeline;
    assert_eq!(t.devices, vec!["cpu".to_string(), "cuda:0".to_string()]);
    let totals: Vec<(u64, u64)> = t
        .totals
        .iter()
        .map(|p| (p.timestamp_ns, p.live_bytes))
        .collect();
    assert_eq!(totals, vec![(1, 16), (4, 23)]);
    let changes: Vec<(u64, u32, MemoryCategory, u64)> = t
        .changes
        .iter()
        .map(|c| (c.timestamp_ns, c.device, c.category, c.live_bytes))
        .collect();
    assert_eq!(
        changes,
        vec![
            (1, 0, MemoryCategory::Activation, 11),
            (1, 0, MemoryCategory::Gradient, 5),
            (4, 1, MemoryCategory::Activation, 7),
        ]
    );
    assert_eq!(t.live_bytes_at(0), 0);
    assert_eq!(t.live_bytes_at(3), 16);
}

#[test]
fn downsampling_keeps_a_one_batch_spike_and_the_stated_size() {
    // 100 small steps with one spike in the middle.
    let mut ev = Vec::new();
    for i in 0..100u64 {
        ev.push(alloc(i * 10, &format!("s{i}"), 1).ev());
    }
    ev.push(alloc(505, "spike", 1_000_000).ev());
    ev.push(free(506, "spike").ev());
    let l = analyze_memory(&doc(ev)).logical.unwrap();
    let peak = l.peak.as_ref().unwrap();
    assert_eq!((peak.timestamp_ns, peak.live_bytes), (505, 1_000_051));
    for points in [1, 2, 3, 7, 10, 50] {
        let s = l.downsampled_timeline(points);
        assert!(s.len() <= points);
        assert!(s
            .iter()
            .any(|p| p.timestamp_ns == 505 && p.live_bytes == 1_000_051));
        let spike = s.iter().find(|p| p.timestamp_ns == 505).unwrap();
        assert_eq!(spike.by_device.get("cpu"), Some(&1_000_051));
        assert_eq!(
            spike.by_category.get(&MemoryCategory::Activation),
            Some(&1_000_051)
        );
    }
    assert!(l.downsampled_timeline(0).is_empty());
    assert_eq!(
        l.downsampled_timeline(10_000).len(),
        l.timeline.totals.len()
    );
}

#[test]
fn live_allocations_at_rebuilds_the_ranked_live_set() {
    let d = doc([
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
}
