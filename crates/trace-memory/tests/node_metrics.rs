//! Per-node metrics: clipping, coverage, op attribution.

use trace_memory::{analyze_memory, node_memory_metrics};
use trace_schema::{CoverageLevel, Pass};
use trace_testkit::*;

#[test]
fn subtree_peak_and_residual_are_clipped_to_the_interval() {
    let mut ev = Vec::new();
    ev.extend(span("root", None, 10, 40, None));
    ev.extend(span("child", Some("root"), 15, 30, None));
    ev.push(alloc(16, "a", 40).span("child").ev());
    ev.push(alloc(20, "b", 60).span("child").ev());
    ev.push(free(25, "a").span("child").ev());
    ev.push(free(45, "b").ev());
    let d = document(ev);
    let n = node_memory_metrics(&d, None);
    let (root, child) = (&n.spans[0], &n.spans[1]);
    assert_eq!(child.subtree_peak_live_bytes, Some(100));
    assert_eq!(child.subtree_residual_bytes, Some(60));
    assert_eq!(child.direct_allocated_bytes, Some(100));
    assert_eq!(root.subtree_peak_live_bytes, Some(100));
    assert_eq!(root.subtree_residual_bytes, Some(60));
    // root allocated nothing itself and coverage is undeclared: unknown, not zero.
    assert_eq!(root.direct_allocated_bytes, None);
}

#[test]
fn allocations_before_the_span_are_not_its_own() {
    // A storage allocated before `late` began and freed inside it is clipped away.
    let mut ev = Vec::new();
    ev.extend(span("late", None, 10, 20, None));
    ev.push(alloc(5, "old", 500).ev());
    ev.push(alloc(12, "new", 7).span("late").ev());
    ev.push(free(15, "old").ev());
    let d = document(ev);
    let n = node_memory_metrics(&d, None);
    assert_eq!(n.spans[0].subtree_peak_live_bytes, Some(7));
    assert_eq!(n.spans[0].subtree_residual_bytes, Some(7));
}

#[test]
fn partial_coverage_leaves_unobserved_spans_unknown_complete_makes_them_zero() {
    let events = || {
        let mut ev = Vec::new();
        ev.extend(span("root", None, 0, 100, None));
        ev.extend(span("busy", Some("root"), 1, 50, None));
        ev.extend(span("quiet", Some("root"), 60, 90, None));
        ev.push(alloc(10, "a", 40).span("busy").ev());
        ev.push(free(20, "a").span("busy").ev());
        ev
    };
    for coverage in [None, Some(CoverageLevel::Partial)] {
        let n = node_memory_metrics(&document_with(coverage, events()), None);
        assert_eq!(n.spans[1].direct_allocated_bytes, Some(40));
        assert_eq!(n.spans[2].direct_allocated_bytes, None);
        assert_eq!(n.spans[2].subtree_peak_live_bytes, None);
        assert_eq!(n.spans[2].subtree_residual_bytes, None);
    }
    let n = node_memory_metrics(
        &document_with(Some(CoverageLevel::Complete), events()),
        None,
    );
    assert_eq!(n.spans[2].direct_allocated_bytes, Some(0));
    assert_eq!(n.spans[2].subtree_peak_live_bytes, Some(0));
    assert_eq!(n.spans[2].subtree_residual_bytes, Some(0));
    // Complete coverage and no memory events at all: still known zeros.
    let d = document_with(Some(CoverageLevel::Complete), span("s", None, 0, 5, None));
    let n = node_memory_metrics(&d, None);
    assert_eq!(n.spans[0].subtree_peak_live_bytes, Some(0));
}

#[test]
fn ambiguous_op_names_stay_at_span_level() {
    let mut ev = Vec::new();
    ev.extend(span("root", None, 0, 100, None));
    ev.push(op("root", "matmul", 10, 2).ev());
    ev.push(op("root", "add", 20, 2).ev());
    ev.push(op("root", "add", 30, 2).ev());
    ev.push(alloc(11, "m", 64).span("root").op("matmul").ev());
    ev.push(alloc(21, "x", 32).span("root").op("add").ev());
    for coverage in [None, Some(CoverageLevel::Complete)] {
        let d = document_with(coverage, ev.clone());
        let n = node_memory_metrics(&d, None);
        assert_eq!(n.ops[0].direct_allocated_bytes, Some(64));
        assert_eq!(n.ops[1].direct_allocated_bytes, None);
        assert_eq!(n.ops[2].direct_allocated_bytes, None);
        assert_eq!(n.spans[0].direct_allocated_bytes, Some(96));
        assert_eq!(n.ops[0].output_dense_bytes, Some(16));
        // The matmul's interval [10,12) holds its 64-byte output.
        assert_eq!(n.ops[0].subtree_peak_live_bytes, Some(64));
    }
}

#[test]
fn open_span_runs_to_the_end_and_has_no_residual() {
    let d = document([
        span_start("open", None, 0, Some(Pass::Forward)),
        alloc(3, "a", 10).span("open").ev(),
        alloc(4, "b", 20).span("open").ev(),
    ]);
    let n = node_memory_metrics(&d, None);
    assert_eq!(n.spans[0].subtree_peak_live_bytes, Some(30));
    assert_eq!(n.spans[0].subtree_residual_bytes, None);
    let l = analyze_memory(&d).logical.unwrap();
    assert_eq!(l.pass_peaks[0].peak.live_bytes, 30);
    assert_eq!(l.pass_peaks[0].interval_count, 1);
}

#[test]
fn pre_existing_storages_are_no_node_s_allocation() {
    let mut ev = Vec::new();
    ev.extend(span("root", None, 0, 10, None));
    ev.push(alloc(0, "w", 1000).span("root").pre().ev());
    ev.push(alloc(1, "a", 1).span("root").ev());
    let d = document(ev);
    let n = node_memory_metrics(&d, None);
    assert_eq!(n.spans[0].direct_allocated_bytes, Some(1));
    assert_eq!(n.spans[0].subtree_peak_live_bytes, Some(1));
}
