//! The bounds-checked frame-pointer walk, shared by the allocation sites (inside the allocator
//! hook) and the stack sampler (inside its signal handler): nothing here allocates, locks or
//! formats once [`note_thread_bounds`] has run on the thread.
//!
//! A frame record is two words at the frame pointer — the caller's frame pointer, then the
//! return address (x86_64 `rbp`, aarch64 `x29`, as the System V and AAPCS64 ABIs lay them out).
//! A frame pointer is followed only while it lies inside `[floor, hi)` of the thread's stack
//! (`floor`: the walker's stack pointer or the interrupted one), is 16-byte aligned and is
//! strictly above the previous one, so a broken chain (a frame built without frame pointers)
//! ends the walk instead of reading outside the stack. The walk is only *correct* when every
//! frame keeps a frame pointer (`-C force-frame-pointers=yes`); callers check that first (the
//! sites' calibration, the sampler's [`in_executable`]).
//!
//! Off Linux the stack bounds and the executable's range are unknown, so no walk starts.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

thread_local! {
    /// This thread's stack: (lowest, highest) address; (0, 0) when unknown.
    static BOUNDS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// This thread's stack bounds, `(lowest, highest)`; `(0, 0)` until [`note_thread_bounds`] ran
/// here. Async-signal-safe (a `const` thread-local).
#[inline(always)]
pub fn thread_bounds() -> (usize, usize) {
    BOUNDS.with(|b| b.get())
}

/// Records this thread's stack bounds (outside the hook and the handler: `pthread_getattr_np`
/// may allocate), so its stacks can be walked by frame pointers. Idempotent.
pub fn note_thread_bounds() {
    if thread_bounds().1 != 0 {
        return;
    }
    if let Some(b) = stack_bounds() {
        BOUNDS.with(|c| c.set(b));
    }
}

#[cfg(not(target_os = "linux"))]
fn stack_bounds() -> Option<(usize, usize)> {
    None
}

#[cfg(target_os = "linux")]
fn stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: a zeroed pthread_attr_t is a valid out-parameter for pthread_getattr_np, which
    // initialises it; it is destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        let lo = addr as usize;
        (ok && size > 0).then(|| (lo, lo.saturating_add(size)))
    }
}

/// Walks the chain from frame pointer `fp` into `buf`: the return address of each valid frame
/// record, innermost first, while the record lies inside `[floor, hi)`, is aligned and is
/// strictly above the previous one. Returns (frames written, cut at the buffer's length).
#[inline(always)]
pub fn walk(buf: &mut [usize], mut fp: usize, floor: usize, hi: usize) -> (usize, bool) {
    const WORD: usize = std::mem::size_of::<usize>();
    let mut prev = 0usize;
    let mut len = 0usize;
    loop {
        let valid = fp >= floor
            && fp > prev
            && fp % (2 * WORD) == 0
            && fp.checked_add(2 * WORD).is_some_and(|end| end <= hi);
        if !valid {
            return (len, false);
        }
        // SAFETY: `[fp, fp + 16)` lies inside this thread's mapped stack, at or above the
        // floor (a live stack pointer, checked just above): readable memory.
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (p.read_volatile(), p.add(1).read_volatile())
        };
        if ret == 0 {
            return (len, false);
        }
        if len == buf.len() {
            return (len, true);
        }
        buf[len] = ret;
        len += 1;
        prev = fp;
        fp = next;
    }
}

/// The current frame pointer register.
#[inline(always)]
pub fn frame_pointer() -> usize {
    let fp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register.
    unsafe {
        std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register.
    unsafe {
        std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        fp = 0;
    }
    fp
}

/// The main executable's executable segments, `[start, end)` (0, 0 until [`note_executable`]).
static EXE_START: AtomicUsize = AtomicUsize::new(0);
static EXE_END: AtomicUsize = AtomicUsize::new(0);

/// Records the address range of the main executable's code (its executable `PT_LOAD`
/// segments; `dl_iterate_phdr` lists the executable first). Outside any handler; once.
pub fn note_executable() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Some((start, end)) = executable_text() {
            EXE_START.store(start, Ordering::Relaxed);
            EXE_END.store(end, Ordering::Release);
        }
    });
}

/// Whether `pc` lies in the main executable's code: where, on a binary built with frame
/// pointers, the interrupted function keeps one (the shared C libraries — libc, libm, the
/// loader — are built without them). Async-signal-safe.
#[inline(always)]
pub fn in_executable(pc: usize) -> bool {
    let end = EXE_END.load(Ordering::Acquire);
    end != 0 && pc >= EXE_START.load(Ordering::Relaxed) && pc < end
}

#[cfg(target_os = "linux")]
fn executable_text() -> Option<(usize, usize)> {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `dl_phdr_info` and our `data` pointer.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Option<(usize, usize)>)) };
        let base = info.dlpi_addr as usize;
        let (mut lo, mut hi) = (usize::MAX, 0usize);
        for i in 0..usize::from(info.dlpi_phnum) {
            // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                let start = base.saturating_add(ph.p_vaddr as usize);
                lo = lo.min(start);
                hi = hi.max(start.saturating_add(ph.p_memsz as usize));
            }
        }
        if hi > lo {
            *out = Some((lo, hi));
        }
        1 // the first object is the executable: stop
    }
    let mut found: Option<(usize, usize)> = None;
    // SAFETY: the callback only reads the headers and writes `found`.
    unsafe {
        libc::dl_iterate_phdr(Some(first), &mut found as *mut _ as *mut libc::c_void);
    }
    found
}

#[cfg(not(target_os = "linux"))]
fn executable_text() -> Option<(usize, usize)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn walk_here(lo: usize, hi: usize) -> (usize, bool) {
        let mut buf = [0usize; 64];
        let marker = 0u8;
        let sp = std::hint::black_box(&marker) as *const u8 as usize;
        std::hint::black_box(walk(&mut buf, frame_pointer(), sp.max(lo), hi))
    }

    #[test]
    fn the_walk_stays_inside_the_stack_bounds() {
        // Empty bounds: not one frame pointer is read.
        assert_eq!(walk_here(0, 1), (0, false));
        let marker = 0u8;
        let sp = &marker as *const u8 as usize;
        assert_eq!(walk_here(sp, sp), (0, false));
        // A chain pointing below the floor or misaligned is not followed.
        let mut buf = [0usize; 4];
        assert_eq!(walk(&mut buf, 8, 16, usize::MAX), (0, false));
        assert_eq!(walk(&mut buf, sp | 1, 0, usize::MAX), (0, false));
        // This thread's real bounds: at most the buffer, and no panic.
        note_thread_bounds();
        let (lo, hi) = thread_bounds();
        assert!(hi > lo && lo < sp && sp < hi, "{lo:#x} {sp:#x} {hi:#x}");
        let (n, _) = walk_here(lo, hi);
        assert!(n <= 64);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_function_is_in_the_executable_and_libc_is_not() {
        note_executable();
        let here = this_function_is_in_the_executable_and_libc_is_not as *const () as usize;
        assert!(in_executable(here));
        assert!(!in_executable(libc::malloc as *const () as usize));
        assert!(!in_executable(0));
    }
}
