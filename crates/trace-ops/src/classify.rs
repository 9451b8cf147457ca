//! One sampled stack → what the thread was doing: an op, a backward op, a non-op function or
//! the probe ([`StackClass`]), by the [`rules`](crate::rules). One pass over the stack's frames
//! (innermost first), no recursion.
//!
//! In order:
//! 1. **Probe**: the innermost `trace_probe` frame, when every frame inside it is a system
//!    frame (std, libc, the unwinder), is the probe's own cost (its span and memory
//!    bookkeeping, the tracking allocator) — unless the probe frame called the system
//!    allocator there (`malloc`, `calloc`'s zeroing, std's `System`): that is the allocation the
//!    program makes anyway, attributed as if the probe frame were not there. A probe frame with user or Candle
//!    frames inside it is a caller (the profiler's step wrapper, a probed module), not the cost.
//! 2. **Backward**: inside candle-core's `Tensor::backward`, the line of the `backward` frame
//!    names the backward op by the generated arm table: `<arm>.backward` (`matmul.backward`),
//!    `grad_accumulate` for `grads.or_insert(..)` (zeros) and for the `add`/`sub` into an
//!    accumulator, `backward.sort_nodes`, or `backward` (the loop around the arms; also every
//!    sample without a line or in another Candle version's file).
//! 3. **Op**: the outermost op frame (what the model called: `broadcast_add`, not the `add` it
//!    is built from); the innermost op frame is kept as `inner_op`.
//! 4. **Non-op**: the innermost frame that is not a system frame, named by its path
//!    (`candle_nn::optim::AdamW::step`, `llama::train_step`). A frame without a name (only an
//!    address: a stripped library, a JIT) ends that walk: the sample is [`UNSYMBOLISED`], never
//!    its caller's function (flameox #484's bug, issue 46); system frames inside it are its.
//!
//! The stack-derived module is the chain of `forward` / `forward_t` frames of types outside
//! candle-core and the probe, outermost first, each shortened to its last two path segments
//! (`llama2_c::Block/llama2_c::CausalSelfAttention/linear::Linear`).

use serde::Serialize;
use trace_schema::FrameEvent;

use crate::names::FnName;
use crate::rules::{self, BackwardLine, FrameRole};

/// What kind of thing a sample was in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum OpKind {
    /// A Candle operation of the public tensor API (`matmul`, `softmax_last_dim`).
    Op,
    /// A part of candle-core's backward (`matmul.backward`, `grad_accumulate`, `backward`).
    BackwardOp,
    /// No op: user code, optimizer bookkeeping, a library (named by its function).
    NonOp,
    /// The probe itself (its cost, counted).
    Probe,
}

impl OpKind {
    /// The snake_case name (`backward_op`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The classification of one stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackClass {
    /// The op's name (`matmul`, `matmul.backward`, `grad_accumulate`), or the function's path
    /// for a non-op or probe sample; [`UNSYMBOLISED`] when no frame has a name (a stripped
    /// binary: the flame tree still shows the addresses) or when the innermost frame that would
    /// name a non-op sample has none.
    pub op: String,
    /// What kind it is.
    pub kind: OpKind,
    /// The innermost op frame's op, when it differs from `op` (`add` inside `broadcast_add`,
    /// `matmul` inside `matmul.backward`).
    pub inner_op: Option<String>,
    /// The stack-derived module path (see the module docs), when the stack has `forward`
    /// frames of model types.
    pub stack_module: Option<String>,
    /// Index (innermost first) of the frame that names `op`: the op frame, the backward frame,
    /// the probe frame or the non-op frame; `None` when no frame has a name.
    pub op_frame: Option<usize>,
    /// A backward sample whose arm could not be read: no line (a build without line tables)
    /// or a line of another Candle version's `backprop.rs`; its op is `backward`.
    pub backward_line_unknown: bool,
    /// Frames more inner than the op frame that read or open files (indices, innermost first).
    pub file_io_frames: Vec<usize>,
}

/// Name for a stack without a single named frame.
pub const UNSYMBOLISED: &str = "(unsymbolised)";

