//! [`Tracking`]: the global allocator wrapper and its hook.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::Ordering;

use crate::counters::{self, Counter};
use crate::ring::{self, DataBuffer, RawEvent};
use crate::state::{
    self, ARMED, BLOCK_SIZE, COUNTING_SEEN, DATA_PTR_OFFSET, HOLD, IGNORE_DEPTH, INSTALLED,
    LAST_FREE, PROBE_THREAD, PROBE_THREADS_NET, RELEASING, SITE_CALIB, STATE, TENSOR_BLOCK_SIZE,
    TENSOR_STORAGE_OFFSET, THREAD_NET,
};
use crate::{hold, sites, watch};

/// A global allocator that forwards to `A` and, while a capture is armed, records storage
/// lifetimes for the probe.
///
/// Install it in the binary (a library cannot), then start a session:
/// ```
/// #[global_allocator]
/// static ALLOC: trace_alloc::Tracking = trace_alloc::Tracking::system();
/// # fn main() { assert!(trace_alloc::is_installed()); }
/// ```
///
/// Cost:
/// - disarmed: one relaxed atomic load per call on top of `A` (plus, only in
///   [`Tracking::counting`] mode, a load and a store of the calling thread's own counter: no
///   atomic read-modify-write for the process's first 256 threads);
/// - armed (inside the captured step only): every allocation is logged to a static ring
///   (address, size, time, thread); a free of the calibrated storage-block size does one probe
///   of the watch table and the CPU storage drop-signature check, and is logged; a free of the
///   calibrated tensor-block size logs one word (the storage pointer that confirms a signature).
///
/// The hook never allocates, never locks and touches only statics, atomics and `const`
/// thread-locals (see the crate docs for why).
pub struct Tracking<A: GlobalAlloc = System> {
    inner: A,
    counting: bool,
}

impl Tracking<System> {
    /// Tracking over the system allocator, disarmed cost one relaxed load per call.
    pub const fn system() -> Self {
        Self {
            inner: System,
            counting: false,
        }
    }

    /// [`Tracking::system`] in counting mode (see [`Tracking::counting`]).
    pub const fn system_counting() -> Self {
        Self {
            inner: System,
            counting: true,
        }
    }
}

impl<A: GlobalAlloc> Tracking<A> {
    /// Tracking over any inner allocator (mimalloc, jemalloc, …).
    pub const fn new(inner: A) -> Self {
        Self {
            inner,
            counting: false,
        }
    }

    /// Like [`Tracking::new`], and also counts live heap bytes at all times (not only while
    /// armed), so device samples can report the absolute `used_bytes` of the heap. Costs a load
    /// and a store of the calling thread's own counter per call (a locked add on a shared shard
    /// for threads past the process's 256th), in addition to the disarmed load.
    pub const fn counting(inner: A) -> Self {
        Self {
            inner,
            counting: true,
        }
    }

    #[inline]
    fn count(&self, delta: i64) {
        if self.counting {
            counters::add_signed(Counter::HeapNet, delta);
            THREAD_NET.with(|n| n.set(n.get().wrapping_add(delta)));
            if PROBE_THREAD.with(Cell::get) {
                PROBE_THREADS_NET.fetch_add(delta, Ordering::Relaxed);
            }
        }
    }

    #[cold]
    fn first_call(&self) {
        if self.counting {
            COUNTING_SEEN.store(true, Ordering::Relaxed);
        }
        STATE.fetch_or(INSTALLED, Ordering::Relaxed);
    }

    #[inline]
    fn flags(&self) -> u8 {
        let s = STATE.load(Ordering::Relaxed);
        if s & INSTALLED == 0 {
            self.first_call();
        }
        s
    }
}

#[inline]
fn log_alloc(ptr: *mut u8, size: usize) {
    counters::add(Counter::ArmedAllocCalls, 1);
    counters::add(Counter::ArmedNetBytes, size as u64);
    if ptr.is_null() || IGNORE_DEPTH.with(|d| d.get()) != 0 {
        return;
    }
    // A captured site reads the clock after its walk: that reading is the event's time too.
    let (site, ts_ns) = sites::on_alloc(size);
    ring::push(RawEvent::Alloc {
        ts_ns: ts_ns.unwrap_or_else(state::now_ns),
        thread: state::thread_id(),
        addr: ptr as usize,
        size,
        site,
    });
}

/// The allocation path while armed or while a thread calibrates the site walkers.
#[inline]
fn on_alloc(s: u8, ptr: *mut u8, size: usize) {
    if s & SITE_CALIB != 0 && size >= 1024 && sites::calibrating_here() {
        sites::calibration_walk();
    }
    if s & ARMED != 0 {
        log_alloc(ptr, size);
    }
}

/// Whether the dying block at `block` holds the word `data` at the calibrated data-pointer
/// offset (or anywhere, when calibration could not pin the offset down).
///
/// # Safety
/// `block` must point to `size` readable bytes (it is being freed, not yet returned to the inner
/// allocator).
#[inline]
unsafe fn block_holds(block: *const u8, size: usize, data: usize) -> bool {
    let words = size / std::mem::size_of::<usize>();
    let off = DATA_PTR_OFFSET.load(Ordering::Relaxed);
    let base = block as *const usize;
    if off != usize::MAX {
        let i = off / std::mem::size_of::<usize>();
        // SAFETY: `i < words`, so word `i` lies inside the `size` readable bytes of `block`
        // (the caller's contract).
        return i < words && unsafe { base.add(i).read_volatile() } == data;
    }
    // SAFETY: every `i < words` names a word inside the `size` readable bytes of `block`.
    (0..words).any(|i| unsafe { base.add(i).read_volatile() } == data)
}

