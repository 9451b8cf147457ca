//! Inference with candle-transformers' `llama2_c::Llama` (tiny config, random weights, no
//! download) and its KV cache (issue 30 §1–§2): a 4-token prompt, then 7 tokens decoded one at
//! a time, call 2 captured, the cache created before the call's guard and kept after it.
//! - The storages allocated in the call and still live at its end (the cache's keys and
//!   values, its causal mask) are in the trace with their exact heap bytes, live at the end,
//!   and counted in the peak and in "live at the end".
//! - The weights are `parameter` storages labelled with their `VarMap` keys without any
//!   optimizer (`.varmap`), and plain tensors given to `.parameters` are too.
//!
//! One test function: the session tracker and the capture window are process-wide.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use candle_transformers::models::llama2_c::{Cache, Config, Llama};
use trace_probe::capture;
use trace_probe::Tracking;
use trace_probe::{ProfileRun, TraceSession};
use trace_schema::{MemoryAction, MemoryCategory, TraceDocument};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const PROMPT: usize = 4;
const DECODED: usize = 7;

/// A cache whose rotary tables are computed (an empty builder: a `VarMap` builder would turn
/// the missing `freq_cis_*` tables into zero variables).
fn new_cache(cfg: &Config) -> candle_core::Result<Cache> {
    let empty = VarBuilder::from_tensors(HashMap::new(), DType::F32, &Device::Cpu);
    Cache::new(true, cfg, empty)
}

/// One generation: the prompt in one forward call, then `DECODED` tokens one at a time.
fn generate(model: &Llama, cache: &mut Cache) -> candle_core::Result<Vec<u32>> {
    let mut tokens: Vec<u32> = (1..=PROMPT as u32).collect();
    let mut pos = 0;
    for i in 0..=DECODED {
        let ctx = if i == 0 {
            &tokens[..]
        } else {
            &tokens[tokens.len() - 1..]
        };
        let input = Tensor::new(ctx, &Device::Cpu)?.unsqueeze(0)?;
        let logits = model.forward(&input, pos, cache)?;
        pos += ctx.len();
        if i < DECODED {
            // Logits of every new position, (1, tokens, vocab): the last one's argmax.
            let next = logits
                .squeeze(0)?
                .get(ctx.len() - 1)?
                .argmax(candle_core::D::Minus1)?;
            tokens.push(next.to_scalar::<u32>()?);
        }
    }
    Ok(tokens)
}

fn bytes_of(t: &Tensor) -> u64 {
    (t.elem_count() * t.dtype().size_in_bytes()) as u64
}

/// Storages allocated in the captured call (not `pre_existing`) with no `free`: their bytes.
fn live_at_end_in_window(doc: &TraceDocument) -> Vec<u64> {
    let freed: HashSet<_> = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Free)
        .filter_map(|m| m.storage)
        .collect();
    let mut v: Vec<u64> = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && !m.pre_existing)
        .filter(|m| m.storage.is_some_and(|s| !freed.contains(&s)))
        .map(|m| m.bytes.expect("bytes"))
        .collect();
    v.sort_unstable();
    v
}

/// `pre_existing` parameter allocs: label → bytes.
fn parameters(doc: &TraceDocument) -> BTreeMap<String, u64> {
    doc.memory
        .iter()
        .filter(|m| {
            m.action == MemoryAction::Alloc
                && m.pre_existing
                && m.category == MemoryCategory::Parameter
        })
        .map(|m| {
            (
                m.label.map(|l| doc.str(l).to_string()).unwrap_or_default(),
                m.bytes.expect("bytes"),
            )
        })
        .collect()
}

