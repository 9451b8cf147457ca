//! Spans and passes: one hand-written Kineto fixture per rule.

#[path = "common/annotation.rs"]
mod annotation;
mod common;
#[path = "common/memory_event.rs"]
mod memory_event;
#[path = "common/span_lookup.rs"]
mod span_lookup;

use annotation::*;
use common::*;
use memory_event::*;
use span_lookup::*;
use trace_schema::{ExecutionPhase, Pass, SpanKind};

#[test]
fn root_is_the_measured_profiler_window() {
    let (imported, doc) = import(vec![
        ann("ProfilerStep#3", 10.0, 100.0),
        op("aten::add", 20.0, 5.0),
        json_trace_span(5.0, 120.0),
    ]);
    let root = &doc.spans[0];
    assert_eq!(doc.str(root.name), "profiler window");
    assert!(root.measured && root.parent.is_none());
    // the window starts at the earliest event (the `Trace` span at 5 µs) and holds everything
    assert_eq!((root.start_ns, root.duration_ns), (0, Some(120_000)));
    assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);
    assert_eq!(span(&doc, "ProfilerStep#3").start_ns, 5_000);
    assert!(doc.terminal.is_some() && !doc.is_truncated());
    assert_eq!(imported.report.spans.threads, 1);
    // one thread: top-level spans hang on the root
    assert_eq!(parent_name(&doc, "ProfilerStep#3"), "profiler window");
    assert_eq!(
        doc.meta.entrypoint, "fixture.json",
        "file name only, no directories"
    );
}

fn json_trace_span(ts: f64, dur: f64) -> serde_json::Value {
    serde_json::json!({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                       "tid": "PyTorch Profiler", "ts": ts, "dur": dur, "args": {"Op count": 0}})
}

#[test]
fn kinds_by_category() {
    let (_, doc) = import(vec![
        ann("ProfilerStep#1", 0.0, 100.0),
        x(
            "python_function",
            "nn.Module: Sequential_0",
            MAIN,
            1.0,
            90.0,
        ),
        x("python_function", "nn.Module: Linear_0", MAIN, 2.0, 20.0),
        x(
            "python_function",
            "torch/nn/functional.py(100): linear",
            MAIN,
            3.0,
            10.0,
        ),
        op("aten::linear", 4.0, 5.0),
        x("cuda_runtime", "cudaLaunchKernel", MAIN, 5.0, 1.0),
    ]);
    let kind = |n: &str| span(&doc, n).kind;
    assert_eq!(kind("ProfilerStep#1"), SpanKind::Function);
    assert_eq!(kind("nn.Module: Sequential_0"), SpanKind::Module);
    assert_eq!(
        kind("torch/nn/functional.py(100): linear"),
        SpanKind::Function
    );
    assert_eq!(kind("aten::linear"), SpanKind::Op);
    assert_eq!(kind("cudaLaunchKernel"), SpanKind::Op);
    let path = |n: &str| span(&doc, n).module_path.map(|p| doc.str(p).to_string());
    assert_eq!(
        path("nn.Module: Linear_0").as_deref(),
        Some("Sequential_0/Linear_0")
    );
    assert_eq!(parent_name(&doc, "cudaLaunchKernel"), "aten::linear");
}

#[test]
fn nesting_by_time_equal_starts_longer_encloses() {
    // Kineto does not sort its events: the child comes first in the file here.
    let (imported, doc) = import(vec![
        op("aten::addmm", 10.0, 5.0),
        op("aten::linear", 10.0, 8.0),
        op("aten::relu", 18.0, 2.0), // starts where linear ends: a sibling, not a child
        op("aten::empty", 19.0, 0.0), // zero length, same start as view: view encloses it
        op("aten::view", 19.0, 0.5),
        op("aten::fill_", 19.25, 0.1),
        op("aten::zero", 19.4, 0.0), // zero length encloses nothing, not even its twin
        op("aten::resize_", 19.4, 0.0),
        op("aten::overlap", 19.5, 3.0), // starts in relu, ends after it
    ]);
    assert_eq!(parent_name(&doc, "aten::addmm"), "aten::linear");
    assert_eq!(parent_name(&doc, "aten::linear"), "profiler window");
    assert_eq!(parent_name(&doc, "aten::relu"), "profiler window");
    assert_eq!(parent_name(&doc, "aten::empty"), "aten::view");
    assert_eq!(parent_name(&doc, "aten::zero"), "aten::view");
    assert_eq!(parent_name(&doc, "aten::fill_"), "aten::view");
    assert_eq!(parent_name(&doc, "aten::resize_"), "aten::view");
    assert_eq!(parent_name(&doc, "aten::view"), "aten::relu");
    assert_eq!(parent_name(&doc, "aten::overlap"), "aten::relu");
    assert_eq!(imported.report.spans.overlapping, 1);
    assert_eq!(span(&doc, "aten::empty").duration_ns, Some(0));
}

