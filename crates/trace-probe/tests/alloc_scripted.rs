//! (a) A scripted CPU sequence without backward: tensors of chosen shapes, a matmul, views and
//! drops in a chosen order. The expected live bytes after each step and the peak are computed
//! from the shapes, to the byte, and compared with the trace.

mod alloc_common;

use candle_core::{DType, Device, Tensor};
use trace_probe::Tracking;
use trace_probe::{CoverageLevel, Pass, ProfileRun, TraceSession};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

const F32: u64 = 4;

#[test]
fn scripted_sequence_live_bytes_and_peak_to_the_byte() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("scripted.jsonl");
    let session = TraceSession::create(ProfileRun::inference("scripted", 1), &path)?;
    // A labelled tensor created before the capture: pre-existing at capture start.
    let w = Tensor::zeros((128, 32), DType::F32, &Device::Cpu)?;
    let mut points: Vec<(u64, u64)> = Vec::new(); // (time, expected live bytes)
    {
        let _step = session.step(1);
        session.tensor("w", &w);
        let w_bytes = 128 * 32 * F32;
        points.push((session.now_ns(), w_bytes));
        let _fwd = session.pass(Pass::Forward);
        let a = Tensor::ones((64, 128), DType::F32, &Device::Cpu)?;
        let a_bytes = 64 * 128 * F32;
        points.push((session.now_ns(), w_bytes + a_bytes));
        let c = a.matmul(&w)?; // [64, 32]
        let c_bytes = 64 * 32 * F32;
        points.push((session.now_ns(), w_bytes + a_bytes + c_bytes));
        let ct = c.t()?; // a view: no bytes
        let bias = Tensor::ones((64, 1), DType::F32, &Device::Cpu)?;
        let bias_b = bias.broadcast_as((64, 32))?; // a view of 256 bytes, not 8192
        let bias_bytes = 64 * F32;
        points.push((session.now_ns(), w_bytes + a_bytes + c_bytes + bias_bytes));
        drop(a);
        points.push((session.now_ns(), w_bytes + c_bytes + bias_bytes));
        let d = (&c + &bias_b)?; // [64, 32]
        let d_bytes = 64 * 32 * F32;
        points.push((session.now_ns(), w_bytes + c_bytes + bias_bytes + d_bytes));
        drop((c, ct));
        drop((bias, bias_b));
        points.push((session.now_ns(), w_bytes + d_bytes));
        let n = d.narrow(1, 0, 8)?.contiguous()?; // a strided view, copied: [64, 8]
        let n_bytes = 64 * 8 * F32;
        points.push((session.now_ns(), w_bytes + d_bytes + n_bytes));
        drop(d);
        points.push((session.now_ns(), w_bytes + n_bytes));
        drop(n);
        points.push((session.now_ns(), w_bytes));
    }
    session.finish()?;

    let doc = trace_schema::load_path(&path)?;
    let contract = doc.meta.capture_contract.clone().expect("contract");
    assert_eq!(
        contract.logical_memory,
        CoverageLevel::Complete,
        "{:?}",
        contract.reasons
    );
    for (i, &(t, expected)) in points.iter().enumerate() {
        assert_eq!(alloc_common::live_at(&doc, t), expected, "checkpoint {i}");
    }
    let expected_peak = points.iter().map(|p| p.1).max().unwrap();
    let profile = trace_memory::analyze_memory(&doc);
    let peak = profile.logical.expect("logical").peak.expect("peak");
    assert_eq!(peak.live_bytes, expected_peak);
    let sum: u64 = peak.live_allocations.iter().map(|l| l.bytes).sum();
    assert_eq!(sum, peak.live_bytes);
    // The forward temporaries are inferred activations; the labelled one is declared.
    for m in &doc.memory {
        if m.pre_existing {
            assert_eq!(m.bytes, Some(128 * 32 * F32));
        }
    }
    Ok(())
}
