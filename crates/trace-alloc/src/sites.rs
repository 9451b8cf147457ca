//! Allocation-site capture **inside** the allocator hook: for an allocation of at least the
//! threshold made while armed, the calling thread's return addresses are copied into a slot of a
//! preallocated static stack pool; the ring's `Alloc` event carries the slot (see [`SiteTag`]).
//! Symbols are resolved after the step, outside the hook (the probe's stack table).
//!
//! # The pool
//! [`POOL_STACKS`] stacks of [`POOL_FRAMES`] return addresses each (8 MiB of zero-initialised
//! `.bss`: only the pages written cost memory). A slot is claimed with one `fetch_add` on a
//! counter and owned by its claimer until the next capture start resets the counter (the hook
//! is disarmed then). A full pool counts the capture as lost; nothing blocks, nothing
//! allocates, nothing is formatted.
//!
//! # Walkers
//! - `libgcc`: [`crate::walk::dwarf::capture_cut`], the DWARF unwinder (`_Unwind_Backtrace`
//!   through the `backtrace` crate): works on any build, costs microseconds per stack.
//! - `frame_pointers`: a bounds-checked walk of the frame-pointer chain (`fp_walk`): every
//!   frame pointer must lie inside `[sp, stack top)` of the thread (bounds read outside the hook,
//!   with `pthread_getattr_np`, at capture start or when a thread joins), be aligned and be
//!   strictly above the previous one. Only correct when every frame on the stack keeps a frame
//!   pointer (`-C force-frame-pointers=yes` for the whole build); [`calibrate`] decides, at each
//!   capture start, by walking one real allocation (the caller's: the probe makes a Candle
//!   tensor) both ways and choosing frame pointers
//!   only when the two stacks agree. A thread whose bounds are unknown uses libgcc.
//!
//! Re-entry (an allocation made by the unwinder itself) is guarded by a `const` thread-local:
//! the inner allocation is logged without a stack and counted as lost.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::counters::{self, Base, Counter};
use crate::line::Line;
use crate::state;
use crate::walk::frame_chain;

/// Stacks in the pool (a capture window's storage-sized allocations beyond this lose their
/// stack, counted in [`SiteCounts::lost_pool_full`]).
pub const POOL_STACKS: usize = 1 << 14;
/// Return addresses kept per stack (deeper stacks keep their innermost frames and count as
/// truncated).
pub const POOL_FRAMES: usize = 64;
/// The default threshold with the DWARF unwinder (≈ 10 µs a stack): allocations of at least
/// 4 KiB get a stack.
pub const DEFAULT_SITE_THRESHOLD_BYTES: usize = 4096;
/// The default threshold with frame pointers (≈ 0.15 µs a stack): allocations of at least
/// 1 KiB get a stack. A model of small tensors holds much of its peak below 4 KiB
/// (candle-transformers' `llama2_c` at its test size: 86.9% of the step's bytes live at the
/// peak are named at 4 KiB, 99.2% at 1 KiB).
pub const FRAME_POINTER_SITE_THRESHOLD_BYTES: usize = 1024;

/// The threshold used when the run sets none: [`FRAME_POINTER_SITE_THRESHOLD_BYTES`] with the
/// frame-pointer walk, [`DEFAULT_SITE_THRESHOLD_BYTES`] with libgcc.
pub fn default_threshold_bytes(unwinder: Unwinder) -> usize {
    match unwinder {
        Unwinder::FramePointers => FRAME_POINTER_SITE_THRESHOLD_BYTES,
        Unwinder::Libgcc => DEFAULT_SITE_THRESHOLD_BYTES,
    }
}

// The ring's tag keeps the slot in 24 bits, the length in 7.
const _: () = assert!(POOL_STACKS < (1 << 24) && POOL_FRAMES < (1 << 7));

/// How stacks are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwinder {
    /// The DWARF unwinder (libgcc's `_Unwind_Backtrace`).
    Libgcc,
    /// The bounds-checked frame-pointer walk.
    FramePointers,
}

