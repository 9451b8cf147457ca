//! The memory plane: one hand-written Kineto fixture per rule, checked on the imported document
//! and, where a figure is the analyser's, through `trace_memory`.

#[path = "common/annotation.rs"]
mod annotation;
mod common;
#[path = "common/cpu_memory.rs"]
mod cpu_memory;
#[path = "common/memory_event.rs"]
mod memory_event;

use annotation::*;
use common::*;
use cpu_memory::*;
use memory_event::*;
use trace_schema::{CoverageLevel, MemoryAction, MemoryCategory};

fn storage_ids(doc: &trace_schema::TraceDocument) -> Vec<(MemoryAction, String, u64, bool)> {
    doc.memory
        .iter()
        .map(|m| {
            (
                m.action,
                doc.str(m.storage.unwrap()).to_string(),
                m.timestamp_ns,
                m.pre_existing,
            )
        })
        .collect()
}

#[test]
fn attributed_to_the_innermost_enclosing_op() {
    let (_, doc) = import(vec![
        ann("ProfilerStep#1", 0.0, 100.0),
        op("aten::linear", 10.0, 20.0),
        op("aten::addmm", 12.0, 10.0),
        op("aten::empty", 13.0, 1.0),
        cpu_mem(13.5, 0x1000, 256, 256), // in aten::empty
        cpu_mem(20.0, 0x2000, 64, 320),  // in aten::addmm, after empty ended
        cpu_mem(40.0, 0x2000, -64, 256), // only in the step annotation
        cpu_mem(150.0, 0x1000, -256, 0), // outside every span: the root
    ]);
    let at = |i: usize| {
        let m = &doc.memory[i];
        (
            doc.str(doc.span(m.span.unwrap()).unwrap().name),
            m.op_name.map(|o| doc.str(o)),
        )
    };
    assert_eq!(at(0), ("aten::empty", Some("aten::empty")));
    assert_eq!(at(1), ("aten::addmm", Some("aten::addmm")));
    assert_eq!(at(2), ("ProfilerStep#1", None));
    assert_eq!(at(3), ("profiler window", None));
    for m in &doc.memory {
        assert_eq!(m.category, MemoryCategory::Other, "Kineto says no more");
        assert_eq!(m.category_source, None);
        assert_eq!(doc.str(m.device), "cpu");
    }
}

#[test]
fn address_reuse_starts_a_new_lifetime() {
    let (imported, doc) = import(vec![
        cpu_mem(1.0, 0xabc, 100, 100),
        cpu_mem(2.0, 0xabc, -100, 0),
        cpu_mem(3.0, 0xabc, 200, 200),
        cpu_mem(4.0, 0xabc, -200, 0),
    ]);
    assert_eq!(
        storage_ids(&doc),
        [
            (MemoryAction::Alloc, "abc.0".into(), 0, false),
            (MemoryAction::Free, "abc.0".into(), 1_000, false),
            (MemoryAction::Alloc, "abc.1".into(), 2_000, false),
            (MemoryAction::Free, "abc.1".into(), 3_000, false),
        ]
    );
    let profile = trace_memory::analyze_memory(&doc).logical.unwrap();
    assert_eq!(profile.peak.unwrap().live_bytes, 200);
    assert_eq!(
        imported.report.memory.unwrap().devices[0].replayed_peak_bytes,
        200
    );
}

#[test]
fn a_free_of_an_unknown_address_is_memory_from_before_the_capture() {
    // CUDA: 1000 B were allocated before the window; 600 B of it are freed inside.
    let cuda =
        |ts: f64, addr: u64, bytes: i64, total: i64| mem(MAIN, ts, addr, bytes, total, 4096, 1, 0);
    let (imported, doc) = import(vec![
        cuda(1.0, 0x10, 256, 1256),
        cuda(2.0, 0x20, -600, 656),
        cuda(3.0, 0x10, -256, 400),
    ]);
    assert_eq!(
        storage_ids(&doc),
        [
            (MemoryAction::Alloc, "20.0".into(), 0, true),
            (MemoryAction::Alloc, "10.0".into(), 0, false),
            (MemoryAction::Free, "20.0".into(), 1_000, false),
            (MemoryAction::Free, "10.0".into(), 2_000, false),
        ]
    );
    assert_eq!(doc.memory[0].bytes, Some(600));
    let m = imported.report.memory.as_ref().unwrap();
    assert_eq!((m.pre_existing, m.pre_existing_bytes), (1, 600));
    let d = &m.devices[0];
    assert_eq!(d.device, "cuda:0");
    // live: 600 (pre-existing) → 856 → 256 → 0; never negative
    assert_eq!(d.replayed_peak_bytes, 856);
    assert_eq!(d.total_allocated_max_bytes, Some(1256));
    // Total Allocated − live is 400 after every event: memory from before the window
    assert_eq!(d.constant_gap_bytes(), Some(400));
    assert_eq!(d.total_reserved_max_bytes, Some(4096));
    assert_eq!(doc.meta.tags["kineto.before_window_bytes.cuda:0"], "400");
    let logical = trace_memory::analyze_memory(&doc).logical.unwrap();
    assert_eq!(logical.peak.unwrap().live_bytes, 856);
    assert!(logical.unmatched_frees.is_empty());
    assert!(
        imported.report.warnings.is_empty(),
        "{:?}",
        imported.report.warnings
    );
}

