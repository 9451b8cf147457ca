//! Event constructors for hand-written test traces.
#![allow(dead_code)]

use trace_schema::*;

pub fn meta(phase: ExecutionPhase, contract: Option<CaptureContract>) -> TraceEvent {
    TraceEvent::Meta(MetaEvent {
        schema: "candle-graph/trace/11".into(),
        run: RunMeta {
            run_id: "run-1".into(),
            correlation_id: Some("mlp/update-2".into()),
            entrypoint: "mlp::train_step".into(),
            phase: Some(phase),
            timestamp: "2026-11-29T08:00:00.000Z".into(),
            capture_step: Some(2),
            warmup_steps: Some(1),
            device: Some("cpu".into()),
            timing_mode: Some(TimingMode::Host),
            capture_contract: contract,
            ..RunMeta::default()
        },
    })
}

pub fn contract(params: &[&str]) -> CaptureContract {
    CaptureContract {
        operations: CoverageLevel::Complete,
        tensors: CoverageLevel::Complete,
        logical_memory: CoverageLevel::Complete,
        gradients: CoverageLevel::Complete,
        gradient_contract: Some(GradientContract::all_active(
            params.iter().map(|k| ("model".to_string(), k.to_string())),
        )),
        ..CaptureContract::default()
    }
}

pub fn start(id: &str, parent: Option<&str>, name: &str, start_ns: u64) -> TraceEvent {
    TraceEvent::SpanStart(SpanStartEvent {
        id: id.into(),
        parent_id: parent.map(Into::into),
        name: name.into(),
        start_ns,
        span_kind: SpanKind::Function,
        measured: false,
        step: None,
        module_path: None,
        instance_key: None,
        module_kind: None,
        forward_span_id: None,
        step_index: None,
    })
}

pub fn step(id: &str, parent: &str, name: &str, start_ns: u64, step: Pass) -> TraceEvent {
    match start(id, Some(parent), name, start_ns) {
        TraceEvent::SpanStart(mut s) => {
            s.step = Some(step);
            TraceEvent::SpanStart(s)
        }
        _ => unreachable!(),
    }
}

pub fn measured(id: &str, parent: Option<&str>, name: &str, start_ns: u64) -> TraceEvent {
    match start(id, parent, name, start_ns) {
        TraceEvent::SpanStart(mut s) => {
            s.measured = true;
            TraceEvent::SpanStart(s)
        }
        _ => unreachable!(),
    }
}

pub fn end(id: &str, duration_ns: u64) -> TraceEvent {
    TraceEvent::SpanEnd(SpanEndEvent {
        id: id.into(),
        duration_ns,
        inferred: false,
        inferred_reason: None,
    })
}