#[test]
fn fractional_microseconds_are_exact_nanoseconds() {
    let (_, doc) = import(vec![
        op("a", 5_192_767_997_062.378, 0.001),
        op("b", 5_192_767_997_062.379, 0.002),
    ]);
    assert_eq!(span(&doc, "a").start_ns, 0);
    assert_eq!(span(&doc, "b").start_ns, 1);
    assert_eq!(span(&doc, "b").duration_ns, Some(2));
}

#[test]
fn backward_named_ops_form_one_backward_span_per_run() {
    let (imported, doc) = import(vec![
        ann("ProfilerStep#1", 0.0, 200.0),
        ann("forward", 1.0, 20.0),
        op("aten::linear", 2.0, 5.0),
        op("aten::ones_like", 30.0, 1.0), // the seed gradient: not named as backward
        op(
            "autograd::engine::evaluate_function: MmBackward0",
            40.0,
            10.0,
        ),
        op("MmBackward0", 41.0, 8.0),
        op("aten::mm", 42.0, 5.0),
        op(
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            55.0,
            2.0,
        ),
        op("torch::autograd::AccumulateGrad", 55.5, 1.0),
        ann("Optimizer.step#AdamW.step", 100.0, 50.0),
        op("aten::add_", 101.0, 1.0),
        ann("Optimizer.zero_grad#AdamW.zero_grad", 160.0, 5.0),
    ]);
    assert_eq!(with_step(&doc, Pass::Forward), ["forward"]);
    assert_eq!(with_step(&doc, Pass::Backward), ["backward"]);
    assert_eq!(
        with_step(&doc, Pass::Optimizer),
        ["Optimizer.step#AdamW.step"]
    );
    let bwd = span(&doc, "backward");
    assert_eq!(
        (bwd.start_ns, bwd.duration_ns),
        (40_000, Some(17_000)),
        "from the first autograd op to the end of the last"
    );
    assert_eq!(parent_name(&doc, "backward"), "ProfilerStep#1");
    assert_eq!(
        parent_name(&doc, "autograd::engine::evaluate_function: MmBackward0"),
        "backward"
    );
    assert_eq!(parent_name(&doc, "aten::ones_like"), "ProfilerStep#1");
    assert_eq!(
        parent_name(&doc, "MmBackward0"),
        "autograd::engine::evaluate_function: MmBackward0"
    );
    assert_eq!(imported.report.spans.derived_backward, 1);
    assert_eq!(doc.meta.phase, Some(ExecutionPhase::Train));
    assert!(doc.meta.tags["import.derived_spans"].contains("1 `backward`"));
    // zero_grad is not the optimizer step
    assert_eq!(span(&doc, "Optimizer.zero_grad#AdamW.zero_grad").pass, None);
}

#[test]
fn runs_split_by_other_ops_and_by_profiler_steps() {
    let (imported, doc) = import(vec![
        ann("ProfilerStep#1", 0.0, 100.0),
        op("AddmmBackward0", 10.0, 5.0),
        op("aten::copy_", 16.0, 1.0),
        op("AddmmBackward0", 20.0, 5.0),
        ann("ProfilerStep#2", 100.0, 100.0),
        op("ReluBackward0", 110.0, 5.0),
    ]);
    assert_eq!(imported.report.spans.derived_backward, 3);
    let backward: Vec<(u64, Option<u64>)> = doc
        .spans
        .iter()
        .filter(|s| doc.str(s.name) == "backward")
        .map(|s| (s.start_ns, s.duration_ns))
        .collect();
    assert_eq!(
        backward,
        [
            (10_000, Some(5_000)),
            (20_000, Some(5_000)),
            (110_000, Some(5_000))
        ]
    );
}

