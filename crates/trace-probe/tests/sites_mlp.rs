//! Allocation sites on real Candle steps (the tracking allocator installed), with hand-counted
//! sites: an MLP training step under AdamW (every update temporary named by its op), a conv
//! step, a script of views and casts, the backward arm of a matmul, a model without module
//! spans (candle-transformers' `llama2_c`: the model type in the site's frames); every storage
//! of at least the threshold allocated in the step has a site; a full stack pool counts its
//! losses and the step completes.

// Sites need the DWARF unwinder of the sampler's targets (cfg `stack_sampler`, set by build.rs).
#![cfg(stack_sampler)]

mod common;
#[path = "support/serial.rs"]
mod serial;
#[path = "support/three_steps.rs"]
mod three_steps;

use std::collections::{BTreeMap, HashMap};

use candle_core::{DType, Device, Module, Tensor, Var};
use candle_nn::{loss, Linear, Optimizer, VarBuilder, VarMap};
use common::sites::Sites;
use serial::serial;
use three_steps::{three_steps, Loss};
use trace_ops::OpKind;
use trace_probe::{Pass, ProbedOptimizer, ProfileRun, Profiler, TerminalOutcome, Tracking};
use trace_schema::TraceEvent;

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const IN: usize = 64;
const HIDDEN: usize = 128;
const CLASSES: usize = 16;
const BATCH: usize = 32;

struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn new(varmap: &VarMap) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        Ok(Self {
            fc1: candle_nn::linear(IN, HIDDEN, vb.pp("fc1"))?,
            fc2: candle_nn::linear(HIDDEN, CLASSES, vb.pp("fc2"))?,
        })
    }
}

impl Loss for Mlp {
    fn loss(&self, x: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.fc1.forward(x)?.relu()?;
        loss::cross_entropy(&self.fc2.forward(&h)?, y)
    }
}

/// The trace of the run, with each span's pass (inherited from its ancestors).
struct Traced {
    sites: Sites,
    pass_of_span: HashMap<String, Option<Pass>>,
}

impl Traced {
    fn pass(&self, span: Option<&str>) -> Option<Pass> {
        span.and_then(|s| self.pass_of_span.get(s).copied().flatten())
    }

    /// (op, bytes) of every window alloc of at least `min` bytes in `pass`.
    fn ops_in(&self, pass: Option<Pass>, min: u64) -> Vec<(String, u64)> {
        self.ops_where(min, |m| self.pass(m.span_id.as_deref()) == pass)
    }

    /// (op, bytes) of every window alloc of at least `min` bytes, any span.
    fn ops_all(&self, min: u64) -> Vec<(String, u64)> {
        self.ops_where(min, |_| true)
    }

    fn ops_where(
        &self,
        min: u64,
        keep: impl Fn(&trace_schema::MemoryEvent) -> bool,
    ) -> Vec<(String, u64)> {
        self.sites
            .window_allocs()
            .filter(|m| m.bytes.unwrap_or(0) >= min && keep(m))
            .map(|m| {
                let op = m
                    .site
                    .map_or("(no site)".to_string(), |s| self.sites.class(s).op);
                (op, m.bytes.unwrap_or(0))
            })
            .collect()
    }
}

fn finish(profiler: Profiler, path: &std::path::Path) -> Res<Traced> {
    let summary = profiler.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Complete);
    let doc = trace_schema::load_path(path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let text = std::fs::read_to_string(path)?;
    let mut parent = HashMap::new();
    let mut own = HashMap::new();
    for line in text.lines() {
        if let Ok(TraceEvent::SpanStart(s)) = serde_json::from_str::<TraceEvent>(line) {
            parent.insert(s.id.clone(), s.parent_id.clone());
            own.insert(s.id.clone(), s.step);
        }
    }
    let mut pass_of_span = HashMap::new();
    for id in own.keys() {
        let mut at = Some(id.clone());
        let mut pass = None;
        // Explicit walk up the parents (no recursion).
        while let Some(s) = at {
            if let Some(p) = own.get(&s).copied().flatten() {
                pass = Some(p);
                break;
            }
            at = parent.get(&s).cloned().flatten();
        }
        pass_of_span.insert(id.clone(), pass);
    }
    let sites = common::sites::read(path);
    // Wire order: frames and stacks, then sites, then the one account.
    if let (Some(site), Some(account)) = (sites.first("site"), sites.first("alloc_sites")) {
        assert!(sites.last("stack").is_some_and(|s| s < site));
        assert!(sites.last("site").is_some_and(|s| s < account));
    }
    Ok(Traced {
        sites,
        pass_of_span,
    })
}