impl Unwinder {
    /// The name written in the `alloc_sites` account.
    pub fn wire_name(self) -> &'static str {
        match self {
            Unwinder::Libgcc => "libgcc",
            Unwinder::FramePointers => "frame_pointers",
        }
    }
}

struct Pool(UnsafeCell<[[usize; POOL_FRAMES]; POOL_STACKS]>);

// SAFETY: each row is written only by the thread that claimed its index with `NEXT.fetch_add`
// (indices are unique until `reset`, which runs while the hook is disarmed), and read only
// after the ring event naming it was published with `Release` and drained with `Acquire`.
unsafe impl Sync for Pool {}

static POOL: Pool = Pool(UnsafeCell::new([[0; POOL_FRAMES]; POOL_STACKS]));
/// Next pool index to claim. Alone on its line: every captured stack writes it, and the
/// settings beside it ([`THRESHOLD`], [`WALKER`], [`LIMIT`]) are read by every armed allocation.
static NEXT: Line<AtomicUsize> = Line(AtomicUsize::new(0));
/// Effective pool capacity in stacks (≤ [`POOL_STACKS`]); lowered by tests.
static LIMIT: AtomicUsize = AtomicUsize::new(POOL_STACKS);
/// Stacks are captured for allocations of at least this many bytes; 0: off.
static THRESHOLD: AtomicUsize = AtomicUsize::new(0);
/// 0: libgcc, 1: frame pointers.
static WALKER: AtomicU8 = AtomicU8::new(0);

/// The per-thread counters of a window (every small allocation bumps two of them: they are
/// kept per thread, with plain stores, see `crate::counters`), from their totals at [`reset`].
static WINDOW: Base<5> = Base::new([
    Counter::SmallAllocs,
    Counter::SmallBytes,
    Counter::Captured,
    Counter::Truncated,
    Counter::CaptureNs,
]);
static LOST_FULL: AtomicU64 = AtomicU64::new(0);
static LOST_REENTRY: AtomicU64 = AtomicU64::new(0);
/// ns of DWARF walks made while libgcc is the chosen walker, for its budget (a shared counter:
/// the budget reads it at every walk, and a walk costs microseconds anyway).
static LIBGCC_NS: AtomicU64 = AtomicU64::new(0);
static FP_FALLBACKS: AtomicU64 = AtomicU64::new(0);
static LOST_BUDGET: AtomicU64 = AtomicU64::new(0);
/// The hook's clock at the window's start (see [`reset`]).
static WINDOW_START_NS: AtomicU64 = AtomicU64::new(0);

/// With the DWARF unwinder (about 10 µs a stack), the walks of a window may take at most this
/// share of its elapsed time: 1/20, 5%. A step of many small storage-sized tensors would
/// otherwise spend a third of its time walking (the llama demo: 999 stacks, 13 ms of a 45 ms
/// step); past the budget a capture is skipped and counted (`SiteCounts::lost_budget`). The
/// frame-pointer walk (0.6 µs) has no budget.
pub const LIBGCC_BUDGET_DIVISOR: u64 = 20;

/// Walk time always allowed before the budget applies, ns (short windows keep their first
/// stacks).
pub const LIBGCC_BUDGET_FLOOR_NS: u64 = 500_000;

thread_local! {
    /// This thread is inside a stack walk (re-entry guard).
    static IN_WALK: Cell<bool> = const { Cell::new(false) };
    /// Calibration: the next allocation of this thread is walked both ways.
    static CALIBRATING: Cell<bool> = const { Cell::new(false) };
}

/// The slot reference carried in a ring `Alloc` event's tag bits: 0 = no stack; otherwise
/// bits 0..24 the pool index + 1, bits 24..31 the frame count, bit 31 truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SiteTag(pub u32);

