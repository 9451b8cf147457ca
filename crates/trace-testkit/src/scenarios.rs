//! Whole traces that several tests start from.

use trace_wire::{ExecutionPhase, GradientState, MemoryCategory, Pass, TraceEvent};

use crate::events::*;

/// An alloc as the allocator sees it: no tensor, in `span`, of `category`.
fn storage_alloc(
    ts: u64,
    storage: &str,
    bytes: u64,
    span: &str,
    category: MemoryCategory,
) -> TraceEvent {
    alloc(ts, storage, bytes)
        .no_tensor()
        .span(span)
        .cat(category)
        .ev()
}

/// A free as the allocator sees it: no tensor, category `other`, in `span`.
fn storage_free(ts: u64, storage: &str, span: &str) -> TraceEvent {
    free(ts, storage)
        .no_tensor()
        .cat(MemoryCategory::Other)
        .span(span)
        .ev()
}

/// A clean training step: root `s1` (measured) with forward `s2` (two ops), backward `s3`,
/// optimizer `s4`; parameters `w1`, `w2` with present gradients; activations freed in backward;
/// under [`step_meta`] with a [`complete_contract`] for `w1`, `w2`, ending at 200 ns.
pub fn clean_training_step() -> Vec<TraceEvent> {
    use MemoryCategory::{Activation, Gradient, Parameter};
    use Pass::{Backward, Forward};
    let forward_op = |name: &str, inputs: &[&str], output: &str, ts: u64, dur: u64| {
        op("s2", name, ts, dur)
            .inputs(inputs)
            .output(output)
            .shape(&[4, 8])
            .ev()
    };
    let pass_span = |id: &str, name: &str, ts: u64, pass: Pass| {
        SpanStart::new(id, ts)
            .parent("s1")
            .name(name)
            .pass(pass)
            .ev()
    };
    vec![
        step_meta(
            ExecutionPhase::Train,
            Some(complete_contract(&["w1", "w2"])),
        ),
        SpanStart::new("s1", 0)
            .name("train_step")
            .measured(true)
            .ev(),
        pass_span("s2", "forward", 10, Forward),
        tensor("s2", "t1", Some("w1"), Parameter, true),
        tensor("s2", "t2", Some("w2"), Parameter, true),
        forward_op("matmul", &["x", "t1"], "h", 20, 30),
        storage_alloc(20, "st-h", 128, "s2", Activation),
        forward_op("relu", &["h"], "y", 50, 20),
        storage_alloc(50, "st-y", 128, "s2", Activation),
        span_end("s2", 80),
        pass_span("s3", "backward", 100, Backward),
        storage_alloc(110, "st-g1", 128, "s3", Gradient),
        storage_alloc(120, "st-g2", 128, "s3", Gradient),
        storage_free(150, "st-h", "s3"),
        storage_free(150, "st-y", "s3"),
        span_end("s3", 60),
        pass_span("s4", "optimizer", 170, Pass::Optimizer),
        storage_alloc(175, "st-m", 256, "s4", MemoryCategory::Optimizer),
        storage_free(190, "st-g1", "s4"),
        storage_free(190, "st-g2", "s4"),
        span_end("s4", 25),
        gradient(1, "w1", GradientState::Present, Some(0.5)),
        gradient(2, "w2", GradientState::Present, Some(0.25)),
        span_end("s1", 200),
        terminal(200),
    ]
}