#[test]
fn autograd_thread_ops_stay_on_their_thread() {
    let mut events = vec![
        thread_name(MAIN, "thread 100 (python)"),
        thread_name(AUTOGRAD, "thread 200 (pt_autograd_0)"),
        ann("ProfilerStep#1", 0.0, 100.0),
        ann("forward", 1.0, 20.0),
        op("aten::mm", 2.0, 5.0),
        ann("ProfilerStep#2", 100.0, 100.0),
    ];
    // on the autograd thread: an unnamed helper op and a named one, in each step
    for (base, name) in [(30.0, "aten::mul"), (130.0, "aten::sum")] {
        events.push(x("cpu_op", name, AUTOGRAD, base, 10.0));
        events.push(x("cpu_op", "aten::empty", AUTOGRAD, base + 1.0, 1.0));
    }
    events.push(mem(AUTOGRAD, 31.5, 0x10, 256, 256, 2048, 1, 0));
    let (imported, doc) = import(events);
    assert_eq!(imported.report.spans.threads, 2);
    // one span per thread under the root, named by thread_name
    assert_eq!(parent_name(&doc, "thread 100 (python)"), "profiler window");
    assert_eq!(
        parent_name(&doc, "thread 200 (pt_autograd_0)"),
        "profiler window"
    );
    assert_eq!(parent_name(&doc, "ProfilerStep#1"), "thread 100 (python)");
    // every top-level op of the autograd thread is backward, grouped per profiler step
    let backward: Vec<_> = doc
        .spans
        .iter()
        .filter(|s| doc.str(s.name) == "backward")
        .collect();
    assert_eq!(backward.len(), 2);
    for b in &backward {
        assert_eq!(
            doc.str(doc.span(b.parent.unwrap()).unwrap().name),
            "thread 200 (pt_autograd_0)"
        );
        assert_eq!(b.pass, Some(Pass::Backward));
    }
    assert_eq!(parent_name(&doc, "aten::mul"), "backward");
    // the allocation on the autograd thread belongs to its op there
    let m = &doc.memory[0];
    assert_eq!(
        doc.str(doc.span(m.span.unwrap()).unwrap().name),
        "aten::empty"
    );
    assert_eq!(doc.str(m.device), "cuda:0");
}

#[test]
fn no_pass_without_evidence() {
    let (imported, doc) = import(vec![
        ann("ProfilerStep#1", 0.0, 100.0),
        op("aten::linear", 1.0, 5.0),
        op("aten::relu", 10.0, 5.0),
    ]);
    assert!(doc.spans.iter().all(|s| s.pass.is_none()));
    assert!(imported.report.passes.is_empty());
    assert_eq!(doc.meta.phase, None, "inference is not guessed either");
}

#[test]
fn backward_inside_a_forward_annotation_is_ambiguous() {
    let (imported, doc) = import(vec![
        ann("forward", 0.0, 100.0),
        op("aten::linear", 1.0, 5.0),
        op(
            "autograd::engine::evaluate_function: MmBackward0",
            10.0,
            5.0,
        ),
        ann("optimizer", 20.0, 5.0),
    ]);
    assert_eq!(with_step(&doc, Pass::Forward), ["forward"]);
    assert!(with_step(&doc, Pass::Backward).is_empty());
    assert!(with_step(&doc, Pass::Optimizer).is_empty());
    let w = imported.report.warnings.join("\n");
    assert!(
        w.contains("1 autograd ops lie inside a forward or optimizer range"),
        "{w}"
    );
    assert!(w.contains("1 pass ranges"), "{w}");
}

#[test]
fn gpu_kernels_are_device_intervals_on_the_launching_op() {
    let kernel = |name: &str, ts: f64, dur: f64, correlation: i64| {
        serde_json::json!({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
            "ts": ts, "dur": dur, "args": {"device": 0, "stream": 7, "correlation": correlation,
            "External id": 99}})
    };
    let mut launch = x("cuda_runtime", "cudaLaunchKernel", MAIN, 3.0, 1.0);
    launch["args"]["correlation"] = 42.into();
    let (imported, doc) = import(vec![
        op("aten::mm", 2.0, 5.0),
        launch,
        kernel("gemm", 10.0, 4.0, 42),
        kernel("empty", 11.0, 0.0, 43),
        kernel("orphan", 12.0, 1.0, 44),
    ]);
    assert_eq!(doc.device_intervals.len(), 2);
    let d = &doc.device_intervals[0];
    assert_eq!(doc.str(span(&doc, "aten::mm").id), d.span_id);
    assert_eq!((d.device.as_str(), d.stream_id.as_str()), ("cuda:0", "7"));
    assert_eq!((d.start_ns, d.duration_ns), (8_000, 4_000));
    assert_eq!(d.backend, "kineto:kernel");
    assert_eq!(doc.device_intervals[1].span_id, "s1", "unlinked: the root");
    let r = &imported.report;
    assert_eq!(r.skipped["GPU events of zero duration"], 1);
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("1 GPU events match no runtime call")));
    let contract = doc.meta.capture_contract.as_ref().unwrap();
    assert_eq!(contract.device_timing, trace_schema::CoverageLevel::Partial);
}

/// Autograd engine thread id.
const AUTOGRAD: i64 = 200;

/// `thread_name` metadata.
fn thread_name(tid: i64, name: &str) -> serde_json::Value {
    serde_json::json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "ts": 0,
           "args": {"name": name}})
}

/// Names of the spans of `step`, in file order.
fn with_step(doc: &trace_schema::TraceDocument, step: Pass) -> Vec<&str> {
    doc.spans
        .iter()
        .filter(|s| s.pass == Some(step))
        .map(|s| doc.str(s.name))
        .collect()
}