impl SiteTag {
    fn new(index: usize, len: usize, truncated: bool) -> Self {
        Self(((index as u32) + 1) | ((len as u32) << 24) | (u32::from(truncated) << 31))
    }

    /// Whether a stack was captured.
    pub fn is_some(self) -> bool {
        self.0 & 0x00ff_ffff != 0
    }

    /// The captured return addresses, innermost first (empty without a stack).
    ///
    /// Call only for a tag drained from the ring in the current capture (the slot is then
    /// written and not reused before the next capture start).
    pub fn frames(self) -> &'static [usize] {
        let index = (self.0 & 0x00ff_ffff) as usize;
        if index == 0 || index > POOL_STACKS {
            return &[];
        }
        let len = ((self.0 >> 24) & 0x7f) as usize;
        // SAFETY: see `Pool`: the row was written before its event was published; it is not
        // written again until `reset`, which the capture calls only at its next start.
        let row = unsafe { &*(POOL.0.get() as *const [usize; POOL_FRAMES]).add(index - 1) };
        &row[..len.min(POOL_FRAMES)]
    }
}

/// The hook's entry: counts a small allocation, or captures the stack of a large one. Returns
/// the tag for the ring's `Alloc` event and, when a stack was walked, the hook's clock read
/// right after the walk (the event's time: the hook reads the clock once less). Never
/// allocates, never locks.
#[inline]
pub(crate) fn on_alloc(size: usize) -> (SiteTag, Option<u64>) {
    let threshold = THRESHOLD.load(Ordering::Relaxed);
    if threshold == 0 {
        return (SiteTag(0), None);
    }
    if size < threshold {
        counters::add(Counter::SmallAllocs, 1);
        counters::add(Counter::SmallBytes, size as u64);
        return (SiteTag(0), None);
    }
    capture()
}

#[inline(never)]
fn capture() -> (SiteTag, Option<u64>) {
    if IN_WALK.with(|w| w.replace(true)) {
        LOST_REENTRY.fetch_add(1, Ordering::Relaxed);
        return (SiteTag(0), None);
    }
    let libgcc = WALKER.load(Ordering::Relaxed) == 0;
    if libgcc && over_budget() {
        LOST_BUDGET.fetch_add(1, Ordering::Relaxed);
        IN_WALK.with(|w| w.set(false));
        return (SiteTag(0), None);
    }
    let index = NEXT.fetch_add(1, Ordering::Relaxed);
    if index >= LIMIT.load(Ordering::Relaxed) {
        LOST_FULL.fetch_add(1, Ordering::Relaxed);
        IN_WALK.with(|w| w.set(false));
        return (SiteTag(0), None);
    }
    let t0 = state::now_ns();
    // SAFETY: `index` was claimed above and is unique until `reset` (see `Pool`).
    let row = unsafe { &mut *(POOL.0.get() as *mut [usize; POOL_FRAMES]).add(index) };
    let (len, truncated) = walk(row);
    let t1 = state::now_ns();
    let spent_ns = t1.saturating_sub(t0);
    counters::add(Counter::CaptureNs, spent_ns);
    if libgcc {
        LIBGCC_NS.fetch_add(spent_ns, Ordering::Relaxed);
    }
    counters::add(Counter::Captured, 1);
    if truncated {
        counters::add(Counter::Truncated, 1);
    }
    IN_WALK.with(|w| w.set(false));
    (SiteTag::new(index, len, truncated), Some(t1))
}

/// Whether the DWARF walks so far exceed their share of the window (see
/// [`LIBGCC_BUDGET_DIVISOR`]).
#[inline]
fn over_budget() -> bool {
    let spent = LIBGCC_NS.load(Ordering::Relaxed);
    spent >= LIBGCC_BUDGET_FLOOR_NS
        && budget_exceeded(
            spent,
            state::now_ns().saturating_sub(WINDOW_START_NS.load(Ordering::Relaxed)),
        )
}

