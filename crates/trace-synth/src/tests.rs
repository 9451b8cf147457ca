//! The generator's properties: exact counts, determinism, nesting, multi-step captures, aliases
//! and reuse.

use crate::TraceDocument;
use crate::*;
use std::collections::{HashMap, HashSet};

fn small() -> SynthConfig {
    SynthConfig {
        memory_events: 5_000,
        spans: 300,
        ops: 2_000,
        devices: 3,
        parameters: 32,
        device_memory_samples: 50,
        ..SynthConfig::default()
    }
}

#[test]
fn counts_are_exact_and_document_is_clean() {
    let config = small();
    let events: Vec<TraceEvent> = synth_events(&config).collect();
    assert_eq!(events.len() as u64, config.total_events());
    let doc = TraceDocument::from_events(events);
    assert_eq!(doc.memory.len(), 5_000);
    assert_eq!(doc.spans.len(), 300);
    assert_eq!(doc.ops.len(), 2_000);
    assert_eq!(doc.device_memory.len(), 50);
    assert_eq!(doc.gradients.len(), 32);
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    assert!(!doc.is_truncated());
    assert_eq!(doc.memory.iter().filter(|m| m.pre_existing).count(), 32);
}

#[test]
fn deterministic_per_seed() {
    let a: Vec<TraceEvent> = synth_events(&small()).collect();
    let b: Vec<TraceEvent> = synth_events(&small()).collect();
    assert_eq!(a, b);
    let c: Vec<TraceEvent> = synth_events(&SynthConfig { seed: 2, ..small() }).collect();
    assert_ne!(a, c);
}

#[test]
fn tiny_configs_still_make_a_valid_trace() {
    for (memory_events, spans, ops) in [(0, 0, 0), (1, 1, 1), (3, 5, 0), (0, 13, 7)] {
        let config = SynthConfig {
            memory_events,
            spans,
            ops,
            parameters: 2,
            device_memory_samples: 3,
            ..SynthConfig::default()
        };
        let doc = TraceDocument::from_events(synth_events(&config));
        assert_eq!(doc.memory.len() as u64, memory_events);
        assert_eq!(doc.spans.len() as u64, spans.max(4));
        assert_eq!(doc.ops.len() as u64, ops);
        assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    }
}

#[test]
fn spans_nest_ops_lie_inside_and_time_increases() {
    let doc = TraceDocument::from_events(synth_events(&small()));
    let roots: Vec<_> = doc.spans.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(roots.len(), 1);
    assert!(roots[0].measured);
    assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);
    let mut depth_max = 0;
    for span in &doc.spans {
        let end = span.end_ns().expect("closed");
        let mut depth = 0;
        let mut cur = span;
        while let Some(parent) = cur.parent {
            let p = doc.span(parent).expect("parent exists");
            assert!(p.start_ns <= cur.start_ns && cur.end_ns().unwrap() <= p.end_ns().unwrap());
            cur = p;
            depth += 1;
        }
        depth_max = depth_max.max(depth);
        assert!(span.start_ns < end);
    }
    assert_eq!(depth_max, 4, "root > step > layer > block > projection");
    for op in &doc.ops {
        let span = doc.span(op.span).expect("op span exists");
        assert!(span.start_ns <= op.timestamp_ns);
        assert!(op.timestamp_ns + op.duration_ns <= span.end_ns().unwrap());
    }
    assert!(doc
        .ops
        .windows(2)
        .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns));
    assert!(doc
        .memory
        .windows(2)
        .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns));
    let steps: HashSet<_> = doc.spans.iter().filter_map(|s| s.pass).collect();
    assert_eq!(steps.len(), 3);
}

