//! The driver calls defined in the binary (feature `cuda`): each forwards to the driver's own
//! function and records its result in the ledger ([`super`]). See the parent module for why
//! this sees every allocation Candle makes, and [`observing`] for the check that it does.

use std::sync::OnceLock;

use candle_core::cuda_backend::cudarc::driver::sys::{self, CUdeviceptr, CUresult, CUstream};

use trace_alloc::IgnoreAllocs;

/// The device ordinal of the calling thread's current context (`None` on a driver error).
fn current_ordinal() -> Option<i32> {
    let mut dev: sys::CUdevice = 0;
    // SAFETY: `cuCtxGetDevice` writes one `CUdevice` through a valid pointer; it is not
    // interposed, so this calls the driver directly.
    let r = unsafe { sys::cuCtxGetDevice(&mut dev) };
    (r == CUresult::CUDA_SUCCESS).then_some(dev)
}

type AllocFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
type AllocSyncFn = unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult;
type FreeFn = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult;
type FreeSyncFn = unsafe extern "C" fn(CUdeviceptr) -> CUresult;

/// The driver's own `name`: the next definition after this binary's, else the one in the
/// already loaded `libcuda.so.1`; `None` when neither is found.
fn next_symbol(name: &'static std::ffi::CStr) -> Option<usize> {
    // SAFETY: `dlsym` with `RTLD_NEXT` and a NUL-terminated name only looks the symbol up.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if !p.is_null() {
        return Some(p as usize);
    }
    // SAFETY: `RTLD_NOLOAD` never loads a library; it returns a handle only to one already
    // loaded (the driver this binary links), which stays loaded for the process's life.
    let lib = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if lib.is_null() {
        return None;
    }
    // SAFETY: as above, on the driver's handle.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    // Never one of this binary's own definitions (that would call itself forever).
    let ours = [
        cuMemAllocAsync as *const () as usize,
        cuMemAlloc_v2 as *const () as usize,
        cuMemFreeAsync as *const () as usize,
        cuMemFree_v2 as *const () as usize,
    ];
    (!p.is_null() && !ours.contains(&(p as usize))).then_some(p as usize)
}

macro_rules! driver_fn {
    ($cell:ident, $name:literal, $ty:ty) => {{
        static $cell: OnceLock<Option<usize>> = OnceLock::new();
        $cell.get_or_init(|| next_symbol($name)).map(|p| {
            // SAFETY: the address is the driver's function of that name, whose C signature
            // is `$ty` (cudarc's bindings of the same CUDA version).
            unsafe { std::mem::transmute::<usize, $ty>(p) }
        })
    }};
}

/// Interposed `cuMemAllocAsync`: the driver's, then the ledger.
///
/// # Safety
/// The driver's contract for `cuMemAllocAsync` (`dptr` valid for one write).
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    stream: CUstream,
) -> CUresult {
    let Some(real) = driver_fn!(REAL, c"cuMemAllocAsync", AllocFn) else {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    // SAFETY: forwarded with the caller's arguments, under the caller's contract.
    let r = unsafe { real(dptr, bytesize, stream) };
    if r == CUresult::CUDA_SUCCESS && !dptr.is_null() {
        // SAFETY: the driver wrote the pointer on success.
        super::record_alloc(unsafe { *dptr }, bytesize as u64, current_ordinal());
    }
    r
}

/// Interposed `cuMemAlloc_v2` (contexts without stream-ordered allocation).
///
/// # Safety
/// The driver's contract for `cuMemAlloc_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    let Some(real) = driver_fn!(REAL, c"cuMemAlloc_v2", AllocSyncFn) else {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    // SAFETY: forwarded with the caller's arguments, under the caller's contract.
    let r = unsafe { real(dptr, bytesize) };
    if r == CUresult::CUDA_SUCCESS && !dptr.is_null() {
        // SAFETY: the driver wrote the pointer on success.
        super::record_alloc(unsafe { *dptr }, bytesize as u64, current_ordinal());
    }
    r
}

/// Interposed `cuMemFreeAsync`.
///
/// # Safety
/// The driver's contract for `cuMemFreeAsync`.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    let Some(real) = driver_fn!(REAL, c"cuMemFreeAsync", FreeFn) else {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    // The ledger first: once the driver has the address back, another thread's allocation may
    // be handed the same address.
    super::record_free(dptr);
    // SAFETY: forwarded with the caller's arguments, under the caller's contract.
    unsafe { real(dptr, stream) }
}

/// Interposed `cuMemFree_v2`.
///
/// # Safety
/// The driver's contract for `cuMemFree_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    let Some(real) = driver_fn!(REAL, c"cuMemFree_v2", FreeSyncFn) else {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    super::record_free(dptr);
    // SAFETY: forwarded with the caller's arguments, under the caller's contract.
    unsafe { real(dptr) }
}

/// Whether this binary's device allocations on `dev` pass through the ledger: a probe tensor
/// of 64 f32 is allocated and its device pointer looked up (checked once per process; `Err`
/// with the reason when not).
pub fn observing(dev: &candle_core::CudaDevice) -> Result<(), String> {
    CHECK
        .get_or_init(|| {
            let _quiet = IgnoreAllocs::new();
            let device = candle_core::Device::Cuda(dev.clone());
            let t = candle_core::Tensor::zeros(64, candle_core::DType::F32, &device)
                .map_err(|e| format!("the probe tensor could not be allocated: {e}"))?;
            let (guard, _) = t.storage_and_layout();
            let ptr = match &*guard {
                candle_core::Storage::Cuda(s) => crate::device_mem::cuda_device_ptr(s),
                _ => None,
            };
            drop(guard);
            let seen = ptr.is_some_and(|p| {
                super::with_ledger(|l| l.live_at(p).is_some_and(|r| r.bytes == 256))
            });
            if seen {
                Ok(())
            } else {
                Err(
                    "the driver's allocation calls do not pass through the probe in this binary \
                     (cudarc built with `dynamic-loading`?): device storages are captured through \
                     registration only"
                        .into(),
                )
            }
        })
        .clone()
}

static CHECK: OnceLock<Result<(), String>> = OnceLock::new();

/// The result of [`observing`] if it ran in this process.
pub(crate) fn checked() -> Option<Result<(), String>> {
    CHECK.get().cloned()
}