/// The budget rule: `spent_ns` of walking in a window `elapsed_ns` long is past its share once
/// it reaches the floor and exceeds `elapsed / LIBGCC_BUDGET_DIVISOR`.
#[inline]
pub(crate) fn budget_exceeded(spent_ns: u64, elapsed_ns: u64) -> bool {
    spent_ns >= LIBGCC_BUDGET_FLOOR_NS
        && spent_ns.saturating_mul(LIBGCC_BUDGET_DIVISOR) > elapsed_ns
}

/// Walks this thread's stack into `buf` with the chosen walker: (frames, truncated).
#[inline(always)]
fn walk(buf: &mut [usize]) -> (usize, bool) {
    if WALKER.load(Ordering::Relaxed) == 1 {
        let (lo, hi) = frame_chain::thread_bounds();
        if hi != 0 {
            return fp_walk(buf, lo, hi);
        }
        FP_FALLBACKS.fetch_add(1, Ordering::Relaxed);
    }
    gcc_walk(buf)
}

#[inline(never)]
fn gcc_walk(buf: &mut [usize]) -> (usize, bool) {
    let c = crate::walk::dwarf::capture_cut(buf);
    (c.len, c.truncated)
}

/// The frame-pointer walk ([`frame_chain::walk`]): return addresses from the caller of this
/// function outward, inside `[sp, hi)` of this thread's stack. `lo` is the stack's lowest
/// address (a frame pointer below the current stack pointer is rejected anyway).
#[inline(never)]
fn fp_walk(buf: &mut [usize], lo: usize, hi: usize) -> (usize, bool) {
    let marker = 0u8;
    let sp = std::hint::black_box(&marker) as *const u8 as usize;
    frame_chain::walk(buf, frame_chain::frame_pointer(), sp.max(lo), hi)
}

/// Records this thread's stack bounds (outside the hook: `pthread_getattr_np` may allocate),
/// so its allocations can be walked by frame pointers. Idempotent.
pub fn note_thread_bounds() {
    frame_chain::note_thread_bounds();
}

/// What [`calibrate`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkerCalibration {
    /// The walker chosen.
    pub unwinder: Unwinder,
    /// Frames the libgcc walk found for the calibration allocation.
    pub libgcc_frames: usize,
    /// Frames the frame-pointer walk found (0 without stack bounds).
    pub fp_frames: usize,
    /// Leading frames on which both walks agree.
    pub agreeing_frames: usize,
}

/// Calibration buffers (used by one thread at a time: `calibrate` runs under the capture lock).
struct CalibBuf(UnsafeCell<([usize; POOL_FRAMES], [usize; POOL_FRAMES], usize, usize)>);
// SAFETY: written by the calibrating thread inside its own allocation, read by it afterwards;
// `calibrate` is serialised by its callers (the capture state's mutex).
unsafe impl Sync for CalibBuf {}
static CALIB: CalibBuf = CalibBuf(UnsafeCell::new(([0; POOL_FRAMES], [0; POOL_FRAMES], 0, 0)));

/// The hook's calibration path: this thread asked for its next allocation to be walked both
/// ways (only while not armed; see [`calibrate`]).
#[inline]
pub(crate) fn calibrating_here() -> bool {
    CALIBRATING.with(|c| c.get())
}

/// Walks the current allocation both ways into the calibration buffers (the hook calls it for
/// the calibrating thread's first allocation of at least 1 KiB).
#[inline(never)]
pub(crate) fn calibration_walk() {
    CALIBRATING.with(|c| c.set(false));
    let (lo, hi) = frame_chain::thread_bounds();
    // SAFETY: see `CalibBuf`.
    let c = unsafe { &mut *CALIB.0.get() };
    let (n, _) = gcc_walk(&mut c.0);
    c.2 = n;
    c.3 = if hi != 0 {
        fp_walk(&mut c.1, lo, hi).0
    } else {
        0
    };
}

