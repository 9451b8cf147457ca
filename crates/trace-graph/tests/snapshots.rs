//! insta snapshots of health, capabilities, graph and findings for hand-written traces.

use trace_graph::{analyze, HealthCode, Severity};
use trace_schema::*;
use trace_testkit::*;

/// Everything but the memory profile (snapshotted by trace-memory's own tests), in field order.
#[derive(serde::Serialize)]
struct View<'a> {
    health: &'a trace_graph::TraceHealth,
    capabilities: &'a trace_graph::CapabilityMatrix,
    gradients: &'a trace_graph::GradientSummary,
    graph: &'a Option<trace_graph::ExecutionGraph>,
    graph_refusal: &'a Option<trace_graph::GraphRefusal>,
    findings: &'a [trace_graph::Finding],
}

fn view(a: &trace_graph::Analysis) -> View<'_> {
    View {
        health: &a.health,
        capabilities: &a.capabilities,
        gradients: &a.gradients,
        graph: &a.graph,
        graph_refusal: &a.graph_refusal,
        findings: &a.findings,
    }
}

fn codes(a: &trace_graph::Analysis) -> Vec<(Severity, HealthCode)> {
    a.health
        .issues
        .iter()
        .map(|i| (i.severity, i.code))
        .collect()
}

#[test]
fn clean_training_step() {
    let doc = TraceDocument::from_events(trace_testkit::clean_training_step());
    let a = analyze(&doc);
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    assert!(a.health.capture_complete);
    let g = a.graph.as_ref().expect("graph");
    assert_eq!(g.outer_wall_time_ns, Some(200));
    insta::assert_yaml_snapshot!(view(&a));
}

#[test]
fn failed_capture_keeps_health_and_refuses_graph() {
    use MemoryCategory::*;
    let doc = TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Train, Some(complete_contract(&["w1"]))),
        SpanStart::new("s1", 0)
            .name("train_step")
            .measured(true)
            .ev(),
        SpanStart::new("s2", 10)
            .parent("s1")
            .name("forward")
            .pass(Pass::Forward)
            .ev(),
        op("s2", "matmul", 20, 30)
            .inputs(&["x", "w"])
            .output("h")
            .shape(&[4, 8])
            .ev(),
        alloc(20, "st-h", 4096)
            .no_tensor()
            .span("s2")
            .cat(Activation)
            .ev(),
        failed(60, "panicked: shape mismatch in matmul"),
    ]);
    let a = analyze(&doc);
    assert!(!a.health.capture_complete);
    assert!(a.health.capture_failed);
    assert!(a.graph.is_none());
    let reasons = &a.graph_refusal.as_ref().unwrap().reasons;
    assert!(
        reasons[0].contains("capture failed: panicked"),
        "{reasons:?}"
    );
    // Open spans are warnings in a failed run, missing manifest keys too.
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::OpenSpan)));
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::GradientManifestMissingKey)));
    insta::assert_yaml_snapshot!(view(&a));
}

#[test]
fn truncated_trace_loads_and_says_so() {
    let text = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"mlp","phase":"infer","timestamp":"2026-11-29T08:00:00.000Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host"}
{"kind":"span_start","id":"s1","name":"mlp","start_ns":0,"span_kind":"function","measured":true}
{"kind":"op","span_id":"s1","op_name":"matmul","inputs":["x","w"],"output":"h","shape":[2,2],"dtype":"f32","device":"cpu","duration_ns":5,"timestamp_ns":1}
{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"st1","bytes":16,"span_id":"s1","category":"activation"}
{"kind":"memory","timestamp_ns":7,"action":"al"#;
    let doc = load_str(text).unwrap();
    assert!(doc.is_truncated());
    let a = analyze(&doc);
    assert!(a.health.truncated);
    assert!(a.health.memory_lower_bound);
    // The graph stays; the open root has no time, the closed op keeps its own.
    let g = a.graph.as_ref().expect("graph of a cut-short trace");
    assert!(g.incomplete_capture);
    assert_eq!(g.nodes[0].host_total_time_ns, None);
    assert_eq!(g.outer_wall_time_ns, None);
    assert_eq!(g.nodes[1].host_total_time_ns, Some(5));
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::TraceTruncated)));
    // call 1 of an inference run: no warm-up call before it
    assert_eq!(
        a.findings.first().map(|f| f.code),
        Some(trace_graph::FindingCode::CapturedWithoutWarmUp)
    );
    insta::assert_yaml_snapshot!(view(&a));
}

