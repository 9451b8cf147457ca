//! Per-module backward spans on the llama-style demo step (`TrainConfig::backward_spans`, the
//! demo's `--backward-spans`): one `backward/<VarBuilder path>` span per probed module call, in
//! Candle's processing order (the reverse of the forward pass for this model), each linked to its
//! forward span, holding its module's gradient allocations; the markers' copies stay out of the
//! user's figures; no span is inferred (residual connections and the q/k/v fan-out nest exactly).
//! Compared with the same seeded step captured with backward spans off.

use std::collections::{BTreeMap, HashSet};

use candle_graph_examples::{train, ModelKind, TrainConfig, TrainReport};
use trace_schema::{ExecutionStep as Pass, MemoryAction, SpanKind, SpanRecord, Sym, TraceDocument};

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

fn capture(backward_spans: bool) -> (TraceDocument, TrainReport) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TrainConfig::new(ModelKind::Llama, dir.path());
    config.deterministic = true;
    config.backward_spans = backward_spans;
    let report = train(&config).unwrap();
    let doc = trace_schema::load_path(&report.trace_path).unwrap();
    (doc, report)
}

fn pass_span(doc: &TraceDocument, pass: Pass) -> &SpanRecord {
    doc.spans
        .iter()
        .find(|s| s.kind == SpanKind::Function && s.pass == Some(pass))
        .expect("pass span")
}

/// Whether span `s` is `ancestor` or lies under it.
fn within(doc: &TraceDocument, s: Option<Sym>, ancestor: Sym) -> bool {
    let mut cur = s;
    for _ in 0..=doc.spans.len() {
        match cur {
            Some(id) if id == ancestor => return true,
            Some(id) => cur = doc.span_index(id).and_then(|i| doc.spans[i].parent),
            None => return false,
        }
    }
    false
}

/// (count, bytes) of the allocations made inside pass `pass` (its span or a descendant).
fn allocations_in(doc: &TraceDocument, pass: Pass) -> (usize, u64) {
    let root = pass_span(doc, pass).id;
    let bytes: Vec<u64> = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && within(doc, m.span, root))
        .map(|m| m.bytes.unwrap_or(0))
        .collect();
    (bytes.len(), bytes.iter().sum())
}