#[test]
fn multi_step_capture_has_alike_steps_and_a_bounded_live_set() {
    let config = SynthConfig {
        steps: 5,
        memory_events: 20_000,
        spans: 400,
        ops: 5_000,
        devices: 2,
        parameters: 16,
        device_memory_samples: 40,
        ..SynthConfig::default()
    };
    let events: Vec<TraceEvent> = synth_events(&config).collect();
    assert_eq!(events.len() as u64, config.total_events());
    let doc = TraceDocument::from_events(events);
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    assert_eq!(
        (doc.memory.len(), doc.spans.len(), doc.ops.len()),
        (20_000, 400, 5_000)
    );
    assert_eq!(doc.gradients.len(), 16, "gradient facts once");
    assert_eq!(doc.meta.last_capture_step, Some(6));
    let root = doc
        .spans
        .iter()
        .find(|s| s.measured)
        .expect("measured root");
    let steps: Vec<_> = doc
        .spans
        .iter()
        .filter(|s| s.step_index.is_some())
        .collect();
    let indices: Vec<u32> = steps.iter().map(|s| s.step_index.unwrap().get()).collect();
    assert_eq!(indices, vec![2, 3, 4, 5, 6]);
    for step in &steps {
        assert_eq!(step.parent, Some(root.id));
        assert_eq!(
            doc.str(step.name),
            format!("step {}", step.step_index.unwrap())
        );
        let passes: Vec<_> = doc
            .spans
            .iter()
            .filter(|s| s.parent == Some(step.id))
            .map(|s| s.pass)
            .collect();
        assert_eq!(
            passes,
            vec![
                Some(Pass::Forward),
                Some(Pass::Backward),
                Some(Pass::Optimizer)
            ]
        );
    }
    // Replay: the storages live at each step's end are the parameters, the optimizer state
    // (two per parameter) and at most one of the step's own.
    let mut live = HashSet::new();
    let mut at_ends = Vec::new();
    let mut events = doc.memory.iter().peekable();
    for step in &steps {
        let end = step.start_ns + step.duration_ns.expect("closed");
        while let Some(m) = events.next_if(|m| m.timestamp_ns <= end) {
            let key = (m.device, m.storage.expect("storage ids"));
            match m.action {
                MemoryAction::Alloc => live.insert(key),
                MemoryAction::Free => live.remove(&key),
            };
        }
        at_ends.push(live.len());
    }
    assert!(
        at_ends.iter().all(|&n| n == 48 || n == 49),
        "live storages at each step's end: {at_ends:?}"
    );
}

#[test]
fn one_step_is_unchanged_by_the_steps_field() {
    let one: Vec<TraceEvent> = synth_events(&SynthConfig {
        steps: 1,
        ..small()
    })
    .collect();
    let zero: Vec<TraceEvent> = synth_events(&SynthConfig {
        steps: 0,
        ..small()
    })
    .collect();
    assert_eq!(one, zero);
    let doc = TraceDocument::from_events(one);
    assert!(doc.spans.iter().all(|s| s.step_index.is_none()));
    assert_eq!(doc.meta.last_capture_step, None);
}

#[test]
fn memory_has_aliases_reuse_and_balanced_frees() {
    let doc = TraceDocument::from_events(synth_events(&small()));
    // Replay: (device, storage) -> live bytes; frees only of live storages.
    let mut live: HashMap<_, u64> = HashMap::new();
    let mut aliases = 0;
    let mut id_reuse = 0;
    let mut freed = HashSet::new();
    let mut address_reuse = 0;
    let mut freed_addresses = HashSet::new();
    let mut devices = HashSet::new();
    for m in &doc.memory {
        let storage = m.storage.expect("trace/11 has storage ids");
        let key = (m.device, storage);
        devices.insert(m.device);
        let address = doc.str(storage).split('.').next().unwrap().to_string();
        match m.action {
            MemoryAction::Alloc => {
                assert!(m.bytes.is_some());
                if let std::collections::hash_map::Entry::Vacant(slot) = live.entry(key) {
                    if freed.contains(&key) {
                        id_reuse += 1;
                    }
                    if freed_addresses.contains(&(m.device, address.clone())) {
                        address_reuse += 1;
                    }
                    slot.insert(m.bytes.unwrap());
                } else {
                    aliases += 1;
                    assert!(m.tensor.is_some());
                }
            }
            MemoryAction::Free => {
                let bytes = live.remove(&key).expect("free of a live storage");
                if let Some(b) = m.bytes {
                    assert_eq!(b, bytes);
                }
                freed.insert(key);
                freed_addresses.insert((m.device, address));
            }
        }
    }
    assert!(aliases > 10, "aliases {aliases}");
    assert!(id_reuse > 5, "same id reused {id_reuse}");
    assert!(address_reuse > 100, "address reuse {address_reuse}");
    assert_eq!(devices.len(), 3);
    let categories: HashSet<_> = doc.memory.iter().map(|m| m.category).collect();
    assert_eq!(categories.len(), 4, "{categories:?}");
    assert!(doc.memory.iter().any(|m| m.tensor.is_none()));
    assert!(doc.memory.iter().any(|m| m.bytes.is_none()));
}

#[test]
fn mix_counts_add_up() {
    let c = SynthConfig::mix(1_000_000);
    let extra = c.total_events() - 1_000_000;
    assert!(extra < 2_000, "{extra}");
}
