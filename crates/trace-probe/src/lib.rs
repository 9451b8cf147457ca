#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

#[doc(hidden)]
pub mod alloc;
mod backward;
mod category;
#[doc(hidden)]
pub mod clock;
#[doc(hidden)]
pub mod cuda_ledger;
mod device;
#[doc(hidden)]
pub mod device_mem;
mod error;
mod facts;
mod frame_chain;
mod gradients;
mod layer;
#[doc(hidden)]
pub mod meta;
pub mod nn;
mod optim;
#[doc(hidden)]
pub mod panic_hook;
pub(crate) mod plugin;
mod profiler;
mod run;
#[doc(hidden)]
pub mod sampler;
mod session;
mod stacks;
mod stats;
#[doc(hidden)]
pub mod storage;
mod tensor_id;
pub mod testing;
mod writer;

pub use alloc::Tracking;
#[doc(hidden)]
pub use device::DeviceLabel;
pub use error::ProbeError;
pub use gradients::NON_PARAMETER_ROOT;
pub use layer::ProbeLayer;
pub use optim::{varmap_manifest, ProbedOptimizer};
pub use profiler::{Profiler, TracingMode};
pub use run::{
    rank_trace_path, ProfileRun, RankInfo, DEFAULT_PARAMETER_ROOT, LOCAL_RANK_ENV, RANK_ENV,
    WORLD_SIZE_ENV,
};
pub use sampler::{SamplingGuard, DEFAULT_SAMPLE_HZ};
pub use session::{SpanGuard, StepGuard, TraceSession, TraceSummary};
pub use stats::TensorStats;
/// Forward, backward or optimizer: the passes of a training step (`trace_schema`'s enum; the
/// trace's `step` field keeps its wire name).
pub use trace_schema::ExecutionStep as Pass;
pub use trace_schema::{
    CaptureContract, ComparisonIdentity, CoverageLevel, GradientContract, MemoryCategory, SpanKind,
    TerminalOutcome,
};

/// The workspace README, whose quick start is compiled here as a doc-test so it cannot drift.
#[doc = include_str!("../../../README.md")]
#[doc(hidden)]
pub mod readme {}
