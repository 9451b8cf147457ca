//! Several steps in one capture (issue 30 §3): `capture_steps(2..=5)` records four consecutive
//! steps of a real Candle loop in one trace, each step its own span, and the analysis gives
//! per-step figures and says whether memory grows.
//! - A loop keeping a tensor in a `Vec` across steps grows by exactly that tensor's bytes per
//!   step, and the `memory_growth` finding says so; a loop keeping its losses grows by a
//!   constant amount per step (each step's graph).
//! - The same loop keeping nothing is steady: per-step figures, no finding.
//! - Decoding with llama2_c's KV cache, one call per token: the cache grows by exactly one
//!   position's keys and values per call, and what each call leaves live is the cache itself.
//!
//! One test function: the session tracker and the capture window are process-wide.

mod common;

use std::collections::HashMap;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use candle_transformers::models::llama2_c::{Cache, Llama};
use trace_graph::{Analysis, FindingCode, Severity};
use trace_probe::Tracking;
use trace_probe::{nn, ProbedOptimizer, ProfileRun, TraceSession};
use trace_schema::Pass;

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// What the training loop keeps across steps.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Keep {
    Nothing,
    /// The first layer's activations, detached: one (32, 256) f32 storage per step.
    Activations,
    /// The loss: its whole autograd graph per step.
    Losses,
}

const HIDDEN_BYTES: u64 = 32 * 256 * 4;

/// Five AdamW updates of a 64-256-10 MLP on a (32, 64) batch, steps 2-5 captured.
fn train(path: &std::path::Path, keep: Keep) -> Res<(trace_schema::TraceDocument, Analysis)> {
    let varmap = VarMap::new();
    let session = TraceSession::create(
        ProfileRun::training("mlp::train", 2)
            .capture_steps(2..=5)
            .varmap(&varmap),
        path,
    )?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let l1 = nn::linear(64, 256, vb.pp("l1"))?;
    let l2 = nn::linear(256, 10, vb.pp("l2"))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let mut kept: Vec<Tensor> = Vec::new();
    for step in 1..=5u32 {
        let (x, y) = common::step_batch(step)?;
        let _step = session.step(step);
        let h = l1.forward(&x)?.relu()?;
        let logits = l2.forward(&h)?;
        let loss = loss::cross_entropy(&logits, &y)?;
        opt.backward_step(&loss)?;
        match keep {
            Keep::Nothing => {}
            Keep::Activations => kept.push(h.detach()),
            Keep::Losses => kept.push(loss.clone()),
        }
    }
    drop(kept);
    session.finish()?;
    let doc = trace_schema::load_path(path)?;
    let analysis = trace_graph::analyze(&doc);
    Ok((doc, analysis))
}

fn growth_finding(a: &Analysis) -> Option<&trace_graph::Finding> {
    a.findings
        .iter()
        .find(|f| f.code == FindingCode::MemoryGrowth)
}

/// Four step rows 2..=5, each closed with its passes and memory.
fn assert_four_steps(doc: &trace_schema::TraceDocument, a: &Analysis, training: bool) {
    assert_eq!(doc.meta.capture_step, Some(2));
    assert_eq!(doc.meta.last_capture_step, Some(5));
    let rows = &a.steps.rows;
    let indices: Vec<u64> = rows.iter().map(|r| r.step_index).collect();
    assert_eq!(indices, vec![2, 3, 4, 5]);
    // One measured region over the four, each step span directly under it.
    let measured: Vec<_> = doc.spans.iter().filter(|s| s.measured).collect();
    assert_eq!(measured.len(), 1);
    let root = measured[0];
    for r in rows {
        let span = doc
            .spans
            .iter()
            .find(|s| doc.str(s.id) == r.span_id)
            .expect("step span");
        assert_eq!(span.parent, Some(root.id), "{}", r.name);
        assert!(r.duration_ns.is_some(), "{} closed", r.name);
        assert!(r.pass_time_ns.contains_key(&Pass::Forward), "{}", r.name);
        if training {
            assert_eq!(r.name, format!("step {}", r.step_index));
            assert!(r.pass_time_ns.contains_key(&Pass::Backward));
            assert!(r.pass_time_ns.contains_key(&Pass::Optimizer));
        } else {
            assert_eq!(r.name, format!("call {}", r.step_index));
        }
        let m = r.memory.as_ref().expect("memory");
        let peak = m.peak_bytes.expect("bytes known");
        assert!(peak >= m.live_at_start_bytes.expect("bytes known"));
        assert!(peak >= m.live_at_end_bytes.expect("closed"));
        assert!(m.allocation_count > 0, "{m:?}");
    }
    let root_end = root.end_ns().expect("root closed");
    assert!(root.start_ns <= rows[0].memory.as_ref().unwrap().start_ns);
    assert!(rows[3].memory.as_ref().unwrap().end_ns.unwrap() <= root_end);
}

