//! insta snapshots of full profiles for small hand-written traces (reviewed by hand).

use trace_memory::{analyze_memory, node_memory_metrics};
use trace_schema::{CoverageLevel, MemoryAction, MemoryCategory, Pass};
use trace_testkit::*;

/// One training step on cuda:0 with a parameter, activations, a gradient and optimizer state,
/// an alias, a pre-existing buffer, and device samples.
fn training_step() -> trace_schema::TraceDocument {
    let mut ev = Vec::new();
    ev.extend(span("step", None, 0, 100, None));
    ev.extend(span("fwd", Some("step"), 10, 40, Some(Pass::Forward)));
    ev.extend(span("bwd", Some("step"), 40, 70, Some(Pass::Backward)));
    ev.extend(span("opt", Some("step"), 70, 95, Some(Pass::Optimizer)));
    ev.push(op("fwd", "matmul", 12, 3).ev());
    ev.push(op("fwd", "relu", 20, 2).ev());
    let d = "cuda:0";
    ev.push(
        alloc(0, "w", 4096)
            .dev(d)
            .cat(MemoryCategory::Parameter)
            .pre()
            .ev(),
    );
    ev.push(alloc(12, "h", 1024).dev(d).span("fwd").op("matmul").ev());
    ev.push(alloc(20, "r", 1024).dev(d).span("fwd").op("relu").ev());
    ev.push(
        alloc(21, "r", 1024)
            .dev(d)
            .span("fwd")
            .tensor("r-view")
            .ev(),
    );
    ev.push(
        alloc(45, "g", 4096)
            .dev(d)
            .span("bwd")
            .cat(MemoryCategory::Gradient)
            .ev(),
    );
    ev.push(free(50, "h").dev(d).span("bwd").ev());
    ev.push(
        alloc(72, "m", 8192)
            .dev(d)
            .span("opt")
            .cat(MemoryCategory::Optimizer)
            .ev(),
    );
    ev.push(free(90, "g").dev(d).span("opt").ev());
    ev.push(device_memory(
        30,
        d,
        Some(10_000),
        Some(90_000),
        Some(12_288),
        Some(100_000),
    ));
    ev.push(device_memory(
        80,
        d,
        Some(20_000),
        Some(80_000),
        Some(20_480),
        Some(100_000),
    ));
    document_with(Some(CoverageLevel::Complete), ev)
}

#[test]
fn training_step_profile() {
    let d = training_step();
    let profile = analyze_memory(&d);
    // Headline figures, said explicitly so a wrong number fails here, not in a snapshot diff.
    let logical = profile.logical.as_ref().unwrap();
    let peak = logical.peak.as_ref().unwrap();
    assert_eq!((peak.live_bytes, peak.timestamp_ns), (17_408, 72));
    assert_eq!(peak.context.span_id.as_deref(), Some("opt"));
    assert_eq!(peak.context.pass, Some(Pass::Optimizer));
    assert_eq!(
        peak.context.dominant_category,
        Some(MemoryCategory::Optimizer)
    );
    assert_eq!(peak.by_category[&MemoryCategory::Parameter], 4096);
    assert_eq!(peak.by_category[&MemoryCategory::Activation], 1024);
    assert_eq!(peak.by_category[&MemoryCategory::Gradient], 4096);
    assert_eq!(peak.by_category[&MemoryCategory::Optimizer], 8192);
    let passes: Vec<(Pass, u64, u64)> = logical
        .pass_peaks
        .iter()
        .map(|p| (p.pass, p.peak.live_bytes, p.peak.timestamp_ns))
        .collect();
    assert_eq!(
        passes,
        vec![
            (Pass::Forward, 6144, 20),
            (Pass::Backward, 10_240, 45),
            (Pass::Optimizer, 17_408, 72)
        ]
    );
    assert_eq!(
        (logical.live_at_end.count, logical.live_at_end.bytes),
        (3, 13_312)
    );
    assert_eq!(logical.totals.total_allocated_bytes, 14_336);
    let phys = &profile.physical.as_ref().unwrap().by_device[0];
    assert_eq!(phys.peak_used.unwrap().bytes, 20_000);
    assert_eq!(phys.samples[1].logical_live_bytes, Some(17_408));
    insta::assert_json_snapshot!("training_step_profile", profile);
    let series = logical.display_timeline(4, None).unwrap();
    let values: Vec<(u64, u64)> = series
        .iter()
        .map(|p| (p.timestamp_ns, p.live_bytes))
        .collect();
    assert_eq!(
        values,
        vec![(20, 6144), (45, 10_240), (46, 10_240), (72, 17_408)]
    );
    insta::assert_json_snapshot!("training_step_series_4", series);
    let nodes = node_memory_metrics(&d, Some(logical));
    // step: everything but the pre-existing parameter; fwd: h + r.
    assert_eq!(nodes.spans[0].subtree_peak_live_bytes, Some(13_312));
    assert_eq!(nodes.spans[1].subtree_peak_live_bytes, Some(2048));
    assert_eq!(nodes.spans[1].subtree_residual_bytes, Some(2048));
    insta::assert_json_snapshot!("training_step_nodes", nodes);
}

/// A trace/6-style stream (no storage ids) with an unmatched free and a size mismatch on two
/// devices.
#[test]
fn legacy_identity_and_warnings_profile() {
    let d = document([
        alloc(1, "_", 10).no_storage().tensor("a").dev("cpu").ev(),
        alloc(1, "_", 30)
            .no_storage()
            .tensor("b")
            .dev("cuda:0")
            .ev(),
        mem(2, MemoryAction::Free, "cpu", "_", Some(12))
            .no_storage()
            .tensor("a")
            .ev(),
        mem(3, MemoryAction::Free, "cuda:0", "_", None)
            .no_storage()
            .tensor("zz")
            .ev(),
    ]);
    let profile = analyze_memory(&d);
    let l = profile.logical.as_ref().unwrap();
    assert!(!l.aliases_detectable);
    let peak = l.peak.as_ref().unwrap();
    assert_eq!((peak.live_bytes, peak.timestamp_ns), (40, 1));
    assert_eq!(
        (l.totals.unpaired_free_count, l.totals.size_mismatch_count),
        (1, 1)
    );
    assert_eq!(l.live_at_end.bytes, 30);
    insta::assert_json_snapshot!("legacy_identity_profile", profile);
}
