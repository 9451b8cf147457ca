//! The tracking global allocator and everything that runs **inside** it: the hook, the event
//! ring, the watch table, the process-wide flags and counters, the held-free park, and the
//! calibration that measures Candle's storage layout for the hook.
//!
//! Nothing here locks or allocates on the hook's path (see `state` for why). What runs outside
//! the allocator — the registry, joining ring records to storages, the capture window and the
//! session plug-in — lives in [`crate::storage`].
//!
//! Install in two lines:
//! ```ignore
//! #[global_allocator]
//! static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();
//! ```

mod calibrate;
pub(crate) mod hold;
pub(crate) mod hook;
pub(crate) mod ring;
pub mod sites;
mod state;
pub(crate) mod watch;

pub use calibrate::{calibrate, Calibration, CalibrationError};
pub use hold::leaked_blocks;
pub use hook::Tracking;
pub use ring::{dropped_events, pending_events, ring_capacity, set_ring_capacity, RING_CAPACITY};
pub use state::{
    armed_alloc_calls, armed_net_bytes, heap_live_bytes, is_armed, is_installed, IgnoreAllocs,
};
pub use watch::{fill_for_test as fill_watch_table_for_test, occupied_slots, WATCH_SLOTS};

pub(crate) use calibrate::dtype_of_code;
pub(crate) use state::thread_key;

/// The calibrated storage block size (0 before calibration succeeded).
pub(crate) fn block_size() -> usize {
    state::BLOCK_SIZE.load(std::sync::atomic::Ordering::Relaxed)
}
