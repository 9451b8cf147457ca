#!/usr/bin/env python3
"""Writes synthetic.jsonl: a hand-made trace/12 of one llama-like training step with 202
wall-clock samples at 2 kHz whose stacks use frame names as Candle 0.11.1 symbolises them
(release build, line tables), with known counts per op (asserted by the tests):

forward (80): broadcast_matmul 40 (+10 with file I/O below matmul: 50), softmax_last_dim 20,
              cross_entropy 5, a hostile-named non-op 5
backward (90): matmul.backward 40, grad_accumulate 30 (20 add + 10 zeros),
               custom_op1.backward 15, the probe 5
optimizer (30): sub 25, candle_nn::optim::AdamW::step (non-op) 5
outside the measured region: 2

Run: python3 make_synthetic.py > synthetic.jsonl
"""
import json

CORE = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-core-0.11.1/src/"
NN = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-nn-0.11.1/src/"
out = []
w = lambda o: out.append(json.dumps(o, ensure_ascii=False, separators=(",", ":")))
w({"kind": "meta", "schema": "candle-graph/trace/12", "run_id": "synthetic-ops", "entrypoint": "llama::train_step",
   "phase": "train", "timestamp": "2026-12-01T00:00:00.000Z", "capture_step": 2, "warmup_steps": 1, "device": "cpu",
   "timing_mode": "host",
   "capture_contract": {"measurement_scope": "profiled_work", "operations": "sampled", "tensors": "none",
                        "gradients": "none", "logical_memory": "none", "physical_memory": "none",
                        "device_timing": "none", "tensor_stats": "none",
                        "reasons": {"operations": "wall-clock stack samples at 2000 Hz"}},
   "candle_version": "0.11.1", "probe_version": "0.1.0"})
MS = 1_000_000
spans = [
    ("s1", None, "llama::train_step", 0, 100 * MS, "function", None, None),
    ("s2", "s1", "forward", 0, 40 * MS, "function", "forward", None),
    ("s3", "s2", "model", 0, 40 * MS, "module", None, "model"),
    ("s4", "s3", "attn", 0, 35 * MS, "module", None, "model/block/attn"),
    ("s5", "s4", "model.layers.0.self_attn.q_proj", 0, 25 * MS, "module", None, "model/block/attn/model.layers.0.self_attn.q_proj"),
    ("s6", "s1", "backward", 40 * MS, 45 * MS, "function", "backward", None),
    ("s7", "s1", "optimizer", 85 * MS, 15 * MS, "function", "optimizer", None),
]
for sid, parent, name, start, dur, kind, step, module in spans:
    e = {"kind": "span_start", "id": sid, "name": name, "start_ns": start, "span_kind": kind, "measured": sid == "s1"}
    if parent:
        e["parent_id"] = parent
    if step:
        e["step"] = step
    if module:
        e["module_path"] = module
    w(e)
for sid, parent, name, start, dur, kind, step, module in reversed(spans):
    w({"kind": "span_end", "id": sid, "duration_ns": dur})

frames = {}
def fr(function, file=None, line=None):
    key = (function, file, line)
    if key not in frames:
        frames[key] = len(frames)
    return frames[key]

harness = [fr("llama::train_step", "examples/src/llama.rs", 80),
           fr("trace_probe::run::ProfileRun::capture", "crates/trace-probe/src/run.rs", 200),
           fr("llama::main", "examples/src/llama.rs", 20), fr("main")]
attn = [fr("<candle_nn::linear::Linear as candle_core::Module>::forward", NN + "linear.rs", 72),
        fr("candle_graph_examples::llama::Attention::forward", "examples/src/llama.rs", 140),
        fr("candle_graph_examples::llama::Block::forward", "examples/src/llama.rs", 180)]
matmul = [fr("candle_core::cpu_backend::MatMul::f", CORE + "cpu_backend/mod.rs", 1380),
          fr("candle_core::storage::Storage::matmul", CORE + "storage.rs", 690),
          fr("candle_core::tensor::Tensor::matmul", CORE + "tensor.rs", 1250)]
def bwd(line):
    return fr("candle_core::backprop::<impl candle_core::tensor::Tensor>::backward", CORE + "backprop.rs", line)
