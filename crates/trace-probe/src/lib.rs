//! # trace-probe
//!
//! Instruments one step of a Candle training (or inference) loop and writes a
//! `candle-graph/trace/11` JSONL trace: spans (with one measured region and forward / backward /
//! optimizer steps), ops, tensor facts, tensor statistics, gradient facts and module spans.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use trace_probe::{ExecutionStep, ProfileRun, TraceSession};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("trace.jsonl");
//! let run = ProfileRun::training("demo::step", 2).device(&Device::Cpu);
//! let session = TraceSession::create(run, &path)?;
//! let w = Tensor::ones((4, 3), DType::F32, &Device::Cpu)?;
//! for step in 1..=3 {
//!     let _step = session.step(step); // records only on step 2
//!     let x = Tensor::ones((2, 4), DType::F32, &Device::Cpu)?;
//!     let fwd = session.step_span("forward", ExecutionStep::Forward);
//!     let y = session.op("matmul", &[&x, &w], || x.matmul(&w))?;
//!     session.tensor_stats("y", &y)?;
//!     drop(fwd);
//! }
//! session.finish()?;
//! let doc = trace_schema::load_path(&path)?;
//! assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);
//! # Ok(()) }
//! ```
//!
//! ## Design
//! - [`ProfileRun`] says which step to capture; [`TraceSession`] is `Send + Sync`, hands events
//!   to a writer thread over a channel (the training thread does no I/O), accepts any writer,
//!   keeps the first I/O error and returns it from [`TraceSession::finish`]. No panic reaches
//!   user code.
//! - Outside the captured step, [`TraceSession::step`] costs one integer comparison and every
//!   other entry point one relaxed atomic load (`benches/overhead.rs`).
//! - Crash safety: span ends queue a flush, so a killed process leaves a valid prefix (it loads
//!   as truncated). A panic inside the captured step writes a `failed` terminal with the panic
//!   message through a chained panic hook, restored at `finish` (see [`panic_hook`] for
//!   `panic = "abort"`).
//! - Deterministic mode ([`ProfileRun::deterministic`]) writes identical bytes for identical
//!   seeded runs.
//!
//! See the crate README for the quick start with the module wrapper, the tracing layer and the
//! optimizer wrapper.

#![deny(missing_docs)]

/// Probed constructors mirroring candle-nn's (`linear`, `embedding`, `layer_norm`, …).
pub mod probed {
    pub use crate::module::{
        conv1d, conv2d, embedding, layer_norm, linear, linear_b, linear_no_bias, rms_norm,
    };
}

pub mod alloc;
pub(crate) mod capture;
pub mod clock;
pub mod device_mem;
mod error;
mod facts;
mod gradients;
pub mod layer;
pub mod meta;
mod module;
mod optim;
pub mod panic_hook;
pub mod registry;
mod run;
mod session;
mod stats;
mod writer;

pub use error::ProbeError;
pub use facts::storage_bytes;
pub use gradients::NON_PARAMETER_ROOT;
pub use layer::ProbeLayer;
pub use module::{ModuleSpan, Probed, ProbedT};
pub use optim::{varmap_manifest, ProbedOptimizer, DEFAULT_PARAMETER_ROOT};
pub use run::{device_label, ProfileRun};
pub use session::{SpanGuard, StepGuard, TraceSession, TraceSummary};
pub use stats::TensorStats;
pub use trace_schema::{
    CaptureContract, ComparisonIdentity, CoverageLevel, ExecutionStep, GradientContract,
    MemoryCategory, SpanKind, TerminalOutcome,
};
