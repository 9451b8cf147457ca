//! Per-module backward spans on real Candle training steps (`ProfileRun::backward_spans`):
//! the probed modules' markers open a `module` span per module inside the `backward` pass, in
//! Candle's processing order, linked to the forward span; the markers' copies stay out of the
//! trace's logical memory; the step's figures other than the backward's own are unchanged.

mod common;
#[path = "support/serial.rs"]
mod serial;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use serial::serial;
use trace_probe::nn::{self, Traced};
use trace_probe::Tracking;
use trace_probe::{Pass, ProbedOptimizer, ProfileRun, SpanKind, TerminalOutcome, TraceSummary};
use trace_schema::{MemoryAction, SpanRecord, TraceDocument};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

/// fc1 → relu → fc2 → relu → fc3, probed (module spans named `fc1`, `fc2`, `fc3`).
struct Mlp {
    fc1: Traced<candle_nn::Linear>,
    fc2: Traced<candle_nn::Linear>,
    fc3: Traced<candle_nn::Linear>,
}

impl Mlp {
    fn new(varmap: &VarMap) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        Ok(Self {
            fc1: nn::linear(common::IN, common::HIDDEN, vb.pp("fc1"))?,
            fc2: nn::linear(common::HIDDEN, common::HIDDEN, vb.pp("fc2"))?,
            fc3: nn::linear(common::HIDDEN, common::CLASSES, vb.pp("fc3"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.fc1.forward(x)?.relu()?;
        let h = self.fc2.forward(&h)?.relu()?;
        self.fc3.forward(&h)
    }
}

/// A block adding a learned term to its input: `proj(pos) + h`. `proj`'s input is a parameter,
/// not the block's input, so Candle reaches it only after the block's input gradient is done.
struct Offset {
    proj: Traced<candle_nn::Linear>,
    pos: Tensor,
}

impl Module for Offset {
    fn forward(&self, h: &Tensor) -> candle_core::Result<Tensor> {
        self.proj.forward(&self.pos)?.broadcast_add(h)
    }
}

/// fc1 → relu → offset (a user module wrapped in [`Traced`]) → fc3.
struct WithOffset {
    fc1: Traced<candle_nn::Linear>,
    offset: Traced<Offset>,
    fc3: Traced<candle_nn::Linear>,
}

impl WithOffset {
    fn new(varmap: &VarMap) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        let ob = vb.pp("offset");
        let offset = Offset {
            proj: nn::linear(common::HIDDEN, common::HIDDEN, ob.pp("proj"))?,
            pos: ob.get_with_hints((1, common::HIDDEN), "pos", candle_nn::Init::Const(0.0))?,
        };
        Ok(Self {
            fc1: nn::linear(common::IN, common::HIDDEN, vb.pp("fc1"))?,
            offset: Traced::new(offset, tracing::trace_span!("offset", module = "offset")),
            fc3: nn::linear(common::HIDDEN, common::CLASSES, vb.pp("fc3"))?,
        })
    }
}

impl Module for WithOffset {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.fc1.forward(x)?.relu()?;
        let h = self.offset.forward(&h)?;
        self.fc3.forward(&h)
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        Mlp::forward(self, x)
    }
}

fn profile(backward_spans: bool) -> (TraceDocument, TraceSummary) {
    profile_model(backward_spans, |varmap| {
        Ok(Box::new(Mlp::new(varmap)?) as Box<dyn Module>)
    })
}

fn profile_model(
    backward_spans: bool,
    build: impl FnOnce(&VarMap) -> candle_core::Result<Box<dyn Module>>,
) -> (TraceDocument, TraceSummary) {
    let _one_at_a_time = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let profiler = ProfileRun::training("mlp::train_step", 2)
        .varmap(&varmap)
        .deterministic(true)
        .backward_spans(backward_spans)
        .start(&path)
        .expect("profiler");
    let mlp = build(&varmap).expect("model");
    common::reseed(&varmap, 5).expect("seed");
    let mut opt =
        ProbedOptimizer::<AdamW>::new(varmap.all_vars(), ParamsAdamW::default()).expect("opt");
    for step in 1..=3u64 {
        let (x, y) = common::batch(step).expect("batch");
        let _step = profiler.step(step);
        let logits = mlp.forward(&x).expect("forward");
        let l = loss::cross_entropy(&logits, &y).expect("loss");
        opt.backward_step(&l).expect("step");
    }
    let summary = profiler.finish().expect("finish");
    assert_eq!(summary.outcome, TerminalOutcome::Complete);
    (trace_schema::load_path(&path).expect("load"), summary)
}

fn pass_span(doc: &TraceDocument, pass: Pass) -> &SpanRecord {
    doc.spans
        .iter()
        .find(|s| s.kind == SpanKind::Function && s.pass == Some(pass))
        .expect("pass span")
}

/// Bytes allocated inside span `id` (by the memory events' span attribution).
fn allocated_in(doc: &TraceDocument, id: trace_schema::Sym) -> u64 {
    doc.memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && m.span == Some(id))
        .map(|m| m.bytes.unwrap_or(0))
        .sum()
}

