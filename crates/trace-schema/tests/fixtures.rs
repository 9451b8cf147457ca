//! One fixture per supported version loads; insta snapshots of the loaded documents.
//!
//! The snapshot is a serializable view of the document: version, event count, truncation,
//! dropped-event count, semantic issues, and the document written back as trace/11 events
//! (`TraceDocument::to_events`), so every upgraded field is visible.

use serde::Serialize;
use trace_schema::{
    load_path, LoadError, SchemaVersion, SemanticIssue, TraceDocument, TraceEvent, Truncation,
};

#[derive(Serialize)]
struct View {
    version: SchemaVersion,
    event_count: u64,
    truncation: Option<Truncation>,
    dropped_events: Option<u64>,
    semantic_issues: Vec<SemanticIssue>,
    events: Vec<TraceEvent>,
}

fn view(doc: &TraceDocument) -> View {
    View {
        version: doc.version,
        event_count: doc.event_count,
        truncation: doc.truncation.clone(),
        dropped_events: doc.dropped_events,
        semantic_issues: doc.semantic_issues.clone(),
        events: doc.to_events(),
    }
}

fn load(name: &str) -> Result<TraceDocument, LoadError> {
    load_path(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR")))
}

#[test]
fn trace_6_upgrades_with_absent_fields_absent() {
    let doc = load("trace_6.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V6);
    // No terminal exists in trace/6: outcome unknown, not truncated.
    assert!(doc.terminal.is_none());
    assert!(!doc.is_truncated());
    assert!(doc.meta.measured_region_device_synchronized);
    // Memory identity is (device, tensor): no storage id.
    assert!(doc
        .memory
        .iter()
        .all(|m| m.storage.is_none() && m.tensor.is_some()));
    // storage_bytes / input_storage_bytes are the dense-byte fields.
    assert_eq!(doc.ops[0].output_dense_bytes, Some(128));
    assert_eq!(doc.ops[0].input_dense_bytes, 192);
    assert_eq!(doc.ops[1].output_dense_bytes, Some(64), "4×8 f16 filled in");
    assert_eq!(doc.tensors[0].dense_bytes, Some(128));
    assert_eq!(doc.tensors[0].storage_bytes, None);
    // The untagged edge is a call edge.
    assert!(matches!(
        doc.edges[0],
        trace_schema::EdgeRecord::Call {
            host_duration_ns: 600,
            ..
        }
    ));
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    insta::assert_json_snapshot!("trace_6", view(&doc));
}

#[test]
fn trace_7_loads() {
    let doc = load("trace_7.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V7);
    assert_eq!(doc.device_intervals.len(), 1);
    assert_eq!(doc.edges.len(), 2);
    assert!(doc.meta.correlation_id.is_none());
    assert!(!doc.is_truncated());
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    insta::assert_json_snapshot!("trace_7", view(&doc));
}

#[test]
fn trace_8_loads() {
    let doc = load("trace_8.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V8);
    assert!(doc.meta.comparison_identity.is_some());
    assert_eq!(
        doc.terminal.as_ref().map(|t| t.outcome),
        Some(trace_schema::TerminalOutcome::Failed)
    );
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    insta::assert_json_snapshot!("trace_8", view(&doc));
}

#[test]
fn trace_9_loads() {
    let doc = load("trace_9.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V9);
    assert!(doc.tensor_stats.is_empty());
    assert_eq!(doc.tensors[0].label.map(|l| doc.str(l)), Some("fc1.weight"));
    // The gradient contract's digest is valid.
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    insta::assert_json_snapshot!("trace_9", view(&doc));
}

#[test]
fn trace_10_loads() {
    let doc = load("trace_10.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V10);
    assert_eq!(doc.tensor_stats.len(), 1);
    assert_eq!(doc.tensor_stats[0].min, None);
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    insta::assert_json_snapshot!("trace_10", view(&doc));
}

#[test]
fn trace_11_loads_every_new_field() {
    let doc = load("trace_11.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V11);
    assert_eq!(doc.dropped_events, Some(3));
    assert_eq!(doc.meta.tracking_allocator_installed, Some(true));
    assert!(doc.memory[0].pre_existing);
    let allocator_only = &doc.memory[2];
    assert!(allocator_only.tensor.is_none() && allocator_only.shape.is_none());
    assert_eq!(doc.memory[3].bytes, None, "a free may omit bytes");
    assert_eq!(
        doc.ops[0].output_dense_bytes,
        Some(24),
        "8×4 f6e2m3 = 24 bytes"
    );
    assert!(doc.spans[2].module_path.is_some());
    assert!(!doc.gradients[2].parameter);
    assert_eq!(doc.device_memory[0].resident_bytes, Some(52_428_800));
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    insta::assert_json_snapshot!("trace_11", view(&doc));
}

#[test]
fn trace_12_loads_sampled_stacks() {
    let doc = load("trace_12.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V12);
    let contract = doc.meta.capture_contract.as_ref().unwrap();
    assert_eq!(contract.operations, trace_schema::CoverageLevel::Sampled);
    let t = &doc.samples;
    assert_eq!((t.frames.len(), t.stacks.len(), t.samples.len()), (3, 2, 2));
    let first: Vec<_> = t.stack_frames(t.samples[0].stack).collect();
    assert_eq!(
        first[0].function.as_deref(),
        Some("candle_core::tensor::Tensor::matmul")
    );
    assert_eq!(first[1].line, Some(40));
    assert_eq!(doc.str(t.samples[0].span.unwrap()), "s1");
    assert_eq!(t.samples[1].span, None);
    let sampler = t.sampler.as_ref().unwrap();
    assert_eq!((sampler.samples(), sampler.lost()), (2, 1));
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    // Written back and read again: the same table.
    let again = trace_schema::TraceDocument::from_events(doc.to_events());
    assert_eq!(
        again.samples.samples,
        t.samples
            .iter()
            .map(|s| trace_schema::SampleRecord {
                span: s.span.map(|x| again.sym(doc.str(x)).unwrap()),
                ..*s
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(again.samples.sampler, t.sampler);
    insta::assert_json_snapshot!("trace_12", view(&doc));
}

#[test]
fn trace_13_loads_allocation_sites() {
    let doc = load("trace_13.jsonl").unwrap();
    assert_eq!(doc.version, SchemaVersion::V13);
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let sites = &doc.sites;
    assert_eq!(sites.sites.len(), 4);
    let account = sites.account.as_ref().unwrap();
    assert_eq!((account.threshold_bytes, account.captured), (4096, 6));
    // Five allocs carry a site (the 64-byte one and the pre-existing parameter do not).
    assert_eq!(sites.storages.len(), 5);
    let mut with_site = Vec::new();
    doc.for_each_memory(trace_schema::MemoryOrder::File, |m| {
        if let Some(s) = sites.of_memory(m.index) {
            with_site.push((m.storage.unwrap().to_string(), s.site, s.thread));
        }
    });
    assert_eq!(
        with_site,
        [
            ("a1", 0, Some(1)),
            ("a2", 1, Some(1)),
            ("g1", 2, Some(1)),
            ("o1", 3, Some(1)),
            ("o2", 3, Some(1)),
        ]
        .map(|(s, i, t)| (s.to_string(), i, t))
    );
    // The site's stack, innermost first: the allocator, then Candle's matmul kernel.
    let stack = sites.stack_of(0).unwrap();
    let first: Vec<_> = doc
        .samples
        .stack_frames(stack)
        .filter_map(|f| f.function.as_deref())
        .collect();
    assert_eq!(first[2], "candle_core::tensor::Tensor::matmul");
    // Written back and read again (in memory and spilled): the same sites.
    let text: String = doc
        .to_events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect();
    for spill_memory in [false, true] {
        let options = trace_schema::LoadOptions {
            spill_memory,
            ..Default::default()
        };
        let again = trace_schema::load_reader_with(text.as_bytes(), &options).unwrap();
        assert!(
            again.semantic_issues.is_empty(),
            "{:?}",
            again.semantic_issues
        );
        assert_eq!(again.version, SchemaVersion::V13);
        assert_eq!(
            again.sites.storages, sites.storages,
            "spilled: {spill_memory}"
        );
        assert_eq!(again.sites.sites, sites.sites);
        assert_eq!(again.sites.account, sites.account);
    }
    insta::assert_json_snapshot!("trace_13", view(&doc));
}

#[test]
fn every_supported_version_has_a_fixture() {
    for schema in trace_schema::SUPPORTED_SCHEMAS {
        let n = schema.rsplit('/').next().unwrap();
        let doc = load(&format!("trace_{n}.jsonl")).unwrap();
        assert_eq!(doc.version.as_str(), *schema);
    }
}
