//! `bench-scale --trace encoder`: a benchmark trace of another shape than trace-synth's, made by
//! code of its own (issue 47): JSON lines written by hand here, not trace-synth's events nor
//! trace-wire's writer, so that a figure measured on it does not share the synthetic
//! generator's assumptions.
//!
//! What it looks like, where trace-synth's benchmark mix differs: a BERT-style encoder
//! fine-tuned on the CPU (12 layers, hidden 768, 201 parameters), captured over many steps with
//! allocation sites and 1 kHz stack samples (trace/13, `operations: sampled`, no `op` events);
//! - **deep module spans**: `bert` → `encoder` → `layer.N` → `attention` → `self` →
//!   `query`/`key`/`value`/…, nine levels under the root, about 260 spans a step;
//! - **many small storages**: each module allocates its output (kept for backward), six
//!   temporaries from 64 bytes to a few MiB freed at once, and every matmul 16 scratch buffers
//!   of 64–2,048 bytes on eight rayon worker threads; about 12,500 memory events a step;
//! - **memory events not in time order**: a worker's events carry its own clock, up to 2 µs
//!   behind the main thread's last event (the file is in arrival order);
//! - **allocation sites** on every main-thread alloc of at least 4,096 bytes (about 300 sites),
//!   **samples** of nine threads at 1 kHz (a fifth of the events), a sampler account;
//! - **the activations retained into the optimizer** (the loss is dropped after the step, the
//!   mistake the `activations_retained_into_optimizer` finding names), optimizer state
//!   allocated in the first step and four temporaries per parameter in every update.
//!
//! The number of steps grows with the requested size (about 16,500 events a step), so a larger
//! trace is a longer capture of the same steps. The events are deterministic (own xorshift PRNG,
//! no clock). The count is within half a step of the request; the function returns the exact
//! one.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

use crate::encoder_model::*;

/// One buffered sample: time, thread, stack index, span (0: none).
#[derive(Clone, Copy)]
struct Sample {
    ts: u64,
    thread: u8,
    stack: u32,
    span: u64,
}

/// Writes the trace (see the module docs) for about `events` events.
///
/// # Errors
/// I/O errors writing `path`.
pub fn write_encoder_trace(path: &Path, events: u64) -> Result<EncoderTrace> {
    let params = parameters();
    // one step written nowhere says how many steps make `events` (the meta names the last)
    let mut dry = Gen::new(std::io::sink());
    dry.meta(1)?;
    let root = dry.open("bench_encoder::train_step", "function", "", true)?;
    dry.parameters(&params)?;
    dry.step(0, &params)?;
    // the first step also allocates the optimizer state and writes the gradient facts
    let head = dry.count();
    dry.step(1, &params)?;
    let per_step = dry.count() - head;
    dry.close(root)?;
    dry.tables()?;
    let tail = dry.lines.saturating_sub(head + per_step);
    let per_step = per_step.max(1);
    // `head` holds the first step
    let steps = 1 + (events.saturating_sub(head + tail) + per_step / 2) / per_step;

    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut g = Gen::new(BufWriter::with_capacity(1 << 20, file));
    g.meta(steps)?;
    let root = g.open("bench_encoder::train_step", "function", "", true)?;
    g.parameters(&params)?;
    for n in 0..steps {
        g.step(n, &params)?;
    }
    g.close(root)?;
    g.tables()?;
    g.out.flush()?;
    Ok(EncoderTrace {
        events: g.lines,
        steps,
    })
}

/// What [`write_encoder_trace`] wrote.
#[derive(Debug, Clone, Copy)]
pub struct EncoderTrace {
    /// Lines (events) written.
    pub events: u64,
    /// Training steps captured.
    pub steps: u64,
}

/// A live storage the generator will free later.
struct Held {
    id: String,
    bytes: u64,
    category: &'static str,
}