#[test]
fn a_sequential_mlp_gets_one_exact_backward_span_per_layer_in_reverse_order() {
    let (doc, summary) = profile(true);
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let backward = pass_span(&doc, Pass::Backward);
    let forward = pass_span(&doc, Pass::Forward);
    let in_backward: Vec<&SpanRecord> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module && s.parent == Some(backward.id))
        .collect();
    let names: Vec<&str> = in_backward.iter().map(|s| doc.str(s.name)).collect();
    assert_eq!(names, ["fc3", "fc2", "fc1"], "Candle's processing order");
    for span in &in_backward {
        let name = doc.str(span.name);
        assert!(!span.inferred, "{name}: a chain does not interleave");
        assert_eq!(span.module_kind.map(|k| doc.str(k)), Some("linear"));
        assert_eq!(span.module_path.map(|p| doc.str(p)), Some(name));
        // Linked to the forward span of the same module.
        let fwd = doc.str(span.forward_span.expect("forward span link"));
        let fwd = doc
            .spans
            .iter()
            .find(|s| doc.str(s.id) == fwd)
            .expect("linked span exists");
        assert_eq!(doc.str(fwd.name), name);
        assert_eq!(fwd.parent, Some(forward.id));
        assert!(span.duration_ns.is_some(), "{name} closed");
        // Each layer's backward allocates (its weight, bias and input gradients).
        assert!(allocated_in(&doc, span.id) > 0, "{name} allocates");
    }
    // Markers: fc1's input (the batch) has no gradient and is not marked; the rest are.
    let (h, c) = (common::HIDDEN as u64, common::CLASSES as u64);
    let b = common::BATCH as u64;
    assert_eq!(summary.backward_markers, 5);
    assert_eq!(
        summary.backward_marker_copy_bytes,
        4 * b * (h + h + h + h + c),
        "fc1 out, fc2 in/out, fc3 in/out"
    );
}

#[test]
fn the_markers_copies_are_not_in_the_trace_and_forward_memory_is_unchanged() {
    let (on, _) = profile(true);
    let (off, summary_off) = profile(false);
    assert_eq!(summary_off.backward_markers, 0);
    assert_eq!(summary_off.backward_marker_copy_bytes, 0);
    // Forward allocations are the user's only: the same count and bytes with markers on.
    let forward_allocs = |doc: &TraceDocument| {
        let fwd = pass_span(doc, Pass::Forward).id;
        let in_fwd: Vec<trace_schema::Sym> = doc
            .spans
            .iter()
            .filter(|s| s.id == fwd || s.parent == Some(fwd))
            .map(|s| s.id)
            .collect();
        let allocs: Vec<u64> = doc
            .memory
            .iter()
            .filter(|m| {
                m.action == MemoryAction::Alloc && m.span.is_some_and(|s| in_fwd.contains(&s))
            })
            .map(|m| m.bytes.unwrap_or(0))
            .collect();
        (allocs.len(), allocs.iter().sum::<u64>())
    };
    assert_eq!(forward_allocs(&on), forward_allocs(&off));
    assert!(forward_allocs(&on).0 > 0);
    // Off: no module span in the backward pass.
    let backward = pass_span(&off, Pass::Backward).id;
    assert!(!off
        .spans
        .iter()
        .any(|s| s.kind == SpanKind::Module && s.parent == Some(backward)));
}

#[test]
fn a_submodule_reached_after_its_block_is_inferred_and_nothing_else() {
    let (doc, _) = profile_model(true, |varmap| {
        Ok(Box::new(WithOffset::new(varmap)?) as Box<dyn Module>)
    });
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let backward = pass_span(&doc, Pass::Backward);
    let end = backward.end_ns().expect("backward closed");
    let in_backward: Vec<&SpanRecord> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module && s.forward_span.is_some())
        .collect();
    assert!(in_backward
        .iter()
        .all(|s| s.start_ns >= backward.start_ns && s.end_ns().is_some_and(|e| e <= end)));
    let names: Vec<&str> = in_backward.iter().map(|s| doc.str(s.name)).collect();
    // Candle's order: fc3, the block (its input gradient is done after the add), fc1 (whose
    // output feeds the block's input), then the block's projection of `pos`.
    assert_eq!(names, ["fc3", "offset", "fc1", "offset.proj"]);
    let inferred: Vec<(&str, &str)> = in_backward
        .iter()
        .filter(|s| s.inferred)
        .map(|s| {
            (
                doc.str(s.name),
                s.inferred_reason.map(|r| doc.str(r)).unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(inferred.len(), 2, "{inferred:?}");
    assert_eq!(inferred[0].0, "offset");
    assert!(
        inferred[0].1.contains("submodules began"),
        "{}",
        inferred[0].1
    );
    assert_eq!(inferred[1].0, "offset.proj");
    assert!(
        inferred[1].1.contains("enclosing module"),
        "{}",
        inferred[1].1
    );
    // The projection's span is not under the block's (it had closed): under `backward`.
    let proj = in_backward[3];
    assert_eq!(proj.parent, Some(backward.id));
    assert!(
        allocated_in(&doc, proj.id) > 0,
        "its gradients are attributed to it"
    );
}