fn bytes_of(t: &Tensor) -> u64 {
    (t.elem_count() * t.dtype().size_in_bytes()) as u64
}

const PROMPT: usize = 4;

/// llama2_c with plain (detached) weights, the prompt in call 1, then one decoded token per
/// call; calls 2..=5 captured. Returns the trace, its analysis and the cache at the end.
fn decode(path: &std::path::Path) -> Res<(trace_schema::TraceDocument, Analysis, Cache)> {
    let cfg = common::llama2_c_config();
    let src = VarMap::new();
    let _ = Llama::load(
        VarBuilder::from_varmap(&src, DType::F32, &Device::Cpu),
        cfg.clone(),
    )?;
    let mut weights: HashMap<String, Tensor> = HashMap::new();
    for (k, v) in src.data().lock().expect("varmap").iter() {
        weights.insert(k.clone(), v.as_tensor().detach().copy()?);
    }
    drop(src);
    let named: Vec<(&str, &Tensor)> = weights.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let session = TraceSession::create(
        ProfileRun::inference("llama2_c::decode", 2)
            .capture_steps(2..=5)
            .parameters(&named),
        path,
    )?;
    let model = Llama::load(
        VarBuilder::from_tensors(weights.clone(), DType::F32, &Device::Cpu),
        cfg.clone(),
    )?;
    let empty = VarBuilder::from_tensors(HashMap::new(), DType::F32, &Device::Cpu);
    let mut cache = Cache::new(true, &cfg, empty)?;
    let mut tokens: Vec<u32> = (1..=PROMPT as u32).collect();
    let mut pos = 0;
    for call in 1..=5u32 {
        let _call = session.step(call);
        let ctx = if call == 1 {
            tokens.clone()
        } else {
            vec![*tokens.last().expect("a token")]
        };
        let input = Tensor::new(ctx.as_slice(), &Device::Cpu)?.unsqueeze(0)?;
        let logits = model.forward(&input, pos, &mut cache)?;
        pos += ctx.len();
        let next = logits
            .squeeze(0)?
            .get(ctx.len() - 1)?
            .argmax(candle_core::D::Minus1)?;
        tokens.push(next.to_scalar::<u32>()?);
    }
    session.finish()?;
    let doc = trace_schema::load_path(path)?;
    let analysis = trace_graph::analyze(&doc);
    Ok((doc, analysis, cache))
}