struct Gen<W: Write> {
    out: W,
    rng: u64,
    /// The training thread's clock, ns.
    clock: u64,
    lines: u64,
    next_span: u64,
    /// Open spans: id, start.
    open: Vec<(u64, u64)>,
    next_tensor: u64,
    next_addr: u64,
    free_addrs: Vec<u64>,
    generation: std::collections::HashMap<u64, u32>,
    /// Every thread's next sample time, and its samples so far.
    next_sample: [u64; THREADS],
    sampled: [u64; THREADS],
    first_sample: [u64; THREADS],
    samples: Vec<Sample>,
    /// The leaf running now (its stacks).
    leaf: Leaf,
    backward: bool,
    /// Site capture account.
    captured: u64,
    small_allocs: u64,
    small_bytes: u64,
    /// Optimizer state exists (allocated in the first step).
    state: bool,
    grads: Vec<Held>,
    activations: Vec<Held>,
}

impl<W: Write> Gen<W> {
    fn new(out: W) -> Self {
        Self {
            out,
            rng: 0x9E37_79B9_7F4A_7C15,
            clock: 1_000_000,
            lines: 0,
            next_span: 1,
            open: Vec::new(),
            next_tensor: 1,
            next_addr: 0x7f00_0000_0000,
            free_addrs: Vec::new(),
            generation: std::collections::HashMap::new(),
            next_sample: std::array::from_fn(|t| 1_500_000 + 37_000 * t as u64),
            sampled: [0; THREADS],
            first_sample: [0; THREADS],
            samples: Vec::new(),
            leaf: Leaf::Loss,
            backward: false,
            captured: 0,
            small_allocs: 0,
            small_bytes: 0,
            state: false,
            grads: Vec::new(),
            activations: Vec::new(),
        }
    }