stacks = {
    "fwd_matmul": [fr("gemm_f32::microkernel::x86::avx2::f32::matmul_3_4_dyn"), fr("gemm_common::gemm::gemm_basic_generic")] + matmul
                  + [fr("candle_core::tensor::Tensor::broadcast_matmul", CORE + "tensor.rs", 1310)] + attn + harness,
    "fwd_matmul_io": [fr("__libc_read"), fr("std::fs::read_to_string::inner"), fr("num_cpus::linux::get_num_physical_cpus"),
                      fr("num_cpus::get_physical"), fr("candle_core::utils::get_num_threads", CORE + "utils.rs", 15)] + matmul
                     + [fr("candle_core::tensor::Tensor::broadcast_matmul", CORE + "tensor.rs", 1310)] + attn + harness,
    "softmax": [fr("<candle_nn::ops::SoftmaxLastDim as candle_core::custom_op::CustomOp1>::cpu_fwd", NN + "ops.rs", 260),
                fr("candle_core::custom_op::<impl candle_core::tensor::Tensor>::apply_op1_no_bwd", CORE + "custom_op.rs", 160),
                fr("candle_nn::ops::softmax_last_dim", NN + "ops.rs", 390)] + attn[1:] + harness,
    "cross_entropy": [fr("candle_core::tensor::Tensor::exp", CORE + "tensor.rs", 600),
                      fr("candle_nn::ops::log_softmax", NN + "ops.rs", 40),
                      fr("candle_nn::loss::cross_entropy", NN + "loss.rs", 40)] + harness,
    "hostile": [fr("evil\u001b[2J\u202e::" + "x" * 120 + "::make_batch", "examples/src/llama.rs", 60)] + harness,
    "bwd_matmul": [fr("gemm_common::gemm::gemm_basic_generic")] + matmul + [bwd(463)] + harness,
    "bwd_add": [fr("candle_core::cpu_backend::utils::binary_map"), fr("candle_core::tensor::Tensor::add", CORE + "tensor.rs", 120), bwd(465)] + harness,
    "bwd_zeros": [fr("__memset_avx2_unaligned_erms"), fr("candle_core::tensor::Tensor::zeros_like", CORE + "tensor.rs", 260),
                  fr("candle_core::backprop::GradStore::or_insert", CORE + "backprop.rs", 774), bwd(464)] + harness,
    "bwd_softmax": [fr("<candle_nn::ops::SoftmaxLastDim as candle_core::custom_op::CustomOp1>::bwd", NN + "ops.rs", 300), bwd(665)] + harness,
    "probe": [fr("core::sync::atomic::AtomicU64::fetch_add"),
              fr("<trace_probe::alloc::Tracking as core::alloc::global::GlobalAlloc>::alloc", "crates/trace-probe/src/alloc.rs", 90),
              fr("alloc::raw_vec::RawVec::allocate_in"), fr("candle_core::tensor::Tensor::add", CORE + "tensor.rs", 120), bwd(465)] + harness,
    "opt_sub": [fr("candle_core::cpu_backend::utils::binary_map"), fr("candle_core::tensor::Tensor::sub", CORE + "tensor.rs", 121),
                fr("<candle_nn::optim::AdamW as candle_nn::optim::Optimizer>::step", NN + "optim.rs", 180)] + harness,
    "opt_step": [fr("<candle_nn::optim::AdamW as candle_nn::optim::Optimizer>::step", NN + "optim.rs", 175)] + harness,
}
for (function, file, line), i in sorted(frames.items(), key=lambda kv: kv[1]):
    e = {"kind": "frame", "id": i, "function": function}
    if file:
        e["file"] = file
    if line:
        e["line"] = line
    w(e)
names = list(stacks)
for i, n in enumerate(names):
    w({"kind": "stack", "id": i, "frames": stacks[n]})
plan = ([("fwd_matmul", "s5")] * 40 + [("fwd_matmul_io", "s5")] * 10 + [("softmax", "s4")] * 20
        + [("cross_entropy", "s2")] * 5 + [("hostile", "s2")] * 5
        + [("bwd_matmul", "s6")] * 40 + [("bwd_add", "s6")] * 20 + [("bwd_zeros", "s6")] * 10
        + [("bwd_softmax", "s6")] * 15 + [("probe", "s6")] * 5
        + [("opt_sub", "s7")] * 25 + [("opt_step", "s7")] * 5
        + [("opt_step", "s1")] * 2)
assert len(plan) == 202
for i, (stack, span) in enumerate(plan):
    w({"kind": "sample", "timestamp_ns": 250_000 + i * 500_000, "thread": 1, "stack_id": names.index(stack), "span_id": span})
w({"kind": "sampler", "hz": 2000, "period_ns": 500000, "clock": "wall", "unwinder": "libgcc", "symbols": "line_tables",
   "unresolved_frames": 0, "truncated_stacks": 0,
   "threads": [{"thread": 1, "name": "main", "start_ns": 0, "end_ns": 101 * MS, "ticks": 205, "samples": 202,
                "lost_overrun": 3, "lost_buffer": 0}]})
w({"kind": "terminal", "outcome": "complete", "timestamp_ns": 101 * MS})
print("\n".join(out))
