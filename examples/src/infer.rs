//! Inference as users run it: candle-transformers' `llama2_c::Llama` (a tiny config, seeded
//! random weights loaded as plain tensors, no download) generating tokens with its KV cache, one
//! generation captured by the probe ([`ProfileRun::inference`]): the prompt in one `prefill`
//! forward call, then one `decode` call per token ([`trace_probe::TraceSession::forward`]), the
//! weights declared as parameters on the started session
//! ([`trace_probe::TraceSession::declare_parameters`]), the cache created before the
//! call and kept after it (its storages are live at the end of the trace).
//!
//! The weights are detached tensors, as `candle_core::safetensors::load` gives them: with
//! `Var`s (a `VarMap` builder) every activation would keep its op graph, and the KV cache would
//! hold the graph of every earlier step.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, IndexOp, Tensor, D};
use candle_nn::{VarBuilder, VarMap};
use candle_transformers::models::llama2_c::{Cache, Config, Llama};
use trace_probe::ProfileRun;

/// What one captured generation did.
#[derive(Debug, Clone)]
pub struct InferReport {
    /// Path of the written trace.
    pub trace_path: PathBuf,
    /// Prompt tokens (the `prefill` call).
    pub prompt_tokens: usize,
    /// Tokens generated (one `decode` call each).
    pub generated_tokens: usize,
    /// Parameter elements.
    pub parameter_count: usize,
    /// Parameter tensors.
    pub parameter_tensors: usize,
    /// The generated token ids.
    pub tokens: Vec<u32>,
}

/// The tiny llama2_c configuration the demo runs (≈ 70 k parameters).
pub fn tiny_config() -> Config {
    Config {
        dim: 64,
        hidden_dim: 128,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        vocab_size: 256,
        seq_len: 64,
        norm_eps: 1e-5,
    }
}

/// Seeded weights for `cfg` as plain (detached) tensors, by `VarBuilder` name.
///
/// # Errors
/// Candle errors building the tensors.
pub fn seeded_weights(cfg: &Config, seed: u64) -> candle_core::Result<HashMap<String, Tensor>> {
    let varmap = VarMap::new();
    Llama::load(
        VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu),
        cfg.clone(),
    )?;
    crate::init::seed_varmap(&varmap, seed)?;
    let data = varmap.data().lock().expect("VarMap lock poisoned");
    data.iter()
        .map(|(k, v)| Ok((k.clone(), v.as_tensor().detach().copy()?)))
        .collect()
}

/// Generates `generate` tokens after a `prompt`-token prompt on the tiny model, twice (call 1
/// warms up, call 2 is captured into `out/trace.jsonl`).
///
/// # Errors
/// Candle or probe errors, boxed with their context.
pub fn generate(
    out: &Path,
    prompt: usize,
    generate: usize,
) -> Result<InferReport, Box<dyn std::error::Error + Send + Sync>> {
    let cfg = tiny_config();
    if prompt == 0 || prompt + generate > cfg.seq_len {
        return Err(format!(
            "prompt {prompt} + {generate} generated tokens must be in 1..={}",
            cfg.seq_len
        )
        .into());
    }
    std::fs::create_dir_all(out)?;
    let trace_path = out.join("trace.jsonl");
    // The profiler starts first, so the session tracker sees the weights being made; they are
    // declared on the session (weights given to `ProfileRun::parameters` would exist before
    // it, and logical memory would read `partial`).
    let profiler = ProfileRun::inference("llama2_c::generate", 2)
        .tag("prompt_tokens", prompt.to_string())
        .tag("generated_tokens", generate.to_string())
        .start(&trace_path)?;
    let weights = seeded_weights(&cfg, 42)?;
    let mut named: Vec<(&str, &Tensor)> = weights.iter().map(|(k, t)| (k.as_str(), t)).collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    profiler.declare_parameters(&named);
    let model = Llama::load(
        VarBuilder::from_tensors(weights.clone(), DType::F32, &Device::Cpu),
        cfg.clone(),
    )?;
    let mut tokens = Vec::new();
    let mut kept = None;
    for call in 1..=2u32 {
        // An empty builder: the cache computes its rotary tables (a VarMap builder would make
        // them zero variables).
        let empty = VarBuilder::from_tensors(HashMap::new(), DType::F32, &Device::Cpu);
        let mut cache = Cache::new(true, &cfg, empty)?;
        {
            let _call = profiler.step(call);
            tokens = (0..prompt as u32).map(|i| (i * 7 + 1) % 256).collect();
            let mut pos = 0;
            for _ in 0..generate {
                let ctx: Vec<u32> = if pos == 0 {
                    tokens.clone()
                } else {
                    vec![tokens[tokens.len() - 1]]
                };
                let input = Tensor::new(ctx.as_slice(), &Device::Cpu)?.unsqueeze(0)?;
                let logits =
                    profiler.forward(ctx.len(), || model.forward(&input, pos, &mut cache))?;
                pos += ctx.len();
                let next = logits.i((0, ctx.len() - 1))?.argmax(D::Minus1)?;
                tokens.push(next.to_scalar::<u32>()?);
            }
        }
        if call == 2 {
            kept = Some(cache); // the captured call's cache outlives it
        }
    }
    profiler.finish()?;
    drop(kept);
    Ok(InferReport {
        trace_path,
        prompt_tokens: prompt,
        generated_tokens: generate,
        parameter_count: weights.values().map(Tensor::elem_count).sum(),
        parameter_tensors: weights.len(),
        tokens,
    })
}
