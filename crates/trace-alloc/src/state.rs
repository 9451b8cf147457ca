//! Process-wide state read by the allocator hook: flags, calibration results, the clock and the
//! per-thread cells.
//!
//! Everything here is a `static` atomic or a `const`-initialised thread-local `Cell` without a
//! destructor. The hook runs *inside* the global allocator, so it must never allocate (that would
//! recurse into itself), never take a lock (the lock may be held by the thread being interrupted
//! mid-allocation, or may itself allocate), and never touch a lazily initialised or `Drop`-carrying
//! thread-local (their first access registers a destructor, which allocates). Const thread-locals
//! of `Cell<Copy>` compile to a plain TLS slot access.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU16, AtomicU8, AtomicUsize, Ordering};

use crate::counters::{self, Base, Counter};
use crate::line::Line;

/// Bit of [`STATE`]: some call went through a [`crate::Tracking`] allocator.
pub(crate) const INSTALLED: u8 = 1;
/// Bit of [`STATE`]: the hook records events.
pub(crate) const ARMED: u8 = 2;
/// Bit of [`STATE`]: storage-sized frees are parked, not freed (see `alloc::hold`).
pub(crate) const HOLD: u8 = 4;
/// Bit of [`STATE`]: a thread calibrates the allocation-site walkers (see `alloc::sites`): the
/// hook walks that thread's next large allocation both ways, without logging anything.
pub(crate) const SITE_CALIB: u8 = 8;

/// Installation and arming flags; the disarmed hook does exactly one relaxed load of it. Alone
/// on its cache line: every allocation of every thread reads it, and a line that other threads
/// write to (a counter) would make that read a miss.
pub(crate) static STATE: Line<AtomicU8> = Line(AtomicU8::new(0));

/// Calibrated size in bytes of a storage's `Arc` block (`ArcInner<RwLock<Storage>>`); 0 until
/// calibration succeeded.
pub(crate) static BLOCK_SIZE: AtomicUsize = AtomicUsize::new(0);

/// Calibrated offset in bytes of the data pointer word of a CPU storage inside its block;
/// `usize::MAX` when the variants disagreed (the hook then scans every word of the block).
pub(crate) static DATA_PTR_OFFSET: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Calibrated size in bytes of a tensor's `Arc` block (`ArcInner<Tensor_>`); 0 until
/// calibration succeeded (no tensor frees are then logged, and no drop signature is confirmed).
pub(crate) static TENSOR_BLOCK_SIZE: AtomicUsize = AtomicUsize::new(0);

/// Calibrated offset in bytes, inside a tensor's block, of the word holding its storage's `Arc`
/// pointer (the storage block's address).
pub(crate) static TENSOR_STORAGE_OFFSET: AtomicUsize = AtomicUsize::new(0);

/// Calibrated offset in bytes, inside a storage's block, of the word whose low byte is the CPU
/// storage's variant (its dtype); `usize::MAX` when calibration found none.
pub(crate) static DTYPE_OFFSET: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The low byte of that word for each dtype code 1, 2, … the calibration names, in order
/// (`u16::MAX`: not calibrated; see [`crate::layout::set_dtype_bytes`]).
pub(crate) static DTYPE_BYTES: [AtomicU16; DTYPE_SLOTS] =
    [const { AtomicU16::new(u16::MAX) }; DTYPE_SLOTS];
/// Entries of [`DTYPE_BYTES`].
pub(crate) const DTYPE_SLOTS: usize = 16;

/// The armed counters' totals at the last arming ([`crate::arm`]): [`armed_net_bytes`] and
/// [`armed_alloc_calls`] are the totals since.
pub(crate) static ARMED_BASE: Base<2> =
    Base::new([Counter::ArmedNetBytes, Counter::ArmedAllocCalls]);

