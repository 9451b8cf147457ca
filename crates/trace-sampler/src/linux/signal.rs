//! The `SIGPROF` handler: installed once per process, and the code that runs in it.
//!
//! # Installation
//! [`install`] puts the handler in place when `SIGPROF`'s disposition is the default or
//! ignored, and refuses (with the reason) when another handler is installed — another
//! profiler (pprof-rs, gperftools) owns the signal and the sampler leaves it alone. Once
//! installed it stays for the process: a timer's last signal can still be delivered after the
//! timer is deleted, and restoring the default disposition (terminate) then would kill the
//! process. The handler ignores every `SIGPROF` that is not one of the sampler's timer
//! signals for a live slot.
//!
//! # What runs in the handler
//! Async-signal-safe code only: no allocation, no lock, no formatting, no thread-local with a
//! destructor. It saves and restores `errno`, reads the slot token and the overrun count from
//! the `siginfo_t`, the interrupted program counter from the `ucontext_t` (x86_64: `RIP`;
//! aarch64: `pc`), takes a timestamp (`clock_gettime(CLOCK_MONOTONIC)`, via
//! `trace_alloc::clock::process_ns`), walks the stack into a local array (by frame pointers
//! where allowed, otherwise `trace_alloc::walk::dwarf::capture_from`) and copies it into the
//! slot's buffer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use trace_alloc::clock::process_ns;
use trace_alloc::walk::dwarf::{self as unwind, MAX_FRAMES};
use trace_alloc::walk::frame_chain;

use super::slots;

/// The part of Linux's `siginfo_t` a POSIX timer fills (`_sigfault` layout of the kernel's
/// `_timer` member): `si_tid`, `si_overrun`, `si_value`.
#[repr(C)]
#[allow(dead_code)] // a layout: only some fields are read
struct TimerSiginfo {
    si_signo: libc::c_int,
    si_errno: libc::c_int,
    si_code: libc::c_int,
    /// The union that follows is pointer-aligned.
    _pad: libc::c_int,
    si_tid: libc::c_int,
    si_overrun: libc::c_int,
    si_value: usize,
}

const _: () =
    assert!(std::mem::size_of::<TimerSiginfo>() <= std::mem::size_of::<libc::siginfo_t>());

static INSTALL: Mutex<()> = Mutex::new(());