pub fn op(
    span: &str,
    name: &str,
    inputs: &[&str],
    output: Option<&str>,
    ts: u64,
    dur: u64,
) -> TraceEvent {
    TraceEvent::Op(OpEvent {
        span_id: span.into(),
        op_name: name.into(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        output: output.map(Into::into),
        shape: vec![4, 8],
        dtype: "f32".into(),
        device: "cpu".into(),
        duration_ns: dur,
        timestamp_ns: ts,
        output_dense_bytes: None,
        input_dense_bytes: 0,
    })
}

pub fn tensor(
    span: &str,
    id: &str,
    label: Option<&str>,
    category: MemoryCategory,
    requires_grad: bool,
) -> TraceEvent {
    TraceEvent::Tensor(TensorEvent {
        span_id: span.into(),
        tensor_id: id.into(),
        label: label.map(Into::into),
        shape: vec![4, 8],
        dtype: "f32".into(),
        device: "cpu".into(),
        requires_grad,
        dense_bytes: None,
        storage_bytes: Some(128),
        storage_id: None,
        category,
    })
}

pub fn alloc(
    ts: u64,
    storage: &str,
    bytes: u64,
    span: Option<&str>,
    category: MemoryCategory,
) -> TraceEvent {
    TraceEvent::Memory(MemoryEvent {
        timestamp_ns: ts,
        action: MemoryAction::Alloc,
        device: "cpu".into(),
        storage_id: Some(storage.into()),
        bytes: Some(bytes),
        logical_bytes: None,
        tensor_id: None,
        span_id: span.map(Into::into),
        op_name: None,
        shape: None,
        dtype: None,
        category,
        category_source: None,
        source: None,
        pre_existing: false,
        label: None,
        site: None,
        thread: None,
    })
}

pub fn pre_existing(ts: u64, storage: &str, bytes: u64, category: MemoryCategory) -> TraceEvent {
    match alloc(ts, storage, bytes, None, category) {
        TraceEvent::Memory(mut m) => {
            m.pre_existing = true;
            TraceEvent::Memory(m)
        }
        _ => unreachable!(),
    }
}

pub fn free(ts: u64, storage: &str, span: Option<&str>) -> TraceEvent {
    TraceEvent::Memory(MemoryEvent {
        timestamp_ns: ts,
        action: MemoryAction::Free,
        device: "cpu".into(),
        storage_id: Some(storage.into()),
        bytes: None,
        logical_bytes: None,
        tensor_id: None,
        span_id: span.map(Into::into),
        op_name: None,
        shape: None,
        dtype: None,
        category: MemoryCategory::Other,
        category_source: None,
        source: None,
        pre_existing: false,
        label: None,
        site: None,
        thread: None,
    })
}

pub fn grad(n: u64, key: &str, state: GradientState, norm: Option<f64>) -> TraceEvent {
    TraceEvent::Gradient(GradientEvent {
        event_id: format!("gradient-{n}"),
        root: "model".into(),
        key: key.into(),
        state,
        norm,
        parameter: true,
        tensor_id: None,
        bytes: None,
        non_finite_elements: None,
    })
}

pub fn terminal(ts: u64) -> TraceEvent {
    TraceEvent::Terminal(TerminalEvent {
        coverage_lost: Default::default(),
        outcome: TerminalOutcome::Complete,
        timestamp_ns: ts,
        reason: None,
        dropped_events: None,
    })
}

pub fn failed(ts: u64, reason: &str) -> TraceEvent {
    TraceEvent::Terminal(TerminalEvent {
        coverage_lost: Default::default(),
        outcome: TerminalOutcome::Failed,
        timestamp_ns: ts,
        reason: Some(reason.into()),
        dropped_events: None,
    })
}

/// A clean training step: root s1 (measured) with forward s2 (two ops), backward s3, optimizer
/// s4; parameters w1, w2 with present gradients; activations freed in backward.
pub fn clean_step() -> Vec<TraceEvent> {
    use MemoryCategory::{Activation, Gradient, Parameter};
    use Pass::{Backward, Forward};
    vec![
        meta(ExecutionPhase::Train, Some(contract(&["w1", "w2"]))),
        measured("s1", None, "train_step", 0),
        step("s2", "s1", "forward", 10, Forward),
        tensor("s2", "t1", Some("w1"), Parameter, true),
        tensor("s2", "t2", Some("w2"), Parameter, true),
        op("s2", "matmul", &["x", "t1"], Some("h"), 20, 30),
        alloc(20, "st-h", 128, Some("s2"), Activation),
        op("s2", "relu", &["h"], Some("y"), 50, 20),
        alloc(50, "st-y", 128, Some("s2"), Activation),
        end("s2", 80),
        step("s3", "s1", "backward", 100, Backward),
        alloc(110, "st-g1", 128, Some("s3"), Gradient),
        alloc(120, "st-g2", 128, Some("s3"), Gradient),
        free(150, "st-h", Some("s3")),
        free(150, "st-y", Some("s3")),
        end("s3", 60),
        step("s4", "s1", "optimizer", 170, Pass::Optimizer),
        alloc(175, "st-m", 256, Some("s4"), MemoryCategory::Optimizer),
        free(190, "st-g1", Some("s4")),
        free(190, "st-g2", Some("s4")),
        end("s4", 25),
        grad(1, "w1", GradientState::Present, Some(0.5)),
        grad(2, "w2", GradientState::Present, Some(0.25)),
        end("s1", 200),
        terminal(200),
    ]
}