/// Chooses the walker for the next capture: `allocate` makes a real allocation of at least
/// 1 KiB on this thread through the code whose stacks matter (the probe makes a 2,048-element
/// Candle f32 tensor) and returns it; the hook walks that allocation by libgcc and by frame
/// pointers; frame pointers are chosen only when both found the same frames, at least down to
/// this function's caller. Call outside the hook, disarmed, serialised (the capture state's
/// lock). The value `allocate` returns is dropped after the walk.
pub fn calibrate<T>(allocate: impl FnOnce() -> T) -> WalkerCalibration {
    note_thread_bounds();
    CALIBRATING.with(|c| c.set(true));
    state::STATE.fetch_or(state::SITE_CALIB, Ordering::SeqCst);
    let t = std::hint::black_box(allocate());
    state::STATE.fetch_and(!state::SITE_CALIB, Ordering::SeqCst);
    CALIBRATING.with(|c| c.set(false));
    drop(t);
    // SAFETY: see `CalibBuf`; the walk is done.
    let c = unsafe { &*CALIB.0.get() };
    let (gcc, fp) = (&c.0[..c.2], &c.1[..c.3]);
    // The walks start at different calls inside `calibration_walk` (and libgcc's keeps its own
    // entry frames): align them on the frame-pointer walk's second frame (the hook's caller of
    // `calibration_walk`), then compare outward.
    let start = fp
        .get(1)
        .and_then(|second| gcc.iter().position(|g| g == second));
    let (gcc, agreeing) = match start {
        Some(k) => (
            &gcc[k..],
            gcc[k..]
                .iter()
                .zip(&fp[1..])
                .take_while(|(a, b)| a == b)
                .count(),
        ),
        None => (gcc, 0),
    };
    // The libgcc walk reaches the thread's entry. Frame pointers pass when they found every
    // frame libgcc found, except at most the outermost two (the thread's entry frames, built
    // without frame pointers by the C runtime).
    let unwinder = if start.is_some() && gcc.len() >= 8 && agreeing + 2 >= gcc.len() {
        Unwinder::FramePointers
    } else {
        Unwinder::Libgcc
    };
    WalkerCalibration {
        unwinder,
        libgcc_frames: gcc.len(),
        fp_frames: fp.len(),
        agreeing_frames: agreeing,
    }
}

