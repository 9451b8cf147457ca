//! The mapping from sampled frames to operations, as data in one place. Every table names its
//! source in Candle 0.11.1 (paths inside the published crates,
//! `~/.cargo/registry/src/*/candle-core-0.11.1/…`); [`classify`](crate::classify) applies them.
//!
//! - [`OP_MODULES`]: where Candle's public tensor API lives. A frame is an **op frame** when its
//!   function is a `Tensor` method (or an arithmetic / indexing trait method on `Tensor`) of
//!   one of candle-core's op modules, or a free function of one of candle-nn's, and is not an
//!   internal helper ([`generated::HELPERS`], [`NOT_OPS`]).
//! - [`generated::BACKWARD_LINES`]: what each line of candle-core's `Tensor::backward` does
//!   (the `match` arm it is in, gradient accumulation, the node sort), generated from
//!   `src/backprop.rs` by `scripts/candle-op-tables.py`.
//! - [`SYSTEM_CRATES`]: frames that never name what a sample is doing (std, core, alloc, the
//!   unwinder and symboliser, C symbols of libc); [`ALLOCATOR_SYMBOLS`]: the system allocator;
//!   [`FILE_IO`]: functions that read or open files.
//! - [`PROBE_CRATE`]: the probe's own frames (its cost is counted, never hidden).

pub mod candle_ops;
pub mod generated;
mod layers;
mod line_kind;
mod role;

pub use layers::{layer_op, LayerOp, LAYER_OPS, NN_CUSTOM_OP_ARMS};
pub use line_kind::BackwardLine;
pub use role::FrameRole;

use trace_schema::FrameEvent;

use crate::names::{display_path, is_full_path, FnName, SourcePath};

/// A module of Candle's public tensor API whose functions are operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpModule {
    /// Crate name in paths (`candle_core`).
    pub crate_name: &'static str,
    /// Crate directory in source paths (`candle-core`: `…/candle-core-0.11.1/src/…` or a
    /// checkout's `…/candle-core/src/…`).
    pub crate_dir: &'static str,
    /// Module (`tensor`).
    pub module: &'static str,
    /// Source file inside the crate (`src/tensor.rs`).
    pub file: &'static str,
    /// Its ops are methods of `Tensor` (candle-core) rather than free functions (candle-nn).
    pub tensor_methods: bool,
}

/// The op modules of Candle 0.11.1. Sources: candle-core `src/tensor.rs` (`impl Tensor`,
/// the `unary_op!` / `binary_op!` / `broadcast_binary_op!` methods and the `bin_trait!`
/// arithmetic impls), `src/tensor_cat.rs` (`cat`, `stack`), `src/conv.rs` (`conv1d`, `conv2d`,
/// transposed), `src/indexer.rs` (`IndexOp::i`), `src/custom_op.rs` (`apply_op1/2/3`),
/// `src/sort.rs` (`arg_sort_last_dim`, `sort_last_dim`); candle-nn `src/ops.rs`
/// (`softmax_last_dim`, `rms_norm`, `sigmoid`, …), `src/loss.rs` (`cross_entropy`, `nll`,
/// `mse`), `src/rotary_emb.rs` (`rope`, `rope_i`), `src/kv_cache.rs` is not an op module.
pub const OP_MODULES: &[OpModule] = &[
    op(
        "candle_core",
        "candle-core",
        "tensor",
        "src/tensor.rs",
        true,
    ),
    op(
        "candle_core",
        "candle-core",
        "tensor_cat",
        "src/tensor_cat.rs",
        true,
    ),
    op("candle_core", "candle-core", "conv", "src/conv.rs", true),
    op(
        "candle_core",
        "candle-core",
        "indexer",
        "src/indexer.rs",
        true,
    ),
    op(
        "candle_core",
        "candle-core",
        "custom_op",
        "src/custom_op.rs",
        true,
    ),
    op("candle_core", "candle-core", "sort", "src/sort.rs", true),
    op("candle_nn", "candle-nn", "ops", "src/ops.rs", false),
    op("candle_nn", "candle-nn", "loss", "src/loss.rs", false),
    op(
        "candle_nn",
        "candle-nn",
        "rotary_emb",
        "src/rotary_emb.rs",
        false,
    ),
];

