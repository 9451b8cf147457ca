//! The synthetic generator's output written to a file loads through `load_path` and is sane.

use trace_schema::{load_path, MemoryAction};
use trace_synth::{write_synth_trace, SynthConfig};

#[test]
fn written_synth_trace_loads_from_disk() {
    let config = SynthConfig {
        memory_events: 100_000,
        spans: 2_000,
        ops: 20_000,
        devices: 2,
        ..SynthConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synth.jsonl");
    let written = write_synth_trace(&path, &config).unwrap();
    assert_eq!(written, config.total_events());
    let doc = load_path(&path).unwrap();
    assert_eq!(doc.version, trace_schema::WRITE_VERSION);
    assert_eq!(doc.event_count, written);
    assert_eq!(doc.memory.len(), 100_000);
    assert_eq!(doc.spans.len(), 2_000);
    assert_eq!(doc.ops.len(), 20_000);
    assert!(
        doc.semantic_issues.is_empty(),
        "{:?}",
        &doc.semantic_issues[..1]
    );
    assert!(!doc.is_truncated());
    let allocs = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc)
        .count();
    assert!(allocs > 50_000 && allocs < 100_000, "{allocs}");
    assert_eq!(doc.str(doc.spans[0].id), "s1");
    assert!(doc.spans[0].measured);
}