/// Settings of the next capture window: `threshold_bytes` (0: off) and the walker. Resets the
/// pool and the counters. Call while disarmed.
pub fn reset(threshold_bytes: usize, unwinder: Unwinder) {
    NEXT.store(0, Ordering::Relaxed);
    WINDOW.start();
    for c in [
        &LOST_FULL,
        &LOST_REENTRY,
        &LIBGCC_NS,
        &FP_FALLBACKS,
        &LOST_BUDGET,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    WINDOW_START_NS.store(state::now_ns(), Ordering::Relaxed);
    WALKER.store(
        u8::from(unwinder == Unwinder::FramePointers),
        Ordering::Relaxed,
    );
    THRESHOLD.store(
        if SUPPORTED { threshold_bytes } else { 0 },
        Ordering::Relaxed,
    );
}

/// Whether this target can capture sites (the DWARF unwinder of the sampler's targets).
pub const SUPPORTED: bool = crate::walk::dwarf::SUPPORTED;

/// Stops capturing stacks (the counters keep their values).
pub fn stop() {
    THRESHOLD.store(0, Ordering::Relaxed);
}

/// Pool rows kept faulted in ahead of the next claim by [`populate_ahead`] (2,048 stacks,
/// 1 MiB: at least a few ms of a model that sites a thousand allocations a step).
pub const POPULATE_AHEAD_STACKS: usize = 2048;

/// Pool rows whose pages [`populate_ahead`] has faulted in (they stay resident: the pool is
/// never returned to the system).
static POPULATED: AtomicUsize = AtomicUsize::new(0);

/// Faults in the pool's pages from the last populated row up to [`POPULATE_AHEAD_STACKS`] past
/// the next claim (within the pool's capacity), without writing them, so that the captured
/// thread's first write of a fresh row does not take a page fault inside the allocation (a fault
/// a page of 8 rows: about an eighth of a sited allocation's hook time on the llama demo). For
/// the probe's drainer thread, outside the hook, at each poll while a window is open; safe
/// beside the hook's writes (Linux `madvise(MADV_POPULATE_WRITE)`: the pages' contents are not
/// touched). Returns the rows populated so far (0 where the system offers no such call).
pub fn populate_ahead() -> usize {
    let done = POPULATED.load(Ordering::Relaxed);
    let want = NEXT
        .load(Ordering::Relaxed)
        .saturating_add(POPULATE_AHEAD_STACKS)
        .min(LIMIT.load(Ordering::Relaxed))
        .min(POOL_STACKS);
    if want <= done {
        return done;
    }
    let row = std::mem::size_of::<[usize; POOL_FRAMES]>();
    let base = POOL.0.get() as usize;
    if !populate_write(
        base + done * row,
        base + want * row,
        base + POOL_STACKS * row,
    ) {
        return done;
    }
    POPULATED.fetch_max(want, Ordering::Relaxed);
    want
}

/// Faults in the pages that hold `[start, end)` writable without changing them, not past the
/// last whole page below `limit` (the pool's end); whether the system did.
#[cfg(target_os = "linux")]
fn populate_write(start: usize, end: usize, limit: usize) -> bool {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let lo = start & !(page - 1);
    let hi = (end.div_ceil(page) * page).min(limit & !(page - 1));
    if hi <= lo {
        return true;
    }
    // SAFETY: `[lo, hi)` covers only pages that hold part of the static pool (rounded to whole
    // pages of the same `.bss` mapping); MADV_POPULATE_WRITE faults them in and leaves every
    // byte as it is, so concurrent writers of the pool see no change.
    unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_POPULATE_WRITE) == 0 }
}

/// Elsewhere the pool's pages fault in at their first write.
#[cfg(not(target_os = "linux"))]
fn populate_write(_start: usize, _end: usize, _limit: usize) -> bool {
    false
}

/// The hook's counts since the last [`reset`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SiteCounts {
    /// Allocations below the threshold.
    pub small_allocs: u64,
    /// Their requested bytes.
    pub small_bytes: u64,
    /// Stacks captured.
    pub captured: u64,
    /// Captures lost because the pool was full.
    pub lost_pool_full: u64,
    /// Captures lost because the hook re-entered itself (an allocation inside a walk).
    pub lost_reentry: u64,
    /// Captured stacks cut at [`POOL_FRAMES`].
    pub truncated: u64,
    /// ns spent walking, all threads (the hook's clock).
    pub capture_ns: u64,
    /// Walks of threads without known stack bounds that fell back to libgcc while frame
    /// pointers were chosen.
    pub fp_fallbacks: u64,
    /// Captures skipped because the DWARF walks had used their share of the window
    /// ([`LIBGCC_BUDGET_DIVISOR`]).
    pub lost_budget: u64,
}

/// The hook's counts since the capture start.
pub fn counts() -> SiteCounts {
    SiteCounts {
        small_allocs: WINDOW.since_start(Counter::SmallAllocs),
        small_bytes: WINDOW.since_start(Counter::SmallBytes),
        captured: WINDOW.since_start(Counter::Captured),
        lost_pool_full: LOST_FULL.load(Ordering::Relaxed),
        lost_reentry: LOST_REENTRY.load(Ordering::Relaxed),
        truncated: WINDOW.since_start(Counter::Truncated),
        capture_ns: WINDOW.since_start(Counter::CaptureNs),
        fp_fallbacks: FP_FALLBACKS.load(Ordering::Relaxed),
        lost_budget: LOST_BUDGET.load(Ordering::Relaxed),
    }
}