const fn op(
    crate_name: &'static str,
    crate_dir: &'static str,
    module: &'static str,
    file: &'static str,
    tensor_methods: bool,
) -> OpModule {
    OpModule {
        crate_name,
        crate_dir,
        module,
        file,
        tensor_methods,
    }
}

/// Public functions of the op modules that are not operations: accessors that compute
/// nothing (candle-core `src/tensor.rs`: `dims`, `shape`, `dtype`, …, `src/shape.rs`'s
/// `dims0..dims5` through `Tensor`), and the custom-op plumbing every fused candle-nn op goes
/// through (`src/custom_op.rs`: `apply_op1_no_bwd`, `apply_op1_arc`, …). Together with
/// [`generated::HELPERS`] (the non-public functions of the op files).
pub const NOT_OPS: &[&str] = &[
    "dims",
    "dim",
    "dims0",
    "dims1",
    "dims2",
    "dims3",
    "dims4",
    "dims5",
    "shape",
    "rank",
    "elem_count",
    "dtype",
    "device",
    "layout",
    "stride",
    "id",
    "is_contiguous",
    "is_fortran_contiguous",
    "is_variable",
    "storage_and_layout",
    "track_op",
    "apply_op1_no_bwd",
    "apply_op2_no_bwd",
    "apply_op3_no_bwd",
    "apply_op1_arc",
    "apply_op2_arc",
    "apply_op3_arc",
    "clone",
    "drop",
    "fmt",
    "deref",
    "as_ref",
];

/// Trait paths whose methods on `Tensor` are operations when the frame has no file to say so
/// (candle-core `src/tensor.rs`'s `bin_trait!`: `Add`, `Sub`, `Mul`, `Div` on `Tensor`,
/// `&Tensor`, `f64`; `src/indexer.rs`'s `IndexOp`).
pub const OP_TRAITS: &[&str] = &["core::ops::arith::", "candle_core::indexer::IndexOp"];

/// The crate of the probe: a frame of it more inner than every op frame is the probe's cost.
pub const PROBE_CRATE: &str = "trace_probe";

/// Every crate of the probe: [`PROBE_CRATE`] and the three it is built on, the allocator hook
/// (`trace_alloc`), the stack sampler (`trace_sampler`) and the trace's events and writer
/// (`trace_wire`).
pub const PROBE_CRATES: &[&str] = &[PROBE_CRATE, "trace_alloc", "trace_sampler", "trace_wire"];

/// Crates whose frames never name what a sample is doing: the standard library, the unwinder
/// and symboliser the probe links (`backtrace` and its `gimli`, `addr2line`, `object`,
/// `miniz_oxide`, `rustc_demangle`). C symbols (no `::`, e.g. libc's `read`, `memcpy`,
/// `syscall`) are system frames too.
pub const SYSTEM_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "backtrace",
    "gimli",
    "addr2line",
    "object",
    "miniz_oxide",
    "rustc_demangle",
    "panic_unwind",
    "compiler_builtins",
];

/// The system allocator: a probe frame (the tracking allocator) whose inner frames are only
/// these is the allocation the program makes anyway, not the probe's cost. C symbols containing
/// one of these words, or Rust paths starting with one of [`ALLOCATOR_PATHS`].
pub const ALLOCATOR_SYMBOLS: &[&str] = &[
    "malloc", "free", "calloc", "realloc", "memalign", "mmap", "munmap", "madvise", "brk", "alloc",
];

/// The global-allocator shims rustc writes into the binary (`__rust_alloc`, `__rdl_alloc`, …,
/// attributed to the file of the `#[global_allocator]`): system frames.
pub const ALLOCATOR_SHIMS: &[&str] = &["__rust_", "__rdl_", "__rg_"];

/// Rust paths of the system allocator (std's `System`, the `__rdl_*` shims).
pub const ALLOCATOR_PATHS: &[&str] = &[
    "std::sys::alloc",
    "std::alloc::",
    "std::sys::pal::unix::alloc",
    "<std::alloc::System as",
    "__rdl_",
    "__rust_alloc",
    "__rust_dealloc",
    "__rust_realloc",
    "__rust_alloc_zeroed",
];