fn mlp_step(run: ProfileRun) -> Res<Traced> {
    let stepped = three_steps(run, Mlp::new, || {
        Ok((
            Tensor::randn(0f32, 1.0, (BATCH, IN), &Device::Cpu)?,
            Tensor::zeros(BATCH, DType::U32, &Device::Cpu)?,
        ))
    })?;
    finish(stepped.profiler, &stepped.path)
}

fn count(ops: &[(String, u64)]) -> BTreeMap<(String, u64), usize> {
    let mut out = BTreeMap::new();
    for (op, bytes) in ops {
        *out.entry((op.clone(), *bytes)).or_insert(0) += 1;
    }
    out
}

/// Every storage of at least the threshold allocated in the step has a site, and the account
/// says what was captured.
fn assert_every_large_storage_has_a_site(t: &Traced, threshold: u64) {
    let missing: Vec<_> = t
        .sites
        .window_allocs()
        .filter(|m| m.bytes.unwrap_or(0) >= threshold && m.site.is_none())
        .map(|m| (m.bytes, m.label.clone(), m.storage_id.clone()))
        .collect();
    assert!(missing.is_empty(), "without a site: {missing:?}");
    let small_with_site = t
        .sites
        .window_allocs()
        .filter(|m| m.bytes.unwrap_or(0) < threshold && m.site.is_some())
        .count();
    assert_eq!(small_with_site, 0);
    // No site keeps the hook's own frames (the probe's allocator, the walk, the shims).
    for &site in t.sites.sites.keys() {
        for f in t.sites.frames_of(site) {
            let name = f.function.as_deref().unwrap_or("");
            assert!(
                !name.starts_with("trace_alloc::")
                    && !name.starts_with("<trace_alloc::")
                    && !name.starts_with("backtrace::")
                    && !name.contains("__rust_alloc"),
                "hook frame kept in site {site}: {name}"
            );
        }
    }
    let account = t.sites.account.as_ref().expect("alloc_sites account");
    assert_eq!(account.threshold_bytes, threshold);
    assert_eq!(account.lost, 0);
    assert!(account.small_allocs > 0 && account.small_bytes > 0);
    assert!(account.sites > 0 && account.sites <= account.captured);
    assert_eq!(account.sites as usize, t.sites.sites.len());
    // Every window alloc with a site also names its allocating thread.
    assert!(t
        .sites
        .window_allocs()
        .filter(|m| m.site.is_some())
        .all(|m| m.thread.is_some()));
}