/// Classifies a stack given its frames innermost first. O(frames).
pub fn classify_stack(frames: &[&FrameEvent]) -> StackClass {
    let roles: Vec<FrameRole> = frames.iter().map(|f| FrameRole::of(f)).collect();
    classify_roles(frames, &roles)
}

/// [`classify_stack`] with the frames' roles already computed (one per frame, same order):
/// callers that classify many stacks sharing a symbol table compute each frame's role once.
pub fn classify_roles(frames: &[&FrameEvent], roles: &[FrameRole]) -> StackClass {
    classify_with_io(frames, roles, None)
}

/// [`classify_roles`] with each frame's [`rules::is_file_io`] already known too (`io`, one per
/// frame, same order; `None`: asked of each frame below the op here). A sample table repeats
/// its frames in many stacks: asking once per frame, not once per stack it is in, is most of
/// the classification's time on a capture of a few hundred stacks.
pub(crate) fn classify_with_io(
    frames: &[&FrameEvent],
    roles: &[FrameRole],
    io: Option<&[bool]>,
) -> StackClass {
    debug_assert_eq!(frames.len(), roles.len());
    debug_assert!(io.is_none_or(|io| io.len() == frames.len()));
    let stack_module = stack_module(frames, roles);
    let is_io = |i: usize| match io {
        Some(io) => io[i],
        None => rules::is_file_io(frames[i]),
    };
    let io_below = |limit: usize| -> Vec<usize> {
        (0..limit.min(frames.len())).filter(|&i| is_io(i)).collect()
    };
    // 1. the probe
    let probe = roles.iter().position(|r| *r == FrameRole::Probe);
    let mut skip_probe_frames = false;
    if let Some(p) = probe {
        let inside = &roles[..p];
        if inside.iter().all(|r| *r == FrameRole::System) {
            // the probe frame called the system allocator: what runs below is the allocation
            let only_allocator = p > 0 && rules::is_allocator(frames[p - 1]);
            if only_allocator {
                skip_probe_frames = true;
            } else {
                return StackClass {
                    op: function_path(frames[p]),
                    kind: OpKind::Probe,
                    inner_op: None,
                    stack_module,
                    op_frame: Some(p),
                    backward_line_unknown: false,
                    file_io_frames: Vec::new(),
                };
            }
        }
    }
    // op frames, innermost first (their indices and names)
    let ops: Vec<(usize, &str)> = roles
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r {
            FrameRole::Op(op) => Some((i, op.as_str())),
            _ => None,
        })
        .collect();
    // 2. backward
    if let Some(b) = roles
        .iter()
        .position(|r| matches!(r, FrameRole::Backward { .. }))
    {
        let inside: Vec<(usize, &str)> = ops.iter().copied().filter(|&(i, _)| i < b).collect();
        let innermost = inside.first().map(|&(_, op)| op);
        let called = inside.last().map(|&(_, op)| op);
        let in_or_insert = roles[..b].contains(&FrameRole::OrInsert);
        let in_sort = roles[..b].contains(&FrameRole::SortNodes);
        let FrameRole::Backward {
            line,
            version_matches,
        } = roles[b]
        else {
            unreachable!("position matched a backward frame")
        };
        let mut unknown = false;
        let op = if in_or_insert {
            rules::GRAD_ACCUMULATE.to_string()
        } else if in_sort {
            rules::SORT_NODES.to_string()
        } else {
            match line
                .filter(|_| version_matches)
                .and_then(rules::backward_line)
            {
                Some((BackwardLine::SortNodes, _)) => rules::SORT_NODES.to_string(),
                Some((BackwardLine::Driver, _)) => rules::BACKWARD.to_string(),
                Some((BackwardLine::AccumulateZeros, _)) => rules::GRAD_ACCUMULATE.to_string(),
                Some((BackwardLine::AccumulateAdd, arm)) => match called {
                    None | Some("add") | Some("sub") => rules::GRAD_ACCUMULATE.to_string(),
                    Some(_) => format!("{arm}.backward"),
                },
                Some((BackwardLine::Arm, arm)) => format!("{arm}.backward"),
                None => {
                    unknown = true;
                    rules::BACKWARD.to_string()
                }
            }
        };
        let op = custom_op_arm(&op, &frames[..b]).unwrap_or(op);
        return StackClass {
            op,
            kind: OpKind::BackwardOp,
            inner_op: innermost.map(str::to_string),
            stack_module,
            op_frame: Some(b),
            backward_line_unknown: unknown,
            file_io_frames: io_below(b),
        };
    }
    // 3. an op
    if let (Some(&(inner_i, inner)), Some(&(outer_i, outer))) = (ops.first(), ops.last()) {
        return StackClass {
            op: outer.to_string(),
            kind: OpKind::Op,
            inner_op: (inner_i != outer_i && inner != outer).then(|| inner.to_string()),
            stack_module,
            op_frame: Some(outer_i),
            backward_line_unknown: false,
            file_io_frames: io_below(outer_i),
        };
    }
    // 4. no op: the innermost frame that is not a system frame (nor, when skipped, the probe's);
    // a frame without a name stops the walk: its time is its own, never its caller's
    let named = roles
        .iter()
        .enumerate()
        .position(|(i, r)| match r {
            FrameRole::System => frames[i].function.is_none(),
            FrameRole::Probe => !skip_probe_frames,
            _ => true,
        })
        .or_else(|| frames.iter().position(|f| f.function.is_some()));
    let op = match named {
        Some(i) if frames[i].function.is_some() => function_path(frames[i]),
        _ => UNSYMBOLISED.to_string(),
    };
    StackClass {
        op,
        kind: OpKind::NonOp,
        inner_op: None,
        stack_module,
        op_frame: named,
        backward_line_unknown: false,
        file_io_frames: Vec::new(),
    }
}

