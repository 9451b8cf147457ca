#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod backward;
mod beside;
pub mod capture;
mod category;
mod cuda_ledger;
mod device;
mod device_mem;
#[cfg(feature = "cuda")]
mod device_mem_cuda;
#[cfg(feature = "metal")]
mod device_mem_metal;
mod error;
mod facts;
mod gradients;
mod layer;
mod meta;
pub mod nn;
mod optim;
mod optim_state;
mod panic_hook;
mod profiler;
mod run;
mod sampler;
#[cfg(feature = "every")]
mod schedule;
mod session;
mod stats;
mod storage;
mod tensor_id;
pub mod testing;
mod writer;

pub use device::DeviceLabel;
pub use error::ProbeError;
pub use gradients::NON_PARAMETER_ROOT;
pub use layer::ProbeLayer;
pub use optim::{varmap_manifest, ProbedOptimizer};
pub use profiler::Profiler;
pub use run::{
    rank_trace_path, ProfileRun, RankInfo, TracingMode, DEFAULT_PARAMETER_ROOT, LOCAL_RANK_ENV,
    RANK_ENV, WORLD_SIZE_ENV,
};
#[cfg(feature = "every")]
pub use run::{BundleOutputs, Schedule, DEFAULT_KEEP_LAST};
pub use session::{SamplingGuard, SpanGuard, StepGuard, TraceSession, TraceSummary};
pub use stats::TensorStats;
pub use trace_alloc::{heap_live_bytes, Tracking};
pub use trace_sampler::DEFAULT_SAMPLE_HZ;
/// Forward, backward or optimizer: the passes of a training step (`trace_wire`'s enum; the
/// trace's `step` field keeps its wire name).
pub use trace_wire::ExecutionStep as Pass;
pub use trace_wire::{
    CaptureContract, ComparisonIdentity, CoverageLevel, GradientContract, MemoryCategory, SpanKind,
    TerminalOutcome,
};

/// The workspace README, whose quick start is compiled here as a doc-test so it cannot drift.
#[doc = include_str!("../../../README.md")]
#[doc(hidden)]
pub mod readme {}
