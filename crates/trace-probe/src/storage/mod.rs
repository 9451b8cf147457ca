//! The storage capture outside the allocator: everything that turns what the allocator hook saw
//! ([`crate::alloc`]) and what public Candle API tells (parameters, graph nodes, gradients,
//! labels) into `memory` events.
//!
//! | module | job |
//! |---|---|
//! | `bytes` | a storage's key, bytes and data pointer, read through Candle's public API |
//! | `registry` | storages the probe can name, keyed by (key, generation); liveness via the watch table |
//! | `join` | joins drained ring records by address: a storage's free to its data buffer's allocation |
//! | `window` | the capture window: arm, drain, pending events, close, summary, logical-memory contract |
//! | `drainer` | the background thread that drains the ring past a high-water mark while a window is open |
//! | `registration` | registering graph nodes, gradients and labelled tensors into the window |
//! | `device_window` | CUDA storages nobody registered, from the driver-call ledger (`crate::cuda_ledger`) |
//! | `construction` | optimizer state allocated while the inner optimizer is built |
//! | `sites` | allocation sites: raw stacks of storages' data buffers deduplicated into site ids; the walker calibration |
//! | `tracker` | every storage allocated since the session was created, adopted at capture start |
//! | `events` | memory events waiting for time and span; host and deterministic attribution |
//! | `session_plugin` | the plug-in joining all of this (and device samples) to a session |
//!
//! Nothing here runs inside the allocator; it takes locks and allocates freely (with
//! [`crate::alloc::IgnoreAllocs`] around its own work so it stays out of the log).

pub mod bytes;
mod construction;
pub mod device_window;
mod drainer;
pub mod events;
pub(crate) mod join;
mod registration;
pub mod registry;
mod session_plugin;
pub mod sites;
pub(crate) mod tracker;
pub mod window;

pub use join::JoinStats;
pub use registry::{RegisterAs, Registration, Registry, StorageEntry};
pub(crate) use session_plugin::{DeclaredParameters, StoragePlugin};
pub use sites::SiteCapture;
pub use tracker::PreSessionStorages;
pub use window::{
    availability, declare_unknown_pre_existing, last_summary, lock, Availability, CaptureState,
    CaptureSummary,
};