/// A custom op's arm (`custom_op1.backward`) named by the candle-nn op whose `bwd` runs inside
/// it ([`rules::NN_CUSTOM_OP_ARMS`]: `<candle_nn::ops::Sigmoid as …CustomOp1>::bwd` →
/// `sigmoid.backward`): the arm alone cannot tell candle-nn's fused ops from a user's own
/// custom op, which keeps `custom_opN.backward`. `inside` are the frames inside the backward
/// frame.
fn custom_op_arm(op: &str, inside: &[&FrameEvent]) -> Option<String> {
    if !(op.starts_with("custom_op") && op.ends_with(".backward")) {
        return None;
    }
    inside.iter().find_map(|f| {
        let name = FnName::parse(f.function.as_deref()?);
        if name.method() != "bwd" {
            return None;
        }
        let (ty, _) = name.self_type()?;
        rules::NN_CUSTOM_OP_ARMS
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, arm)| arm.to_string())
    })
}

/// A frame's function path without closures and generic arguments, a trait method named by
/// its type (`<candle_nn::optim::AdamW as candle_nn::optim::Optimizer>::step` →
/// `candle_nn::optim::AdamW::step`); its address when it has no name.
pub fn function_path(frame: &FrameEvent) -> String {
    match frame.function.as_deref() {
        Some(f) => crate::names::display_path(f, frame.file.as_deref()),
        None => frame
            .address
            .clone()
            .unwrap_or_else(|| UNSYMBOLISED.to_string()),
    }
}

