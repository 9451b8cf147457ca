//! Metal device memory (feature `metal`). UNCOMPILED on the development machine (`objc2` does
//! not build on Linux); written against candle-core 0.11.1 / candle-metal-kernels 0.11.1.
//!
//! `current_allocated_size()` includes Candle's size-bucketed buffer pool (buffers are released
//! only in `drop_unused_buffers`), so it is written as `reserved_bytes`. The probe's host-side
//! free of a Metal storage marks the last handle's release back into that pool.

use candle_core::{MetalDevice, MetalStorage};

/// Bytes the Metal device has allocated (`MTLDevice.currentAllocatedSize`).
pub(crate) fn current_allocated_size(dev: &MetalDevice) -> Option<u64> {
    Some(dev.metal_device().current_allocated_size() as u64)
}

/// Bytes of a Metal storage's buffer (`MTLBuffer.length`, which may round up to the pool bucket).
pub(crate) fn storage_bytes(s: &MetalStorage) -> u64 {
    s.buffer().length() as u64
}
