//! Held frees: while the hold flag is set, the hook does not return freed
//! storage-sized and tensor-sized blocks to the inner allocator but parks them here, so memory
//! the probe reads after disarming (the optimizer-construction capture reads a word of blocks
//! that were live at disarm time; the capture start reads storage and tensor blocks the session
//! tracker saw allocated) cannot be freed and reused under it, whichever thread frees it. A
//! hold may also start while armed (`hold_armed`): the frees are logged when
//! parked, and not again when released.
//!
//! Lock-free and allocation-free: a static array of slots claimed with `fetch_add`. A full array
//! leaks the block instead of freeing it (counted by [`leaked_blocks`]): never freeing is always
//! sound, and the array holds 4,096 blocks while a hold lasts microseconds. [`release`] clears the
//! flag, waits until no hook call is between its check of the flag and its park, and frees the
//! parked blocks through the global allocator (the tracking allocator, which forwards them).

use std::alloc::Layout;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::state::{HOLD, RELEASING, STATE};

/// Slots of the park.
const SLOTS: usize = 4096;

struct Slot {
    ptr: AtomicUsize,
    size: AtomicUsize,
    align: AtomicUsize,
}

static PARKED: [Slot; SLOTS] = [const {
    Slot {
        ptr: AtomicUsize::new(0),
        size: AtomicUsize::new(0),
        align: AtomicUsize::new(0),
    }
}; SLOTS];

/// Next slot to claim.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Hook calls between their check of `HOLD` and the end of their park.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Blocks never freed because the park was full.
static LEAKED: AtomicU64 = AtomicU64::new(0);

/// Called by the hook's dealloc for a storage-sized block while the flags it loaded had `HOLD`
/// set. Returns true when the block was taken (parked or leaked): the caller must then not free
/// it. Never allocates, never locks.
#[inline]
pub(crate) fn park(ptr: *mut u8, layout: Layout) -> bool {
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    // Re-check after announcing ourselves: `release` clears the flag, then waits for
    // `IN_FLIGHT` to drop to 0, so either it sees us or we see the flag cleared (SeqCst).
    if STATE.load(Ordering::SeqCst) & HOLD == 0 {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        return false;
    }
    let i = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Some(slot) = PARKED.get(i) {
        slot.size.store(layout.size(), Ordering::Relaxed);
        slot.align.store(layout.align(), Ordering::Relaxed);
        slot.ptr.store(ptr as usize, Ordering::Release);
    } else {
        LEAKED.fetch_add(1, Ordering::Relaxed);
    }
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    true
}

/// Starts holding storage-sized frees by applying `transition` to the state flags in one atomic
/// step (it must set `HOLD`; the hook's disarm-and-hold also clears `ARMED` in the same step).
pub(crate) fn start_with(transition: impl Fn(u8) -> u8) {
    NEXT.store(0, Ordering::Relaxed);
    let _ = STATE.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| Some(transition(s)));
}

/// Stops holding and frees every parked block (through the global allocator). Call outside the
/// hook only, after `disarm_and_hold` or `hold_armed`; without a hold it does nothing.
pub fn release() {
    STATE.fetch_and(!HOLD, Ordering::SeqCst);
    while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        std::hint::spin_loop();
    }
    let n = NEXT.swap(0, Ordering::Relaxed).min(SLOTS);
    RELEASING.with(|r| r.set(true));
    for slot in &PARKED[..n] {
        let ptr = slot.ptr.swap(0, Ordering::Acquire);
        if ptr == 0 {
            continue;
        }
        let size = slot.size.load(Ordering::Relaxed);
        let align = slot.align.load(Ordering::Relaxed);
        if let Ok(layout) = Layout::from_size_align(size, align) {
            // SAFETY: `ptr` was handed to the global allocator's `dealloc` with exactly this
            // layout and parked instead of freed; nothing else holds it. `HOLD` is cleared, so
            // this dealloc goes through the tracking allocator to the inner allocator.
            unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
        }
    }
    RELEASING.with(|r| r.set(false));
}

/// Blocks leaked because the park was full, since process start.
pub fn leaked_blocks() -> u64 {
    LEAKED.load(Ordering::Relaxed)
}