/// Issue "Exact figures on any input" §6: a trace missing only its terminal line keeps the
/// times of every closed span, marked as from an incomplete capture.
#[test]
fn a_trace_missing_only_its_terminal_keeps_closed_span_times() {
    let mut events = vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        SpanStart::new("s2", 10).parent("s1").name("encoder").ev(),
        span_end("s2", 60),
        span_end("s1", 100),
    ];
    let complete = analyze(&TraceDocument::from_events({
        let mut e = events.clone();
        e.push(terminal(100));
        e
    }));
    events.truncate(5); // no terminal
    let doc = TraceDocument::from_events(events);
    assert!(doc.is_truncated());
    let a = analyze(&doc);
    let g = a.graph.as_ref().expect("graph");
    assert!(g.incomplete_capture);
    assert_eq!(g.outer_wall_time_ns, Some(100));
    let slowest: Vec<(&str, u64)> = g
        .rankings
        .measured
        .slowest_by_self_time
        .iter()
        .map(|c| (&*c.id, c.host_self_time_ns))
        .collect();
    assert_eq!(slowest, vec![("s2", 60), ("s1", 40)]);
    assert_eq!(
        complete.graph.as_ref().unwrap().rankings,
        g.rankings,
        "same times as the complete trace"
    );
    assert_eq!(
        a.capabilities
            .level(trace_graph::CapabilityKind::NestedHostTime),
        trace_graph::CapabilityLevel::Partial
    );
    // The largest-self-time finding still works on it.
    assert!(a
        .findings
        .iter()
        .any(|f| f.code == trace_graph::FindingCode::LargestHostSelfTime));
}

/// Issue "Exact figures on any input" §5: overlapping children are counted once.
#[test]
fn overlapping_children_count_once_and_are_a_warning() {
    let a = analyze(&TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        SpanStart::new("s2", 0).parent("s1").name("a").ev(),
        SpanStart::new("s3", 0).parent("s1").name("b").ev(),
        span_end("s2", 100),
        span_end("s3", 100),
        span_end("s1", 0), // recorded as 0: shorter than its children
        terminal(100),
    ]));
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    let g = a.graph.as_ref().unwrap();
    assert_eq!(g.outer_wall_time_ns, Some(100));
    let root = &g.nodes[0];
    assert_eq!(root.host_total_time_ns, Some(100));
    assert_eq!(root.host_self_time_ns, Some(0));
    assert!(root.host_time_inferred);
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::OverlappingSiblings)));
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::SpanShorterThanChildren)));
}

/// Issue "Exact figures on any input" §2: no time sum wraps; an impossible end is an error.
#[test]
fn durations_past_u64_are_an_error_never_a_wrapped_time() {
    let half = 1u64 << 63;
    let a = analyze(&TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        SpanStart::new("s2", 0).parent("s1").name("a").ev(),
        span_end("s2", half),
        SpanStart::new("s3", half).parent("s1").name("b").ev(),
        span_end("s3", half), // ends at 2^64: impossible
        span_end("s1", 0),
        terminal(u64::MAX),
    ]));
    assert!(!a.health.structurally_valid);
    assert!(codes(&a).contains(&(Severity::Error, HealthCode::TimeOverflow)));
    assert!(
        a.graph.is_none(),
        "no graph, so no wall time, rather than a wrapped one"
    );
    // Two children of 2^63 ns side by side at 0: the root covers 2^63 ns, exactly.
    let b = analyze(&TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        SpanStart::new("s2", 0).parent("s1").name("a").ev(),
        SpanStart::new("s3", 0).parent("s1").name("b").ev(),
        span_end("s2", half),
        span_end("s3", half),
        span_end("s1", 0),
        terminal(half),
    ]));
    assert_eq!(b.graph.as_ref().unwrap().outer_wall_time_ns, Some(half));
}

/// Issue "Exact figures on any input" §4: impossible device samples are warnings.
#[test]
fn device_samples_with_zero_capacity_or_more_used_than_capacity_are_warnings() {
    let mut events = trace_testkit::clean_training_step();
    let last = events.pop().unwrap();
    for (used, capacity) in [(Some(10), Some(0)), (Some(200), Some(100))] {
        events.push(TraceEvent::DeviceMemory(DeviceMemoryEvent {
            timestamp_ns: 5,
            device: "cuda:0".into(),
            used_bytes: used,
            free_bytes: None,
            reserved_bytes: None,
            capacity_bytes: capacity,
            resident_bytes: None,
        }));
    }
    events.push(last);
    let a = analyze(&TraceDocument::from_events(events));
    let msgs: Vec<&str> = a
        .health
        .issues
        .iter()
        .filter(|i| i.code == HealthCode::ImplausibleDeviceMemorySample)
        .map(|i| i.message.as_str())
        .collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs[0].contains("a capacity of 0 B"), "{}", msgs[0]);
    assert!(
        msgs[1].contains("200 B used, more than its capacity of 100 B"),
        "{}",
        msgs[1]
    );
}

