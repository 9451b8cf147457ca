//! The `storages_retained_at_end` finding lists every retained storage (full detail) or the
//! largest [`trace_memory::SUMMARY_TOP`] (summary detail), largest first, and names the five
//! largest in its text — on more storages than either list shows.

use trace_graph::{analyze_with, Detail, Finding, FindingCode};
use trace_schema::*;
use trace_testkit::*;

/// A step whose forward pass allocates `n` activations of distinct sizes (storage `st-i` holds
/// `1000 + (i * 7919) % n` bytes: not in size order) that are never freed.
fn retained(n: u64, detail: Detail) -> Finding {
    let mut events = vec![
        step_meta(ExecutionPhase::Train, None),
        SpanStart::new("s1", 0)
            .name("train_step")
            .measured(true)
            .ev(),
        SpanStart::new("s2", 10)
            .parent("s1")
            .name("forward")
            .pass(Pass::Forward)
            .ev(),
    ];
    for i in 0..n {
        let bytes = 1000 + (i * 7919) % n;
        events.push(
            alloc(20 + i, &format!("st-{i}"), bytes)
                .no_tensor()
                .span("s2")
                .cat(MemoryCategory::Activation)
                .ev(),
        );
    }
    events.push(span_end("s2", 20 + n));
    events.push(span_end("s1", 100 + n));
    events.push(terminal(100 + n));
    let a = analyze_with(&TraceDocument::from_events(events), detail);
    a.findings
        .into_iter()
        .find(|f| f.code == FindingCode::StoragesRetainedAtEnd)
        .expect("retained finding")
}

/// `cpu:st-i` labels of the storages sorted by bytes, largest first.
fn by_size(n: u64) -> Vec<String> {
    let mut ids: Vec<u64> = (0..n).collect();
    ids.sort_by_key(|&i| std::cmp::Reverse((i * 7919) % n));
    ids.into_iter().map(|i| format!("cpu:st-{i}")).collect()
}

#[test]
fn full_detail_lists_every_retained_storage_largest_first() {
    let n = 300; // more than SUMMARY_TOP (256) and than the five the text names
    let f = retained(n, Detail::Full);
    assert_eq!(f.evidence.count, Some(n));
    let want_bytes: u64 = (0..n).map(|i| 1000 + (i * 7919) % n).sum();
    assert_eq!(f.evidence.bytes, Some(want_bytes));
    assert_eq!(f.evidence.storages, by_size(n));
    assert!(
        f.summary.starts_with("300 storage(s) holding"),
        "{}",
        f.summary
    );
}

#[test]
fn summary_detail_lists_the_largest_summary_top() {
    let n = 300;
    let f = retained(n, Detail::Summary);
    assert_eq!(f.evidence.count, Some(n));
    let mut want = by_size(n);
    want.truncate(trace_memory::SUMMARY_TOP);
    assert_eq!(f.evidence.storages, want);
    // the text names the five largest: 1299, 1298, ... bytes
    let largest = f.summary.split("largest: ").nth(1).expect("largest named");
    assert_eq!(largest.matches("B").count(), 5, "{largest}");
    assert!(largest.contains("1.27 KiB"), "{largest}");
}
