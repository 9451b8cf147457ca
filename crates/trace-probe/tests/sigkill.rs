//! SIGKILL: a child process (this test binary re-executed) records a forward span, makes sure
//! its end is flushed, tells the parent on stdout and waits; the parent kills it with SIGKILL.
//! The trace must load as truncated and hold everything flushed before the signal.

#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use trace_probe::{Pass, ProfileRun, TraceSession};

const CHILD_ENV: &str = "TRACE_PROBE_SIGKILL_CHILD";
const READY: &str = "TRACE-PROBE-FLUSHED";

/// The child's work; runs only when re-executed by the parent (ignored otherwise).
#[test]
#[ignore = "child process of sigkill_leaves_a_loadable_truncated_trace"]
fn sigkill_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let session =
        TraceSession::create(ProfileRun::training("mlp::train_step", 1), &path).expect("session");
    let mlp = common::Mlp::seeded(3).expect("mlp");
    let (x, _) = common::batch(4).expect("batch");
    let _step = session.step(1);
    {
        let _fwd = session.pass(Pass::Forward);
        let logits = session
            .op("mlp", &[&x], || mlp.forward(&x))
            .expect("forward");
        session.tensor("logits", &logits);
    }
    // Opening backward closes the forward pass the step guard opened; its end is flushed
    // within the writer's interval, and `flush` waits for it.
    let _backward = session.pass(Pass::Backward);
    session.flush().expect("flush");
    let mut out = std::io::stdout();
    writeln!(out, "\n{READY}").expect("stdout");
    out.flush().expect("stdout");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[test]
fn sigkill_leaves_a_loadable_truncated_trace() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "sigkill_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    // libtest prints `test sigkill_child ... ` without a newline first: look for the marker
    // anywhere in a line. Read on a thread so a child that never reports cannot hang the test.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains(READY) {
                let _ = tx.send(());
                break;
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(120)).is_ok();
    child.kill()?; // SIGKILL on Unix
    let status = child.wait()?;
    assert!(
        ready,
        "the child never reported a flushed span end ({status})"
    );
    assert!(!status.success());

    let doc = trace_schema::load_path(&path)?;
    let truncation = doc
        .truncation
        .as_ref()
        .expect("a killed trace is truncated");
    assert!(truncation.terminal_missing);
    assert!(doc.terminal.is_none());
    let forward = doc
        .spans
        .iter()
        .find(|s| s.pass == Some(Pass::Forward))
        .expect("forward span flushed before the kill");
    assert!(forward.duration_ns.is_some(), "its end was flushed");
    assert_eq!(doc.ops.len(), 1);
    assert_eq!(doc.tensors.len(), 1);
    assert_eq!(doc.meta.capture_step, Some(1));
    Ok(())
}
