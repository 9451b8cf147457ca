//! One captured step around a closure, through the probe's public door only: a session whose
//! step does nothing but the closure (no model, no optimizer, no sampling, no allocation sites,
//! no tracking before the step), its memory events read back from the trace in time order, with
//! the capture window's summary (`trace_probe::capture::last_summary`).
//!
//! The closure gets `register(tensor, label, category)`: a tensor fact (`session.tensor_as`), which
//! registers the tensor's storage with the capture like the probe's own registrations do.

use std::io::Write;
use std::sync::{Arc, Mutex};

use candle_core::Tensor;
use trace_probe::capture::{self, CaptureSummary};
use trace_probe::{ProfileRun, TraceSession};
use trace_schema::{MemoryCategory, MemoryEvent, TraceEvent};

/// The trace's bytes, shared with the session's writer thread.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` as the captured step of a fresh session; returns its result, the step's memory
/// events sorted by time, and the window's summary. Panics (a test helper) when the capture
/// cannot run: the tracking allocator must be the binary's global allocator.
pub fn window<R>(
    f: impl FnOnce(&mut dyn FnMut(&Tensor, &str, MemoryCategory)) -> R,
) -> (R, Vec<MemoryEvent>, CaptureSummary) {
    let available = capture::availability();
    assert!(available.installed, "the tracking allocator is installed");
    available
        .calibration
        .expect("calibration succeeds on this Candle");
    let out = Shared::default();
    let run = ProfileRun::training("window", 1)
        .track_pre_existing(false)
        .sample_hz(0)
        .alloc_site_threshold_bytes(0);
    let session = TraceSession::new(run, out.clone()).expect("session");
    let r = {
        let _step = session.step(1u64);
        f(&mut |t, label, c| session.tensor_as(label, t, c))
    };
    session.finish().expect("finish");
    let summary = capture::last_summary();
    let bytes = out.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut events: Vec<MemoryEvent> = String::from_utf8(bytes)
        .expect("utf-8 trace")
        .lines()
        .filter_map(|l| match serde_json::from_str::<TraceEvent>(l) {
            Ok(TraceEvent::Memory(m)) => Some(m),
            _ => None,
        })
        .collect();
    events.sort_by_key(|e| e.timestamp_ns);
    (r, events, summary)
}