#[test]
fn an_mlp_step_names_every_adamw_temporary_by_its_op() -> Res<()> {
    let _s = serial();
    let t = mlp_step(
        ProfileRun::training("mlp::train_step", 2)
            .sample_hz(0)
            .alloc_site_threshold_bytes(4096),
    )?;
    assert_every_large_storage_has_a_site(&t, 4096);
    // AdamW's update of one parameter (candle-nn 0.11.1, optim.rs), hand-counted: 15 fresh
    // tensors of the parameter's size — m·β1, g·(1−β1), their sum (next_m); v·β2, g², g²·(1−β2),
    // their sum (next_v); m̂, v̂, θ·(1−lr·λ), √v̂, √v̂+ε, m̂/(√v̂+ε), ·lr, θ − that. By op:
    // `sqr`, `sqrt`, `div`, `sub` once each, `add` twice (`+ ε` is a scalar affine), and nine
    // scalar multiplications/additions (`affine`, read as `mul`/`add` where the operator's
    // trait method is the outermost op frame). Parameters of at least 4 KiB: fc1.weight
    // (128×64 f32, 32 KiB) and fc2.weight (16×128, 8 KiB); the biases are below the threshold.
    // Unregistered storages carry the dtype read from their CPU storage variant (calibrated).
    let anonymous: Vec<_> = t
        .sites
        .window_allocs()
        .filter(|m| m.label.is_none() && m.bytes.unwrap_or(0) >= 4096)
        .collect();
    assert!(!anonymous.is_empty());
    for m in &anonymous {
        // f32 everywhere but relu's backward mask (`ge`: u8, 32×128 = 4 KiB).
        let expected = match t.pass(m.span_id.as_deref()) {
            Some(Pass::Backward) if m.bytes == Some(4096) => "u8",
            _ => "f32",
        };
        assert_eq!(m.dtype.as_deref(), Some(expected), "{m:?}");
    }
    let opt = count(&t.ops_in(Some(Pass::Optimizer), 4096));
    for bytes in [32_768u64, 8_192] {
        let of = |op: &str| opt.get(&(op.to_string(), bytes)).copied().unwrap_or(0);
        let total: usize = opt
            .iter()
            .filter(|((_, b), _)| *b == bytes)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(total, 15, "{bytes} B: {opt:?}");
        for op in ["sqr", "sqrt", "div", "sub"] {
            assert_eq!(of(op), 1, "{op} at {bytes} B: {opt:?}");
        }
        assert_eq!(
            of("affine") + of("mul") + of("add"),
            11,
            "{bytes} B: {opt:?}"
        );
        assert!(of("add") >= 2, "{bytes} B: {opt:?}");
    }
    // Forward: fc1's matmul and bias add and the relu (32×128 f32, 16 KiB each); fc2's output
    // (32×16, 2 KiB) is below the threshold.
    let fwd = count(&t.ops_in(Some(Pass::Forward), 4096));
    for op in ["matmul", "broadcast_add", "relu"] {
        assert_eq!(fwd.get(&(op.to_string(), 16_384)), Some(&1), "{fwd:?}");
    }
    // Forward sites carry the stack-derived module (candle-nn's Linear).
    let matmul = t
        .sites
        .window_allocs()
        .filter_map(|m| m.site)
        .map(|s| t.sites.class(s))
        .find(|c| c.op == "matmul")
        .expect("a matmul site");
    assert_eq!(matmul.kind, OpKind::Op);
    assert!(
        matmul
            .stack_module
            .as_deref()
            .is_some_and(|m| m.contains("Linear")),
        "{matmul:?}"
    );
    // Backward: every large allocation is a backward arm or gradient accumulation.
    let bwd = t.ops_in(Some(Pass::Backward), 4096);
    assert!(!bwd.is_empty());
    for (op, _) in &bwd {
        assert!(
            op.ends_with(".backward") || op == "grad_accumulate",
            "{op} in backward: {bwd:?}"
        );
    }
    Ok(())
}

#[test]
fn sites_are_off_at_threshold_zero_and_in_deterministic_mode() -> Res<()> {
    let _s = serial();
    for run in [
        ProfileRun::training("mlp::train_step", 2)
            .sample_hz(0)
            .alloc_site_threshold_bytes(0),
        ProfileRun::training("mlp::train_step", 2).deterministic(true),
    ] {
        let t = mlp_step(run)?;
        assert!(t.sites.account.is_none());
        assert!(t.sites.sites.is_empty());
        assert!(t
            .sites
            .memory
            .iter()
            .all(|m| m.site.is_none() && m.thread.is_none()));
    }
    Ok(())
}

#[test]
fn a_threshold_of_one_kib_names_the_smaller_storages_too() -> Res<()> {
    let _s = serial();
    let t = mlp_step(
        ProfileRun::training("mlp::train_step", 2)
            .sample_hz(0)
            .alloc_site_threshold_bytes(1024),
    )?;
    assert_every_large_storage_has_a_site(&t, 1024);
    // fc2's output (32×16 f32 = 2 KiB) now has a site: the forward matmul at 2 KiB.
    let fwd = count(&t.ops_in(Some(Pass::Forward), 1024));
    assert_eq!(fwd.get(&("matmul".to_string(), 2048)), Some(&1), "{fwd:?}");
    Ok(())
}

#[test]
fn the_default_threshold_follows_the_walker() -> Res<()> {
    let _s = serial();
    let t = mlp_step(ProfileRun::training("mlp::train_step", 2).sample_hz(0))?;
    let account = t.sites.account.as_ref().expect("alloc_sites account");
    let expected = match account.unwinder.as_str() {
        "frame_pointers" => 1024,
        "libgcc" => 4096,
        other => panic!("unwinder {other}"),
    };
    assert_eq!(account.threshold_bytes, expected);
    // This workspace builds with frame pointers (.cargo/config.toml): the cheap walk, 1 KiB.
    assert_eq!(account.unwinder, "frame_pointers");
    assert_every_large_storage_has_a_site(&t, expected);
    Ok(())
}

