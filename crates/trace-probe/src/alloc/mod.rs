//! Automatic storage capture: a tracking global allocator that sees every Candle storage's
//! `Arc` block and CPU data buffer come and go.
//!
//! Candle has no allocation hooks, but every storage lives in an `Arc<RwLock<Storage>>` whose
//! host allocation the global allocator sees. While a capture is armed, [`Tracking`] logs
//! allocations to a static ring and recognises storage frees two ways:
//! - **registered storages** (parameters, graph nodes, gradients, labels — see
//!   [`crate::registry`]) by an exact-address probe of a lock-free watch table;
//! - **every other CPU storage** by its drop signature: its data buffer is freed, then, on the
//!   same thread, its `Arc` block, which still holds the buffer's pointer.
//!
//! [`capture::StorageCapture`] drains the ring, joins frees to the logged allocations by
//! address and turns them into `memory` events with exact times and bytes.
//!
//! Install in two lines:
//! ```ignore
//! #[global_allocator]
//! static ALLOC: trace_probe::alloc::Tracking = trace_probe::alloc::Tracking::system();
//! ```

mod calibrate;
pub mod capture;
mod hook;
mod join;
mod plugin;
mod ring;
mod state;
mod watch;

pub use calibrate::{calibrate, Calibration, CalibrationError};
pub use hook::Tracking;
pub(crate) use plugin::StoragePlugin;
pub use ring::{dropped_events, pending_events, ring_capacity, set_ring_capacity, RING_CAPACITY};
pub use state::{
    armed_alloc_calls, armed_net_bytes, heap_live_bytes, is_armed, is_installed, IgnoreAllocs,
};
pub use watch::{occupied_slots, WATCH_SLOTS};

use candle_core::{CpuStorage, Tensor};

/// The storage key of `t`: the address its `storage_and_layout()` guard derefs to (the
/// `RwLock`'s payload inside the storage's `Arc` block). Equal keys mean a shared storage.
///
/// Takes a read lock on the storage: do not call while this thread holds its write lock.
pub fn storage_key(t: &Tensor) -> usize {
    let (guard, _) = t.storage_and_layout();
    &*guard as *const candle_core::Storage as usize
}

/// Data pointer and bytes (`len × element size`, the storage's own size, not a view's) of a CPU
/// storage.
pub fn cpu_data(cpu: &CpuStorage) -> (usize, usize) {
    fn of<T>(v: &[T]) -> (usize, usize) {
        (v.as_ptr() as usize, std::mem::size_of_val(v))
    }
    match cpu {
        CpuStorage::U8(v) => of(v.as_slice()),
        CpuStorage::U32(v) => of(v.as_slice()),
        CpuStorage::I16(v) => of(v.as_slice()),
        CpuStorage::I32(v) => of(v.as_slice()),
        CpuStorage::I64(v) => of(v.as_slice()),
        CpuStorage::BF16(v) => of(v.as_slice()),
        CpuStorage::F16(v) => of(v.as_slice()),
        CpuStorage::F32(v) => of(v.as_slice()),
        CpuStorage::F64(v) => of(v.as_slice()),
        CpuStorage::F8E4M3(v) => of(v.as_slice()),
        CpuStorage::F6E2M3(v) => of(v.as_slice()),
        CpuStorage::F6E3M2(v) => of(v.as_slice()),
        CpuStorage::F4(v) => of(v.as_slice()),
        CpuStorage::F8E8M0(v) => of(v.as_slice()),
    }
}

/// The calibrated storage block size (0 before calibration succeeded).
pub(crate) fn block_size() -> usize {
    state::BLOCK_SIZE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The live watch tag of block `block` (0: not watched or freed).
pub(crate) fn watch_get(block: usize) -> u32 {
    watch::get(block)
}

/// Watches block `block` with `tag`; false when the table is full.
pub(crate) fn watch_insert(block: usize, tag: u32) -> bool {
    watch::insert(block, tag)
}

/// Clears block `block`'s tag if it is still `tag`.
pub(crate) fn watch_clear_if(block: usize, tag: u32) {
    watch::clear_if(block, tag)
}
