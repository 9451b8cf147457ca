//! Part 1 on a real training step: a 2-layer MLP (candle-nn Linear, relu, cross-entropy,
//! AdamW) on CPU with explicit forward / backward / optimizer spans.

mod common;

use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW};
use common::{batch, Mlp};
use trace_probe::{MemoryCategory, Pass, ProfileRun, SpanKind, TerminalOutcome, TraceSession};

/// One training step with explicit spans, ops, tensor facts and stats; `session.step` decides
/// whether anything is recorded.
fn train(session: &TraceSession, steps: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mlp = Mlp::seeded(7)?;
    let mut opt = AdamW::new(mlp.varmap.all_vars(), ParamsAdamW::default())?;
    for step in 1..=steps {
        let (x, y) = batch(100 + step)?;
        let _step = session.step(step);
        session.tensor_as("batch.x", &x, MemoryCategory::Other);
        let fwd = session.pass(Pass::Forward);
        let h = {
            let _m = session.span("fc1", SpanKind::Module);
            session.op("linear", &[&x], || {
                candle_core::Module::forward(&mlp.fc1, &x)
            })?
        };
        let a = session.op("relu", &[&h], || h.relu())?;
        session.tensor("hidden", &a);
        let logits = session.op("linear", &[&a], || {
            candle_core::Module::forward(&mlp.fc2, &a)
        })?;
        session.tensor_stats("logits", &logits)?;
        let l = session.op("cross_entropy", &[&logits, &y], || {
            loss::cross_entropy(&logits, &y)
        })?;
        drop(fwd);
        let grads = {
            let _b = session.pass(Pass::Backward);
            l.backward()?
        };
        let _o = session.pass(Pass::Optimizer);
        opt.step(&grads)?;
    }
    Ok(())
}

#[test]
fn mlp_step_writes_a_valid_trace() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let run = ProfileRun::training("mlp::train_step", 2).tag("batch", common::BATCH.to_string());
    let session = TraceSession::create(run, &path)?;
    train(&session, 3)?;
    let summary = session.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Complete);

    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    assert!(doc.truncation.is_none());
    assert_eq!(
        doc.terminal.as_ref().map(|t| t.outcome),
        Some(TerminalOutcome::Complete)
    );
    let meta = &doc.meta;
    assert_eq!(meta.capture_step, Some(2));
    assert_eq!(meta.warmup_steps, Some(1));
    assert_eq!(meta.device.as_deref(), Some("cpu"));
    assert_eq!(meta.candle_version.as_deref(), Some("0.11.1"));
    assert!(meta.probe_version.is_some());
    assert!(!meta.measured_region_device_synchronized);
    assert!(meta
        .host
        .as_ref()
        .is_some_and(|h| h.os.is_some() && h.cpu_count.is_some()));
    assert_eq!(meta.tags.get("batch").map(String::as_str), Some("16"));

    // One measured region, the root, closed; one span per step marker; only step 2 captured.
    let measured: Vec<_> = doc.spans.iter().filter(|s| s.measured).collect();
    assert_eq!(measured.len(), 1);
    assert!(measured[0].parent.is_none() && measured[0].duration_ns.is_some());
    assert_eq!(doc.spans.iter().filter(|s| s.parent.is_none()).count(), 1);
    for step in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
        assert_eq!(
            doc.spans.iter().filter(|s| s.pass == Some(step)).count(),
            1,
            "{step:?}"
        );
    }
    assert!(doc.spans.iter().all(|s| s.duration_ns.is_some()));
    let fc1 = doc
        .spans
        .iter()
        .find(|s| doc.str(s.name) == "fc1")
        .expect("fc1 span");
    let forward = doc
        .spans
        .iter()
        .find(|s| s.pass == Some(Pass::Forward))
        .unwrap();
    assert_eq!(fc1.parent, Some(forward.id));

    // Ops: names, shapes, bytes and the edge from each input.
    let names: Vec<&str> = doc.ops.iter().map(|o| doc.str(o.op_name)).collect();
    assert_eq!(names, ["linear", "relu", "linear", "cross_entropy"]);
    let logits_op = &doc.ops[2];
    assert_eq!(doc.shape(logits_op.shape), &[16, 8]);
    assert_eq!(logits_op.output_dense_bytes, Some(16 * 8 * 4));
    assert_eq!(logits_op.input_dense_bytes, 16 * 64 * 4);
    assert_eq!(doc.ops[0].span, fc1.id);
    assert_eq!(doc.edges.len(), 5);

    // Tensor facts with storage bytes from the storage, declared and inferred categories (the
    // step guard opened the forward pass: a tensor recorded there is an activation).
    assert_eq!(doc.tensors.len(), 2);
    let x = &doc.tensors[0];
    assert_eq!(x.storage_bytes, Some(16 * 32 * 4));
    assert_eq!(x.category, MemoryCategory::Other);
    assert_eq!(doc.tensors[1].category, MemoryCategory::Activation);

    // Tensor stats over the logits.
    assert_eq!(doc.tensor_stats.len(), 1);
    let stats = &doc.tensor_stats[0];
    assert_eq!(
        (stats.label.as_str(), stats.elements, stats.non_finite),
        ("logits", 128, 0)
    );
    assert!(stats.rms.unwrap() > 0.0 && stats.min.unwrap() <= stats.max.unwrap());

    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    Ok(())
}