#[test]
fn a_full_stack_pool_counts_its_losses_and_the_step_completes() -> Res<()> {
    let _s = serial();
    trace_alloc::sites::set_pool_capacity(5);
    let t = mlp_step(ProfileRun::training("mlp::train_step", 2).sample_hz(0));
    trace_alloc::sites::set_pool_capacity(usize::MAX);
    let t = t?;
    let account = t.sites.account.as_ref().expect("account");
    assert_eq!(account.captured, 5);
    assert!(account.lost > 20, "{account:?}");
    let with = t.sites.window_allocs().filter(|m| m.site.is_some()).count();
    let without = t
        .sites
        .window_allocs()
        .filter(|m| m.site.is_none() && m.bytes.unwrap_or(0) >= 4096)
        .count();
    assert!(with <= 5, "{with}");
    assert!(without > 20, "{without}");
    Ok(())
}

/// Runs `f` as the captured step (an inference run, no optimizer), returning the trace.
fn script(f: impl Fn() -> candle_core::Result<()>) -> Res<Traced> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let profiler = ProfileRun::inference("script", 2)
        .sample_hz(0)
        .alloc_site_threshold_bytes(4096)
        .start(&path)?;
    for step in 1..=2u64 {
        let _step = profiler.step(step);
        f()?;
    }
    finish(profiler, &path)
}

#[test]
fn views_allocate_nothing_and_copies_and_casts_are_named() -> Res<()> {
    let _s = serial();
    // 64×64 f32: 16 KiB, made before the step.
    let x = Tensor::randn(0f32, 1.0, (64, 64), &Device::Cpu)?;
    let half = Tensor::randn(0f32, 1.0, (32, 64), &Device::Cpu)?;
    let t = script(|| {
        // Views: no storage.
        let v = x.t()?;
        let n = x.narrow(0, 8, 16)?.reshape((16 * 64,))?; // contiguous: reshape is a view
        let b = x.narrow(1, 0, 1)?.broadcast_as((64, 64))?;
        let _ = (v.dims(), n.dims(), b.dims());
        // A reshape of a non-contiguous view copies: 16×64 f32, 4 KiB.
        let r = x.t()?.narrow(0, 8, 16)?.reshape((16 * 64,))?;
        // A copy, a cast, a slice assignment.
        let c = x.t()?.contiguous()?; // 16 KiB
        let h = x.to_dtype(DType::F16)?; // 8 KiB
        let u = x.ge(0.0)?; // u8 mask, 4 KiB (a `ge`)
        let s = x.slice_assign(&[0..32, 0..64], &half)?;
        drop((r, c, h, s, u));
        Ok(())
    })?;
    assert_every_large_storage_has_a_site(&t, 4096);
    let ops = count(&t.ops_all(4096));
    // slice_assign (candle-core 0.11.1, tensor.rs), hand-counted for a 32×64 f32 source into
    // rows 0..32 of 64×64: the source padded along dim 0 (zeros 32×64 f32, 8 KiB, then the
    // concatenation, 16 KiB), the u8 mask padded the same way (zeros 2 KiB, below the
    // threshold; concatenation 4 KiB), `where_cond` (16 KiB). Dim 1 needs no padding.
    let expected: BTreeMap<(String, u64), usize> = [
        (("reshape", 4096), 1),
        (("contiguous", 16_384), 1),
        (("to_dtype", 8192), 1),
        (("ge", 4096), 1),
        (("slice_assign", 4096), 1),
        (("slice_assign", 8192), 1),
        (("slice_assign", 16_384), 2),
    ]
    .into_iter()
    .map(|((op, b), n)| ((op.to_string(), b), n))
    .collect();
    // Exactly these: the views allocated nothing.
    assert_eq!(ops, expected);
    // The dtypes of these unregistered storages, from their CPU storage variants.
    let mut dtypes: Vec<(u64, String)> = t
        .sites
        .window_allocs()
        .filter(|m| m.bytes.unwrap_or(0) >= 4096)
        .map(|m| (m.bytes.unwrap_or(0), m.dtype.clone().unwrap_or_default()))
        .collect();
    dtypes.sort();
    assert_eq!(
        dtypes,
        [
            (4096, "f32".to_string()), // reshape copy
            (4096, "u8".to_string()),  // ge
            (4096, "u8".to_string()),  // slice_assign's padded mask
            (8192, "f16".to_string()), // to_dtype
            (8192, "f32".to_string()),
            (16_384, "f32".to_string()),
            (16_384, "f32".to_string()),
            (16_384, "f32".to_string()),
        ]
    );
    Ok(())
}

