//! The physical plane: kept apart, unknowns stay unknown, logical-vs-physical comparison.

use trace_memory::{analyze_memory, physical::CPU_RATIO_NOTE};
use trace_testkit::*;

#[test]
fn physical_only_samples_form_their_own_plane() {
    let d = document([
        device_memory(10, "cuda:0", Some(100), Some(900), None, Some(1000)),
        device_memory(20, "cuda:0", Some(300), Some(700), Some(400), Some(1000)),
    ]);
    let p = analyze_memory(&d);
    assert!(p.logical.is_none());
    let ph = p.physical.unwrap();
    let s = &ph.by_device[0];
    assert_eq!(s.sample_count, 2);
    assert_eq!(
        s.peak_used.map(|o| (o.bytes, o.timestamp_ns)),
        Some((300, 20))
    );
    assert_eq!(
        s.peak_reserved.map(|o| (o.bytes, o.timestamp_ns)),
        Some((400, 20))
    );
    assert_eq!(
        s.minimum_free.map(|o| (o.bytes, o.timestamp_ns)),
        Some((700, 20))
    );
    assert_eq!(
        s.maximum_capacity.map(|o| (o.bytes, o.timestamp_ns)),
        Some((1000, 10))
    );
    assert_eq!(s.logical_comparison, None);
    assert_eq!(s.samples[0].logical_live_bytes, None);
}

#[test]
fn physical_unknowns_are_never_derived() {
    let d = document([device_memory(10, "cuda:0", None, None, Some(400), None)]);
    let s = &analyze_memory(&d).physical.unwrap().by_device[0];
    assert_eq!(
        (
            s.used_sample_count,
            s.free_sample_count,
            s.reserved_sample_count,
            s.capacity_sample_count
        ),
        (0, 0, 1, 0)
    );
    assert_eq!(s.peak_used, None);
    assert_eq!(s.minimum_free, None);
    assert_eq!(s.maximum_capacity, None);
    assert_eq!(s.peak_resident, None);
}

#[test]
fn logical_vs_physical_cache_and_coverage_ratio() {
    let d = document([
        alloc(1, "a", 100).dev("cuda:0").ev(),
        device_memory(2, "cuda:0", Some(400), None, Some(512), None),
        alloc(3, "b", 200).dev("cuda:0").ev(),
        device_memory(3, "cuda:0", Some(500), None, Some(512), None),
        free(4, "a").dev("cuda:0").ev(),
        device_memory(5, "cuda:0", Some(450), None, Some(1024), None),
        device_memory(6, "cuda:1", Some(1), None, Some(2), None),
    ]);
    let ph = analyze_memory(&d).physical.unwrap();
    let c0 = &ph.by_device[0];
    let live: Vec<Option<u64>> = c0.samples.iter().map(|s| s.logical_live_bytes).collect();
    assert_eq!(live, vec![Some(100), Some(300), Some(200)]);
    let cache: Vec<Option<i128>> = c0.samples.iter().map(|s| s.allocator_cache_bytes).collect();
    assert_eq!(cache, vec![Some(412), Some(212), Some(824)]);
    let cmp = c0.logical_comparison.as_ref().unwrap();
    assert_eq!(cmp.logical_peak_bytes, 300);
    assert_eq!(cmp.physical_peak_used_bytes, Some(500));
    assert_eq!(cmp.coverage_ratio, Some(0.6));
    assert_eq!(
        (
            cmp.max_allocator_cache_bytes,
            cmp.max_allocator_cache_timestamp_ns
        ),
        (Some(824), Some(5))
    );
    assert_eq!(cmp.note, None);
    // cuda:1 has samples but no logical events: no comparison, no invented zeros.
    let c1 = &ph.by_device[1];
    assert_eq!(c1.logical_comparison, None);
    assert_eq!(c1.samples[0].logical_live_bytes, None);
}

#[test]
fn cpu_ratio_carries_its_caveat() {
    let d = document([
        alloc(1, "a", 100).ev(),
        device_memory(2, "cpu", Some(1000), None, None, None),
    ]);
    let ph = analyze_memory(&d).physical.unwrap();
    let cmp = ph.by_device[0].logical_comparison.as_ref().unwrap();
    assert_eq!(cmp.coverage_ratio, Some(0.1));
    assert_eq!(cmp.note.as_deref(), Some(CPU_RATIO_NOTE));
    assert_eq!(ph.by_device[0].samples[0].allocator_cache_bytes, None);
}