/// Lowers (or restores) the effective pool capacity, clamped to `0..=POOL_STACKS` stacks. A test
/// knob: it makes a full pool reachable with a few allocations. Takes effect for the next walk.
pub fn set_pool_capacity(stacks: usize) {
    LIMIT.store(stacks.min(POOL_STACKS), Ordering::Relaxed);
}

/// Times both walkers from the caller's frame: (libgcc ns, frame-pointer ns, frames each) per
/// stack over `rounds` walks (the frame-pointer figure is `None` without stack bounds). For the
/// bench and the README; outside the hook.
pub fn time_walkers(rounds: u32) -> (f64, Option<f64>, usize, usize) {
    note_thread_bounds();
    let mut buf = [0usize; POOL_FRAMES];
    let rounds = rounds.max(1);
    let t = std::time::Instant::now();
    let mut gcc = 0;
    for _ in 0..rounds {
        gcc = std::hint::black_box(gcc_walk(&mut buf)).0;
    }
    let gcc_ns = t.elapsed().as_nanos() as f64 / f64::from(rounds);
    let (lo, hi) = frame_chain::thread_bounds();
    if hi == 0 {
        return (gcc_ns, None, gcc, 0);
    }
    let t = std::time::Instant::now();
    let mut fp = 0;
    for _ in 0..rounds {
        fp = std::hint::black_box(fp_walk(&mut buf, lo, hi)).0;
    }
    let fp_ns = t.elapsed().as_nanos() as f64 / f64::from(rounds);
    (gcc_ns, Some(fp_ns), gcc, fp)
}

/// Whether a frame named `function` in `file` is the allocator hook's own code: this crate
/// (the tracking allocator, the sites' stack walk), the unwinder it calls (`backtrace`), or the
/// standard library's `__rust_alloc` shims. An allocation site's stack starts with such frames;
/// the probe drops them. A frame is the hook's by its name or, for the inlined frames a
/// `debug = "line-tables-only"` build names only by their short name (`walk`, `capture`), by its
/// source file: this crate's `src/`, in a workspace checkout (`trace-alloc/src/…`) or a
/// registry one (`trace-alloc-0.1.0/src/…`).
pub fn is_hook_frame_name(function: Option<&str>, file: Option<&str>) -> bool {
    file.is_some_and(is_hook_file)
        || function.is_some_and(|n| {
            n.starts_with("trace_alloc::")
                || n.starts_with("<trace_alloc::")
                || n.starts_with("backtrace::")
                || n.starts_with("<backtrace::")
                || n.starts_with("__rust_alloc")
                || n.starts_with("__rustc::__rust_")
                || n.starts_with("__rust_realloc")
                || n.starts_with("__rg_")
        })
}

/// Whether `file` is one of this crate's source files (see [`is_hook_frame_name`]).
fn is_hook_file(file: &str) -> bool {
    let file = file.replace('\\', "/");
    let Some(at) = file.rfind("/src/") else {
        return false;
    };
    let krate = file[..at].rsplit('/').next().unwrap_or("");
    krate == "trace-alloc" || krate.starts_with("trace-alloc-")
}

#[cfg(test)]
mod tests {

