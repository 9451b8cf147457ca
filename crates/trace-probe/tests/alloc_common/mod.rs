//! Helpers shared by the armed allocator tests (independent oracles over a loaded trace).

#![allow(dead_code)]

use std::collections::HashMap;

use trace_schema::{MemoryAction, TraceDocument};

/// Logical live bytes at session time `t` (events with `timestamp_ns <= t`), computed directly
/// from the trace's memory events: allocs add their bytes, frees subtract their storage's.
pub fn live_at(doc: &TraceDocument, t: u64) -> u64 {
    let mut bytes: HashMap<_, u64> = HashMap::new();
    let mut live: i128 = 0;
    let mut events: Vec<_> = doc.memory.iter().collect();
    events.sort_by_key(|m| m.timestamp_ns);
    for m in events {
        if m.timestamp_ns > t {
            break;
        }
        let id = m.storage.expect("allocator traces carry storage ids");
        match m.action {
            MemoryAction::Alloc => {
                let b = m.bytes.expect("alloc bytes");
                assert!(bytes.insert(id, b).is_none(), "storage allocated twice");
                live += b as i128;
            }
            MemoryAction::Free => {
                let b = bytes.remove(&id).expect("free of an allocated storage");
                live -= b as i128;
            }
        }
    }
    assert!(live >= 0);
    live as u64
}

/// The innermost span (latest start among those containing `t`): (name, step).
pub fn span_containing(
    doc: &TraceDocument,
    t: u64,
) -> Option<(String, Option<trace_schema::ExecutionStep>)> {
    doc.spans
        .iter()
        .filter(|s| s.start_ns <= t && s.end_ns().is_none_or(|e| t <= e))
        .max_by_key(|s| s.start_ns)
        .map(|s| (doc.str(s.name).to_string(), s.pass))
}