/// Functions that open or read files: Rust paths by prefix (std's `fs`), C symbols by exact
/// name (glibc's `read`, `open64`, …). A sample with one below an op frame is file I/O inside
/// that op (on Candle 0.11.1: `candle_core::utils::get_num_threads` →
/// `num_cpus::get_physical` reading /proc/cpuinfo on every CPU matmul while
/// `RAYON_NUM_THREADS` is unset).
pub const FILE_IO: FileIo = FileIo {
    rust_prefixes: &[
        "std::fs::",
        "<std::fs::File as std::io::Read>",
        "<&std::fs::File as std::io::Read>",
        "std::sys::fs::",
        "std::sys::pal::unix::fs::",
        "std::sys::unix::fs::",
        "std::io::default_read_to_end",
        "std::io::read_to_string",
        "std::io::default_read_buf",
        "std::sys::pal::unix::fd::",
        "std::sys::fd::",
    ],
    c_symbols: &[
        "read",
        "__read",
        "__libc_read",
        "__read_nocancel",
        "pread64",
        "__pread64",
        "open",
        "open64",
        "__open64",
        "__libc_open64",
        "__open64_nocancel",
        "openat",
        "openat64",
        "__openat64",
        "__libc_openat64",
        "fopen",
        "fopen64",
        "fread",
        "fgets",
        "getline",
        "getdelim",
        "statx",
        "__statx",
        "fstat64",
        "__fstat64",
    ],
};

/// See [`FILE_IO`].
#[derive(Debug, Clone, Copy)]
pub struct FileIo {
    /// Rust function paths, by prefix.
    pub rust_prefixes: &'static [&'static str],
    /// C symbols, exact.
    pub c_symbols: &'static [&'static str],
}

/// The op name of the gradient accumulation (zeros then add, per accumulator).
pub const GRAD_ACCUMULATE: &str = "grad_accumulate";
/// The op name of the node sort before the backward loop.
pub const SORT_NODES: &str = "backward.sort_nodes";
/// The op name of the backward driver, and of every backward sample whose line is unknown
/// (a build without line tables) or outside the table (another Candle version).
pub const BACKWARD: &str = "backward";

/// The first line of the statement `line` of `Tensor::backward` is in
/// ([`generated::BACKWARD_STATEMENTS`]; a line that begins its statement is its own).
pub fn backward_statement(line: u32) -> u32 {
    let table = generated::BACKWARD_STATEMENTS;
    table
        .binary_search_by_key(&line, |&(l, _)| l)
        .map_or(line, |i| table[i].1)
}

/// The entry of `line` in [`generated::BACKWARD_LINES`] (binary search), `None` outside
/// `Tensor::backward`.
pub fn backward_line(line: u32) -> Option<(BackwardLine, &'static str)> {
    let table = generated::BACKWARD_LINES;
    table
        .binary_search_by_key(&line, |&(l, _, _)| l)
        .ok()
        .map(|i| (table[i].1, table[i].2))
}

/// The op a function name is, per [`OP_MODULES`], or `None`.
pub fn op_name<'a>(name: &FnName<'a>, file: Option<&str>) -> Option<&'a str> {
    let method = name.method();
    if method.is_empty() || NOT_OPS.contains(&method) || generated::HELPERS.contains(&method) {
        return None;
    }
    let krate = name.crate_name();
    let segs = &name.segments;
    match name.self_type() {
        Some((ty, tr)) if ty == "candle_core::tensor::Tensor" || ty == "candle_core::Tensor" => {
            if let Some(tr) = tr {
                // a trait method on Tensor: an op when written in an op file, or (no file) an
                // arithmetic / indexing trait
                return match file {
                    Some(f) => op_module_of_file(f)
                        .filter(|m| m.tensor_methods)
                        .map(|_| method),
                    None => OP_TRAITS
                        .iter()
                        .any(|p| tr.starts_with(p))
                        .then_some(method),
                };
            }
            // `candle_core::<module>::Tensor::m` or `candle_core::<module>::<impl Tensor>::m`
            let module = segs.get(1).copied()?;
            OP_MODULES
                .iter()
                .any(|m| m.tensor_methods && m.crate_name == krate && m.module == module)
                .then_some(method)
        }
        Some(_) => None, // another type's method (a layer, a kernel): not an op
        None => {
            // a free function `candle_nn::<module>::f`
            (segs.len() == 3
                && OP_MODULES
                    .iter()
                    .any(|m| !m.tensor_methods && m.crate_name == segs[0] && m.module == segs[1]))
            .then_some(method)
        }
    }
}