    fn rand(&mut self, n: u64) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x % n.max(1)
    }

    /// Lines written plus samples still to write.
    fn count(&self) -> u64 {
        self.lines + self.samples.len() as u64
    }

    fn line(&mut self, s: std::fmt::Arguments<'_>) -> Result<()> {
        self.out.write_fmt(s)?;
        self.out.write_all(b"\n")?;
        self.lines += 1;
        Ok(())
    }

    /// Moves the training thread's clock on by `lo..hi` ns, taking every sample due.
    fn advance(&mut self, lo: u64, hi: u64) {
        self.clock += lo + self.rand(hi - lo);
        let span = self.open.last().map_or(0, |s| s.0);
        for t in 0..THREADS {
            while self.next_sample[t] <= self.clock {
                let ts = self.next_sample[t];
                let stack = self.sample_stack(t);
                if self.sampled[t] == 0 {
                    self.first_sample[t] = ts;
                }
                self.samples.push(Sample {
                    ts,
                    thread: t as u8 + 1,
                    stack,
                    span: if t == 0 { span } else { 0 },
                });
                self.sampled[t] += 1;
                self.next_sample[t] += PERIOD_NS;
            }
        }
    }

    /// Stack index of a sample on thread `t` (0: the training loop): per leaf kind, forward
    /// and backward, three variants; workers a kernel or parked.
    fn sample_stack(&mut self, t: usize) -> u32 {
        if t == 0 {
            let variant = self.rand(3) as u32;
            (self.leaf.index() as u32 * 2 + u32::from(self.backward)) * 3 + variant
        } else {
            MAIN_STACKS + u32::from(self.leaf.matmul() && self.rand(4) != 0)
        }
    }

    fn meta(&mut self, steps: u64) -> Result<()> {
        let last = 1 + steps;
        self.line(format_args!(
            concat!(
                r#"{{"kind":"meta","schema":"candle-graph/trace/13","run_id":"bench-encoder","#,
                r#""entrypoint":"bench_encoder::train_step","phase":"train","#,
                r#""timestamp":"2026-12-07T00:00:00.000Z","capture_step":2,"last_capture_step":{last},"#,
                r#""warmup_steps":1,"#,
                r#""device":"cpu","timing_mode":"host","capture_contract":{{"#,
                r#""measurement_scope":"profiled_work","operations":"sampled","tensors":"none","#,
                r#""gradients":"partial","logical_memory":"complete","physical_memory":"none","#,
                r#""device_timing":"none","tensor_stats":"none"}},"#,
                r#""tags":{{"generator":"xtask-encoder","model":"bert-base"}},"#,
                r#""tracking_allocator_installed":true}}"#
            ),
            last = last
        ))
    }

    fn open(&mut self, name: &str, kind: &str, extra: &str, measured: bool) -> Result<u64> {
        self.advance(500, 3_000);
        let id = self.next_span;
        self.next_span += 1;
        let parent = match self.open.last() {
            Some(&(p, _)) => format!(r#","parent_id":"s{p}""#),
            None => String::new(),
        };
        let clock = self.clock;
        self.line(format_args!(
            r#"{{"kind":"span_start","id":"s{id}"{parent},"name":"{name}","start_ns":{clock},"span_kind":"{kind}","measured":{measured}{extra}}}"#
        ))?;
        self.open.push((id, clock));
        Ok(id)
    }

    fn module(&mut self, name: &str, path: &str, module_kind: Option<&str>) -> Result<u64> {
        let key = self.next_span;
        let kind = module_kind.map_or(String::new(), |k| format!(r#","module_kind":"{k}""#));
        self.open(
            name,
            "module",
            &format!(r#","module_path":"{path}","instance_key":"k{key}"{kind}"#),
            false,
        )
    }

    fn close(&mut self, id: u64) -> Result<()> {
        self.advance(500, 3_000);
        let (open, start) = self.open.pop().context("no open span")?;
        debug_assert_eq!(open, id);
        let d = self.clock - start;
        self.line(format_args!(
            r#"{{"kind":"span_end","id":"s{open}","duration_ns":{d}}}"#
        ))
    }

    /// A storage id as the probe writes them: address, generation (a freed address is reused).
    fn storage(&mut self) -> String {
        let addr = match self.free_addrs.pop() {
            Some(a) => a,
            None => {
                self.next_addr += 0x1_0000;
                self.next_addr
            }
        };
        let g = self.generation.entry(addr).or_insert(0);
        *g += 1;
        format!("{addr:x}.{g}")
    }

    fn release(&mut self, id: &str) {
        if let Some(addr) = id
            .split('.')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        {
            self.free_addrs.push(addr);
        }
    }

    /// One alloc on the training thread; returns the storage id.
    #[allow(clippy::too_many_arguments)]
    fn alloc(
        &mut self,
        bytes: u64,
        category: &'static str,
        slot: u32,
        shape: &str,
        label: Option<&str>,
        source: &str,
    ) -> Result<String> {
        self.advance(5_000, 60_000);
        let id = self.storage();
        let tensor = self.next_tensor;
        self.next_tensor += 1;
        let span = self.open.last().map_or(1, |s| s.0);
        let site = if bytes >= SITE_THRESHOLD {
            self.captured += 1;
            let kind = self.leaf.index() as u32 * 2 + u32::from(self.backward);
            format!(
                r#","site":{},"thread":1"#,
                kind * SITES_PER_KIND + slot % SITES_PER_KIND
            )
        } else {
            self.small_allocs += 1;
            self.small_bytes += bytes;
            String::new()
        };
        let mut label = label.map_or(String::new(), |l| format!(r#","label":"{l}""#));
        if source == "registry" {
            label.push_str(r#","pre_existing":true"#);
        }
        let (clock, csrc) = (
            self.clock,
            if category == "parameter" {
                "registry"
            } else {
                "inferred"
            },
        );
        self.line(format_args!(
            r#"{{"kind":"memory","timestamp_ns":{clock},"action":"alloc","device":"cpu","storage_id":"{id}","bytes":{bytes},"tensor_id":"t{tensor}","span_id":"s{span}","shape":{shape},"dtype":"f32","category":"{category}","category_source":"{csrc}","source":"{source}"{label}{site}}}"#
        ))?;
        Ok(id)
    }

    fn free(&mut self, id: &str, bytes: u64, category: &str) -> Result<()> {
        self.advance(2_000, 20_000);
        let span = self.open.last().map_or(1, |s| s.0);
        let clock = self.clock;
        self.line(format_args!(
            r#"{{"kind":"memory","timestamp_ns":{clock},"action":"free","device":"cpu","storage_id":"{id}","bytes":{bytes},"span_id":"s{span}","category":"{category}","source":"allocator"}}"#
        ))?;
        self.release(id);
        Ok(())
    }

    /// `SCRATCH` small buffers on the workers, each allocated and freed on the worker's own
    /// clock, up to 2 µs behind the training thread's (the file is in arrival order).
    fn scratch(&mut self) -> Result<()> {
        let span = self.open.last().map_or(1, |s| s.0);
        for i in 0..SCRATCH {
            self.advance(1_000, 4_000);
            let thread = 2 + (i % (THREADS - 1));
            let bytes = 64 << self.rand(6);
            let at = self.clock - 1_500 - self.rand(2_000);
            let id = format!("w{thread}.{:x}", self.rand(1 << 20));
            self.small_allocs += 1;
            self.small_bytes += bytes;
            self.line(format_args!(
                r#"{{"kind":"memory","timestamp_ns":{at},"action":"alloc","device":"cpu","storage_id":"{id}","bytes":{bytes},"span_id":"s{span}","category":"other","category_source":"inferred","source":"allocator","thread":{thread}}}"#
            ))?;
            let end = at + 300 + self.rand(900);
            self.line(format_args!(
                r#"{{"kind":"memory","timestamp_ns":{end},"action":"free","device":"cpu","storage_id":"{id}","bytes":{bytes},"span_id":"s{span}","category":"other","source":"allocator","thread":{thread}}}"#
            ))?;
        }
        Ok(())
    }

    /// `n` temporaries of the running leaf, each freed right after it is used.
    fn temporaries(&mut self, n: usize, out_bytes: u64) -> Result<()> {
        for i in 0..n {
            let bytes = match self.rand(4) {
                0 => 64 << self.rand(4),
                1 => BATCH * SEQ * 4,
                2 => out_bytes / (1 + self.rand(8)),
                _ => out_bytes,
            };
            let id = self.alloc(bytes, "other", i as u32 + 4, "[]", None, "caller")?;
            self.free(&id, bytes, "other")?;
        }
        Ok(())
    }

    /// A leaf module's forward: its output (kept for backward), temporaries, worker scratch.
    fn leaf(&mut self, name: &str, path: &str, leaf: Leaf, out: [u64; 3]) -> Result<()> {
        let kind = match leaf {
            Leaf::Linear => Some("linear"),
            Leaf::LayerNorm => Some("layer-norm"),
            Leaf::Embedding => Some("embedding"),
            _ => None,
        };
        let id = self.module(name, path, kind)?;
        self.leaf = leaf;
        let bytes = out.iter().product::<u64>() * 4;
        self.temporaries(TEMPS_FORWARD / 2, bytes)?;
        if leaf.matmul() {
            self.scratch()?;
        }
        let shape = format!("[{},{},{}]", out[0], out[1], out[2]);
        let storage = self.alloc(bytes, "activation", 0, &shape, None, "caller")?;
        self.activations.push(Held {
            id: storage,
            bytes,
            category: "activation",
        });
        self.temporaries(TEMPS_FORWARD - TEMPS_FORWARD / 2, bytes)?;
        self.close(id)
    }

    /// The forward pass of one step: embeddings, the layers, pooler, classifier, loss.
    fn forward(&mut self) -> Result<()> {
        let act = [BATCH, SEQ, HIDDEN];
        let pass = self.open("forward", "function", r#","step":"forward""#, false)?;
        let bert = self.module("bert", "bert", None)?;
        let emb = self.module("embeddings", "bert/embeddings", None)?;
        for m in [
            "word_embeddings",
            "position_embeddings",
            "token_type_embeddings",
        ] {
            self.leaf(m, &format!("bert/embeddings/{m}"), Leaf::Embedding, act)?;
        }
        self.leaf(
            "LayerNorm",
            "bert/embeddings/LayerNorm",
            Leaf::LayerNorm,
            act,
        )?;
        self.leaf("dropout", "bert/embeddings/dropout", Leaf::Dropout, act)?;
        self.close(emb)?;
        let enc = self.module("encoder", "bert/encoder", None)?;
        for l in 0..LAYERS {
            self.layer(l)?;
        }
        self.close(enc)?;
        let pool = self.module("pooler", "bert/pooler", None)?;
        self.leaf(
            "dense",
            "bert/pooler/dense",
            Leaf::Linear,
            [BATCH, 1, HIDDEN],
        )?;
        self.leaf(
            "activation",
            "bert/pooler/activation",
            Leaf::Tanh,
            [BATCH, 1, HIDDEN],
        )?;
        self.close(pool)?;
        self.close(bert)?;
        self.leaf("classifier", "classifier", Leaf::Linear, [BATCH, 1, 2])?;
        self.leaf("cross_entropy", "loss", Leaf::Loss, [1, 1, 1])?;
        self.close(pass)
    }

    fn layer(&mut self, l: usize) -> Result<()> {
        let act = [BATCH, SEQ, HIDDEN];
        let p = format!("bert/encoder/layer.{l}");
        let layer = self.module(&format!("layer.{l}"), &p, None)?;
        let attn = self.module("attention", &format!("{p}/attention"), None)?;
        let s = self.module("self", &format!("{p}/attention/self"), None)?;
        for m in ["query", "key", "value"] {
            self.leaf(m, &format!("{p}/attention/self/{m}"), Leaf::Linear, act)?;
        }
        let scores = [BATCH * HEADS, SEQ, SEQ];
        self.leaf(
            "scores",
            &format!("{p}/attention/self/scores"),
            Leaf::Scores,
            scores,
        )?;
        self.leaf(
            "dropout",
            &format!("{p}/attention/self/dropout"),
            Leaf::Dropout,
            scores,
        )?;
        self.close(s)?;
        let o = self.module("output", &format!("{p}/attention/output"), None)?;
        self.leaf(
            "dense",
            &format!("{p}/attention/output/dense"),
            Leaf::Linear,
            act,
        )?;
        let ln = format!("{p}/attention/output/LayerNorm");
        self.leaf("LayerNorm", &ln, Leaf::LayerNorm, act)?;
        self.leaf(
            "dropout",
            &format!("{p}/attention/output/dropout"),
            Leaf::Dropout,
            act,
        )?;
        self.close(o)?;
        self.close(attn)?;
        let inter = [BATCH, SEQ, INTER];
        let i = self.module("intermediate", &format!("{p}/intermediate"), None)?;
        self.leaf(
            "dense",
            &format!("{p}/intermediate/dense"),
            Leaf::Linear,
            inter,
        )?;
        self.leaf("gelu", &format!("{p}/intermediate/gelu"), Leaf::Gelu, inter)?;
        self.close(i)?;
        let o = self.module("output", &format!("{p}/output"), None)?;
        self.leaf("dense", &format!("{p}/output/dense"), Leaf::Linear, act)?;
        self.leaf(
            "LayerNorm",
            &format!("{p}/output/LayerNorm"),
            Leaf::LayerNorm,
            act,
        )?;
        self.leaf(
            "dropout",
            &format!("{p}/output/dropout"),
            Leaf::Dropout,
            act,
        )?;
        self.close(o)?;
        self.close(layer)
    }

    /// The backward pass: one span per layer (last first), temporaries and scratch per module,
    /// the gradients of the layer's parameters; the gradient facts in the first step.
    fn backward(&mut self, params: &[Param], facts: bool) -> Result<()> {
        let pass = self.open("backward", "function", r#","step":"backward""#, false)?;
        self.backward = true;
        // parameters by layer: embeddings (5), 16 per layer, pooler + classifier (4)
        let groups: Vec<(String, std::ops::Range<usize>)> =
            std::iter::once(("head".to_string(), params.len() - 4..params.len()))
                .chain((0..LAYERS).rev().map(|l| {
                    let lo = 5 + 16 * l;
                    (format!("layer.{l}"), lo..lo + 16)
                }))
                .chain(std::iter::once(("embeddings".to_string(), 0..5)))
                .collect();
        for (name, range) in groups {
            let span = self.open(&format!("{name}.backward"), "function", "", false)?;
            let leaves: &[Leaf] = match name.as_str() {
                "head" => &[Leaf::Loss, Leaf::Linear, Leaf::Tanh, Leaf::Linear],
                "embeddings" => &[Leaf::Dropout, Leaf::LayerNorm, Leaf::Embedding],
                _ => &[
                    Leaf::Dropout,
                    Leaf::LayerNorm,
                    Leaf::Linear,
                    Leaf::Gelu,
                    Leaf::Linear,
                    Leaf::Dropout,
                    Leaf::LayerNorm,
                    Leaf::Linear,
                    Leaf::Dropout,
                    Leaf::Scores,
                    Leaf::Linear,
                    Leaf::Linear,
                    Leaf::Linear,
                ],
            };
            for &leaf in leaves {
                self.leaf = leaf;
                self.temporaries(TEMPS_BACKWARD, BATCH * SEQ * HIDDEN * 4)?;
                if leaf.matmul() {
                    self.scratch()?;
                }
            }
            for p in &params[range] {
                let label = format!("{}.grad", p.name);
                let shape = format!("{:?}", p.shape).replace(' ', "");
                let id = self.alloc(p.bytes, "gradient", 1, &shape, Some(&label), "caller")?;
                self.grads.push(Held {
                    id,
                    bytes: p.bytes,
                    category: "gradient",
                });
            }
            self.close(span)?;
        }
        if facts {
            self.gradient_facts(params)?;
        }
        self.backward = false;
        self.close(pass)
    }

    fn gradient_facts(&mut self, params: &[Param]) -> Result<()> {
        for (i, p) in params.iter().enumerate() {
            let norm = 0.01 + self.rand(10_000) as f64 / 1e4;
            let state = if p.name.contains("position_embeddings") {
                r#""state":"zero","norm":0.0"#.to_string()
            } else {
                format!(r#""state":"present","norm":{norm}"#)
            };
            self.line(format_args!(
                r#"{{"kind":"gradient","event_id":"g{i}","root":"model","key":"{}",{state},"bytes":{}}}"#,
                p.name, p.bytes
            ))?;
        }
        Ok(())
    }

    /// The optimizer pass: the state (first step), four temporaries per parameter, the
    /// gradients freed at its end.
    fn optimizer(&mut self, params: &[Param]) -> Result<()> {
        let pass = self.open("optimizer", "function", r#","step":"optimizer""#, false)?;
        let adamw = self.open("adamw.step", "function", "", false)?;
        self.leaf = Leaf::Dropout;
        for p in params {
            if !self.state {
                let shape = format!("{:?}", p.shape).replace(' ', "");
                for s in ["exp_avg", "exp_avg_sq"] {
                    let label = format!("{}.{s}", p.name);
                    self.alloc(p.bytes, "optimizer", 2, &shape, Some(&label), "caller")?;
                }
            }
            for t in 0..4 {
                let id = self.alloc(p.bytes, "other", 8 + t, "[]", None, "caller")?;
                self.free(&id, p.bytes, "other")?;
            }
        }
        self.state = true;
        for h in std::mem::take(&mut self.grads) {
            self.free(&h.id, h.bytes, h.category)?;
        }
        self.close(adamw)?;
        self.close(pass)
    }

    fn parameters(&mut self, params: &[Param]) -> Result<()> {
        for p in params {
            let shape = format!("{:?}", p.shape).replace(' ', "");
            self.alloc(p.bytes, "parameter", 3, &shape, Some(&p.name), "registry")?;
        }
        Ok(())
    }

    /// One training step; the activations are freed after the optimizer (the loss lives
    /// through the step).
    fn step(&mut self, n: u64, params: &[Param]) -> Result<()> {
        let index = n + 2;
        let extra = format!(r#","step_index":{index}"#);
        let span = self.open(&format!("step {index}"), "function", &extra, false)?;
        self.forward()?;
        self.backward(params, n == 0)?;
        self.optimizer(params)?;
        self.leaf = Leaf::Loss;
        for h in std::mem::take(&mut self.activations).into_iter().rev() {
            self.free(&h.id, h.bytes, h.category)?;
        }
        self.close(span)
    }

    /// Frames, stacks, sites, the site account, the samples, the sampler, the terminal.
    fn tables(&mut self) -> Result<()> {
        let mut names: Vec<&'static str> = Vec::new();
        let mut frame = |name: &'static str| -> usize {
            names.iter().position(|&n| n == name).unwrap_or_else(|| {
                names.push(name);
                names.len() - 1
            })
        };
        // sample stacks: per (leaf, pass) three variants, then the workers' two
        let mut stacks: Vec<Vec<usize>> = Vec::new();
        for leaf in Leaf::ALL {
            for backward in [false, true] {
                for v in 0..3 {
                    let mut s: Vec<usize> = leaf.frames()[v..].iter().map(|f| frame(f)).collect();
                    if backward {
                        s.insert(0, frame("candle_core::backprop::Tensor::backward"));
                    }
                    s.extend(OUTER.iter().map(|f| frame(f)));
                    stacks.push(s);
                }
            }
        }
        stacks.push(WORKER[2..].iter().map(|f| frame(f)).collect());
        stacks.push(WORKER.iter().map(|f| frame(f)).collect());
        // site stacks: the allocator's caller, then the leaf's frames
        let site_base = stacks.len();
        for kind in 0..(Leaf::ALL.len() * 2) {
            for slot in 0..SITES_PER_KIND as usize {
                let leaf = Leaf::ALL[kind / 2];
                let mut s = vec![frame("alloc::raw_vec::RawVec::allocate_in")];
                s.extend(leaf.frames()[slot % 3..].iter().map(|f| frame(f)));
                if kind % 2 == 1 {
                    s.insert(1, frame("candle_core::backprop::Tensor::backward"));
                }
                s.extend(OUTER.iter().map(|f| frame(f)));
                stacks.push(s);
            }
        }
        for (i, n) in names.iter().enumerate() {
            let file = n.split("::").next().unwrap_or("std");
            let line = 10 + i * 7;
            self.line(format_args!(
                r#"{{"kind":"frame","id":{i},"function":"{n}","file":"src/{file}.rs","line":{line}}}"#
            ))?;
        }
        for (i, s) in stacks.iter().enumerate() {
            let frames = format!("{s:?}").replace(' ', "");
            self.line(format_args!(
                r#"{{"kind":"stack","id":{i},"frames":{frames}}}"#
            ))?;
        }
        let sites = stacks.len() - site_base;
        for i in 0..sites {
            let stack = site_base + i;
            self.line(format_args!(
                r#"{{"kind":"site","id":{i},"stack_id":{stack}}}"#
            ))?;
        }
        let (captured, small, small_bytes) = (self.captured, self.small_allocs, self.small_bytes);
        self.line(format_args!(
            r#"{{"kind":"alloc_sites","threshold_bytes":{SITE_THRESHOLD},"unwinder":"frame_pointers","symbols":"line_tables","captured":{captured},"lost":0,"truncated":0,"small_allocs":{small},"small_bytes":{small_bytes},"sites":{sites}}}"#
        ))?;
        self.sample_lines()
    }

    fn sample_lines(&mut self) -> Result<()> {
        for s in std::mem::take(&mut self.samples) {
            let span = if s.span == 0 {
                String::new()
            } else {
                format!(r#","span_id":"s{}""#, s.span)
            };
            self.line(format_args!(
                r#"{{"kind":"sample","timestamp_ns":{},"thread":{},"stack_id":{}{span}}}"#,
                s.ts, s.thread, s.stack
            ))?;
        }
        let threads: Vec<String> = (0..THREADS)
            .map(|t| {
                let name = if t == 0 {
                    "main".to_string()
                } else {
                    format!("rayon-{t}")
                };
                let n = self.sampled[t];
                format!(
                    r#"{{"thread":{},"name":"{name}","start_ns":{},"end_ns":{},"ticks":{n},"samples":{n},"lost_overrun":0,"lost_buffer":0}}"#,
                    t + 1,
                    self.first_sample[t],
                    self.clock
                )
            })
            .collect();
        self.line(format_args!(
            r#"{{"kind":"sampler","hz":1000,"period_ns":{PERIOD_NS},"clock":"wall","unwinder":"frame_pointers","symbols":"line_tables","threads":[{}]}}"#,
            threads.join(",")
        ))?;
        let end = self.clock + 1_000;
        self.line(format_args!(
            r#"{{"kind":"terminal","outcome":"complete","timestamp_ns":{end},"dropped_events":0}}"#
        ))
    }
}