#[test]
fn the_matmul_backward_arm_allocates_both_operand_gradients() -> Res<()> {
    let _s = serial();
    // 64×128 @ 128×64, both variables: the arm computes grad·rhsᵀ (64×128, 32 KiB) and
    // lhsᵀ·grad (128×64, 32 KiB).
    let a = Var::randn(0f32, 1.0, (64, 128), &Device::Cpu)?;
    let b = Var::randn(0f32, 1.0, (128, 64), &Device::Cpu)?;
    let t = script(|| {
        let loss = a.as_tensor().matmul(b.as_tensor())?.sum_all()?;
        let grads = loss.backward()?;
        drop(grads);
        Ok(())
    })?;
    assert_every_large_storage_has_a_site(&t, 4096);
    let ops = count(&t.ops_all(4096));
    println!("{ops:?}");
    assert_eq!(
        ops.get(&("matmul.backward".to_string(), 32_768)),
        Some(&2),
        "{ops:?}"
    );
    assert_eq!(
        ops.get(&("matmul".to_string(), 16_384)),
        Some(&1),
        "{ops:?}"
    );
    Ok(())
}

#[test]
fn a_conv_step_names_the_convolution_forward_and_backward() -> Res<()> {
    let _s = serial();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let profiler = ProfileRun::training("conv::train_step", 2)
        .sample_hz(0)
        .alloc_site_threshold_bytes(4096)
        .varmap(&varmap)
        .start(&path)?;
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let conv = candle_nn::conv2d(3, 16, 3, Default::default(), vb.pp("conv"))?;
    let mut opt = ProbedOptimizer::<candle_nn::SGD>::new(varmap.all_vars(), 0.01)?;
    let x = Tensor::randn(0f32, 1.0, (4, 3, 16, 16), &Device::Cpu)?;
    for step in 1..=3u64 {
        let _step = profiler.step(step);
        let loss = conv.forward(&x)?.relu()?.sqr()?.mean_all()?;
        opt.backward_step(&loss)?;
    }
    let t = finish(profiler, &path)?;
    assert_every_large_storage_has_a_site(&t, 4096);
    let fwd = t.ops_in(Some(Pass::Forward), 4096);
    let bwd = t.ops_in(Some(Pass::Backward), 4096);
    println!("{fwd:?}\n{bwd:?}");
    // Candle's `conv2d` calls `conv2d_with_algo` (the outermost op frame on this build).
    assert!(
        fwd.iter().any(|(op, _)| op.starts_with("conv2d")),
        "{fwd:?}"
    );
    assert!(bwd.iter().any(|(op, _)| op == "conv2d.backward"), "{bwd:?}");
    Ok(())
}

#[test]
fn a_model_without_module_spans_shows_its_type_in_the_sites() -> Res<()> {
    use candle_transformers::models::llama2_c::{Cache, Config, Llama};
    let _s = serial();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let profiler = ProfileRun::inference("llama2_c::forward", 2)
        .sample_hz(0)
        .alloc_site_threshold_bytes(4096)
        .start(&path)?;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let cfg = Config::tiny_260k();
    let model = Llama::load(vb.clone(), cfg.clone())?;
    let tokens = Tensor::new(&[[1u32, 5, 9, 2, 7, 3, 4, 8]], &Device::Cpu)?;
    for step in 1..=2u64 {
        let _step = profiler.step(step);
        let mut cache = Cache::new(false, &cfg, vb.pp("rot"))?;
        let logits = model.forward(&tokens, 0, &mut cache)?;
        drop(logits);
    }
    let t = finish(profiler, &path)?;
    assert_every_large_storage_has_a_site(&t, 4096);
    // No module spans in this model: its type appears in the allocating stacks, and the
    // stack-derived module of the matmuls names it.
    let sites: Vec<u32> = t.sites.window_allocs().filter_map(|m| m.site).collect();
    assert!(!sites.is_empty());
    assert!(
        sites.iter().any(|&s| t.sites.has_function(s, "llama2_c::")),
        "no llama2_c frame"
    );
    let modules: Vec<_> = sites
        .iter()
        .map(|&s| t.sites.class(s))
        .filter(|c| c.op == "matmul")
        .filter_map(|c| c.stack_module)
        .collect();
    println!("{modules:?}");
    assert!(
        modules
            .iter()
            .any(|m| m.contains("llama2_c") || m.contains("Llama") || m.contains("Block")),
        "{modules:?}"
    );
    Ok(())
}