#[test]
fn file_order_inside_one_timestamp_is_kept() {
    // Old Kineto versions wrote whole microseconds: many events share one timestamp.
    let (_, doc) = import(vec![
        cpu_mem(5.0, 0x1, 10, 10),
        cpu_mem(5.0, 0x1, -10, 0),
        cpu_mem(5.0, 0x1, 30, 30),
        cpu_mem(5.0, 0x2, 5, 35),
        cpu_mem(6.0, 0x2, -5, 30),
    ]);
    assert_eq!(
        storage_ids(&doc),
        [
            (MemoryAction::Alloc, "1.0".into(), 0, false),
            (MemoryAction::Free, "1.0".into(), 0, false),
            (MemoryAction::Alloc, "1.1".into(), 0, false),
            (MemoryAction::Alloc, "2.0".into(), 0, false),
            (MemoryAction::Free, "2.0".into(), 1_000, false),
        ]
    );
}

#[test]
fn lost_frees_and_repeated_frees() {
    let (imported, doc) = import(vec![
        cpu_mem(1.0, 0x1, 10, 10),
        cpu_mem(2.0, 0x1, 20, 20), // allocated again while live: the free of .0 was lost
        cpu_mem(3.0, 0x1, -20, 0),
        cpu_mem(4.0, 0x1, -20, 0), // freed twice
    ]);
    assert_eq!(
        storage_ids(&doc),
        [
            (MemoryAction::Alloc, "1.0".into(), 0, false),
            (MemoryAction::Free, "1.0".into(), 1_000, false),
            (MemoryAction::Alloc, "1.1".into(), 1_000, false),
            (MemoryAction::Free, "1.1".into(), 2_000, false),
            (MemoryAction::Free, "1.2".into(), 3_000, false),
        ]
    );
    let m = imported.report.memory.as_ref().unwrap();
    assert_eq!((m.inferred_frees, m.repeated_frees), (1, 1));
    assert_eq!(imported.report.warnings.len(), 2);
    let logical = trace_memory::analyze_memory(&doc).logical.unwrap();
    assert_eq!(logical.unmatched_frees.len(), 1);
}

#[test]
fn counters_become_device_samples() {
    let (_, doc) = import(vec![
        cpu_mem(1.0, 0x1, 64, 64),
        mem(MAIN, 2.0, 0x9, 512, 512, 2_097_152, 1, 1),
    ]);
    let samples: Vec<_> = doc
        .device_memory
        .iter()
        .map(|d| (doc.str(d.device), d.used_bytes, d.reserved_bytes))
        .collect();
    // the CPU has no reservation (PyTorch writes 0 there): not observed, so absent
    assert_eq!(
        samples,
        [
            ("cpu", Some(64), None),
            ("cuda:1", Some(512), Some(2_097_152))
        ]
    );
    let c = doc.meta.capture_contract.as_ref().unwrap();
    assert_eq!(c.logical_memory, CoverageLevel::Partial);
    assert_eq!(c.physical_memory, CoverageLevel::Partial);
    assert!(c.reasons["logical_memory"].contains("before the window"));
    assert_eq!(doc.meta.device, None, "two devices");
}

/// Total Allocated after every event, for a capture that starts from zero.
fn from_zero(same_tick: bool) -> Vec<serde_json::Value> {
    // 1000 B live, then 500 B allocated and freed within one tick: the device held 1500 B.
    let t = if same_tick { 50.0 } else { 50.5 };
    vec![
        op("aten::mm", 0.0, 100.0),
        cpu_mem(10.0, 0xa, 1000, 1000),
        cpu_mem(50.0, 0xb, 500, 1500),
        cpu_mem(t, 0xb, -500, 1000),
        cpu_mem(60.0, 0xc, 300, 1300),
        cpu_mem(70.0, 0xc, -300, 1000),
    ]
}

#[test]
fn replayed_peak_equals_total_allocated_when_the_capture_starts_from_zero() {
    for same_tick in [false, true] {
        let (imported, doc) = import(from_zero(same_tick));
        let d = &imported.report.memory.as_ref().unwrap().devices[0];
        assert_eq!(d.total_allocated_max_bytes, Some(1500));
        assert_eq!(d.replayed_peak_bytes, 1500, "the import replays per event");
        assert_eq!(d.constant_gap_bytes(), Some(0));
        let physical = trace_memory::analyze_memory(&doc).physical.unwrap();
        assert_eq!(physical.by_device[0].peak_used.unwrap().bytes, 1500);
    }
    let (_, doc) = import(from_zero(false));
    let logical = trace_memory::analyze_memory(&doc).logical.unwrap();
    assert_eq!(logical.peak.unwrap().live_bytes, 1500);
}

/// Issue 13 §1 (the per-event peak rule in trace-memory): a block allocated and freed within
/// one tick counts.
#[test]
fn replayed_peak_counts_what_lives_inside_one_tick() {
    let (_, doc) = import(from_zero(true));
    let logical = trace_memory::analyze_memory(&doc).logical.unwrap();
    assert_eq!(logical.peak.unwrap().live_bytes, 1500);
}

#[test]
fn no_memory_events_means_no_memory_plane() {
    let (imported, doc) = import(vec![op("aten::add", 0.0, 1.0)]);
    assert!(doc.memory.is_empty() && doc.device_memory.is_empty());
    assert!(imported.report.memory.is_none());
    let profile = trace_memory::analyze_memory(&doc);
    assert!(profile.logical.is_none() && profile.physical.is_none());
    let c = doc.meta.capture_contract.as_ref().unwrap();
    assert_eq!(c.logical_memory, CoverageLevel::None);
    assert_eq!(
        c.reasons["logical_memory"],
        "profile_memory was on but the trace holds no [memory] events"
    );
    assert!(imported.report.warnings[0].contains("the memory plane is absent, not empty"));
}
