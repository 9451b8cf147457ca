//! A panic inside the captured step leaves a `failed` terminal carrying the panic message, and
//! the previous panic hook still runs (the probe's hook chains to it). One test per binary: the
//! panic hook is process-wide.

mod common;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};

use trace_probe::{Pass, ProfileRun, TerminalOutcome, TraceSession};

static USER_HOOK_CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn panic_in_captured_step_writes_failed_terminal() -> Result<(), Box<dyn std::error::Error>> {
    std::panic::set_hook(Box::new(|_| {
        USER_HOOK_CALLS.fetch_add(1, Ordering::SeqCst);
    }));
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let session = TraceSession::create(ProfileRun::training("mlp::train_step", 1), &path)?;
    let mlp = common::Mlp::seeded(1)?;
    let (x, _) = common::batch(2)?;
    let in_step = session.clone();
    let result = std::panic::catch_unwind(AssertUnwindSafe(move || {
        let _step = in_step.step(1);
        let _fwd = in_step.pass(Pass::Forward);
        let logits = in_step
            .op("mlp", &[&x], || mlp.forward(&x))
            .expect("forward");
        if logits.dims()[0] > 0 {
            panic!("loss diverged at step 1");
        }
    }));
    assert!(result.is_err());
    assert_eq!(
        USER_HOOK_CALLS.load(Ordering::SeqCst),
        1,
        "the chained hook ran"
    );

    let summary = session.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Failed);
    let doc = trace_schema::load_path(&path)?;
    let terminal = doc.terminal.as_ref().expect("terminal");
    assert_eq!(terminal.outcome, TerminalOutcome::Failed);
    let reason = terminal.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("loss diverged at step 1"), "{reason}");
    assert!(reason.contains("panic_terminal.rs"), "{reason}");
    // Recorded before the panic: the root and forward spans (left open) and the op.
    assert_eq!(doc.spans.len(), 2);
    assert!(doc.spans.iter().all(|s| s.duration_ns.is_none()));
    assert_eq!(doc.ops.len(), 1);
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );

    // After finish the previous hook is back: a later panic reaches it, not the probe.
    let _ = std::panic::catch_unwind(|| panic!("after finish"));
    assert_eq!(USER_HOOK_CALLS.load(Ordering::SeqCst), 2);
    let _ = std::panic::take_hook();
    Ok(())
}