#[test]
fn capture_step_never_reached_is_a_failed_trace_and_an_error(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let session = TraceSession::create(ProfileRun::training("mlp", 5), &path)?;
    train(&session, 2)?;
    assert!(matches!(
        session.finish(),
        Err(trace_probe::ProbeError::CaptureStepNotReached { step: 5 })
    ));
    let doc = trace_schema::load_path(&path)?;
    assert_eq!(
        doc.terminal.map(|t| t.outcome),
        Some(TerminalOutcome::Failed)
    );
    assert!(doc.spans.is_empty());
    Ok(())
}

#[test]
fn invalid_runs_are_refused() {
    let err = TraceSession::new(ProfileRun::training("mlp", 2).warmup(3), std::io::sink())
        .expect_err("warm-up above the step");
    assert!(err.to_string().contains("warmup_steps 3"), "{err}");
}

#[test]
fn session_is_send_and_sync() {
    fn check<T: Send + Sync + Clone>() {}
    check::<TraceSession>();
}

#[test]
fn finish_inside_the_captured_step_ends_the_trace_as_failed(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let session = TraceSession::create(ProfileRun::inference("mlp::forward", 1), &path)?;
    let step = session.step(1);
    let span = session.span("early", SpanKind::Function);
    let summary = session.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Failed);
    drop(span);
    drop(step);
    assert!(matches!(
        session.finish(),
        Err(trace_probe::ProbeError::AlreadyFinished)
    ));
    let doc = trace_schema::load_path(&path)?;
    let terminal = doc.terminal.expect("terminal");
    assert_eq!(terminal.outcome, TerminalOutcome::Failed);
    assert!(terminal
        .reason
        .unwrap_or_default()
        .contains("inside the captured step"));
    // The root, the forward pass the step guard opened, and `early`.
    assert_eq!(doc.spans.len(), 3);
    Ok(())
}

#[test]
fn spans_on_other_threads_attach_to_the_root() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let session = TraceSession::create(ProfileRun::inference("mlp::forward", 1), &path)?;
    {
        let _step = session.step(1);
        let _outer = session.span("main-thread", SpanKind::Function);
        std::thread::scope(|scope| {
            for i in 0..3 {
                let session = session.clone();
                scope.spawn(move || {
                    let _worker = session.span(&format!("worker-{i}"), SpanKind::Function);
                    let _inner = session.span("inner", SpanKind::Op);
                });
            }
        });
    }
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    let root = doc
        .spans
        .iter()
        .find(|s| s.parent.is_none())
        .expect("root")
        .id;
    let workers: Vec<_> = doc
        .spans
        .iter()
        .filter(|s| doc.str(s.name).starts_with("worker-"))
        .collect();
    assert_eq!(workers.len(), 3);
    assert!(workers.iter().all(|w| w.parent == Some(root)));
    for inner in doc.spans.iter().filter(|s| doc.str(s.name) == "inner") {
        assert!(workers.iter().any(|w| Some(w.id) == inner.parent));
    }
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    Ok(())
}
