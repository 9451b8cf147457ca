//! The boundary cases of the logical plane, each with its expected numbers, and the seed's
//! semantics in our own words.

use trace_memory::{analyze_memory, MemoryQueryError};
use trace_schema::{MemoryAction, MemoryCategory, Pass};
use trace_testkit::*;

#[test]
fn free_without_alloc_is_unmatched_and_changes_no_total() {
    let d = document([
        alloc(1, "a", 10).ev(),
        free(2, "ghost").ev(), // size unknown
        mem(3, MemoryAction::Free, "cpu", "ghost2", Some(64)).ev(), // size stated
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.totals.unpaired_free_count, 2);
    assert_eq!(l.unpaired_free_count(), 2);
    assert_eq!(l.unmatched_frees[0].bytes, None);
    assert_eq!(l.unmatched_frees[1].bytes, Some(64));
    assert_eq!(&*l.unmatched_frees[0].storage_id.clone().unwrap(), "ghost");
    assert_eq!(l.totals.allocation_count, 1);
    assert_eq!(l.totals.matched_free_count, 0);
    assert_eq!(l.totals.total_allocated_bytes, 10);
    assert_eq!(l.live_at_end.bytes, 10);
    assert_eq!(l.timeline.totals.last().unwrap().live_bytes, 10);
    assert_eq!(l.peak.unwrap().live_bytes, 10);
}

#[test]
fn free_with_other_size_is_a_warning_and_alloc_size_is_used() {
    let d = document([
        alloc(1, "a", 100).ev(),
        alloc(2, "b", 50).ev(),
        mem(3, MemoryAction::Free, "cpu", "a", Some(80)).ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.totals.size_mismatch_count, 1);
    let m = &l.size_mismatches[0];
    assert_eq!(
        (m.alloc_bytes, m.free_bytes, m.free_timestamp_ns),
        (100, 80, 3)
    );
    assert_eq!(l.lifetimes[m.lifetime_index].bytes, 100);
    // 150 - 100 (alloc size), not 150 - 80.
    assert_eq!(l.live_at_end.bytes, 50);
    assert_eq!(l.timeline.live_bytes_at(3), 50);
    assert_eq!(l.totals.matched_free_count, 1);
}

#[test]
fn six_allocs_and_no_frees_peak_at_their_sum_all_live_at_end() {
    let d = document((0..6).map(|i| alloc(i * 10, &format!("s{i}"), 10 + i).ev()));
    let l = analyze_memory(&d).logical.unwrap();
    let peak = l.peak.as_ref().unwrap();
    assert_eq!(peak.live_bytes, 10 + 11 + 12 + 13 + 14 + 15);
    assert_eq!(peak.timestamp_ns, 50);
    assert_eq!(peak.live_allocations.len(), 6);
    assert_eq!(l.live_at_end.count, 6);
    assert_eq!(l.live_at_end.bytes, 75);
    assert_eq!(l.live_at_end_lifetimes().count(), 6);
    assert!(!l.live_at_end.trace_truncated);
    // Ranked by bytes, descending.
    let bytes: Vec<u64> = peak.live_allocations.iter().map(|a| a.bytes).collect();
    assert_eq!(bytes, vec![15, 14, 13, 12, 11, 10]);
    let (top, more, more_bytes) = peak.top(2);
    assert_eq!((top.len(), more, more_bytes), (2, 4, Some(46)));
}

#[test]
fn parameter_plus_step_activation_example() {
    // alloc P 100 (parameter) t=0; span step [5,10); alloc T 20 t=6 (in step); free T t=7
    let mut events = vec![alloc(0, "P", 100).cat(MemoryCategory::Parameter).ev()];
    events.extend(span("step", None, 5, 10, Some(Pass::Optimizer)));
    events.push(alloc(6, "T", 20).span("step").ev());
    events.push(free(7, "T").span("step").ev());
    let d = document(events);
    let l = analyze_memory(&d).logical.unwrap();
    let peak = l.peak.as_ref().unwrap();
    assert_eq!((peak.live_bytes, peak.timestamp_ns), (120, 6));
    let live: Vec<&str> = peak
        .live_allocations
        .iter()
        .map(|a| a.storage_id.as_deref().unwrap())
        .collect();
    assert_eq!(live, vec!["P", "T"]);
    // The step peak starts from what was already live.
    let step = &l.pass_peaks[0];
    assert_eq!(step.pass, Pass::Optimizer);
    assert_eq!((step.peak.live_bytes, step.peak.timestamp_ns), (120, 6));
    assert_eq!(
        step.peak.context.dominant_category,
        Some(MemoryCategory::Parameter)
    );
    assert_eq!((step.allocation_count, step.allocated_bytes), (1, 20));
    // Part 2: the subtree metric of `step` is 20.
    let nodes = trace_memory::node_memory_metrics(&d, Some(&l));
    let m = &nodes.spans[0];
    assert_eq!(m.subtree_peak_live_bytes, Some(20));
    assert_eq!(m.subtree_residual_bytes, Some(0));
    assert_eq!(m.direct_allocated_bytes, Some(20));
}

#[test]
fn two_devices_keep_their_own_peaks_and_unknown_device_says_so() {
    let d = document([
        alloc(1, "a", 100).dev("cuda:0").ev(),
        free(2, "a").dev("cuda:0").ev(),
        alloc(3, "a", 30).dev("cuda:1").ev(),
        alloc(4, "b", 40).dev("cuda:1").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    let c0 = l.device("cuda:0").unwrap();
    let c1 = l.device("cuda:1").unwrap();
    let p0 = c0.peak.as_ref().unwrap();
    let p1 = c1.peak.as_ref().unwrap();
    assert_eq!((p0.live_bytes, p0.timestamp_ns), (100, 1));
    assert_eq!((p1.live_bytes, p1.timestamp_ns), (70, 4));
    assert_eq!(p1.live_allocation_count, 2);
    // The global peak is first reached at t=1 (100) — 70 never beats it.
    let g = l.peak.as_ref().unwrap();
    assert_eq!((g.live_bytes, g.timestamp_ns), (100, 1));
    assert_eq!(g.by_device.get("cuda:0"), Some(&100));
    assert_eq!(g.by_device.get("cuda:1"), None);
    let err = l.device("cuda:2").unwrap_err();
    assert!(matches!(err, MemoryQueryError::UnknownDevice { .. }));
    assert!(err.to_string().contains("cuda:2"));
    assert!(err.to_string().contains("cuda:0, cuda:1"));
}

#[test]
fn peak_is_the_simultaneous_sum_not_the_largest_allocation() {
    let d = document([
        alloc(10, "a", 40).ev(),
        alloc(20, "b", 70).ev(),
        free(30, "a").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    let p = l.peak.unwrap();
    assert_eq!((p.live_bytes, p.timestamp_ns), (110, 20));
}

#[test]
fn aliases_share_one_lifetime_and_count_bytes_once() {
    let d = document([
        alloc(10, "a", 64).tensor("base").ev(),
        alloc(20, "a", 64).tensor("view").ev(),
        free(40, "a").tensor("view").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert!(l.aliases_detectable);
    assert_eq!(l.totals.allocation_count, 1);
    assert_eq!(l.totals.alias_event_count, 1);
    assert_eq!(l.totals.matched_free_count, 1);
    assert_eq!(l.peak.as_ref().unwrap().live_bytes, 64);
    assert_eq!(l.lifetimes.len(), 1);
    let ids: Vec<&str> = l.lifetimes[0].tensor_ids.iter().map(|t| &**t).collect();
    assert_eq!(ids, vec!["base", "view"]);
    assert_eq!(l.lifetimes[0].end_ns, Some(40));
}

/// A storage aliased by many views: each distinct view is an alias, a view (or an anonymous
/// alloc) that allocs it again is a duplicate, and the storage stays one lifetime of its bytes.
#[test]
fn many_aliases_of_one_storage_and_their_repeats() {
    let mut events = vec![alloc(1, "a", 64).tensor("base").ev()];
    for k in 0..1000u64 {
        events.push(alloc(2 + k, "a", 64).tensor(&format!("v{k}")).ev());
    }
    events.push(alloc(2000, "a", 64).tensor("v500").ev()); // repeat of an alias: duplicate
    events.push(alloc(2001, "a", 64).tensor("base").ev()); // repeat of the first: duplicate
    let anonymous = |t| {
        let mut e = alloc(t, "a", 64);
        e.tensor_id = None;
        e.ev()
    };
    events.push(anonymous(2002)); // the first alias without a tensor id
    events.push(anonymous(2003)); // again: duplicate
    events.push(free(3000, "a").tensor("base").ev());
    let d = document(events);
    let m = analyze_memory(&d);
    let l = m.logical.as_ref().unwrap();
    assert_eq!(l.totals.allocation_count, 1);
    assert_eq!(l.totals.alias_event_count, 1004);
    assert_eq!(l.peak.as_ref().unwrap().live_bytes, 64);
    assert_eq!(l.lifetimes.len(), 1);
    assert_eq!(
        l.lifetimes[0].tensor_ids.len(),
        1001,
        "base and the 1,000 views, once each"
    );
    let dups: Vec<(usize, Option<&str>)> = m
        .duplicate_allocations
        .iter()
        .map(|d| (d.event_index, d.tensor_id.as_deref()))
        .collect();
    assert_eq!(
        dups,
        vec![(1001, Some("v500")), (1002, Some("base")), (1004, None)]
    );
}

#[test]
fn storage_identity_is_scoped_by_device() {
    let d = document([
        alloc(10, "shared", 10).dev("cpu").ev(),
        alloc(10, "shared", 20).dev("cuda:0").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.totals.allocation_count, 2);
    assert_eq!(l.peak.unwrap().live_bytes, 30);
    assert_eq!(l.by_device.len(), 2);
}

#[test]
fn address_reuse_is_a_new_lifetime_and_file_order_inside_a_tick_decides_identity() {
    let d = document([
        alloc(1, "x", 10).ev(),
        // One tick at t=5: free x, then alloc x again (reuse) — a new lifetime.
        free(5, "x").ev(),
        alloc(5, "x", 30).ev(),
        // One tick at t=8: alloc y then free y: y was live after its alloc, so it counts.
        alloc(8, "y", 1000).ev(),
        free(8, "y").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.lifetimes.len(), 3);
    assert_eq!(l.totals.allocation_count, 3);
    assert_eq!(l.totals.alias_event_count, 0);
    assert_eq!(
        (l.lifetimes[0].start_ns, l.lifetimes[0].end_ns),
        (1, Some(5))
    );
    assert_eq!((l.lifetimes[1].start_ns, l.lifetimes[1].end_ns), (5, None));
    // The 1000-byte y lived inside one tick, on top of the 30 of x: the device held 1030.
    let p = l.peak.unwrap();
    assert_eq!((p.live_bytes, p.timestamp_ns, p.event_index), (1030, 8, 3));
    assert_eq!(l.live_at_end.bytes, 30);
}

/// Issue "Exact figures on any input" §1, first case: a coarse clock must not hide a peak.
#[test]
fn a_storage_allocated_and_freed_within_one_tick_counts_toward_the_peak() {
    let d = document([
        alloc(0, "param", 1000)
            .cat(MemoryCategory::Parameter)
            .pre()
            .ev(),
        alloc(50, "t1", 500).ev(),
        free(50, "t1").ev(),
        alloc(60, "t2", 300).ev(),
        free(70, "t2").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    let p = l.peak.as_ref().unwrap();
    assert_eq!((p.live_bytes, p.timestamp_ns), (1500, 50));
    assert_eq!(p.by_category[&MemoryCategory::Parameter], 1000);
    assert_eq!(p.by_category[&MemoryCategory::Activation], 500);
    assert_eq!(p.by_device["cpu"], 1500);
    let dev = l.device("cpu").unwrap().peak.as_ref().unwrap();
    assert_eq!((dev.live_bytes, dev.timestamp_ns), (1500, 50));
    assert_eq!(
        dev.context.dominant_category,
        Some(MemoryCategory::Parameter)
    );
    // The live set right after the peak's event holds both storages.
    let live: Vec<&str> = l
        .live_allocations_after(p.event_index, Some("cpu"))
        .iter()
        .map(|x| x.storage_id.as_deref().unwrap())
        .collect();
    assert_eq!(live, vec!["param", "t1"]);
    // After the whole tick only the parameter is live.
    assert_eq!(l.timeline.live_bytes_at(50), 1000);
}

/// Issue "Exact figures on any input" §1, second case.
#[test]
fn one_storage_allocated_and_freed_at_time_zero_peaks_at_its_size() {
    let d = document([alloc(0, "s", 64).ev(), free(0, "s").ev()]);
    let l = analyze_memory(&d).logical.unwrap();
    let p = l.peak.as_ref().unwrap();
    assert_eq!((p.live_bytes, p.timestamp_ns), (64, 0));
    assert_eq!(p.by_device["cpu"], 64);
    assert_eq!(p.by_category[&MemoryCategory::Activation], 64);
    assert_eq!(
        p.context.dominant_category,
        Some(MemoryCategory::Activation)
    );
    assert_eq!(l.live_at_end.bytes, 0);
}

#[test]
fn byte_counts_past_u64_max_refuse_the_logical_plane() {
    let d = document([
        alloc(1, "a", u64::MAX - 10).ev(),
        alloc(2, "b", 100).ev(),
        device_memory(3, "cpu", Some(10), None, None, None),
    ]);
    let m = analyze_memory(&d);
    assert!(m.logical.is_none());
    let o = m.logical_overflow.as_ref().unwrap();
    assert_eq!((o.event_index, o.bytes, o.timestamp_ns), (1, 100, 2));
    assert_eq!(o.storage_id.as_deref(), Some("b"));
    // The physical plane stands on its own samples; no comparison with a refused plane.
    let phys = m.physical.unwrap();
    assert_eq!(phys.by_device[0].peak_used.unwrap().bytes, 10);
    assert!(phys.by_device[0].samples[0].logical_live_bytes.is_none());
    assert_eq!(trace_memory::sum_bytes([u64::MAX, 1]), None);
    assert_eq!(trace_memory::sum_bytes([2, 3]), Some(5));
}

#[test]
fn every_peak_names_its_span_pass_and_dominant_category() {
    // root [0,100): forward [10,40), backward [50,80) with a child module span.
    let mut ev = Vec::new();
    ev.extend(span("root", None, 0, 100, None));
    ev.extend(span("fwd", Some("root"), 10, 40, Some(Pass::Forward)));
    ev.extend(span("bwd", Some("root"), 50, 80, Some(Pass::Backward)));
    ev.extend(span("lin", Some("bwd"), 55, 70, None));
    ev.push(alloc(1, "w", 100).cat(MemoryCategory::Parameter).pre().ev());
    ev.push(alloc(20, "act", 40).span("fwd").ev());
    ev.push(
        alloc(60, "g", 300)
            .cat(MemoryCategory::Gradient)
            .span("lin")
            .ev(),
    );
    ev.push(free(65, "g").span("lin").ev());
    ev.push(free(75, "act").span("bwd").ev());
    // An allocation without a span at t=30: its context is the innermost span holding t=30.
    ev.push(alloc(30, "tmp", 1).ev());
    let d = document(ev);
    let l = analyze_memory(&d).logical.unwrap();
    let p = l.peak.as_ref().unwrap();
    assert_eq!((p.live_bytes, p.timestamp_ns), (441, 60));
    assert_eq!(p.context.span_id.as_deref(), Some("lin"));
    assert_eq!(p.context.pass, Some(Pass::Backward));
    assert_eq!(p.context.dominant_category, Some(MemoryCategory::Gradient));
    let fwd = &l.pass_peaks[0];
    assert_eq!(fwd.pass, Pass::Forward);
    assert_eq!((fwd.peak.live_bytes, fwd.peak.timestamp_ns), (141, 30));
    assert_eq!(fwd.peak.context.span_id.as_deref(), Some("fwd"));
    assert_eq!(fwd.peak.context.pass, Some(Pass::Forward));
    assert_eq!(
        fwd.peak.context.dominant_category,
        Some(MemoryCategory::Parameter)
    );
    let bwd = &l.pass_peaks[1];
    assert_eq!((bwd.peak.live_bytes, bwd.peak.timestamp_ns), (441, 60));
    assert_eq!(bwd.peak.event_index, Some(p.event_index));
    // allocations attributed by effective pass: `g` in `lin` counts toward backward.
    assert_eq!((bwd.allocation_count, bwd.allocated_bytes), (1, 300));
}

#[test]
fn alloc_then_free_order_inside_a_batch_matters() {
    // alloc x then free x at t=5 while x is already live: the alloc is an alias, the free ends it.
    let d = document([
        alloc(1, "x", 10).ev(),
        alloc(5, "x", 10).tensor("v").ev(),
        free(5, "x").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.lifetimes.len(), 1);
    assert_eq!(l.lifetimes[0].end_ns, Some(5));
    assert_eq!(l.live_at_end.bytes, 0);
}

#[test]
fn pre_existing_counts_in_live_and_peak_not_in_allocations() {
    let d = document([
        alloc(0, "w", 1000)
            .cat(MemoryCategory::Parameter)
            .pre()
            .ev(),
        alloc(5, "a", 10).ev(),
        free(6, "w").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.totals.allocation_count, 1);
    assert_eq!(l.totals.total_allocated_bytes, 10);
    assert_eq!(l.totals.pre_existing_count, 1);
    assert_eq!(l.totals.pre_existing_bytes, 1000);
    assert_eq!(l.totals.matched_free_count, 1);
    let p = l.peak.unwrap();
    assert_eq!((p.live_bytes, p.timestamp_ns), (1010, 5));
    assert!(p.live_allocations[0].pre_existing);
    let cat = &l.totals.by_category[&MemoryCategory::Parameter];
    assert_eq!((cat.allocation_count, cat.pre_existing_count), (0, 1));
}

#[test]
fn trace6_identity_is_device_and_tensor_and_aliases_undetectable() {
    let d = document([
        alloc(1, "ignored", 10).no_storage().tensor("t1").ev(),
        alloc(2, "ignored", 10).no_storage().tensor("t2").ev(),
        free(3, "ignored").no_storage().tensor("t1").ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert!(!l.aliases_detectable);
    assert_eq!(l.totals.allocation_count, 2);
    assert_eq!(l.peak.as_ref().unwrap().live_bytes, 20);
    assert_eq!(l.live_at_end.bytes, 10);
    assert_eq!(l.lifetimes[0].storage_id, None);
    assert_eq!(&*l.lifetimes[0].tensor_ids[0], "t1");
}

#[test]
fn ties_report_the_first_time_the_peak_was_reached() {
    let d = document([
        alloc(1, "a", 50).ev(),
        free(2, "a").ev(),
        alloc(3, "b", 50).ev(),
    ]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.peak.unwrap().timestamp_ns, 1);
}

#[test]
fn no_memory_events_means_no_logical_plane() {
    let d = document([device_memory(1, "cuda:0", Some(10), None, None, None)]);
    let p = analyze_memory(&d);
    assert!(p.logical.is_none());
    assert!(p.physical.is_some());
    assert!(analyze_memory(&document([])).physical.is_none());
}

#[test]
fn truncated_trace_says_live_when_the_trace_ended() {
    let text = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"st1","bytes":64}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":6,"act"#,
    );
    let d = trace_schema::load_str(text).unwrap();
    assert!(d.is_truncated());
    let l = analyze_memory(&d).logical.unwrap();
    assert!(l.live_at_end.trace_truncated);
    assert_eq!((l.live_at_end.count, l.live_at_end.bytes), (1, 64));
}

#[test]
fn findings_support_figures() {
    // forward [0,10): activations A (40, freed in backward) and B (60, held to the end).
    // backward [10,20), optimizer [20,30).
    let mut ev = Vec::new();
    ev.extend(span("fwd", None, 0, 10, Some(Pass::Forward)));
    ev.extend(span("bwd", None, 10, 20, Some(Pass::Backward)));
    ev.extend(span("opt", None, 20, 30, Some(Pass::Optimizer)));
    ev.push(alloc(1, "A", 40).span("fwd").ev());
    ev.push(alloc(2, "B", 60).span("fwd").ev());
    ev.push(
        alloc(12, "G", 5)
            .cat(MemoryCategory::Gradient)
            .span("bwd")
            .ev(),
    );
    ev.push(free(15, "A").span("bwd").ev());
    ev.push(
        alloc(22, "M", 7)
            .cat(MemoryCategory::Optimizer)
            .span("opt")
            .ev(),
    );
    ev.push(free(35, "B").ev());
    let d = document(ev);
    let l = analyze_memory(&d).logical.unwrap();
    let b = l.findings.first_backward.as_ref().unwrap();
    assert_eq!(
        (
            &*b.span_id,
            b.activation_live_bytes,
            b.activation_live_count
        ),
        ("bwd", 100, 2)
    );
    let o = l.findings.first_optimizer.as_ref().unwrap();
    assert_eq!(o.activation_live_bytes, 60);
    assert_eq!(o.still_live_at_end_bytes, Some(60));
    // Step peaks: forward 100, backward 105 (at 12), optimizer 72 at 22.
    let by_step: Vec<(Pass, u64, u64)> = l
        .pass_peaks
        .iter()
        .map(|s| (s.pass, s.peak.live_bytes, s.peak.timestamp_ns))
        .collect();
    assert_eq!(
        by_step,
        vec![
            (Pass::Forward, 100, 2),
            (Pass::Backward, 105, 12),
            (Pass::Optimizer, 72, 22),
        ]
    );
    assert_eq!(
        l.pass_peaks[2].peak.context.dominant_category,
        Some(MemoryCategory::Activation)
    );
}

#[test]
fn memory_event_with_a_span_missing_from_the_document_does_not_crash() {
    let d = document([alloc(1, "a", 8).span("nowhere").ev()]);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(&**l.lifetimes[0].span_id.as_ref().unwrap(), "nowhere");
    let n = trace_memory::node_memory_metrics(&d, None);
    assert!(n.spans.is_empty());
}