thread_local! {
    /// The previous dealloc on this thread: (pointer, size). Feeds the storage drop signature.
    pub(crate) static LAST_FREE: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Depth of [`IgnoreAllocs`] guards on this thread: allocations are not logged while > 0.
    pub(crate) static IGNORE_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// This thread is returning parked blocks to the inner allocator (`hold::release`): their
    /// frees were logged when they were parked, so the hook does not log them again.
    pub(crate) static RELEASING: Cell<bool> = const { Cell::new(false) };
    /// Bytes this thread allocated minus bytes it freed through a counting-mode allocator (see
    /// [`thread_heap_net_bytes`]).
    pub(crate) static THREAD_NET: Cell<i64> = const { Cell::new(0) };
    /// This thread does the probe's own background work ([`mark_probe_thread`]).
    pub(crate) static PROBE_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Bytes allocated minus bytes freed by the threads marked with [`mark_probe_thread`] (alone on
/// its line: only the probe's threads write it, at every allocation of theirs).
pub(crate) static PROBE_THREADS_NET: Line<AtomicI64> = Line(AtomicI64::new(0));

/// Marks the calling thread as the probe's own background work (a thread that reads and writes
/// files, never the program's tensors): from now on its heap bytes also count in
/// [`probe_threads_heap_bytes`], so a figure of the program's heap can leave them out. A block
/// handed between such a thread and another is counted where it is allocated and where it is
/// freed; keep what crosses small.
pub fn mark_probe_thread() {
    PROBE_THREAD.with(|p| p.set(true));
}

/// Live heap bytes held by the threads marked with [`mark_probe_thread`] (allocated there less
/// freed there, at least 0); `None` unless the allocator counts ([`crate::Tracking::counting`]).
pub fn probe_threads_heap_bytes() -> Option<u64> {
    if !COUNTING_SEEN.load(Ordering::Relaxed) {
        return None;
    }
    Some(PROBE_THREADS_NET.load(Ordering::Relaxed).max(0) as u64)
}

/// [`thread_key`] as stored in a ring event.
#[inline]
pub(crate) fn thread_id() -> u32 {
    crate::thread::thread_key() as u32
}

/// Fixes the process clock base (outside the hook) before the first arming.
pub(crate) fn epoch() {
    crate::clock::process_base();
}

/// Hook timestamp: ns since the process clock base ([`crate::clock::process_ns`]; `Instant::now`
/// is a vDSO `clock_gettime(CLOCK_MONOTONIC)` on Linux, and the base is a set `OnceLock`: no
/// allocation, no lock).
#[inline]
pub(crate) fn now_ns() -> u64 {
    crate::clock::process_ns()
}

/// Set by the first call of a counting-mode allocator.
pub(crate) static COUNTING_SEEN: AtomicBool = AtomicBool::new(false);

/// Whether a [`crate::Tracking`] allocator has served at least one call in this process.
///
/// It is the process's global allocator exactly when this is true: a `Tracking` value that is not
/// the `#[global_allocator]` is never called by the runtime.
pub fn is_installed() -> bool {
    STATE.load(Ordering::Relaxed) & INSTALLED != 0
}

/// Whether the hook currently records events.
pub fn is_armed() -> bool {
    STATE.load(Ordering::Relaxed) & ARMED != 0
}

/// Live heap bytes through the tracking allocator since process start, summed over all threads;
/// `None` unless the allocator is installed in counting mode ([`crate::Tracking::counting`]).
pub fn heap_live_bytes() -> Option<u64> {
    if !COUNTING_SEEN.load(Ordering::Relaxed) {
        return None;
    }
    Some((counters::total(Counter::HeapNet) as i64).max(0) as u64)
}

/// Bytes this thread allocated minus bytes it freed since it started, through a counting-mode
/// allocator ([`crate::Tracking::counting`]); `None` otherwise. A block freed on another thread
/// than the one that allocated it counts on both: the difference of two readings on one thread
/// is exact for work that allocates and frees only its own blocks (a cache filled by a call, the
/// bytes it keeps).
pub fn thread_heap_net_bytes() -> Option<i64> {
    if !COUNTING_SEEN.load(Ordering::Relaxed) {
        return None;
    }
    Some(THREAD_NET.with(Cell::get))
}

/// Bytes allocated minus bytes freed through the armed hook since the last arming (may be
/// negative: frees of memory allocated before arming count).
pub fn armed_net_bytes() -> i64 {
    ARMED_BASE.since_start(Counter::ArmedNetBytes) as i64
}

/// Allocation calls (alloc, alloc_zeroed, realloc) seen by the armed hook since the last arming.
pub fn armed_alloc_calls() -> u64 {
    ARMED_BASE.since_start(Counter::ArmedAllocCalls)
}

/// RAII guard: while alive, allocations made *by this thread* are not logged (frees still are,
/// so a storage dropped inside the guard is not missed). Nests. Use it around probe-internal work
/// (the writer thread, registry maps) so the probe's own allocations stay out of the trace.
#[must_use = "allocations are logged again as soon as the guard is dropped"]
pub struct IgnoreAllocs {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl IgnoreAllocs {
    /// Starts ignoring this thread's allocations until the guard is dropped.
    pub fn new() -> Self {
        IGNORE_DEPTH.with(|d| d.set(d.get() + 1));
        Self {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Default for IgnoreAllocs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for IgnoreAllocs {
    fn drop(&mut self) {
        IGNORE_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}