/// Installs the handler unless another `SIGPROF` handler is installed; `Ok` when ours is in
/// place (also when it already was).
///
/// # Errors
/// Why not: another handler owns `SIGPROF`, or `sigaction` failed.
pub fn install() -> Result<(), String> {
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: a zeroed sigaction is a valid out-parameter; the call only reads the current one.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; SIGPROF is a valid signal.
    if unsafe { libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) } != 0 {
        return Err(format!(
            "sigaction(SIGPROF) failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let ours = on_sigprof as *const () as libc::sighandler_t;
    match old.sa_sigaction {
        h if h == ours => return Ok(()),
        libc::SIG_DFL | libc::SIG_IGN => {}
        _ => {
            return Err(
                "another SIGPROF handler is installed (another profiler owns the signal), so the \
                 stack sampler stays off"
                    .to_string(),
            )
        }
    }
    unwind::warm_up();
    // SAFETY: as above.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = ours;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: `sa_mask` is a valid sigset; the handler has the SA_SIGINFO signature.
    let rc = unsafe {
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(format!(
            "sigaction(SIGPROF) failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The handler (see the module docs).
extern "C" fn on_sigprof(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: `__errno_location` returns this thread's errno slot.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    unsafe { sample(info, context) };
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// Takes one sample into the slot the signal names.
///
/// # Safety
/// `info` and `context` are the handler's arguments.
#[inline(always)]
unsafe fn sample(info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    if info.is_null() || context.is_null() {
        return;
    }
    // SAFETY: `info` is valid; the timer layout is read only when si_code says SI_TIMER.
    let info = unsafe { &*(info as *const TimerSiginfo) };
    if info.si_code != libc::SI_TIMER {
        return;
    }
    let Some(writing) = slots::begin(info.si_value) else {
        return;
    };
    let start = process_ns();
    // SAFETY: `context` is the handler's ucontext.
    let pc = unsafe { interrupted_pc(context) };
    let mut frames = [0usize; MAX_FRAMES];
    // SAFETY: the same ucontext.
    let (got, by_frame_pointers) = match unsafe { frame_pointer_walk(context, pc, &mut frames) } {
        Some(got) => (got, true),
        None => (unwind::capture_from(pc, &mut frames), false),
    };
    let overrun = u64::try_from(info.si_overrun).unwrap_or(0);
    writing.push(
        start,
        overrun,
        &frames[..got.len.min(MAX_FRAMES)],
        got.truncated,
    );
    writing.add_handler_ns(process_ns().saturating_sub(start), by_frame_pointers);
}

/// Whether the handler may walk frame pointers (see [`set_frame_pointers`]).
static FRAME_POINTERS: AtomicBool = AtomicBool::new(false);

/// Lets the handler walk the interrupted thread's frame-pointer chain where it can (the
/// process's walker calibration chose frame pointers: the binary keeps them). Outside the
/// handler; also records the executable's code range the handler checks against.
pub fn set_frame_pointers(on: bool) {
    if on {
        frame_chain::note_executable();
    }
    FRAME_POINTERS.store(on, Ordering::Relaxed);
}

/// The frame-pointer walk from the interrupted context: the interrupted `pc`, then the return
/// addresses of the chain from its frame pointer, inside `[sp, hi)` of this thread's stack.
/// `None` (the caller walks with libgcc instead) unless frame pointers are allowed, this
/// thread's stack bounds are known and the chain gives at least one caller.
///
/// Where the `pc` lies outside the executable's code (the shared C libraries — libm's `expf`,
/// libc's `memset` — are built without frame pointers), the frame-pointer register still holds
/// the last frame of the executable's code when the library function left it alone, as leaf
/// routines do: the chain is taken only if its first return address lies in the executable,
/// and it is cut at the first address that does not (what follows a foreign frame may be any
/// value). That loses the library function's direct caller (the same limit as `perf`'s
/// frame-pointer call graphs); a library function that used the register for something else
/// fails the check and is walked by libgcc. Walking these samples by frame pointers too keeps
/// the handler's cost the same wherever the signal lands: a cost that differs by where the
/// thread was (0.2 µs in Rust code, ≈ 40 µs by libgcc in libm, measured) would stretch the
/// ops in the C libraries and bias every share.
///
/// # Safety
/// `context` is the handler's `ucontext_t`.
#[inline(always)]
unsafe fn frame_pointer_walk(
    context: *mut libc::c_void,
    pc: usize,
    buf: &mut [usize; MAX_FRAMES],
) -> Option<unwind::Captured> {
    if !FRAME_POINTERS.load(Ordering::Relaxed) {
        return None;
    }
    let (lo, hi) = frame_chain::thread_bounds();
    if hi == 0 {
        return None;
    }
    // SAFETY: the caller's contract.
    let (fp, sp) = unsafe { interrupted_fp_sp(context) };
    if sp < lo || sp >= hi {
        return None; // on another stack (an alternate signal stack): not ours to walk
    }
    buf[0] = pc;
    let (mut n, mut truncated) = frame_chain::walk(&mut buf[1..], fp, sp, hi);
    if !frame_chain::in_executable(pc) {
        // Outside the executable: keep the chain up to its first foreign address, and only
        // when it starts in the executable.
        let kept = buf[1..=n]
            .iter()
            .position(|&ret| !frame_chain::in_executable(ret))
            .unwrap_or(n);
        if kept < n {
            n = kept;
            truncated = false;
        }
    }
    (n > 0).then_some(unwind::Captured {
        len: n + 1,
        truncated,
    })
}

/// The interrupted frame pointer and stack pointer.
///
/// # Safety
/// `context` is the handler's `ucontext_t`.
#[inline(always)]
unsafe fn interrupted_fp_sp(context: *mut libc::c_void) -> (usize, usize) {
    // SAFETY: the caller's contract.
    let uc = unsafe { &*(context as *const libc::ucontext_t) };
    #[cfg(target_arch = "x86_64")]
    {
        (
            uc.uc_mcontext.gregs[libc::REG_RBP as usize] as usize,
            uc.uc_mcontext.gregs[libc::REG_RSP as usize] as usize,
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        (uc.uc_mcontext.regs[29] as usize, uc.uc_mcontext.sp as usize)
    }
}

/// The program counter of the interrupted code.
///
/// # Safety
/// `context` is a signal handler's `ucontext_t`.
#[inline(always)]
unsafe fn interrupted_pc(context: *mut libc::c_void) -> usize {
    // SAFETY: the caller's contract.
    let uc = unsafe { &*(context as *const libc::ucontext_t) };
    #[cfg(target_arch = "x86_64")]
    {
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
    #[cfg(target_arch = "aarch64")]
    {
        uc.uc_mcontext.pc as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_is_idempotent() {
        install().expect("first");
        install().expect("again: ours is in place");
        // SAFETY: reading the disposition.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        unsafe { libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) };
        assert_eq!(
            old.sa_sigaction,
            on_sigprof as *const () as libc::sighandler_t
        );
        assert_ne!(old.sa_flags & libc::SA_SIGINFO, 0);
    }

    #[test]
    fn a_stray_sigprof_is_ignored() {
        install().expect("installed");
        // SAFETY: raising a signal whose handler ignores non-timer codes.
        assert_eq!(unsafe { libc::raise(libc::SIGPROF) }, 0);
    }
}
