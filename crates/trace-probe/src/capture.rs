//! What the automatic storage capture can see in this process and what it saw, beside the
//! trace: whether the tracking allocator is installed and calibrated ([`availability`]), the
//! figures of the last capture window ([`last_summary`]: how many frees matched, allocation
//! calls, drops, unidentified live blocks, the allocation sites), the storage layout the
//! calibration measured ([`calibrate`]), and how the probe reads a tensor's storage
//! ([`storage_key`], [`storage_facts`]) and a device's memory ([`device_memory_sample`]); with
//! the `cuda-ledger` feature, the CUDA driver-call ledger's figures (`observed_allocations`,
//! `pool_figures`, `reset_pool_high`).
//!
//! The trace is the product; these are its diagnostics (the README's cost figures, the
//! exactness tests). Everything here reads process-wide state: the allocator is one per
//! process.
//!
//! ```no_run
//! let available = trace_probe::capture::availability();
//! assert!(available.installed, "#[global_allocator] static ALLOC: trace_probe::Tracking");
//! // … a captured step …
//! let summary = trace_probe::capture::last_summary();
//! println!("{} storages written from their drop signature", summary.anonymous_storages);
//! ```

#[cfg(feature = "cuda-ledger")]
pub use crate::cuda_ledger::observed_allocations;
pub use crate::device_mem::sample as device_memory_sample;
#[cfg(feature = "cuda-ledger")]
pub use crate::device_mem_cuda::{pool_figures, reset_pool_high, PoolFigures};
pub use crate::storage::bytes::{storage_facts, storage_key, StorageFacts};
pub use crate::storage::calibrate::{calibrate, Calibration, CalibrationError};
pub use crate::storage::device_window::DeviceStorages;
pub use crate::storage::join::JoinStats;
pub use crate::storage::sites::SiteCapture;
pub use crate::storage::window::{
    availability, declare_unknown_pre_existing, last_summary, Availability, CaptureSummary,
};