/// The op module a source path is in (`…/candle-core-0.11.1/src/tensor.rs`).
pub fn op_module_of_file(file: &str) -> Option<&'static OpModule> {
    let file = file.replace('\\', "/");
    OP_MODULES.iter().find(|m| {
        let Some(rest) = file.strip_suffix(m.file) else {
            return false;
        };
        let rest = rest.trim_end_matches('/');
        let dir = rest.rsplit('/').next().unwrap_or(rest);
        dir == m.crate_dir || dir.starts_with(&format!("{}-", m.crate_dir))
    })
}

/// The frame is the system allocator ([`ALLOCATOR_SYMBOLS`], [`ALLOCATOR_PATHS`]).
pub fn is_allocator(frame: &FrameEvent) -> bool {
    let Some(f) = frame.function.as_deref() else {
        return false;
    };
    let path = display_path(f, frame.file.as_deref());
    if ALLOCATOR_PATHS
        .iter()
        .any(|p| f.starts_with(p) || path.starts_with(p))
    {
        return true;
    }
    // a C symbol: no Rust source file names its crate
    frame.file.as_deref().and_then(SourcePath::parse).is_none()
        && !is_full_path(f)
        && ALLOCATOR_SYMBOLS.iter().any(|w| f.contains(w))
}

/// The frame opens or reads a file ([`FILE_IO`]).
pub fn is_file_io(frame: &FrameEvent) -> bool {
    let Some(f) = frame.function.as_deref() else {
        return false;
    };
    if frame.file.as_deref().and_then(SourcePath::parse).is_none() && !is_full_path(f) {
        return FILE_IO.c_symbols.contains(&f);
    }
    let path = display_path(f, frame.file.as_deref());
    FILE_IO
        .rust_prefixes
        .iter()
        .any(|p| f.starts_with(p) || path.starts_with(p))
}

