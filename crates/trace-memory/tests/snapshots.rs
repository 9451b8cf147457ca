//! insta snapshots of full profiles for small hand-written traces (reviewed by hand).

mod common;

use common::*;
use trace_memory::{analyze_memory, node_memory_metrics};
use trace_schema::{CoverageLevel, ExecutionStep, MemoryAction, MemoryCategory};

/// One training step on cuda:0 with a parameter, activations, a gradient and optimizer state,
/// an alias, a pre-existing buffer, and device samples.
fn training_step() -> trace_schema::TraceDocument {
    let mut ev = Vec::new();
    ev.extend(span("step", None, 0, 100, None));
    ev.extend(span(
        "fwd",
        Some("step"),
        10,
        40,
        Some(ExecutionStep::Forward),
    ));
    ev.extend(span(
        "bwd",
        Some("step"),
        40,
        70,
        Some(ExecutionStep::Backward),
    ));
    ev.extend(span(
        "opt",
        Some("step"),
        70,
        95,
        Some(ExecutionStep::Optimizer),
    ));
    ev.push(op("fwd", "matmul", 12, 3));
    ev.push(op("fwd", "relu", 20, 2));
    let d = "cuda:0";
    ev.push(
        alloc(0, "w", 4096)
            .dev(d)
            .cat(MemoryCategory::Parameter)
            .pre()
            .ev(),
    );
    ev.push(alloc(12, "h", 1024).dev(d).span("fwd").op("matmul").ev());
    ev.push(alloc(20, "r", 1024).dev(d).span("fwd").op("relu").ev());
    ev.push(
        alloc(21, "r", 1024)
            .dev(d)
            .span("fwd")
            .tensor("r-view")
            .ev(),
    );
    ev.push(
        alloc(45, "g", 4096)
            .dev(d)
            .span("bwd")
            .cat(MemoryCategory::Gradient)
            .ev(),
    );
    ev.push(free(50, "h").dev(d).span("bwd").ev());
    ev.push(
        alloc(72, "m", 8192)
            .dev(d)
            .span("opt")
            .cat(MemoryCategory::Optimizer)
            .ev(),
    );
    ev.push(free(90, "g").dev(d).span("opt").ev());
    ev.push(sample(
        30,
        d,
        Some(10_000),
        Some(90_000),
        Some(12_288),
        Some(100_000),
    ));
    ev.push(sample(
        80,
        d,
        Some(20_000),
        Some(80_000),
        Some(20_480),
        Some(100_000),
    ));
    doc_with(Some(CoverageLevel::Complete), ev)
}

#[test]
fn training_step_profile() {
    let d = training_step();
    let profile = analyze_memory(&d);
    insta::assert_json_snapshot!("training_step_profile", profile);
    let logical = profile.logical.as_ref().unwrap();
    insta::assert_json_snapshot!("training_step_series_4", logical.downsampled_timeline(4));
    insta::assert_json_snapshot!(
        "training_step_nodes",
        node_memory_metrics(&d, Some(logical))
    );
}

/// A trace/6-style stream (no storage ids) with an unmatched free and a size mismatch on two
/// devices.
#[test]
fn legacy_identity_and_warnings_profile() {
    let d = doc([
        alloc(1, "_", 10).no_storage().tensor("a").dev("cpu").ev(),
        alloc(1, "_", 30)
            .no_storage()
            .tensor("b")
            .dev("cuda:0")
            .ev(),
        mem(2, MemoryAction::Free, "cpu", "_", Some(12))
            .no_storage()
            .tensor("a")
            .ev(),
        mem(3, MemoryAction::Free, "cuda:0", "_", None)
            .no_storage()
            .tensor("zz")
            .ev(),
    ]);
    insta::assert_json_snapshot!("legacy_identity_profile", analyze_memory(&d));
}
