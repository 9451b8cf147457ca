//! Automatic storage capture on a tiny transformer block (rms norm, 4-head softmax attention,
//! gelu MLP, mse loss; B=4, T=32, D=64), AdamW: every storage allocated in the step is freed in
//! the trace or live at the end, the logical live bytes never exceed the heap bytes the
//! allocator counts at any sample, and the match rate of the drop signature is reported.

mod alloc_common;

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use trace_probe::capture;
use trace_probe::Tracking;
use trace_probe::{CoverageLevel, MemoryCategory, Pass, ProbedOptimizer, ProfileRun, TraceSession};

#[global_allocator]
static ALLOC: Tracking = Tracking::system_counting();

const B: usize = 4;
const T: usize = 32;
const DM: usize = 64;
const HEADS: usize = 4;

struct Block {
    norm1: Tensor,
    qkv: Linear,
    proj: Linear,
    norm2: Tensor,
    up: Linear,
    down: Linear,
}

fn rms_norm(x: &Tensor, w: &Tensor) -> candle_core::Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(ms + 1e-5)?.sqrt()?)?.broadcast_mul(w)
}

impl Block {
    fn new(vb: VarBuilder) -> candle_core::Result<Self> {
        Ok(Self {
            norm1: vb.get_with_hints(DM, "norm1", candle_nn::Init::Const(1.0))?,
            qkv: candle_nn::linear(DM, 3 * DM, vb.pp("qkv"))?,
            proj: candle_nn::linear(DM, DM, vb.pp("proj"))?,
            norm2: vb.get_with_hints(DM, "norm2", candle_nn::Init::Const(1.0))?,
            up: candle_nn::linear(DM, 4 * DM, vb.pp("up"))?,
            down: candle_nn::linear(4 * DM, DM, vb.pp("down"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let hd = DM / HEADS;
        let h = rms_norm(x, &self.norm1)?;
        let qkv = self.qkv.forward(&h)?.reshape((B, T, 3, HEADS, hd))?;
        let q = qkv
            .narrow(2, 0, 1)?
            .squeeze(2)?
            .transpose(1, 2)?
            .contiguous()?;
        let k = qkv
            .narrow(2, 1, 1)?
            .squeeze(2)?
            .transpose(1, 2)?
            .contiguous()?;
        let v = qkv
            .narrow(2, 2, 1)?
            .squeeze(2)?
            .transpose(1, 2)?
            .contiguous()?;
        let att = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?;
        let att = candle_nn::ops::softmax(&att, D::Minus1)?;
        let y = att.matmul(&v)?.transpose(1, 2)?.reshape((B, T, DM))?;
        let x = (x + self.proj.forward(&y)?)?;
        let h = rms_norm(&x, &self.norm2)?;
        let h = self.down.forward(&self.up.forward(&h)?.gelu()?)?;
        x + h
    }
}

fn data(step: u64) -> candle_core::Result<(Tensor, Tensor)> {
    let n = B * T * DM;
    let mut rng = StdRng::seed_from_u64(step);
    let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-0.5..0.5)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.gen_range(-0.5..0.5)).collect();
    Ok((
        Tensor::from_vec(x, (B, T, DM), &Device::Cpu)?,
        Tensor::from_vec(y, (B, T, DM), &Device::Cpu)?,
    ))
}

#[test]
fn transformer_block_storages_are_all_accounted() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tfm.jsonl");
    let varmap = VarMap::new();
    let session = TraceSession::create(ProfileRun::training("tfm", 2).varmap(&varmap), &path)?;
    let block = Block::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let mut t_start = 0;
    let mut t_end = 0;
    for step in 1..=2u64 {
        let (x, y) = data(step)?;
        let _step = session.step(step);
        session.tensor_as("batch.x", &x, MemoryCategory::Other);
        session.tensor_as("batch.y", &y, MemoryCategory::Other);
        t_start = session.now_ns();
        let out = {
            let _fwd = session.pass(Pass::Forward);
            block.forward(&x)?
        };
        let l = candle_nn::loss::mse(&out, &y)?;
        opt.backward_step(&l)?;
        drop((l, out));
        t_end = session.now_ns();
    }
    session.finish()?;
    let summary = capture::last_summary();
    let doc = trace_schema::load_path(&path)?;
    let contract = doc.meta.capture_contract.clone().expect("contract");
    assert_eq!(
        contract.logical_memory,
        CoverageLevel::Complete,
        "{:?}",
        contract.reasons
    );

    let logical = trace_memory::analyze_memory(&doc).logical.expect("logical");
    assert!(logical.unmatched_frees.is_empty());
    let live_end_in_window = logical
        .lifetimes
        .iter()
        .filter(|l| l.end_ns.is_none() && !l.pre_existing)
        .count();
    assert_eq!(
        live_end_in_window, 0,
        "storages allocated in the window and never freed"
    );
    assert_eq!(
        alloc_common::live_at(&doc, t_end),
        alloc_common::live_at(&doc, t_start),
        "after the step, the capture-start figure"
    );
    for s in &doc.device_memory {
        let used = s.used_bytes.expect("counting mode observes heap bytes");
        assert!(alloc_common::live_at(&doc, s.timestamp_ns) <= used);
    }
    // Unregistered storages take their bytes from the freed data buffer: for every registered
    // storage that could be checked, that size equals `len × element size`.
    assert!(summary.data_size_checked > 0);
    assert_eq!(summary.data_size_mismatches, 0);
    let peak = logical.peak.expect("peak");
    let (span, step) = alloc_common::span_containing(&doc, peak.timestamp_ns).expect("span");
    let j = summary.join;
    eprintln!(
        "tfm peak: {} bytes in span {span:?} (step {step:?}), by category {:?}",
        peak.live_bytes, peak.by_category
    );
    eprintln!(
        "tfm match rate: {} signature matches of {} unregistered block-sized frees; registered \
         frees {} ({} with signature); alloc calls {}; anonymous storages {}; registered in \
         window {}; unidentified live blocks {}",
        j.signature_frees,
        j.block_frees - j.registered_frees,
        j.registered_frees,
        j.registered_with_signature,
        summary.armed_alloc_calls,
        summary.anonymous_storages,
        summary.registered_in_window,
        summary.unidentified_live_blocks
    );
    assert!(summary.anonymous_storages > 0);
    Ok(())
}
