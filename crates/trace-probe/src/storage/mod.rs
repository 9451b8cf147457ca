//! The storage capture outside the allocator: everything that turns what the allocator hook saw
//! (`trace_alloc`) and what public Candle API tells (parameters, graph nodes, gradients,
//! labels) into `memory` events.
//!
//! | module | job |
//! |---|---|
//! | `calibrate` | Candle's storage layout measured with throw-away tensors, set into `trace_alloc::layout` |
//! | `bytes` | a storage's key, bytes and data pointer, read through Candle's public API |
//! | `registry` | storages the probe can name, keyed by (key, generation); liveness via the watch table |
//! | `join` | joins drained ring records by address: a storage's free to its data buffer's allocation |
//! | `window` | the capture window: arm, drain, pending events, close, summary, logical-memory contract |
//! | `registration` | registering graph nodes, gradients and labelled tensors into the window |
//! | `graph_beside` | the loss's graph registered on the helper thread while backward runs |
//! | `device_window` | CUDA storages nobody registered, from the driver-call ledger (`crate::cuda_ledger`) |
//! | `construction` | optimizer state allocated while the inner optimizer is built |
//! | `declared` | the weights a run declared, registered as `parameter` storages at capture start |
//! | `sites` | allocation sites: raw stacks of storages' data buffers deduplicated into site ids; the walker calibration |
//! | `tracker` | every storage allocated since the session was created, adopted at capture start |
//! | `events` | memory events waiting for time and span; host and deterministic attribution |
//! | `session_plugin` | the plug-in joining all of this (and device samples) to a session |
//!
//! Nothing here runs inside the allocator; it takes locks and allocates freely (with
//! [`trace_alloc::IgnoreAllocs`] around its own work so it stays out of the log).

pub mod bytes;
pub(crate) mod calibrate;

mod construction;
mod declared;
pub mod device_window;
pub mod events;
mod graph_beside;
pub(crate) mod join;
mod registration;
pub mod registry;
pub(crate) mod session_plugin;
pub mod sites;
pub(crate) mod tracker;
pub mod window;
