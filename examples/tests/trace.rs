//! The instrumented loop end to end (tracking allocator installed, as in the examples and the
//! demo): the trace loads, is structurally valid and complete, every parameter's gradient is
//! `present`, module spans appear, and the memory plane comes from the real step.

use candle_graph_examples::{train, ModelKind, TrainConfig};

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

fn check(model: ModelKind, parameters: u64) {
    let dir = tempfile::tempdir().unwrap();
    let config = TrainConfig::new(model, dir.path());
    let report = train(&config).unwrap();
    assert_eq!(report.losses.len(), 3);
    assert!(report.losses.iter().all(|l| l.is_finite()));
    let doc = trace_schema::load_path(&report.trace_path).unwrap();
    assert_eq!(doc.meta.capture_step, Some(2));
    // Probed layers: module spans named by their VarBuilder path, their kind beside.
    let linears: Vec<&str> = doc
        .spans
        .iter()
        .filter(|s| s.module_kind.map(|k| doc.str(k)) == Some("linear"))
        .map(|s| doc.str(s.name))
        .collect();
    let expected_first = match model {
        ModelKind::Llama => "model.layers.0.self_attn.q_proj",
        ModelKind::Mlp => "fc1",
    };
    assert_eq!(
        linears.first().copied(),
        Some(expected_first),
        "module spans"
    );
    // Backward spans are opt-in: none by default.
    assert!(!doc.spans.iter().any(|s| s.forward_span.is_some()));
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:?}",
        analysis.health.issues
    );
    assert!(analysis.health.capture_complete);
    let g = &analysis.gradients;
    assert_eq!(g.parameter_count(), parameters);
    assert_eq!(g.counts.present, parameters, "{:?}", g.without_gradient);
    let logical = analysis
        .memory
        .logical
        .expect("memory plane with the allocator installed");
    let peak = logical.peak.expect("a peak");
    assert!(peak.live_bytes > 0);
    assert_eq!(
        peak.live_allocations.iter().map(|l| l.bytes).sum::<u64>(),
        peak.live_bytes
    );
}

#[test]
fn llama_and_mlp_traces() {
    // one test: the allocator's capture is process-wide
    check(ModelKind::Llama, 21);
    check(ModelKind::Mlp, 6);
}