#[test]
fn several_steps_per_step_figures_and_growth() -> Res<()> {
    let dir = tempfile::tempdir()?;

    // 1. A tensor kept in a Vec across steps: exactly its bytes per step.
    let (doc, a) = train(&dir.path().join("activations.jsonl"), Keep::Activations)?;
    assert_four_steps(&doc, &a, true);
    let g = a.steps.growth.as_ref().expect("growth");
    assert_eq!(g.per_step_bytes, vec![HIDDEN_BYTES; 4], "{:?}", a.steps);
    assert!(g.constant);
    assert_eq!(g.bytes_per_step, HIDDEN_BYTES);
    assert_eq!(g.end_bytes - g.start_bytes, 4 * HIDDEN_BYTES);
    for r in &a.steps.rows {
        let m = r.memory.as_ref().unwrap();
        assert_eq!(m.retained_bytes, Some(HIDDEN_BYTES), "{}: {m:?}", r.name);
        assert_eq!(m.retained_count, Some(1), "{}: {m:?}", r.name);
        assert_eq!(m.retained[0].bytes, HIDDEN_BYTES);
    }
    let f = growth_finding(&a).expect("memory_growth");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.evidence.bytes, Some(HIDDEN_BYTES));
    assert_eq!(f.evidence.count, Some(4));
    assert!(
        f.summary.contains("+32.00 KiB (32,768 B) per step (exactly: each step ends that much above the one before; 4 steps)"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("1,000 more steps → +31.25 MiB"),
        "{}",
        f.summary
    );
    // Gradient facts once per parameter (the last step's), not once per step.
    let mut keys: Vec<&str> = doc
        .gradients
        .iter()
        .filter(|g| g.parameter)
        .map(|g| g.key.as_str())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["l1.bias", "l1.weight", "l2.bias", "l2.weight"]);

    // 2. The losses kept: each step's graph, the same bytes every step.
    let (doc, a) = train(&dir.path().join("losses.jsonl"), Keep::Losses)?;
    assert_four_steps(&doc, &a, true);
    let g = a.steps.growth.as_ref().expect("growth");
    assert!(g.constant, "{g:?}");
    // Each graph holds at least l1's output and its relu, (32, 256) f32 each, and the batch
    // it was computed from (allocated before the step's guard: x (32, 64) f32 and y (32) u32).
    // The first step is measured from its start, when its batch was already live.
    let batch = 32 * 64 * 4 + 32 * 4;
    assert!(g.bytes_per_step >= 2 * HIDDEN_BYTES, "{g:?}");
    assert_eq!(g.per_step_bytes[0] + batch, g.bytes_per_step, "{g:?}");
    for (r, grown) in a.steps.rows.iter().zip(&g.per_step_bytes) {
        let left = r.memory.as_ref().unwrap().retained_bytes.unwrap();
        // What the step allocated and kept: its graph without the batch.
        assert_eq!(left, g.per_step_bytes[0], "{}: {left} {grown}", r.name);
    }
    let losses_per_step = g.bytes_per_step;
    assert_eq!(
        growth_finding(&a).and_then(|f| f.evidence.bytes),
        Some(losses_per_step)
    );

    // 3. Steady: per-step figures, nothing left live, no finding.
    let (doc, a) = train(&dir.path().join("steady.jsonl"), Keep::Nothing)?;
    assert_four_steps(&doc, &a, true);
    assert_eq!(a.steps.growth, None, "{:?}", a.steps);
    assert!(growth_finding(&a).is_none());
    let ends: Vec<u64> = a
        .steps
        .rows
        .iter()
        .map(|r| r.memory.as_ref().unwrap().live_at_end_bytes.unwrap())
        .collect();
    assert!(ends.windows(2).all(|w| w[0] == w[1]), "{ends:?}");
    for r in &a.steps.rows {
        assert_eq!(
            r.memory.as_ref().unwrap().retained_bytes,
            Some(0),
            "{}",
            r.name
        );
    }

    // 4. Decoding with a KV cache, one token per call: one position's keys and values per
    // call, in every layer.
    let cfg = common::llama2_c_config();
    let (doc, a, cache) = decode(&dir.path().join("decode.jsonl"))?;
    assert_four_steps(&doc, &a, false);
    let head_dim = cfg.dim / cfg.n_heads;
    let per_call = (cfg.n_layers * 2 * cfg.n_kv_heads * head_dim * 4) as u64;
    assert_eq!(per_call, 256);
    let g = a.steps.growth.as_ref().expect("growth");
    assert_eq!(g.per_step_bytes, vec![per_call; 4], "{:?}", a.steps);
    let last = a.steps.rows[3].memory.as_ref().unwrap();
    let cache_bytes: u64 = cache
        .kvs
        .iter()
        .flatten()
        .map(|(k, v)| bytes_of(k) + bytes_of(v))
        .sum();
    // The prompt's positions (call 1) and one per captured call.
    assert_eq!(cache_bytes, (PROMPT as u64 + 4) * per_call);
    assert_eq!(last.retained_bytes, Some(cache_bytes), "{last:?}");
    assert_eq!(last.retained_count, Some(2 * cfg.n_layers as u64));
    let f = growth_finding(&a).expect("memory_growth");
    assert!(
        f.summary.contains(
            "+256 B per call (exactly: each call ends that much above the one before; 4 calls)"
        ),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("4,096 more calls → +1.00 MiB"),
        "{}",
        f.summary
    );
    Ok(())
}
