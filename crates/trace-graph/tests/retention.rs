//! Who holds the activations retained into the optimizer, on hand-written traces that isolate
//! each rule (the real Candle loops are in `examples/tests/advice.rs`): the loss's storage,
//! free runs cut by allocations and span boundaries, gradient releases.

use trace_graph::{analyze, Finding, FindingCode, Holder};
use trace_schema::*;
use trace_testkit::*;

/// An activation the probe registered as an autograd-graph node.
fn node(ts: u64, storage: &str) -> TraceEvent {
    match alloc(ts, storage, 128)
        .no_tensor()
        .span("s2")
        .cat(MemoryCategory::Activation)
        .ev()
    {
        TraceEvent::Memory(mut m) => {
            m.category_source = Some(CategorySource::Registry);
            TraceEvent::Memory(m)
        }
        _ => unreachable!(),
    }
}

/// Root s1 [0, 300), forward s2 [10, 90) allocating `h` (at 20) and `y` (at 50, the loss when
/// both are graph nodes), backward s3 [100, 160) allocating gradients g1, g2, optimizer s4
/// [170, 195); then `tail`.
fn step_with(graph_nodes: bool, tail: Vec<TraceEvent>) -> Finding {
    use MemoryCategory::Gradient;
    let act = |ts, id| {
        if graph_nodes {
            node(ts, id)
        } else {
            alloc(ts, id, 128)
                .no_tensor()
                .span("s2")
                .cat(MemoryCategory::Activation)
                .ev()
        }
    };
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
        act(20, "st-h"),
        act(50, "st-y"),
        span_end("s2", 80),
        SpanStart::new("s3", 100)
            .parent("s1")
            .name("backward")
            .pass(Pass::Backward)
            .ev(),
        alloc(110, "st-g1", 64)
            .no_tensor()
            .span("s3")
            .cat(Gradient)
            .ev(),
        alloc(120, "st-g2", 64)
            .no_tensor()
            .span("s3")
            .cat(Gradient)
            .ev(),
        span_end("s3", 60),
        SpanStart::new("s4", 170)
            .parent("s1")
            .name("optimizer")
            .pass(Pass::Optimizer)
            .ev(),
        span_end("s4", 25),
    ];
    events.extend(tail);
    events.push(span_end("s1", 300));
    events.push(terminal(300));
    let a = analyze(&TraceDocument::from_events(events));
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    a.findings
        .into_iter()
        .find(|f| f.code == FindingCode::ActivationsRetainedIntoOptimizer)
        .expect("retention finding")
}

fn holders(f: &Finding) -> Vec<(Holder, u64, Option<u64>)> {
    f.evidence
        .held_by
        .iter()
        .map(|h| (h.holder, h.count, h.released_ns))
        .collect()
}