#[test]
fn child_outliving_parent_is_clipped_never_negative() {
    let doc = TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        SpanStart::new("s2", 10).parent("s1").name("encoder").ev(),
        SpanStart::new("s3", 40).parent("s2").name("attention").ev(),
        op("s2", "matmul", 12, 60)
            .inputs(&["x"])
            .output("h")
            .shape(&[4, 8])
            .ev(),
        span_end("s3", 40),
        span_end("s2", 40),
        span_end("s1", 100),
        terminal(100),
    ]);
    let a = analyze(&doc);
    assert!(a.health.structurally_valid);
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::ChildOutlivesParent)));
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::OperationOutlivesSpan)));
    let g = a.graph.as_ref().unwrap();
    let s2 = g.nodes.iter().find(|n| &*n.id == "s2").unwrap();
    // s2 = [10, 50]; op [12, 72] and s3 [40, 80] clipped to it cover [12, 50].
    assert_eq!(s2.host_self_time_ns, Some(2));
    let s1 = g.nodes.iter().find(|n| &*n.id == "s1").unwrap();
    assert_eq!(s1.host_self_time_ns, Some(60));
    insta::assert_yaml_snapshot!(view(&a));
}

#[test]
fn equal_timestamp_siblings_are_ordered_by_id_and_counted_once() {
    let doc = TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        SpanStart::new("s10", 10).parent("s1").name("b").ev(),
        SpanStart::new("s2", 10).parent("s1").name("a").ev(),
        span_end("s10", 20),
        span_end("s2", 30),
        SpanStart::new("s3", 50).parent("s1").name("zero").ev(),
        op("s3", "add", 50, 5)
            .inputs(&["x", "y"])
            .output("z")
            .shape(&[4, 8])
            .ev(),
        op("s3", "mul", 55, 5)
            .inputs(&["z", "z"])
            .output("w")
            .shape(&[4, 8])
            .ev(),
        span_end("s3", 0),
        span_end("s1", 100),
        terminal(100),
    ]);
    let a = analyze(&doc);
    let g = a.graph.as_ref().unwrap();
    let ids: Vec<&str> = g.nodes.iter().map(|n| &*n.id).collect();
    assert_eq!(&ids[..4], &["s1", "s2", "s10", "s3"]);
    let s1 = &g.nodes[0];
    // children cover [10, 40] ∪ [50, 60] = 40 ns.
    assert_eq!(s1.host_self_time_ns, Some(60));
    let s3 = g.nodes.iter().find(|n| &*n.id == "s3").unwrap();
    assert!(s3.host_time_inferred);
    assert_eq!(s3.host_total_time_ns, Some(10));
    assert_eq!(s3.host_self_time_ns, Some(0));
    insta::assert_yaml_snapshot!(view(&a));
}

#[test]
fn all_gradients_missing_is_a_finding_not_an_error() {
    let mut events = trace_testkit::clean_training_step();
    let params = ["w1", "w2", "w3"];
    events[0] = step_meta(ExecutionPhase::Train, Some(complete_contract(&params)));
    events.retain(|e| !matches!(e, TraceEvent::Gradient(_)));
    let n = events.len();
    for (i, p) in params.iter().enumerate() {
        events.insert(
            n - 1,
            gradient(i as u64 + 1, p, GradientState::Missing, None),
        );
    }
    let a = analyze(&TraceDocument::from_events(events));
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    assert!(codes(&a).contains(&(
        Severity::Warning,
        HealthCode::GradientActiveFamilyBelowMinimum
    )));
    let f = a
        .findings
        .iter()
        .find(|f| f.code == trace_graph::FindingCode::ParametersWithoutGradient)
        .expect("finding");
    assert!(
        f.summary
            .starts_with("3 of 3 parameters received no gradient"),
        "{}",
        f.summary
    );
    assert_eq!(f.severity, Severity::Error);
    insta::assert_yaml_snapshot!(view(&a));
}

