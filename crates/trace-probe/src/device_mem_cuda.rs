//! CUDA device memory (feature `cuda`), written against candle-core 0.11.1 / cudarc 0.19.10.
//! Type-checked in CI and linked (with a CUDA 13.0 toolchain from PyPI wheels, see
//! `scripts/cuda-toolchain.sh`); not yet run on a GPU.
//!
//! On CUDA, the probe's host-side free of a storage marks the release of the last handle:
//! cudarc frees with `cuMemFreeAsync` into the stream-ordered pool, so `mem_get_info` reflects
//! pool reservations, not live tensors.

use candle_core::cuda_backend::{CudaDevice, CudaStorage, CudaStorageSlice};

/// `(free, total)` bytes from `cuMemGetInfo_v2`; `None` on a driver error.
pub(crate) fn free_and_total(dev: &CudaDevice) -> Option<(u64, u64)> {
    let (free, total) = dev.cuda_stream().context().mem_get_info().ok()?;
    Some((free as u64, total as u64))
}

/// Bytes of a CUDA storage (`CudaSlice::num_bytes`).
pub(crate) fn storage_bytes(s: &CudaStorage) -> u64 {
    let n = match &s.slice {
        CudaStorageSlice::U8(v) => v.num_bytes(),
        CudaStorageSlice::U32(v) => v.num_bytes(),
        CudaStorageSlice::I16(v) => v.num_bytes(),
        CudaStorageSlice::I32(v) => v.num_bytes(),
        CudaStorageSlice::I64(v) => v.num_bytes(),
        CudaStorageSlice::BF16(v) => v.num_bytes(),
        CudaStorageSlice::F16(v) => v.num_bytes(),
        CudaStorageSlice::F32(v) => v.num_bytes(),
        CudaStorageSlice::F64(v) => v.num_bytes(),
        CudaStorageSlice::F8E4M3(v) => v.num_bytes(),
        CudaStorageSlice::F6E2M3(v) => v.num_bytes(),
        CudaStorageSlice::F6E3M2(v) => v.num_bytes(),
        CudaStorageSlice::F4(v) => v.num_bytes(),
        CudaStorageSlice::F8E8M0(v) => v.num_bytes(),
    };
    n as u64
}