#[test]
fn kv_cache_outliving_the_call_and_weights_without_optimizer() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let cfg = common::llama2_c_config();

    // 1. `.varmap`: llama2_c over a VarMap, no optimizer; the cache of call 2 outlives it.
    let path = dir.path().join("llama2_c.jsonl");
    let varmap = VarMap::new();
    let session = TraceSession::create(
        ProfileRun::inference("llama2_c::generate", 2).varmap(&varmap),
        &path,
    )?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = Llama::load(vb, cfg.clone())?;
    let mut kept = None;
    for call in 1..=2u32 {
        let mut cache = new_cache(&cfg)?;
        {
            let _call = session.step(call);
            let tokens = generate(&model, &mut cache)?;
            assert_eq!(tokens.len(), PROMPT + DECODED);
        }
        if call == 2 {
            kept = Some(cache);
        }
    }
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    let cache = kept.expect("the captured call's cache");

    // What the cache holds now, from its tensors' shapes and dtypes.
    let mut expected: Vec<u64> = Vec::new();
    for (k, v) in cache.kvs.iter().flatten() {
        assert_eq!(k.dims()[1], PROMPT + DECODED, "keys of every position");
        expected.push(bytes_of(k));
        expected.push(bytes_of(v));
    }
    assert_eq!(expected.len(), 2 * cfg.n_layers);
    // The prefill's causal mask (u8, prompt × prompt), cached in the cache's mask map.
    let mask = candle_transformers::utils::build_causal_mask(PROMPT, 0, &Device::Cpu)?;
    expected.push(bytes_of(&mask));
    expected.sort_unstable();
    let kv_bytes: u64 = expected.iter().sum::<u64>() - bytes_of(&mask);
    assert_eq!(
        kv_bytes,
        (2 * cfg.n_layers * (PROMPT + DECODED) * cfg.n_kv_heads * (cfg.dim / cfg.n_heads) * 4)
            as u64
    );
    // The weights are variables, so every tensor computed from them keeps its op graph: the
    // cache's keys and values hold the graph that made them (the earlier caches they were
    // concatenated from, the projections...). What is live is a superset of the cache.
    let live = live_at_end_in_window(&doc);
    let mut rest = live.clone();
    for b in &expected {
        let i = rest
            .iter()
            .position(|x| x == b)
            .unwrap_or_else(|| panic!("{b} B of the cache missing from {live:?}"));
        rest.swap_remove(i);
    }
    assert!(
        !rest.is_empty(),
        "the variables' op graph is held by the cache"
    );
    let summary = capture::last_summary();
    assert_eq!(
        summary.live_at_end_storages,
        live.len() as u64,
        "{summary:?}"
    );
    assert_eq!(summary.live_at_end_bytes, live.iter().sum::<u64>());
    assert_eq!(summary.unidentified_live_blocks, 0, "{summary:?}");
    // Their dtype was read from the live storage.
    let freed: HashSet<_> = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Free)
        .filter_map(|m| m.storage)
        .collect();
    let dtypes: Vec<String> = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && !m.pre_existing)
        .filter(|m| m.storage.is_some_and(|s| !freed.contains(&s)))
        .map(|m| m.dtype.map(|d| doc.str(d).to_string()).unwrap_or_default())
        .collect();
    assert_eq!(dtypes.len(), live.len());
    assert!(
        dtypes.iter().all(|d| d == "f32" || d == "u8" || d == "u32"),
        "{dtypes:?}"
    );
    assert_eq!(
        dtypes.iter().filter(|d| *d == "u8").count(),
        1,
        "the mask: {dtypes:?}"
    );

    // llama2_c's layers open no tracing span: the terminal says that no module is named.
    let lost = &doc.terminal.as_ref().expect("terminal").coverage_lost;
    let why = lost
        .iter()
        .find(|(k, _)| k.as_str() == "module_spans")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(why.starts_with("no module spans"), "{lost:?}");
    assert!(
        !lost.iter().any(|(k, _)| k.as_str() == "backward_spans"),
        "{lost:?}"
    );

    // The weights: parameters labelled with their VarMap keys, exact bytes, no optimizer.
    let want: BTreeMap<String, u64> = varmap
        .data()
        .lock()
        .expect("varmap")
        .iter()
        .map(|(k, v)| (k.clone(), bytes_of(v.as_tensor())))
        .collect();
    assert!(want.len() > 10, "{want:?}");
    assert_eq!(parameters(&doc), want);
    let weight_bytes: u64 = want.values().sum();

    // In every peak and in "live at the end".
    let profile = trace_memory::analyze_memory(&doc);
    let logical = profile.logical.expect("logical memory");
    let end = logical.live_at_end.clone();
    assert!(
        end.bytes >= weight_bytes + live.iter().sum::<u64>(),
        "live at the end {} B: weights {weight_bytes} B + {live:?}",
        end.bytes,
    );
    let peak = logical.peak.as_ref().expect("peak");
    assert!(
        peak.live_bytes >= end.bytes,
        "{} < {}",
        peak.live_bytes,
        end.bytes
    );
    assert!(
        peak.live_bytes >= weight_bytes + kv_bytes,
        "the peak includes the weights and the cache"
    );

    // 2. `.parameters`: plain tensors (as loaded from safetensors), no VarMap, no optimizer.
    let path = dir.path().join("plain.jsonl");
    let mut weights: HashMap<String, Tensor> = HashMap::new();
    let src = VarMap::new();
    let _ = Llama::load(
        VarBuilder::from_varmap(&src, DType::F32, &Device::Cpu),
        cfg.clone(),
    )?;
    for (k, v) in src.data().lock().expect("varmap").iter() {
        // Detached copies: plain tensors, not variables.
        weights.insert(k.clone(), v.as_tensor().detach().copy()?);
    }
    drop(src);
    let named: Vec<(&str, &Tensor)> = weights.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let session = TraceSession::create(
        ProfileRun::inference("llama2_c::generate", 1).parameters(&named),
        &path,
    )?;
    let model = Llama::load(
        VarBuilder::from_tensors(weights.clone(), DType::F32, &Device::Cpu),
        cfg.clone(),
    )?;
    let mut cache = new_cache(&cfg)?;
    {
        let _call = session.step(1);
        generate(&model, &mut cache)?;
    }
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    // Plain weights: no op graph, the cache holds only itself (and its mask), exact bytes.
    let mut expected: Vec<u64> = cache
        .kvs
        .iter()
        .flatten()
        .flat_map(|(k, v)| [bytes_of(k), bytes_of(v)])
        .collect();
    expected.push(bytes_of(&mask));
    expected.sort_unstable();
    assert_eq!(
        live_at_end_in_window(&doc),
        expected,
        "the KV cache and the mask allocated in the call and live at its end, exact bytes"
    );
    let summary = capture::last_summary();
    assert_eq!(
        summary.live_at_end_storages,
        expected.len() as u64,
        "{summary:?}"
    );
    assert_eq!(summary.live_at_end_bytes, expected.iter().sum::<u64>());
    let logical = trace_memory::analyze_memory(&doc)
        .logical
        .expect("logical memory");
    let weight_bytes: u64 = weights.values().map(bytes_of).sum();
    assert!(logical.live_at_end.bytes >= weight_bytes + expected.iter().sum::<u64>());
    assert!(logical.peak.as_ref().expect("peak").live_bytes >= logical.live_at_end.bytes);

    // 3. `backward_spans(true)` on a model without probed modules: 0 markers, and it says so.
    let path = dir.path().join("backward_spans.jsonl");
    let session = TraceSession::create(
        ProfileRun::inference("llama2_c::generate", 1)
            .parameters(&named)
            .backward_spans(true),
        &path,
    )?;
    {
        let mut cache = new_cache(&cfg)?;
        let _call = session.step(1);
        generate(&model, &mut cache)?;
    }
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    let lost = &doc.terminal.as_ref().expect("terminal").coverage_lost;
    let why = lost
        .iter()
        .find(|(k, _)| k.as_str() == "backward_spans")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(
        why.starts_with("backward_spans(true) placed 0 markers"),
        "{lost:?}"
    );
    let want: BTreeMap<String, u64> = weights
        .iter()
        .map(|(k, t)| (k.clone(), bytes_of(t)))
        .collect();
    assert_eq!(parameters(&doc), want);
    Ok(())
}
