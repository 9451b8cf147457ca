//! Device memory samples (the physical plane): each field only when really observed.
//!
//! | device | field | source |
//! |---|---|---|
//! | CPU | `used_bytes` | live heap bytes through the tracking allocator, **absolute since process start**, less the symboliser's cache (the debug information the probe parses to name frames, kept for the process's life and measured around each resolution: [`trace_sampler::symbol_cache_bytes`]) and less what the probe's bundler threads hold ([`trace_alloc::probe_threads_heap_bytes`]: a bundle in the making, the run log) — only when it is installed in counting mode ([`crate::Tracking::counting`]); absent otherwise (a net-since-arming figure would not be "used bytes") |
//! | CPU | `resident_bytes` | process RSS: `/proc/self/statm` field 2 × page size (Linux only) |
//! | CUDA | `free_bytes`, `capacity_bytes` | `cuMemGetInfo_v2` via `cuda_stream().context().mem_get_info()` (`device_mem_cuda`, `cuda` feature); `used_bytes` absent, never `total − free` |
//! | Metal | `reserved_bytes` | `metal_device().current_allocated_size()` (`device_mem_metal`, `metal` feature); includes Candle's buffer pool |
//!
//! Both are written against candle 0.11.1. The CUDA module is type-checked on every CI run
//! (`scripts/ci-cuda-check.sh`) and links into a release binary (`scripts/gpu-carry.sh`), but
//! has **not run on a GPU** yet (`scripts/gpu-check.sh` is the check to run); the Metal module
//! is not compiled on Linux (`objc2` does not build there).

use candle_core::Device;
use trace_wire::DeviceMemoryEvent;

use crate::device::DeviceLabel;

#[cfg(feature = "cuda")]
use crate::device_mem_cuda as cuda;
#[cfg(feature = "metal")]
use crate::device_mem_metal as metal;

/// One sample of `device` at session time `timestamp_ns` (`device_label` as in the trace).
/// Fields that could not be observed stay `None`; the event may be empty (then don't write it).
pub fn sample(device: &Device, device_label: DeviceLabel, timestamp_ns: u64) -> DeviceMemoryEvent {
    let mut ev = DeviceMemoryEvent {
        timestamp_ns,
        device: device_label.to_string(),
        used_bytes: None,
        free_bytes: None,
        reserved_bytes: None,
        capacity_bytes: None,
        resident_bytes: None,
    };
    match device {
        Device::Cpu => {
            // the probe's own symbol cache and bundler are not the program's heap
            ev.used_bytes = trace_alloc::heap_live_bytes().map(|h| {
                h.saturating_sub(trace_sampler::symbol_cache_bytes().unwrap_or(0))
                    .saturating_sub(trace_alloc::probe_threads_heap_bytes().unwrap_or(0))
            });
            ev.resident_bytes = resident_bytes();
        }
        #[allow(unused_variables)]
        Device::Cuda(dev) => {
            #[cfg(feature = "cuda")]
            {
                if let Some((free, total)) = cuda::free_and_total(dev) {
                    ev.free_bytes = Some(free);
                    ev.capacity_bytes = Some(total);
                }
                // The stream-ordered allocator's default pool: what the application holds
                // (`used`) and what the pool keeps from the device (`reserved`).
                #[cfg(feature = "cuda-ledger")]
                if let Some(pool) = cuda::pool_figures(dev) {
                    ev.used_bytes = Some(pool.used_bytes);
                    ev.reserved_bytes = Some(pool.reserved_bytes);
                }
            }
        }
        #[allow(unused_variables)]
        Device::Metal(dev) => {
            #[cfg(feature = "metal")]
            {
                ev.reserved_bytes = metal::current_allocated_size(dev);
            }
        }
    }
    ev
}

/// Process resident set size in bytes from `/proc/self/statm` (Linux); `None` elsewhere or on
/// any read or parse error. The file stays open (re-read from offset 0 each time: procfs
/// regenerates it), so a sample costs one `pread` instead of open, read and close (a sample is
/// taken at every span end of the captured step).
pub fn resident_bytes() -> Option<u64> {
    let mut buf = [0u8; 256];
    let n = read_statm(&mut buf)?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size()?)
}

/// Reads `/proc/self/statm` into `buf` through a kept descriptor (reopened after a fork: the
/// descriptor names the process that opened it).
#[cfg(unix)]
fn read_statm(buf: &mut [u8]) -> Option<usize> {
    use std::os::unix::fs::FileExt;
    static STATM: std::sync::Mutex<Option<(u32, std::fs::File)>> = std::sync::Mutex::new(None);
    let pid = std::process::id();
    let mut slot = STATM.lock().unwrap_or_else(|e| e.into_inner());
    if slot.as_ref().map(|(p, _)| *p) != Some(pid) {
        *slot = Some((pid, std::fs::File::open("/proc/self/statm").ok()?));
    }
    slot.as_ref()?.1.read_at(buf, 0).ok()
}

#[cfg(not(unix))]
fn read_statm(_buf: &mut [u8]) -> Option<usize> {
    None
}

/// The page size in bytes (`statm` counts pages): the `KernelPageSize` of the first mapping in
/// `/proc/self/smaps`, read once (no libc dependency for `sysconf`); 4096 when it cannot be read.
fn page_size() -> Option<u64> {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    Some(*PAGE.get_or_init(|| {
        std::fs::read_to_string("/proc/self/smaps")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("KernelPageSize:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .unwrap_or(4096)
    }))
}

#[cfg(feature = "cuda-ledger")]
pub(crate) use cuda::device_ptr as cuda_device_ptr;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_sample_has_rss_and_no_device_fields() {
        let ev = sample(&Device::Cpu, DeviceLabel::Cpu, 5);
        assert_eq!(ev.timestamp_ns, 5);
        if cfg!(target_os = "linux") {
            let rss = ev.resident_bytes.expect("statm readable on linux");
            assert!(rss > 1 << 20, "a test process holds more than 1 MiB: {rss}");
        }
        assert_eq!(ev.free_bytes, None);
        assert_eq!(ev.capacity_bytes, None);
        assert_eq!(ev.reserved_bytes, None);
        // The unit-test binary does not install the tracking allocator.
        assert_eq!(ev.used_bytes, None);
    }
}
