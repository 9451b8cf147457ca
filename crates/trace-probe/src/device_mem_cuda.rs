//! CUDA device memory (feature `cuda`), written against candle-core 0.11.1 / cudarc 0.19.10.
//! Type-checked in CI and linked (with a CUDA 13.0 toolchain from PyPI wheels, see
//! `scripts/cuda-toolchain.sh`); run on an H200 by `scripts/gpu-check.sh` (docs/devices.md).
//!
//! On CUDA, the probe's host-side free of a storage marks the release of the last handle:
//! cudarc frees with `cuMemFreeAsync` into the stream-ordered pool, so `mem_get_info` reflects
//! pool reservations, not live tensors.

#[cfg(feature = "cuda-ledger")]
use candle_core::cuda_backend::cudarc::driver::sys;
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

#[cfg(feature = "cuda-ledger")]
/// The device pointer of a CUDA storage (`DevicePtr::device_ptr` on its own stream: for an
/// event-tracking context it records a read event, as every Candle kernel launch does).
pub(crate) fn device_ptr(s: &CudaStorage) -> Option<u64> {
    use candle_core::cuda_backend::cudarc::driver::DevicePtr;
    macro_rules! ptr {
        ($v:expr) => {{
            let v = $v;
            let (p, _sync) = v.device_ptr(v.stream());
            p
        }};
    }
    let p = match &s.slice {
        CudaStorageSlice::U8(v) => ptr!(v),
        CudaStorageSlice::U32(v) => ptr!(v),
        CudaStorageSlice::I16(v) => ptr!(v),
        CudaStorageSlice::I32(v) => ptr!(v),
        CudaStorageSlice::I64(v) => ptr!(v),
        CudaStorageSlice::BF16(v) => ptr!(v),
        CudaStorageSlice::F16(v) => ptr!(v),
        CudaStorageSlice::F32(v) => ptr!(v),
        CudaStorageSlice::F64(v) => ptr!(v),
        CudaStorageSlice::F8E4M3(v) => ptr!(v),
        CudaStorageSlice::F6E2M3(v) => ptr!(v),
        CudaStorageSlice::F6E3M2(v) => ptr!(v),
        CudaStorageSlice::F4(v) => ptr!(v),
        CudaStorageSlice::F8E8M0(v) => ptr!(v),
    };
    (p != 0).then_some(p)
}

#[cfg(feature = "cuda-ledger")]
/// What the device's default memory pool (the one `cuMemAllocAsync` draws from) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolFigures {
    /// `CU_MEMPOOL_ATTR_USED_MEM_CURRENT`: bytes of the pool's allocations not yet freed.
    pub used_bytes: u64,
    /// `CU_MEMPOOL_ATTR_USED_MEM_HIGH`: the high-water mark of `used_bytes` since it was last
    /// reset ([`reset_pool_high`]).
    pub used_high_bytes: u64,
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`: bytes the pool holds from the device.
    pub reserved_bytes: u64,
}

#[cfg(feature = "cuda-ledger")]
fn default_pool(dev: &CudaDevice) -> Option<sys::CUmemoryPool> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let cu_dev = dev.cuda_stream().context().cu_device();
    // SAFETY: writes one pool handle through a valid pointer.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, cu_dev) };
    (r == sys::CUresult::CUDA_SUCCESS && !pool.is_null()).then_some(pool)
}

#[cfg(feature = "cuda-ledger")]
fn pool_attr(pool: sys::CUmemoryPool, attr: sys::CUmemPool_attribute) -> Option<u64> {
    let mut v: u64 = 0;
    // SAFETY: these attributes are `cuuint64_t`, written through a valid pointer.
    let r = unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&mut v as *mut u64).cast()) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
}

#[cfg(feature = "cuda-ledger")]
/// The default pool's figures of `dev`'s device; `None` on a driver error.
pub fn pool_figures(dev: &CudaDevice) -> Option<PoolFigures> {
    use sys::CUmemPool_attribute as A;
    let pool = default_pool(dev)?;
    Some(PoolFigures {
        used_bytes: pool_attr(pool, A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
        used_high_bytes: pool_attr(pool, A::CU_MEMPOOL_ATTR_USED_MEM_HIGH)?,
        reserved_bytes: pool_attr(pool, A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
    })
}

#[cfg(feature = "cuda-ledger")]
/// Resets the default pool's `USED_MEM_HIGH` to its current use (the driver accepts only 0,
/// which resets it). Returns whether the driver accepted.
pub fn reset_pool_high(dev: &CudaDevice) -> bool {
    let Some(pool) = default_pool(dev) else {
        return false;
    };
    let mut zero: u64 = 0;
    // SAFETY: `USED_MEM_HIGH` is a `cuuint64_t`; 0 resets it.
    let r = unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
            (&mut zero as *mut u64).cast(),
        )
    };
    r == sys::CUresult::CUDA_SUCCESS
}
