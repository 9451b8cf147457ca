//! [`FrameRole`]: what one sampled frame is (an op, the backward pass, the probe, the system),
//! by the tables of [`super`].

use trace_schema::FrameEvent;

use super::{
    generated, layer_op, op_name, ALLOCATOR_SHIMS, LAYER_OPS, NOT_OPS, OP_MODULES, PROBE_CRATES,
    SYSTEM_CRATES,
};
use crate::names::{is_full_path, FnName, SourcePath};

/// What a frame is, for the classifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameRole {
    /// An op frame: the op's name (`matmul`, `softmax_last_dim`, `cross_entropy`).
    Op(String),
    /// candle-core's `Tensor::backward` at this line (if known) in a file of this Candle
    /// version (`false` when the path names another version).
    Backward {
        /// 1-based line, when the frame has one.
        line: Option<u32>,
        /// The path names candle-core 0.11.1, or no version (a checkout): the line table applies.
        version_matches: bool,
    },
    /// `GradStore::or_insert` (the zeros of a new accumulator).
    OrInsert,
    /// `Tensor::sorted_nodes` (and its `walk`).
    SortNodes,
    /// A probe frame.
    Probe,
    /// A standard-library, unwinder or C frame, or one without a name.
    System,
    /// Anything else: user code, candle internals, other crates.
    Other,
}

impl FrameRole {
    /// The role of `frame`: by its full function path when the symbol has one, else (an
    /// inlined frame of a line-tables-only build: `matmul`, `forward<…>`) by its short name
    /// and its source file's crate and module ([`SourcePath`]).
    pub fn of(frame: &FrameEvent) -> Self {
        let Some(function) = frame.function.as_deref() else {
            return Self::System;
        };
        let src = frame.file.as_deref().and_then(SourcePath::parse);
        if src.as_ref().is_some_and(|s| s.std) {
            return Self::System;
        }
        if !is_full_path(function) {
            return match &src {
                None => Self::System, // a C symbol (`read`, `malloc`, `main`)
                Some(src) => Self::of_short(function, src, frame),
            };
        }
        let name = FnName::parse(function);
        let krate = name.crate_name();
        if SYSTEM_CRATES.contains(&krate) {
            return Self::System;
        }
        if PROBE_CRATES.contains(&krate)
            || src
                .as_ref()
                .is_some_and(|s| PROBE_CRATES.contains(&s.crate_name.as_str()))
        {
            return Self::Probe;
        }
        if krate == "candle_core" && name.segments.get(1) == Some(&"backprop") {
            return Self::backprop(
                name.method(),
                name.segments.contains(&"sorted_nodes"),
                frame,
            );
        }
        if let Some(op) = layer_op(function) {
            return Self::Op(op.to_string());
        }
        match op_name(&name, frame.file.as_deref()) {
            Some(op) => Self::Op(op.to_string()),
            None => Self::Other,
        }
    }

    /// A short-named frame in a known source file.
    fn of_short(function: &str, src: &SourcePath<'_>, frame: &FrameEvent) -> Self {
        if PROBE_CRATES.contains(&src.crate_name.as_str()) {
            return Self::Probe;
        }
        let method = FnName::parse(function).method();
        if SYSTEM_CRATES.contains(&src.crate_name.as_str())
            || ALLOCATOR_SHIMS.iter().any(|p| method.starts_with(p))
        {
            return Self::System;
        }
        let module = src.module.first().copied().unwrap_or("");
        if src.crate_name == "candle_core" && module == "backprop" {
            return Self::backprop(method, matches!(method, "sorted_nodes" | "walk"), frame);
        }
        if let Some(l) = LAYER_OPS.iter().find(|l| {
            !l.short.is_empty()
                && l.short == method
                && src.crate_name == l.path.split("::").next().unwrap_or("")
                && src.module.len() == 1
                && src.module.first().copied()
                    == Some(l.file.trim_start_matches("src/").trim_end_matches(".rs"))
        }) {
            return Self::Op(l.op.to_string());
        }
        if method.is_empty() || NOT_OPS.contains(&method) || generated::HELPERS.contains(&method) {
            return Self::Other;
        }
        let op_file = src.module.len() == 1
            && OP_MODULES
                .iter()
                .any(|m| m.crate_name == src.crate_name && m.module == module);
        if !op_file {
            return Self::Other;
        }
        if src.crate_name == "candle_nn" && !generated::NN_OPS.contains(&method) {
            return Self::Other; // a method of those files (a custom op's `cpu_fwd`): not an op
        }
        Self::Op(method.to_string())
    }

    /// A frame of candle-core's `backprop.rs`.
    fn backprop(method: &str, in_sort: bool, frame: &FrameEvent) -> Self {
        if in_sort {
            return Self::SortNodes;
        }
        match method {
            "or_insert" => Self::OrInsert,
            "backward" => Self::Backward {
                line: frame.line,
                version_matches: frame
                    .file
                    .as_deref()
                    .is_none_or(|f| version_matches(f, "candle-core")),
            },
            _ => Self::Other,
        }
    }
}

/// A source path of `crate_dir` names version [`generated::CANDLE_VERSION`] or none
/// (`…/candle-core/src/…`, a checkout).
fn version_matches(file: &str, crate_dir: &str) -> bool {
    let versioned = format!("{crate_dir}-");
    match file.find(&versioned) {
        Some(i) => {
            file[i + versioned.len()..].starts_with(&format!("{}/", generated::CANDLE_VERSION))
        }
        None => true,
    }
}