#[test]
fn unpaired_frees_are_warnings_and_the_trace_stays_valid() {
    let mut events = trace_testkit::clean_training_step();
    let n = events.len();
    events.insert(
        n - 2,
        free(5, "st-from-before")
            .no_tensor()
            .cat(MemoryCategory::Other)
            .span("s1")
            .ev(),
    );
    events.insert(
        n - 2,
        free(6, "st-from-before-2")
            .no_tensor()
            .cat(MemoryCategory::Other)
            .ev(),
    );
    let a = analyze(&TraceDocument::from_events(events));
    assert!(a.health.structurally_valid);
    let unpaired = codes(&a)
        .into_iter()
        .filter(|c| *c == (Severity::Warning, HealthCode::UnpairedFree))
        .count();
    assert_eq!(unpaired, 2);
    assert!(a.graph.is_some());
    insta::assert_yaml_snapshot!(a.health);
}

#[test]
fn activations_retained_into_the_optimizer_step() {
    let mut events = trace_testkit::clean_training_step();
    // Free the activations only after the optimizer step instead of during backward.
    for e in events.iter_mut() {
        if let TraceEvent::Memory(m) = e {
            if m.action == MemoryAction::Free && m.timestamp_ns == 150 {
                m.timestamp_ns = 198;
            }
        }
    }
    let a = analyze(&TraceDocument::from_events(events));
    assert!(a.health.structurally_valid);
    let f = a
        .findings
        .iter()
        .find(|f| f.code == trace_graph::FindingCode::ActivationsRetainedIntoOptimizer)
        .expect("finding");
    assert_eq!(f.evidence.bytes, Some(256));
    assert!(
        f.summary.contains("run backward, drop the loss, then step"),
        "{}",
        f.summary
    );
    let peak = a
        .findings
        .iter()
        .find(|f| f.code == trace_graph::FindingCode::MemoryPeak)
        .expect("peak");
    assert_eq!(peak.evidence.pass, Some(Pass::Optimizer));
    insta::assert_yaml_snapshot!(a.findings);
}

#[test]
fn measured_subtree_and_concurrent_work_are_ranked_apart() {
    let doc = TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("session").ev(),
        SpanStart::new("s2", 100)
            .parent("s1")
            .name("step")
            .measured(true)
            .ev(),
        SpanStart::new("s3", 150).parent("s2").name("inner").ev(),
        span_end("s3", 100),
        span_end("s2", 400),
        // Background work recorded after the fact, attached to the root.
        SpanStart::new("s4", 300)
            .parent("s1")
            .name("data_loader")
            .ev(),
        span_end("s4", 400),
        SpanStart::new("s5", 600)
            .parent("s1")
            .name("checkpoint")
            .ev(),
        span_end("s5", 300),
        span_end("s1", 1000),
        terminal(1000),
    ]);
    let a = analyze(&doc);
    let g = a.graph.as_ref().expect("graph");
    assert_eq!(g.measured_span.as_deref(), Some("s2"));
    assert_eq!(g.outer_wall_time_ns, Some(400));
    let measured: Vec<&str> = g
        .rankings
        .measured
        .slowest_by_self_time
        .iter()
        .map(|c| &*c.id)
        .collect();
    assert_eq!(measured, ["s2", "s3"]);
    let concurrent = &g.rankings.concurrent.slowest_by_self_time;
    assert_eq!(
        concurrent.len(),
        1,
        "s1 is an ancestor, s5 does not overlap"
    );
    assert_eq!(&*concurrent[0].id, "s4");
    // s4 = [300, 700] overlaps the measured [100, 500] for 200 ns.
    assert_eq!(concurrent[0].measured_overlap_self_time_ns, 200);
    assert_eq!(concurrent[0].host_self_time_ns, 400);
    insta::assert_yaml_snapshot!(g.rankings);
}

