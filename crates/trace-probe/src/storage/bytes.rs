//! What a storage is, read through Candle's public API only: its key (identity while live), its
//! bytes (from the storage itself, never from a view's shape) and, on CPU, its data pointer.
//! The one place that reads a CPU storage's size.

use candle_core::{CpuStorage, Storage, Tensor};

use crate::device::DeviceLabel;

/// The storage key of `t`: the address its `storage_and_layout()` guard derefs to (the
/// `RwLock`'s payload inside the storage's `Arc` block). Equal keys mean a shared storage.
///
/// Takes a read lock on the storage: do not call while this thread holds its write lock.
pub fn storage_key(t: &Tensor) -> usize {
    let (guard, _) = t.storage_and_layout();
    &*guard as *const Storage as usize
}

/// Applies a generic function to the `Vec` of every CPU storage variant.
macro_rules! cpu_map {
    ($cpu:expr, $f:ident) => {
        match $cpu {
            CpuStorage::U8(v) => $f(v),
            CpuStorage::U32(v) => $f(v),
            CpuStorage::I16(v) => $f(v),
            CpuStorage::I32(v) => $f(v),
            CpuStorage::I64(v) => $f(v),
            CpuStorage::BF16(v) => $f(v),
            CpuStorage::F16(v) => $f(v),
            CpuStorage::F32(v) => $f(v),
            CpuStorage::F64(v) => $f(v),
            CpuStorage::F8E4M3(v) => $f(v),
            CpuStorage::F6E2M3(v)
            | CpuStorage::F6E3M2(v)
            | CpuStorage::F4(v)
            | CpuStorage::F8E8M0(v) => $f(v),
        }
    };
}

/// Data pointer and heap bytes of a CPU storage: `capacity × element size`, the size of the
/// data buffer the allocator handed out and will take back (what occupies memory). For Candle's
/// own storages capacity equals length; a `from_vec` of a `Vec` with spare capacity keeps it, and
/// the one size rule is that every storage is sized by its heap bytes
/// ([`cpu_logical_bytes`] gives `len × element size` beside it). Raw bytes for the sub-byte
/// formats.
pub fn cpu_data(cpu: &CpuStorage) -> (usize, u64) {
    fn of<T>(v: &Vec<T>) -> (usize, u64) {
        (
            v.as_ptr() as usize,
            (v.capacity() * std::mem::size_of::<T>()) as u64,
        )
    }
    cpu_map!(cpu, of)
}

/// Logical bytes of a CPU storage: `len × element size` (≤ its heap bytes, [`cpu_data`]).
pub fn cpu_logical_bytes(cpu: &CpuStorage) -> u64 {
    fn of<T>(v: &Vec<T>) -> u64 {
        std::mem::size_of_val(v.as_slice()) as u64
    }
    cpu_map!(cpu, of)
}

/// Storage facts read through `storage_and_layout()` (read lock held only inside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageFacts {
    /// Storage key (see [`storage_key`]).
    pub key: usize,
    /// Bytes of the storage: on CPU its heap bytes (see [`cpu_data`]); `None`: the backend's
    /// size is not readable in this build.
    pub bytes: Option<u64>,
    /// Logical bytes (`len × element size`, CPU only; see [`cpu_logical_bytes`]).
    pub logical_bytes: Option<u64>,
    /// CPU data pointer.
    pub data_ptr: Option<usize>,
    /// Device pointer of a CUDA storage (`None` elsewhere, or without the `cuda` feature).
    pub device_ptr: Option<u64>,
    /// Device.
    pub device: DeviceLabel,
}

/// Reads a tensor's storage facts. Takes a read lock on the storage.
pub fn storage_facts(t: &Tensor) -> StorageFacts {
    let (guard, _) = t.storage_and_layout();
    let key = &*guard as *const Storage as usize;
    let (bytes, logical_bytes, data_ptr) = match &*guard {
        Storage::Cpu(cpu) => {
            let (ptr, bytes) = cpu_data(cpu);
            (Some(bytes), Some(cpu_logical_bytes(cpu)), Some(ptr))
        }
        #[allow(unreachable_patterns)]
        other => (backend_storage_bytes(other), None, None),
    };
    let device_ptr = backend_device_ptr(&guard);
    drop(guard);
    StorageFacts {
        key,
        bytes,
        logical_bytes,
        data_ptr,
        device_ptr,
        device: DeviceLabel::of(t.device()),
    }
}

/// Bytes of the storage behind `tensor`, read from the storage itself (not from the view's
/// shape, which misstates broadcast and narrowed views). Exact on CPU; on CUDA and Metal the
/// buffer size when that backend is compiled in, else `None`.
///
/// Takes the storage's read lock: do not call it while the same thread holds the write lock.
pub fn storage_bytes(tensor: &Tensor) -> Option<u64> {
    storage_facts(tensor).bytes
}

/// Bytes of a non-CPU storage, when the backend is compiled in; `None` otherwise.
#[allow(unused_variables)]
pub(crate) fn backend_storage_bytes(storage: &Storage) -> Option<u64> {
    match storage {
        Storage::Cpu(cpu) => Some(cpu_data(cpu).1),
        #[cfg(feature = "cuda")]
        Storage::Cuda(s) => Some(crate::device_mem_cuda::storage_bytes(s)),
        #[cfg(feature = "metal")]
        Storage::Metal(s) => Some(crate::device_mem_metal::storage_bytes(s)),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The device pointer of a CUDA storage (`None` for other backends or without `cuda-ledger`).
#[allow(unused_variables)]
pub(crate) fn backend_device_ptr(storage: &Storage) -> Option<u64> {
    match storage {
        #[cfg(feature = "cuda-ledger")]
        Storage::Cuda(s) => crate::device_mem_cuda::device_ptr(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn bytes_come_from_the_storage_not_the_view() -> candle_core::Result<()> {
        let base = Tensor::zeros((8, 64, 1), DType::F32, &Device::Cpu)?;
        let wide = base.broadcast_as((8, 64, 128))?;
        assert_eq!(storage_bytes(&wide), Some(8 * 64 * 4));
        assert_eq!(storage_key(&wide), storage_key(&base));
        let m = Tensor::zeros((10, 10), DType::F64, &Device::Cpu)?;
        assert_eq!(storage_bytes(&m.narrow(0, 2, 3)?), Some(800));
        Ok(())
    }

    #[test]
    fn heap_bytes_include_spare_capacity_logical_bytes_do_not() -> candle_core::Result<()> {
        let mut v: Vec<f32> = Vec::with_capacity(300_000);
        v.extend((0..262_144).map(|i| i as f32));
        let t = Tensor::from_vec(v, 262_144, &Device::Cpu)?;
        let f = storage_facts(&t);
        assert_eq!(f.bytes, Some(1_200_000), "heap bytes: capacity × 4");
        assert_eq!(f.logical_bytes, Some(1_048_576), "logical bytes: len × 4");
        Ok(())
    }
}