#[inline]
fn on_dealloc(ptr: *mut u8, size: usize) {
    counters::add_signed(Counter::ArmedNetBytes, -(size as i64));
    let (last_ptr, last_size) = LAST_FREE.with(|c| c.replace((ptr as usize, size)));
    if size == TENSOR_BLOCK_SIZE.load(Ordering::Relaxed) {
        let off = TENSOR_STORAGE_OFFSET.load(Ordering::Relaxed);
        if off + std::mem::size_of::<usize>() <= size {
            // SAFETY: `ptr` is a block of `size` bytes being freed by our caller and not yet
            // handed to the inner allocator; the word read lies inside it.
            let word = unsafe { (ptr.add(off) as *const usize).read_volatile() };
            ring::push(RawEvent::TensorFree {
                ts_ns: state::now_ns(),
                thread: state::thread_id(),
                storage_block: word,
                block: ptr as usize,
            });
        }
    }
    if size != BLOCK_SIZE.load(Ordering::Relaxed) {
        return;
    }
    let tag = watch::take(ptr as usize);
    // SAFETY: `ptr` is a block of `size` bytes being freed by our caller and not yet handed to
    // the inner allocator (that happens after this function, or later for a held block).
    let signature = last_ptr != 0 && unsafe { block_holds(ptr, size, last_ptr) };
    let dtype = if signature {
        // SAFETY: as above.
        unsafe { crate::layout::dtype_code(ptr, size) }
    } else {
        0
    };
    // Every block-sized free is logged, matched or not: the drain needs it to know which
    // logged block allocations are still live at the end of the window.
    ring::push(RawEvent::BlockFree {
        ts_ns: state::now_ns(),
        thread: state::thread_id(),
        tag,
        block: ptr as usize,
        data: signature.then_some(DataBuffer {
            ptr: last_ptr,
            size: last_size,
        }),
        dtype,
    });
}

// SAFETY: every method forwards to `A` with the caller's arguments unchanged — except that a
// storage-sized block freed while frees are held is parked and forwarded to `A`'s `dealloc`
// later, unchanged, by `hold::release` through the global allocator (this one). The hook only
// records metadata and never touches memory except reading a block being freed.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Tracking<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, under `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { self.inner.alloc(layout) };
        let s = self.flags();
        self.count(layout.size() as i64);
        if s & (ARMED | SITE_CALIB) != 0 {
            on_alloc(s, ptr, layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, under `GlobalAlloc::alloc_zeroed`'s contract.
        let ptr = unsafe { self.inner.alloc_zeroed(layout) };
        let s = self.flags();
        self.count(layout.size() as i64);
        if s & (ARMED | SITE_CALIB) != 0 {
            on_alloc(s, ptr, layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let s = self.flags();
        if s & ARMED != 0 && !RELEASING.with(|r| r.get()) {
            on_dealloc(ptr, layout.size());
        }
        if s & HOLD != 0
            && (layout.size() == BLOCK_SIZE.load(Ordering::Relaxed)
                || layout.size() == TENSOR_BLOCK_SIZE.load(Ordering::Relaxed))
            && hold::park(ptr, layout)
        {
            // Parked: freed (and counted) later by `hold::release`, through this allocator.
            return;
        }
        self.count(-(layout.size() as i64));
        // SAFETY: `ptr` and `layout` are the caller's, who allocated `ptr` from this allocator
        // (so from `inner`) with `layout`.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's arguments, under `GlobalAlloc::realloc`'s contract.
        let new = unsafe { self.inner.realloc(ptr, layout, new_size) };
        let s = self.flags();
        if !new.is_null() {
            self.count(new_size as i64 - layout.size() as i64);
        }
        if s & ARMED != 0 && !new.is_null() {
            // The old block is gone, the new one is logged as an allocation (a grown Vec that
            // becomes a storage's data buffer is joined on its final address).
            counters::add_signed(Counter::ArmedNetBytes, -(layout.size() as i64));
            let old = layout.size();
            if old == BLOCK_SIZE.load(Ordering::Relaxed)
                || old == TENSOR_BLOCK_SIZE.load(Ordering::Relaxed)
            {
                // A block-sized object that is not a storage (no storage block is ever
                // reallocated) left this address: a zero-size allocation there tells the
                // session tracker that whatever it knew at that address is gone.
                ring::push(RawEvent::Alloc {
                    ts_ns: state::now_ns(),
                    thread: state::thread_id(),
                    addr: ptr as usize,
                    size: 0,
                    site: ring::SiteTag(0),
                });
            }
            log_alloc(new, new_size);
        }
        new
    }
}

/// Arms the hook (process-wide): from now on every allocation, every free of the calibrated
/// block sizes, is logged to the ring. Resets the armed counters ([`crate::armed_net_bytes`],
/// [`crate::armed_alloc_calls`]) and fixes the process clock base. Call outside the hook.
pub fn arm() {
    state::ARMED_BASE.start();
    state::epoch();
    STATE.fetch_or(ARMED, Ordering::SeqCst);
}

/// Disarms the hook (process-wide): nothing more is logged.
pub fn disarm() {
    STATE.fetch_and(!ARMED, Ordering::SeqCst);
}

/// Disarms the hook and starts holding storage-sized (and tensor-sized) frees in one atomic
/// step, so no block that was live while armed (no free logged) can be returned to the inner
/// allocator until [`hold::release`].
pub fn disarm_and_hold() {
    hold::start_with(|s| (s & !ARMED) | HOLD);
}

/// Starts holding storage-sized and tensor-sized frees and leaves the hook armed (frees are
/// still logged): memory of blocks the drain has not yet seen freed stays readable until
/// [`hold::release`].
pub fn hold_armed() {
    hold::start_with(|s| s | HOLD);
}
