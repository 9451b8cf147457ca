//! A ring capped low: the session's trace reports the dropped count (a `dropped_events` event
//! and the terminal's count), so analyzers treat its memory figures as lower bounds.

use candle_core::{DType, Device, Tensor};
use trace_alloc as alloc;
use trace_probe::Tracking;
use trace_probe::{Pass, ProfileRun, TraceSession};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

#[test]
fn a_capped_ring_reports_drops_in_the_trace() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("ring.jsonl");
    let session = TraceSession::create(ProfileRun::inference("ring", 1), &path)?;
    alloc::set_ring_capacity(16);
    {
        let _step = session.step(1);
        let _fwd = session.pass(Pass::Forward);
        for _ in 0..200 {
            drop(Tensor::zeros(256, DType::F32, &Device::Cpu)?);
        }
    }
    session.finish()?;
    alloc::set_ring_capacity(alloc::RING_CAPACITY);
    let doc = trace_schema::load_path(&path)?;
    let dropped = doc.dropped_events.expect("dropped events reported");
    assert!(dropped > 0);
    let terminal = doc.terminal.expect("terminal");
    assert_eq!(terminal.dropped_events, Some(dropped));
    Ok(())
}
