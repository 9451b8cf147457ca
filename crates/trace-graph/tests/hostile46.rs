//! Issue 46, class 3: steps captured apart (1, 5, 9) with 4,096 B kept in each grow 1,024 B per
//! step — the growth is divided by the step numbers, not by the number of step spans — and the
//! projection says which steps it saw.

use trace_graph::{analyze, FindingCode};

/// Steps 1, 5 and 9 of a loop, each keeping one 4,096 B storage (and freeing a temporary);
/// a 1,000 B parameter lives throughout.
const TRACE: &str = r#"{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e::train_step","phase":"train","timestamp":"2026-01-01T00:00:00.000Z","capture_step":1,"last_capture_step":9,"capture_contract":{"logical_memory":"complete"}}
{"kind":"span_start","id":"s1","name":"e::train_step","start_ns":0,"span_kind":"function","measured":true}
{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"P","bytes":1000,"category":"parameter","pre_existing":true}
{"kind":"span_start","id":"s2","parent_id":"s1","name":"step 1","start_ns":10,"span_kind":"function","step_index":1}
{"kind":"memory","timestamp_ns":12,"action":"alloc","device":"cpu","storage_id":"K1","bytes":4096,"span_id":"s2"}
{"kind":"memory","timestamp_ns":13,"action":"alloc","device":"cpu","storage_id":"T1","bytes":100,"span_id":"s2"}
{"kind":"memory","timestamp_ns":14,"action":"free","device":"cpu","storage_id":"T1"}
{"kind":"span_end","id":"s2","duration_ns":10}
{"kind":"span_start","id":"s3","parent_id":"s1","name":"step 5","start_ns":30,"span_kind":"function","step_index":5}
{"kind":"memory","timestamp_ns":32,"action":"alloc","device":"cpu","storage_id":"K5","bytes":4096,"span_id":"s3"}
{"kind":"span_end","id":"s3","duration_ns":10}
{"kind":"span_start","id":"s4","parent_id":"s1","name":"step 9","start_ns":50,"span_kind":"function","step_index":9}
{"kind":"memory","timestamp_ns":52,"action":"alloc","device":"cpu","storage_id":"K9","bytes":4096,"span_id":"s4"}
{"kind":"span_end","id":"s4","duration_ns":10}
{"kind":"span_end","id":"s1","duration_ns":100}
{"kind":"terminal","outcome":"complete","timestamp_ns":100}
"#;

#[test]
fn growth_of_steps_captured_apart_is_per_step_number() {
    let doc = trace_schema::load_str(TRACE).unwrap();
    let a = analyze(&doc);
    let g = a.steps.growth.as_ref().expect("memory grows at every step");
    // live at the ends: 1,000 + 4,096 = 5,096; 9,192; 13,288. From step 1's end to step 9's:
    // 8,192 B over 9 - 1 = 8 step numbers = 1,024 B per step (today's main: over 2 step
    // spans, 4,096 B per step)
    assert_eq!(g.step_indices, vec![1, 5, 9]);
    assert_eq!(g.steps_spanned, 8);
    assert_eq!(g.per_step_bytes, vec![4096, 4096, 4096]);
    assert_eq!((g.bytes_per_step, g.constant), (1024, true));
    assert!(!g.consecutive());
    let f = a
        .findings
        .iter()
        .find(|f| f.code == FindingCode::MemoryGrowth)
        .expect("a memory_growth finding");
    assert_eq!(f.evidence.bytes, Some(1024));
    // 1,000 more steps at 1,024 B: 1,024,000 B = 1000.00 KiB (today's main: +3.91 MiB)
    for part in [
        "+1.00 KiB (1,024 B) per step",
        "3 steps captured, 1, 5, 9",
        "1,000 more steps → +1000.00 KiB (at the rate per step number over steps 1–9, of which 1, 5, 9 were captured)",
    ] {
        assert!(f.summary.contains(part), "no {part:?} in {}", f.summary);
    }
    assert!(!f.summary.contains("3.91 MiB"), "{}", f.summary);
}

#[test]
fn consecutive_steps_keep_their_wording() {
    let text = TRACE
        .replace(r#""step_index":5"#, r#""step_index":2"#)
        .replace(r#""step_index":9"#, r#""step_index":3"#);
    let doc = trace_schema::load_str(&text).unwrap();
    let a = analyze(&doc);
    let g = a.steps.growth.as_ref().unwrap();
    // 8,192 B over 2 step numbers
    assert_eq!((g.bytes_per_step, g.steps_spanned), (4096, 2));
    assert!(g.consecutive());
    let f = a
        .findings
        .iter()
        .find(|f| f.code == FindingCode::MemoryGrowth)
        .unwrap();
    assert!(
        f.summary.contains("+4.00 KiB (4,096 B) per step (exactly: each step ends that much above the one before; 3 steps)"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("1,000 more steps → +3.91 MiB;"),
        "{}",
        f.summary
    );
}