#[test]
fn llama_backward_has_one_linked_span_per_module_in_processing_order() {
    // one test: the allocator's capture is process-wide
    let (on, report_on) = capture(true);
    let (off, report_off) = capture(false);
    assert!(on.semantic_issues.is_empty(), "{:?}", on.semantic_issues);
    let backward = pass_span(&on, Pass::Backward);
    let forward = pass_span(&on, Pass::Forward);

    // The prefixes of the parameters (the VarBuilder paths of the probed layers).
    let prefixes: HashSet<String> = report_on
        .parameters
        .iter()
        .filter_map(|p| {
            p.name
                .rsplit_once('.')
                .map(|(prefix, _)| prefix.to_string())
        })
        .collect();
    // The probed layers' forward spans (named by VarBuilder path, kind beside), in order; the
    // blocks around them (named after their layers' common prefix, `model.layers.1`, which no
    // parameter has) get no backward span.
    let forward_modules: Vec<&SpanRecord> = on
        .spans
        .iter()
        .filter(|s| {
            s.kind == SpanKind::Module
                && s.module_kind.is_some()
                && s.forward_span.is_none()
                && within(&on, s.parent, forward.id)
                && prefixes.contains(on.str(s.name))
        })
        .collect();
    assert_eq!(
        forward_modules.len(),
        21,
        "embedding, 2 × 9 block layers, norm, lm_head"
    );
    let backward_modules: Vec<&SpanRecord> = on
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module && s.forward_span.is_some())
        .collect();

    // … names that are VarBuilder paths (the prefixes of the parameters) …
    let analysis = trace_graph::analyze(&on);
    for s in &backward_modules {
        let name = on.str(s.name);
        assert!(prefixes.contains(name), "{name} is a VarBuilder path");
        assert_eq!(
            s.parent,
            Some(backward.id),
            "{name}: directly under backward"
        );
        let path = analysis.spans.path_of_id(&on, on.str(s.id)).unwrap();
        assert!(path.ends_with(&format!("/backward/{name}")), "{path}");
        assert!(
            !s.inferred,
            "{name}: {:?}",
            s.inferred_reason.map(|r| on.str(r))
        );
        assert!(s.duration_ns.is_some(), "{name} closed");
    }
    // … in Candle's processing order: the exact reverse of the forward pass here (lm_head,
    // model.norm, layer 1's down/up/gate projections, …, model.embed_tokens) …
    let names = |spans: &[&SpanRecord]| -> Vec<String> {
        spans.iter().map(|s| on.str(s.name).to_string()).collect()
    };
    let mut expected = names(&forward_modules);
    expected.reverse();
    assert_eq!(names(&backward_modules), expected);
    assert_eq!(on.str(backward_modules[0].name), "lm_head");
    assert!(backward_modules
        .windows(2)
        .all(|w| w[0].end_ns().unwrap() <= w[1].start_ns));
    // … each linked to the forward span of the same call (one backward span per call).
    let mut linked = HashSet::new();
    for s in &backward_modules {
        let fwd = on.str(s.forward_span.unwrap());
        let f = forward_modules
            .iter()
            .find(|f| on.str(f.id) == fwd)
            .unwrap_or_else(|| panic!("{fwd} is a forward module span"));
        assert_eq!((f.name, f.module_kind), (s.name, s.module_kind));
        assert!(linked.insert(fwd), "{fwd} linked twice");
    }

    // Memory allocated while a span is open is attributed to it: each module's parameter
    // gradients (an allocation of exactly the parameter's size per parameter).
    let param_bytes: BTreeMap<&str, Vec<u64>> =
        report_on
            .parameters
            .iter()
            .fold(BTreeMap::new(), |mut m, p| {
                let (prefix, _) = p.name.rsplit_once('.').unwrap();
                let bytes = p.dims.iter().product::<usize>() as u64 * 4;
                m.entry(prefix).or_insert_with(Vec::new).push(bytes);
                m
            });
    for s in &backward_modules {
        let name = on.str(s.name);
        let allocs: Vec<u64> = on
            .memory
            .iter()
            .filter(|m| m.action == MemoryAction::Alloc && m.span == Some(s.id))
            .map(|m| m.bytes.unwrap_or(0))
            .collect();
        for bytes in &param_bytes[name] {
            assert!(
                allocs.contains(bytes),
                "{name}: its {bytes} B gradient is allocated inside its span ({allocs:?})"
            );
        }
    }

    // The markers' copies are not in the user's figures: the forward and optimizer passes
    // allocate exactly what they allocate with backward spans off; the backward pass allocates
    // exactly two more tensors of each marked tensor's size (Candle accumulates the gradient
    // a marker passes through into a fresh zero tensor: `zeros_like` + `add`).
    assert_eq!(report_off.backward_markers, 0);
    assert_eq!(report_off.backward_marker_copy_bytes, 0);
    assert!(report_on.backward_markers > 0);
    assert!(report_on.backward_marker_copy_bytes > 0);
    assert!(!off
        .spans
        .iter()
        .any(|s| s.forward_span.is_some() || s.inferred));
    for pass in [Pass::Forward, Pass::Optimizer] {
        assert_eq!(
            allocations_in(&on, pass),
            allocations_in(&off, pass),
            "{pass:?}"
        );
    }
    let (on_n, on_b) = allocations_in(&on, Pass::Backward);
    let (off_n, off_b) = allocations_in(&off, Pass::Backward);
    assert_eq!(on_n - off_n, 2 * report_on.backward_markers as usize);
    assert_eq!(on_b - off_b, 2 * report_on.backward_marker_copy_bytes);
    // No copy enters as a storage from before the capture (their frees and graph registrations
    // are left out): the pre-existing storages are the same, and so is the step's logical peak
    // (the pass-through allocations are transient, freed before the optimizer's peak).
    let pre_existing = |doc: &TraceDocument| {
        let bytes: Vec<u64> = doc
            .memory
            .iter()
            .filter(|m| m.action == MemoryAction::Alloc && m.pre_existing)
            .map(|m| m.bytes.unwrap_or(0))
            .collect();
        (bytes.len(), bytes.iter().sum::<u64>())
    };
    assert_eq!(pre_existing(&on), pre_existing(&off));
    let peak = |doc: &TraceDocument| {
        let logical = trace_graph::analyze(doc)
            .memory
            .logical
            .expect("memory plane");
        let p = logical.peak.expect("a peak");
        (p.live_bytes, p.live_allocations.len())
    };
    assert_eq!(peak(&on), peak(&off));
    // The losses are the same step for step: the markers are identities.
    assert_eq!(report_on.losses, report_off.losses);
}