#[test]
fn zero_non_finite_and_non_parameter_gradients() {
    let mut events = trace_testkit::clean_training_step();
    events.retain(|e| !matches!(e, TraceEvent::Gradient(_)));
    let n = events.len();
    events.insert(n - 1, gradient(1, "w1", GradientState::Zero, Some(0.0)));
    events.insert(n - 1, gradient(2, "w2", GradientState::NonFinite, None));
    events.insert(
        n - 1,
        TraceEvent::Gradient(GradientEvent {
            event_id: "gradient-3".into(),
            root: "activations".into(),
            key: "tensor/h".into(),
            state: GradientState::Present,
            norm: Some(2.0),
            parameter: false,
            tensor_id: Some("h".into()),
            bytes: Some(128),
            non_finite_elements: None,
        }),
    );
    let a = analyze(&TraceDocument::from_events(events));
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::GradientFamilyNonFinite)));
    assert_eq!(a.gradients.counts.zero, 1);
    assert_eq!(a.gradients.counts.non_finite, 1);
    assert_eq!(a.gradients.non_parameter_bytes, Some(128));
    let gradient_findings: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.requires == [trace_graph::CapabilityKind::Gradients])
        .collect();
    assert_eq!(gradient_findings.len(), 2);
    insta::assert_yaml_snapshot!((&a.gradients, gradient_findings));
}

#[test]
fn host_timed_device_ops_and_dropped_events() {
    let mut events = trace_testkit::clean_training_step();
    for e in events.iter_mut() {
        if let TraceEvent::Op(op) = e {
            op.device = "cuda:0".into();
        }
    }
    let n = events.len();
    events.insert(
        n - 1,
        TraceEvent::DroppedEvents(DroppedEventsEvent {
            timestamp_ns: 199,
            dropped_events: 12,
        }),
    );
    let a = analyze(&TraceDocument::from_events(events));
    assert!(a.health.structurally_valid);
    assert!(!a.health.capture_complete);
    assert!(a.health.memory_lower_bound);
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::HostTimedDeviceOps)));
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::DroppedEvents)));
    // Dropped events cap every capability at partial, but the graph is still built.
    assert!(a.graph.is_some());
    assert!(a
        .capabilities
        .capabilities
        .iter()
        .all(|c| c.level != trace_graph::CapabilityLevel::Complete));
    insta::assert_yaml_snapshot!(a.health);
}

#[test]
fn invalid_trace_refuses_graph_with_every_reason() {
    let doc = TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        SpanStart::new("s2", 10).parent("ghost").name("orphan").ev(),
        span_end("s2", 5),
        SpanStart::new("s3", 20).name("second root").ev(),
        span_end("s3", 5),
        op("s9", "matmul", 1, 1)
            .inputs(&[])
            .output_opt(None)
            .shape(&[4, 8])
            .ev(),
        span_end("s1", 100),
        terminal(100),
    ]);
    let a = analyze(&doc);
    assert!(!a.health.structurally_valid);
    let reasons = &a.graph_refusal.as_ref().unwrap().reasons;
    assert!(
        reasons.iter().any(|r| r.starts_with("root_count")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.starts_with("unknown_parent")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.starts_with("unknown_span")),
        "{reasons:?}"
    );
    assert!(a
        .capabilities
        .capabilities
        .iter()
        .all(|c| !c.level.is_available()));
    insta::assert_yaml_snapshot!(view(&a));
}

#[test]
fn span_id_colliding_with_an_op_id_is_refused() {
    let doc = TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Infer, None),
        SpanStart::new("s1", 0).name("run").measured(true).ev(),
        op("s1", "add", 1, 1)
            .inputs(&[])
            .output_opt(None)
            .shape(&[4, 8])
            .ev(),
        SpanStart::new("s1/op/0", 10).parent("s1").name("evil").ev(),
        span_end("s1/op/0", 5),
        span_end("s1", 100),
        terminal(100),
    ]);
    let a = analyze(&doc);
    assert!(a.health.structurally_valid);
    let reasons = &a.graph_refusal.as_ref().expect("refused").reasons;
    assert!(
        reasons[0].starts_with("duplicate node id s1/op/0"),
        "{reasons:?}"
    );
}

#[test]
fn byte_counts_past_u64_make_the_trace_invalid() {
    use MemoryCategory::*;
    let mut events = trace_testkit::clean_training_step();
    let terminal = events.pop().unwrap();
    events.push(
        alloc(150, "st-huge-1", u64::MAX)
            .no_tensor()
            .span("s1")
            .cat(Activation)
            .ev(),
    );
    events.push(
        alloc(150, "st-huge-2", u64::MAX)
            .no_tensor()
            .span("s1")
            .cat(Activation)
            .ev(),
    );
    events.push(terminal);
    let a = analyze(&TraceDocument::from_events(events));
    assert!(codes(&a).contains(&(Severity::Error, HealthCode::MemoryBytesOverflow)));
    assert!(!a.health.structurally_valid);
    assert!(a.graph.is_none());
}