#[test]
fn a_live_loss_holds_its_graph_and_a_shared_free_run_is_said_to_be_undecidable() {
    // Gradients, then the loss's graph, back to back after the optimizer: one free run.
    let f = step_with(
        true,
        vec![
            free(200, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(200, "st-g2")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(201, "st-h")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(201, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    assert_eq!(holders(&f), [(Holder::Loss, 2, Some(201))]);
    let s = &f.summary;
    assert!(
        s.contains("the loss is still live then (its storage is among them, freed at 201 ns)"),
        "{s}"
    );
    assert!(s.contains("run backward, drop the loss, then step"), "{s}");
    assert!(
        s.contains("the trace cannot tell yet which of them the gradient store holds too"),
        "{s}"
    );

    // The same, with an allocation between the two drops: nothing undecidable is said.
    let f = step_with(
        true,
        vec![
            free(200, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(200, "st-g2")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            alloc(201, "st-x", 8)
                .no_tensor()
                .span("s1")
                .cat(MemoryCategory::Other)
                .ev(),
            free(202, "st-h")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(202, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(203, "st-x")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    assert_eq!(holders(&f), [(Holder::Loss, 2, Some(202))]);
    assert!(!f.summary.contains("cannot tell"), "{}", f.summary);
}

#[test]
fn after_the_loss_is_dropped_what_goes_with_the_gradients_is_held_by_the_store() {
    // The loss (st-y, the last graph node) is freed between backward and the optimizer; st-h
    // goes in the run of frees that drops the gradients.
    let f = step_with(
        true,
        vec![
            free(165, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(200, "st-g2")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(201, "st-h")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(202, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    // st-y was freed before the optimizer: st-h alone is retained
    assert_eq!(f.evidence.count, Some(1));
    assert_eq!(holders(&f), [(Holder::GradientStore, 1, Some(200))]);
    let s = &f.summary;
    assert!(
        s.contains("though the loss was dropped before it (its storage was freed at 165 ns)"),
        "{s}"
    );
    assert!(s.contains("128 B (1 storage) of them are freed only with the gradients, when the gradient store is dropped (at 200 ns in train_step)"), "{s}");
    assert!(s.contains("the gradient store holds them"), "{s}");
    assert!(
        s.contains("keep only the parameters' gradients, detached"),
        "{s}"
    );
    assert!(!s.contains("run backward, drop the loss, then step"), "{s}");
    assert_eq!(f.evidence.held_by[0].storages, ["cpu:st-h"]);
}

#[test]
fn a_span_boundary_or_an_allocation_ends_a_free_run() {
    // The gradients are freed inside the optimizer span, st-h after it ended: another run.
    let f = step_with(
        true,
        vec![
            free(165, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(190, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s4")
                .ev(),
            free(190, "st-g2")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s4")
                .ev(),
            free(196, "st-h")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    assert_eq!(holders(&f), [(Holder::Unknown, 1, None)]);
    let s = &f.summary;
    assert!(s.contains("128 B (1 storage) of them are freed apart from the gradients: the trace does not show what holds them"), "{s}");

    // An allocation between the gradients' frees and st-h's.
    let f = step_with(
        true,
        vec![
            free(165, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(200, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            alloc(201, "st-x", 8)
                .no_tensor()
                .span("s1")
                .cat(MemoryCategory::Other)
                .ev(),
            free(202, "st-h")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(203, "st-x")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    assert_eq!(holders(&f), [(Holder::Unknown, 1, None)]);

    // Never freed.
    let f = step_with(
        true,
        vec![
            free(165, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(200, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    assert_eq!(holders(&f), [(Holder::Unknown, 1, None)]);
    assert!(
        f.summary.contains("(never freed in the trace)"),
        "{}",
        f.summary
    );
}

#[test]
fn without_graph_nodes_the_loss_is_unknown() {
    // Freed with the gradients: the loss or the store held them.
    let f = step_with(
        false,
        vec![
            free(200, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(201, "st-h")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(201, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    assert_eq!(holders(&f), [(Holder::LossOrGradientStore, 2, Some(200))]);
    let s = &f.summary;
    assert!(s.contains("the probe did not see the loss"), "{s}");
    assert!(
        s.contains("cannot tell whether the loss or the gradient store held them"),
        "{s}"
    );

    // Freed apart from the gradients: the finding's words of old, no holder.
    let f = step_with(
        false,
        vec![
            free(190, "st-g1")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s4")
                .ev(),
            free(250, "st-h")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
            free(250, "st-y")
                .no_tensor()
                .cat(MemoryCategory::Other)
                .span("s1")
                .ev(),
        ],
    );
    assert!(f.evidence.held_by.is_empty());
    assert!(
        f.summary.contains(
            ": run backward, drop the loss, then step, so they are freed before the optimizer runs. What-if, replayed: "
        ),
        "{}",
        f.summary
    );
    // the replay: both activations released at the optimizer's start; the run's peak is
    // elsewhere, so the advice does not lower it — and the trace cannot show it frees them all
    let w = f.evidence.what_if.as_ref().expect("what-if");
    assert!(!w.exact);
    assert_eq!(w.released_bytes, 256);
    assert_eq!(w.saving_bytes(), 0, "{w:?}");
    assert!(
        f.summary.contains("it does not lower the run's peak"),
        "{}",
        f.summary
    );
}