/// Advice for file I/O found below an op, keyed by a function on the path from the op to the
/// I/O (the first key found, outermost first, wins: the one closest to what a user
/// changes). Data, not detection: the finding is made
/// from the samples whatever the function; this only says what to do about known ones.
pub const FILE_IO_ADVICE: &[(&str, &str)] = &[
    (
        "candle_core::utils::get_num_threads",
        "candle-core 0.11.1 calls num_cpus::get_physical (which reads /proc/cpuinfo) on every CPU matmul unless RAYON_NUM_THREADS is set: set RAYON_NUM_THREADS (e.g. to the number of cores) before the process starts",
    ),
    (
        "num_cpus::get_physical",
        "num_cpus::get_physical reads /proc/cpuinfo on every call: call it once and keep the result (in Candle 0.11.1, set RAYON_NUM_THREADS so candle_core::utils::get_num_threads skips it)",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> FrameEvent {
        FrameEvent {
            id: 0,
            function: Some(function.to_string()),
            file: file.map(str::to_string),
            line,
            module: None,
            address: None,
        }
    }

    const CORE: &str =
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-core-0.11.1/src/";

    #[test]
    fn op_frames_of_the_public_api() {
        let cases: &[(&str, Option<&str>, Option<&str>)] = &[
            (
                "candle_core::tensor::Tensor::matmul",
                Some("tensor.rs"),
                Some("matmul"),
            ),
            (
                "candle_core::tensor::Tensor::broadcast_add",
                None,
                Some("broadcast_add"),
            ),
            (
                "candle_core::tensor::Tensor::matmul::{{closure}}",
                None,
                Some("matmul"),
            ),
            (
                "candle_core::tensor::Tensor::same_shape_binary_op",
                Some("tensor.rs"),
                None,
            ),
            ("candle_core::tensor::Tensor::dims4", None, None),
            (
                "candle_core::tensor_cat::<impl candle_core::tensor::Tensor>::cat",
                Some("tensor_cat.rs"),
                Some("cat"),
            ),
            (
                "candle_core::tensor_cat::<impl candle_core::tensor::Tensor>::cat0",
                Some("tensor_cat.rs"),
                None,
            ),
            (
                "candle_core::conv::<impl candle_core::tensor::Tensor>::conv2d",
                Some("conv.rs"),
                Some("conv2d"),
            ),
            (
                "candle_core::custom_op::<impl candle_core::tensor::Tensor>::apply_op1_no_bwd",
                Some("custom_op.rs"),
                None,
            ),
            (
                "<&candle_core::tensor::Tensor as core::ops::arith::Add<f64>>::add",
                Some("tensor.rs"),
                Some("add"),
            ),
            (
                "<candle_core::tensor::Tensor as core::ops::arith::Mul>::mul",
                None,
                Some("mul"),
            ),
            (
                "<candle_core::tensor::Tensor as candle_core::indexer::IndexOp<(A,)>>::i",
                Some("indexer.rs"),
                Some("i"),
            ),
            (
                "<candle_core::tensor::Tensor as core::clone::Clone>::clone",
                Some("tensor.rs"),
                None,
            ),
            (
                "candle_nn::ops::softmax_last_dim",
                Some("ops.rs"),
                Some("softmax_last_dim"),
            ),
            (
                "candle_nn::loss::cross_entropy",
                None,
                Some("cross_entropy"),
            ),
            (
                "<candle_nn::ops::SoftmaxLastDim as candle_core::custom_op::CustomOp1>::cpu_fwd",
                Some("ops.rs"),
                None,
            ),
            (
                "<candle_nn::linear::Linear as candle_core::Module>::forward",
                Some("linear.rs"),
                None,
            ),
            ("candle_core::cpu_backend::MatMul::f", None, None),
            ("candle_nn::optim::AdamW::step", None, None),
        ];
        for &(f, file, want) in cases {
            let crate_dir = if f.contains("candle_nn") {
                "candle-nn-0.11.1"
            } else {
                "candle-core-0.11.1"
            };
            let file = file.map(|x| format!("/r/{crate_dir}/src/{x}"));
            let role = FrameRole::of(&frame(f, file.as_deref(), Some(10)));
            let got = match role {
                FrameRole::Op(op) => Some(op),
                _ => None,
            };
            assert_eq!(got.as_deref(), want, "{f}");
        }
    }

    #[test]
    fn backward_frames_and_the_line_table() {
        let f = frame(
            "candle_core::backprop::<impl candle_core::tensor::Tensor>::backward",
            Some(&format!("{CORE}backprop.rs")),
            Some(463),
        );
        assert_eq!(
            FrameRole::of(&f),
            FrameRole::Backward {
                line: Some(463),
                version_matches: true
            }
        );
        assert_eq!(backward_line(463), Some((BackwardLine::Arm, "matmul")));
        assert_eq!(
            backward_line(464),
            Some((BackwardLine::AccumulateZeros, "matmul"))
        );
        assert_eq!(
            backward_line(465),
            Some((BackwardLine::AccumulateAdd, "matmul"))
        );
        assert_eq!(backward_line(166), Some((BackwardLine::SortNodes, "")));
        assert_eq!(
            backward_line(525),
            Some((BackwardLine::AccumulateAdd, "to_dtype"))
        );
        assert_eq!(backward_line(665), Some((BackwardLine::Arm, "custom_op1")));
        assert_eq!(backward_line(100), None);
        let other = frame(
            "candle_core::backprop::<impl candle_core::tensor::Tensor>::backward",
            Some("/r/candle-core-0.9.1/src/backprop.rs"),
            Some(463),
        );
        assert_eq!(
            FrameRole::of(&other),
            FrameRole::Backward {
                line: Some(463),
                version_matches: false
            }
        );
        let or_insert = frame(
            "candle_core::backprop::GradStore::or_insert",
            None,
            Some(774),
        );
        assert_eq!(FrameRole::of(&or_insert), FrameRole::OrInsert);
        let walk = frame(
            "candle_core::backprop::<impl candle_core::tensor::Tensor>::sorted_nodes::walk",
            None,
            None,
        );
        assert_eq!(FrameRole::of(&walk), FrameRole::SortNodes);
    }

    #[test]
    fn the_generated_table_is_well_formed() {
        let t = generated::BACKWARD_LINES;
        let (first, last) = generated::BACKWARD_FN_LINES;
        // ascending, unique, every line after the signature to the closing brace
        assert!(
            t.windows(2).all(|w| w[0].0 + 1 == w[1].0),
            "lines ascend without gaps"
        );
        assert_eq!((t[0].0, t[t.len() - 1].0), (first + 1, last));
        for &(line, kind, arm) in t {
            match kind {
                BackwardLine::SortNodes | BackwardLine::Driver => assert!(arm.is_empty(), "{line}"),
                _ => {
                    assert!(!arm.is_empty(), "{line}");
                    assert!(
                        arm.split('|').all(|a| !a.is_empty()
                            && a.chars()
                                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')),
                        "{line}: {arm}"
                    );
                }
            }
        }
        assert_eq!(
            t.iter().filter(|r| r.1 == BackwardLine::SortNodes).count(),
            1
        );
        // every op the arms of candle-core 0.11.1 name, once each in order of the source
        let mut arms: Vec<&str> = Vec::new();
        for r in t {
            if !r.2.is_empty() && arms.last() != Some(&r.2) {
                arms.push(r.2);
            }
        }
        for want in [
            "add",
            "sub",
            "mul",
            "div",
            "matmul",
            "cat",
            "broadcast",
            "sum",
            "to_dtype",
            "narrow",
            "index_select",
            "exp",
            "sqr",
            "sqrt",
            "custom_op1",
            "transpose",
            "reshape",
            "affine",
            "silu",
        ] {
            assert_eq!(arms.iter().filter(|a| **a == want).count(), 1, "{want}");
        }
        let (zs, ze) = generated::OR_INSERT_FN_LINES;
        assert!(zs > last && ze > zs);
        assert!(generated::HELPERS.windows(2).all(|w| w[0] < w[1]));
        assert!(generated::HELPERS.contains(&"same_shape_binary_op"));
        assert_eq!(generated::CANDLE_VERSION, "0.11.1");
    }

    /// Frames as the sampler writes them from a release build with line tables: inlined
    /// functions by their short names, the file saying whose they are (from the real llama
    /// trace in tests/data).
    #[test]
    fn short_named_inlined_frames_of_a_real_trace() {
        let core = |f: &str| format!("{CORE}{f}");
        let nn = |f: &str| {
            format!("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-nn-0.11.1/src/{f}")
        };
        let cases: Vec<(FrameEvent, FrameRole)> = vec![
            (frame("matmul", Some(&core("tensor.rs")), Some(1543)), FrameRole::Op("matmul".into())),
            (frame("index_select<usize>", Some(&core("tensor.rs")), Some(1931)), FrameRole::Op("index_select".into())),
            (frame("add<candle_core::tensor::Tensor>", Some(&core("tensor.rs")), Some(3039)), FrameRole::Op("add".into())),
            (frame("from_storage<candle_core::shape::Shape>", Some(&core("tensor.rs")), Some(172)), FrameRole::Other),
            (frame("zeros_impl<&candle_core::shape::Shape>", Some(&core("tensor.rs")), Some(245)), FrameRole::Other),
            (frame("cat<&candle_core::tensor::Tensor, usize>", Some(&core("tensor_cat.rs")), Some(66)), FrameRole::Op("cat".into())),
            (frame("cat_contiguous<&candle_core::tensor::Tensor>", Some(&core("tensor_cat.rs")), Some(234)), FrameRole::Other),
            (frame("{closure#0}<candle_core::op::Exp>", Some(&core("op.rs")), Some(217)), FrameRole::Other),
            (frame("map<candle_core::cpu_backend::MatMul>", Some(&core("cpu_backend/utils.rs")), Some(68)), FrameRole::Other),
            (frame("softmax<candle_core::shape::D>", Some(&nn("ops.rs")), Some(26)), FrameRole::Op("softmax".into())),
            (frame("cpu_fwd", Some(&nn("ops.rs")), Some(260)), FrameRole::Other),
            (frame("forward", Some(&nn("linear.rs")), Some(72)), FrameRole::Other),
            (frame("backward", Some(&core("backprop.rs")), Some(463)), FrameRole::Backward { line: Some(463), version_matches: true }),
            (frame("or_insert", Some(&core("backprop.rs")), Some(774)), FrameRole::OrInsert),
            (frame("walk", Some(&core("backprop.rs")), Some(60)), FrameRole::SortNodes),
            (frame("alloc<std::alloc::System>", Some("/work/wt-sampler/crates/trace-probe/src/alloc/hook.rs"), Some(183)), FrameRole::Probe),
            (frame("fold<usize, usize>", Some("/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/slice/iter/macros.rs"), Some(284)), FrameRole::System),
            (frame("resize_inner<alloc::alloc::Global>", Some("/rust/deps/hashbrown-0.16.1/src/raw/mod.rs"), Some(2956)), FrameRole::System),
            (frame("__rust_alloc", Some("/work/wt-sampler/crates/trace-cli/src/main.rs"), Some(37)), FrameRole::System),
            (frame("__libc_read", None, None), FrameRole::System),
            (frame("gemm_basic_generic<gemm_common::simd::x86::V3, f32>", Some("/r/gemm-common-0.19.0/src/gemm.rs"), Some(802)), FrameRole::Other),
        ];
        for (f, want) in cases {
            assert_eq!(FrameRole::of(&f), want, "{:?} {:?}", f.function, f.file);
        }
        let read = frame(
            "read_buf",
            Some("/rustc/5980/library/std/src/sys/fd/unix.rs"),
            Some(1),
        );
        assert!(is_file_io(&read));
        let sys_alloc = frame(
            "alloc_zeroed",
            Some("/rustc/5980/library/std/src/sys/alloc/unix.rs"),
            Some(1),
        );
        assert!(is_allocator(&sys_alloc));
        let memset = frame(
            "__memset_avx512_unaligned_erms",
            Some("../sysdeps/x86_64/multiarch/memset-vec-unaligned-erms.S"),
            Some(1),
        );
        assert!(!is_allocator(&memset) && FrameRole::of(&memset) == FrameRole::System);
    }

    #[test]
    fn system_probe_allocator_and_file_io_frames() {
        assert_eq!(
            FrameRole::of(&frame("malloc", None, None)),
            FrameRole::System
        );
        assert_eq!(
            FrameRole::of(&frame("std::fs::read_to_string", None, None)),
            FrameRole::System
        );
        assert_eq!(
            FrameRole::of(&frame(
                "<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop",
                None,
                None
            )),
            FrameRole::System
        );
        assert_eq!(
            FrameRole::of(&frame("trace_probe::alloc::Tracking::alloc", None, None)),
            FrameRole::Probe
        );
        assert_eq!(
            FrameRole::of(&frame(
                "<trace_alloc::Tracking as core::alloc::global::GlobalAlloc>::alloc",
                None,
                None
            )),
            FrameRole::Probe
        );
        assert_eq!(
            FrameRole::of(&frame(
                "<trace_probe::alloc::Tracking as core::alloc::global::GlobalAlloc>::alloc",
                None,
                None
            )),
            FrameRole::Probe
        );
        assert!(is_allocator(&frame("__libc_malloc", None, None)));
        assert!(is_allocator(&frame(
            "<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
            None,
            None
        )));
        assert!(!is_allocator(&frame("memcpy", None, None)));
        assert!(is_file_io(&frame(
            "std::fs::read_to_string::inner",
            None,
            None
        )));
        assert!(is_file_io(&frame("__libc_read", None, None)));
        assert!(!is_file_io(&frame("readdir", None, None)));
        assert!(op_module_of_file("/x/candle-core/src/tensor.rs").is_some());
        assert!(op_module_of_file("/x/my-candle-core/src/tensor.rs").is_none());
    }
}