#[test]
fn declared_gradients_not_reached_by_a_failed_capture_are_unavailable_not_invalid() {
    let doc = TraceDocument::from_events(vec![
        step_meta(
            ExecutionPhase::Train,
            Some(complete_contract(&["w1", "w2"])),
        ),
        SpanStart::new("s1", 0)
            .name("train_step")
            .measured(true)
            .ev(),
        failed(60, "panicked before backward"),
    ]);
    let a = analyze(&doc);
    let row = a
        .capabilities
        .capabilities
        .iter()
        .find(|c| c.kind == trace_graph::CapabilityKind::Gradients)
        .unwrap();
    assert_eq!(
        row.level,
        trace_graph::CapabilityLevel::Unavailable,
        "{row:?}"
    );
    assert!(a
        .findings
        .iter()
        .all(|f| f.code != trace_graph::FindingCode::ParametersWithoutGradient));
}

#[test]
fn memory_events_outside_their_span_are_a_warning() {
    use MemoryCategory::*;
    let mut events = trace_testkit::clean_training_step();
    let terminal = events.pop().unwrap();
    // s2 (forward) runs from 10 ns; an allocation stamped before it started is suspect.
    events.push(
        alloc(5, "st-early", 64)
            .no_tensor()
            .span("s2")
            .cat(Activation)
            .ev(),
    );
    events.push(terminal);
    let a = analyze(&TraceDocument::from_events(events));
    assert!(codes(&a).contains(&(Severity::Warning, HealthCode::MemoryOutsideSpan)));
    assert!(a.health.structurally_valid);
    let clean = analyze(&TraceDocument::from_events(
        trace_testkit::clean_training_step(),
    ));
    assert!(!codes(&clean).contains(&(Severity::Warning, HealthCode::MemoryOutsideSpan)));
}

/// `captured_without_warm_up` reads `warmup_steps` (0: none), else capture step 1; a trace with
/// no span (the capture never started) has no captured step to qualify.
#[test]
fn warm_up_finding_follows_the_meta() {
    let with = |capture: Option<u64>, warmup: Option<u64>, spans: bool| {
        let mut events = trace_testkit::clean_training_step();
        if let TraceEvent::Meta(m) = &mut events[0] {
            m.run.capture_step = capture;
            m.run.warmup_steps = warmup;
        }
        if !spans {
            events.retain(|e| matches!(e, TraceEvent::Meta(_)));
            events.push(failed(
                10,
                "capture step 1 was never reached before finish()",
            ));
        }
        let a = analyze(&TraceDocument::from_events(events));
        a.findings
            .iter()
            .find(|f| f.code == trace_graph::FindingCode::CapturedWithoutWarmUp)
            .map(|f| f.summary.clone())
    };
    let s = with(Some(1), Some(0), true).expect("finding");
    assert!(
        s.starts_with("step 1 was captured with no warm-up step before it"),
        "{s}"
    );
    assert!(with(Some(1), None, true).is_some());
    assert!(with(Some(3), Some(0), true)
        .unwrap()
        .starts_with("step 3 was"));
    assert!(with(Some(2), Some(1), true).is_none());
    assert!(with(None, None, true).is_none());
    assert!(with(Some(1), Some(0), false).is_none());
}

/// A failed terminal and no span: the capture never started, the first issue says so (and the
/// failure is not repeated as `capture_failed`); a failed capture with spans is `capture_failed`.
#[test]
fn a_capture_that_never_started_is_the_first_issue() {
    let never = analyze(&TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Train, Some(complete_contract(&["w1"]))),
        failed(10, "capture step 2 was never reached before finish()"),
    ]));
    let first = &never.health.issues[0];
    assert_eq!(first.code, HealthCode::CaptureNotStarted);
    assert_eq!(first.severity, Severity::Error);
    assert!(
        first
            .message
            .contains("(capture step 2 was never reached before finish())")
            && first
                .message
                .contains("run at least 2 steps or capture an earlier step"),
        "{}",
        first.message
    );
    assert!(!codes(&never).contains(&(Severity::Warning, HealthCode::CaptureFailed)));

    let started = analyze(&TraceDocument::from_events(vec![
        step_meta(ExecutionPhase::Train, None),
        SpanStart::new("s1", 0)
            .name("train_step")
            .measured(true)
            .ev(),
        failed(10, "panicked"),
    ]));
    assert!(!codes(&started)
        .iter()
        .any(|c| c.1 == HealthCode::CaptureNotStarted));
    assert!(codes(&started).contains(&(Severity::Warning, HealthCode::CaptureFailed)));
}