    #[cfg(target_os = "linux")]
    #[test]
    fn populating_ahead_faults_in_the_pools_next_pages_and_not_beyond() {
        let resident = |row: usize| {
            let size = std::mem::size_of::<[usize; POOL_FRAMES]>();
            // SAFETY: sysconf has no memory-safety preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
            let addr = (POOL.0.get() as usize + row * size) & !(page - 1);
            let mut vec = 0u8;
            // SAFETY: `addr` is a page of the static pool; `vec` holds the one page's byte.
            let rc = unsafe { libc::mincore(addr as *mut libc::c_void, page, &mut vec) };
            assert_eq!(rc, 0, "mincore");
            vec & 1 == 1
        };
        // No test of this binary claims pool rows (nothing is armed), so NEXT is 0.
        let far = POOL_STACKS - 64;
        assert!(!resident(far), "the pool's far end is untouched");
        let rows = populate_ahead();
        if rows == 0 {
            // a kernel before 5.14 has no MADV_POPULATE_WRITE: the pages fault in when written
            let err = std::io::Error::last_os_error();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
            return;
        }
        assert_eq!(rows, POPULATE_AHEAD_STACKS);
        assert!(resident(0) && resident(POPULATE_AHEAD_STACKS - 16));
        assert!(!resident(far), "nothing past the lead");
        assert_eq!(populate_ahead(), rows, "a second call has nothing to do");
    }

    #[test]
    fn the_dwarf_walks_keep_to_a_twentieth_of_the_window_after_the_floor() {
        // below the floor every walk is allowed, however short the window
        assert!(!budget_exceeded(LIBGCC_BUDGET_FLOOR_NS - 1, 0));
        // 1 ms of walking is 5% of a 20 ms window: still allowed; of a 19 ms one: not
        assert!(!budget_exceeded(1_000_000, 20_000_000));
        assert!(budget_exceeded(1_000_000, 19_999_999));
        // no overflow on hostile clocks
        assert!(budget_exceeded(u64::MAX, u64::MAX - 1));
        assert!(!budget_exceeded(0, u64::MAX));
    }

    use super::*;

    #[test]
    fn a_tag_names_its_slot_length_and_cut() {
        assert!(!SiteTag(0).is_some());
        assert!(SiteTag(0).frames().is_empty());
        let t = SiteTag::new(POOL_STACKS - 1, POOL_FRAMES, true);
        assert!(t.is_some());
        assert_eq!((t.0 & 0x00ff_ffff) as usize, POOL_STACKS);
        assert_eq!(((t.0 >> 24) & 0x7f) as usize, POOL_FRAMES);
        assert_eq!(t.0 >> 31, 1);
        assert_eq!(t.frames().len(), POOL_FRAMES);
    }

    #[test]
    fn the_hooks_frames_are_known_by_name_or_by_file() {
        assert!(is_hook_file("/w/crates/trace-alloc/src/sites.rs"));
        assert!(is_hook_file(
            "/h/.cargo/registry/src/index/trace-alloc-0.1.0/src/hook.rs"
        ));
        assert!(is_hook_file("/w/crates/trace-alloc/src/walk/dwarf.rs"));
        assert!(!is_hook_file("/w/crates/trace-probe/src/run.rs"));
        assert!(!is_hook_file("/w/crates/trace-sampler/src/linux/signal.rs"));
        assert!(!is_hook_file("/w/my-trace-alloc/src/mine.rs"));
        assert!(!is_hook_file(
            "/rustc/59807616e1fa/library/alloc/src/alloc.rs"
        ));
        assert!(!is_hook_file("sites.rs"));
        assert!(is_hook_frame_name(
            Some("<trace_alloc::Tracking as core::alloc::global::GlobalAlloc>::alloc"),
            None
        ));
        assert!(is_hook_frame_name(Some("__rustc::__rust_alloc"), None));
        assert!(is_hook_frame_name(
            Some("walk"),
            Some("/w/crates/trace-alloc/src/walk/frame_chain.rs")
        ));
        assert!(!is_hook_frame_name(
            Some("candle_core::tensor::Tensor::zeros"),
            Some("/r/candle-core-0.11.1/src/tensor.rs")
        ));
        assert!(!is_hook_frame_name(None, None));
    }

    #[cfg(dwarf_walk)]
    #[test]
    fn both_walkers_can_be_timed_outside_the_hook() {
        let (gcc_ns, fp_ns, gcc_frames, _) = time_walkers(3);
        assert!(gcc_ns > 0.0 && gcc_frames > 0);
        assert!(fp_ns.is_some());
    }
}