/// The chain of model `forward` frames, outermost first (see the module docs).
fn stack_module(frames: &[&FrameEvent], roles: &[FrameRole]) -> Option<String> {
    let mut chain: Vec<String> = Vec::new();
    for i in (0..frames.len()).rev() {
        if roles[i] != FrameRole::Other {
            continue;
        }
        let Some(f) = frames[i].function.as_deref() else {
            continue;
        };
        let name = FnName::parse(f);
        if !matches!(name.method(), "forward" | "forward_t") {
            continue;
        }
        // the type from a full path, else (a short inlined name) the module of its file
        let ty = match name.self_type() {
            Some((ty, _)) => ty,
            None if !crate::names::is_full_path(f) => {
                match frames[i]
                    .file
                    .as_deref()
                    .and_then(crate::names::SourcePath::parse)
                {
                    Some(src) => src.path(),
                    None => continue,
                }
            }
            None => continue,
        };
        let ty = ty.split('<').next().unwrap_or(&ty);
        if !ty.contains("::")
            || ty.starts_with("candle_core::")
            || rules::PROBE_CRATES.iter().any(|c| ty.starts_with(c))
        {
            continue;
        }
        let parts: Vec<&str> = ty.rsplitn(3, "::").collect();
        let short = match parts.as_slice() {
            [last, module, ..] => format!("{module}::{last}"),
            _ => ty.to_string(),
        };
        if chain.last() != Some(&short) {
            chain.push(short);
        }
    }
    (!chain.is_empty()).then(|| chain.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORE: &str =
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-core-0.11.1/src";
    const NN: &str =
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-nn-0.11.1/src";

    fn f(function: &str, file: &str, line: u32) -> FrameEvent {
        FrameEvent {
            id: 0,
            function: Some(function.into()),
            file: (!file.is_empty()).then(|| file.to_string()),
            line: (line > 0).then_some(line),
            module: None,
            address: None,
        }
    }

    fn class(frames: &[FrameEvent]) -> StackClass {
        let refs: Vec<&FrameEvent> = frames.iter().collect();
        classify_stack(&refs)
    }

    #[test]
    fn forward_matmul_is_the_outermost_op_with_its_module_from_the_stack() {
        let frames = [
            f("gemm_f32::microkernel::fma::f32::x86_microkernel", "", 0),
            f("gemm_common::gemm::gemm_basic_generic", "", 0),
            f(
                "candle_core::cpu_backend::MatMul::f",
                &format!("{CORE}/cpu_backend/mod.rs"),
                1400,
            ),
            f(
                "candle_core::storage::Storage::matmul",
                &format!("{CORE}/storage.rs"),
                700,
            ),
            f(
                "candle_core::tensor::Tensor::matmul",
                &format!("{CORE}/tensor.rs"),
                1250,
            ),
            f(
                "candle_core::tensor::Tensor::broadcast_matmul",
                &format!("{CORE}/tensor.rs"),
                1300,
            ),
            f(
                "<candle_nn::linear::Linear as candle_core::Module>::forward",
                &format!("{NN}/linear.rs"),
                50,
            ),
            f(
                "candle_transformers::models::llama2_c::CausalSelfAttention::forward",
                "",
                0,
            ),
            f(
                "candle_transformers::models::llama2_c::Block::forward",
                "",
                0,
            ),
            f("llama::train_step", "examples/src/llama.rs", 80),
            f("trace_probe::run::ProfileRun::capture", "", 0),
            f("main", "", 0),
        ];
        let c = class(&frames);
        assert_eq!(c.kind, OpKind::Op);
        assert_eq!(c.op, "broadcast_matmul");
        assert_eq!(c.inner_op.as_deref(), Some("matmul"));
        assert_eq!(c.op_frame, Some(5));
        assert_eq!(
            c.stack_module.as_deref(),
            Some("llama2_c::Block/llama2_c::CausalSelfAttention/linear::Linear")
        );
    }

    #[test]
    fn backward_arms_accumulation_and_the_sort() {
        let bwd = |line: u32| {
            f(
                "candle_core::backprop::<impl candle_core::tensor::Tensor>::backward",
                &format!("{CORE}/backprop.rs"),
                line,
            )
        };
        let matmul = f(
            "candle_core::tensor::Tensor::matmul",
            &format!("{CORE}/tensor.rs"),
            1250,
        );
        let add = f(
            "candle_core::tensor::Tensor::add",
            &format!("{CORE}/tensor.rs"),
            120,
        );
        let div = f("<&candle_core::tensor::Tensor as core::ops::arith::Div<&candle_core::tensor::Tensor>>::div", &format!("{CORE}/tensor.rs"), 3050);
        let zeros = f(
            "candle_core::tensor::Tensor::zeros_like",
            &format!("{CORE}/tensor.rs"),
            260,
        );
        let or_insert = f(
            "candle_core::backprop::GradStore::or_insert",
            &format!("{CORE}/backprop.rs"),
            774,
        );
        let main = f("llama::train_step", "", 0);
        // grad.matmul(&rhs.t()?) in the Matmul arm
        let c = class(&[matmul.clone(), bwd(463), main.clone()]);
        assert_eq!(
            (c.op.as_str(), c.kind, c.inner_op.as_deref()),
            ("matmul.backward", OpKind::BackwardOp, Some("matmul"))
        );
        // *lhs_sum_grad = lhs_sum_grad.add(&lhs_grad)?
        let c = class(&[add.clone(), bwd(465), main.clone()]);
        assert_eq!(c.op, "grad_accumulate");
        // grads.or_insert(lhs): zeros of a new accumulator, inlined or not
        let c = class(&[zeros.clone(), or_insert, bwd(464), main.clone()]);
        assert_eq!(c.op, "grad_accumulate");
        let c = class(&[zeros, bwd(464), main.clone()]);
        assert_eq!(c.op, "grad_accumulate");
        // *sum_grad = sum_grad.add(&(grad / arg)?)? in the Log arm: the div is the arm's
        let c = class(&[div, bwd(538), main.clone()]);
        assert_eq!(c.op, "log.backward");
        // the sort, the driver, an unknown line
        let walk = f(
            "candle_core::backprop::<impl candle_core::tensor::Tensor>::sorted_nodes::walk",
            "",
            0,
        );
        assert_eq!(
            class(&[walk, bwd(166), main.clone()]).op,
            "backward.sort_nodes"
        );
        assert_eq!(class(&[bwd(174), main.clone()]).op, "backward");
        let no_line = class(&[matmul, bwd(0), main]);
        assert_eq!(
            (no_line.op.as_str(), no_line.backward_line_unknown),
            ("backward", true)
        );
    }

    #[test]
    fn the_probe_is_counted_but_not_its_callers_nor_the_allocation() {
        let main = f("llama::train_step", "", 0);
        let matmul = f("candle_core::tensor::Tensor::matmul", "", 0);
        let tracking = f(
            "<trace_probe::alloc::Tracking as core::alloc::global::GlobalAlloc>::alloc",
            "",
            0,
        );
        let harness = f("trace_probe::run::ProfileRun::capture", "", 0);
        // the tracking allocator's bookkeeping inside matmul: the probe
        let c = class(&[
            f("core::sync::atomic::AtomicU64::fetch_add", "", 0),
            tracking.clone(),
            f("alloc::raw_vec::RawVec::allocate_in", "", 0),
            matmul.clone(),
            main.clone(),
            harness.clone(),
        ]);
        assert_eq!(
            (c.kind, c.op.as_str()),
            (OpKind::Probe, "trace_probe::alloc::Tracking::alloc")
        );
        // malloc under the tracking allocator: the allocation matmul makes anyway
        let c = class(&[
            f("__libc_malloc", "", 0),
            f(
                "<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
                "",
                0,
            ),
            tracking,
            matmul,
            main.clone(),
            harness.clone(),
        ]);
        assert_eq!((c.kind, c.op.as_str()), (OpKind::Op, "matmul"));
        // user code under the profiler's step wrapper: user code
        let c = class(&[
            f("llama::batch::{{closure}}", "", 0),
            main.clone(),
            harness.clone(),
        ]);
        assert_eq!((c.kind, c.op.as_str()), (OpKind::NonOp, "llama::batch"));
        // the probe's event encoding (trace-wire) under its gradient registration: the probe
        let c = class(&[
            f("__libc_malloc", "", 0),
            f(
                "<alloc::string::String as core::clone::Clone>::clone",
                "",
                0,
            ),
            f(
                "<trace_wire::event::Event as core::clone::Clone>::clone",
                "",
                0,
            ),
            f("trace_probe::grads::register_grads", "", 0),
            main,
            harness,
        ]);
        assert_eq!(c.kind, OpKind::Probe, "{}", c.op);
    }

    #[test]
    fn file_io_below_an_op_and_unsymbolised_stacks() {
        let frames = [
            f("__libc_read", "", 0),
            f("std::fs::read_to_string::inner", "", 0),
            f("num_cpus::linux::get_num_physical_cpus", "", 0),
            f("num_cpus::get_physical", "", 0),
            f("candle_core::utils::get_num_threads", "", 0),
            f("candle_core::cpu_backend::MatMul::f", "", 0),
            f("candle_core::tensor::Tensor::matmul", "", 0),
            f("mlp::train_step", "", 0),
        ];
        let c = class(&frames);
        assert_eq!(
            (c.op.as_str(), c.file_io_frames.clone()),
            ("matmul", vec![0, 1])
        );
        let unnamed = FrameEvent {
            id: 0,
            function: None,
            file: None,
            line: None,
            module: None,
            address: Some("0x1".into()),
        };
        let c = class(std::slice::from_ref(&unnamed));
        assert_eq!((c.kind, c.op.as_str()), (OpKind::NonOp, UNSYMBOLISED));
        let c = class(&[]);
        assert_eq!(c.op, UNSYMBOLISED);
        let opt = class(&[
            f("candle_nn::optim::AdamW::step", "", 0),
            f("mlp::train_step", "", 0),
        ]);
        assert_eq!(
            (opt.kind, opt.op.as_str()),
            (OpKind::NonOp, "candle_nn::optim::AdamW::step")
        );
    }

    #[test]
    fn layers_without_an_op_module_are_one_op_and_sigmoid_names_its_arm() {
        let bwd = f(
            "candle_core::backprop::<impl candle_core::tensor::Tensor>::backward",
            &format!("{CORE}/backprop.rs"),
            665,
        );
        let main = f("conformance::train_step", "", 0);
        let matmul = f(
            "candle_core::tensor::Tensor::matmul",
            &format!("{CORE}/tensor.rs"),
            1250,
        );
        // the GRU's step encloses its matmuls: the op is the layer's, as aten::gru is one op
        let step = f(
            "<candle_nn::rnn::GRU as candle_nn::rnn::RNN>::step",
            &format!("{NN}/rnn.rs"),
            370,
        );
        let seq = f("candle_nn::rnn::RNN::seq_init", &format!("{NN}/rnn.rs"), 36);
        let c = class(&[matmul.clone(), step, seq, main.clone()]);
        assert_eq!((c.kind, c.op.as_str()), (OpKind::Op, "rnn_seq"));
        assert_eq!(c.inner_op.as_deref(), Some("matmul"));
        let bn = f(
            "candle_nn::batch_norm::BatchNorm::forward_train",
            &format!("{NN}/batch_norm.rs"),
            227,
        );
        let sub = f(
            "candle_core::tensor::Tensor::broadcast_sub",
            &format!("{CORE}/tensor.rs"),
            621,
        );
        let c = class(&[sub, bn, main.clone()]);
        assert_eq!((c.kind, c.op.as_str()), (OpKind::Op, "batch_norm"));
        // a short (inlined) name in the layer's file names it too
        let short = f("forward_train", &format!("{NN}/batch_norm.rs"), 227);
        assert_eq!(class(&[short, main.clone()]).op, "batch_norm");
        // a hash suffix does not hide the layer
        assert_eq!(
            crate::rules::layer_op("candle_core::variable::Var::set::h0123456789abcdef"),
            Some("var_set")
        );
        assert_eq!(
            crate::rules::layer_op("candle_core::variable::Var::set_x"),
            None
        );
        // the custom-op arm with candle-nn's Sigmoid::bwd inside is sigmoid's backward
        let sig = f(
            "<candle_nn::ops::Sigmoid as candle_core::custom_op::CustomOp1>::bwd",
            &format!("{NN}/ops.rs"),
            210,
        );
        let c = class(&[sig, bwd.clone(), main.clone()]);
        assert_eq!(
            (c.kind, c.op.as_str()),
            (OpKind::BackwardOp, "sigmoid.backward")
        );
        // another custom op's bwd (a user's) keeps the arm's name
        let mine = f(
            "<my_crate::MyOp as candle_core::custom_op::CustomOp1>::bwd",
            "",
            0,
        );
        assert_eq!(class(&[mine, bwd, main]).op, "custom_op1.backward");
    }
}
