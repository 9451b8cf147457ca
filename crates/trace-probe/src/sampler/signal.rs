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
//! aarch64: `pc`), takes a timestamp (`clock_gettime(CLOCK_MONOTONIC)`, via the probe's
//! process clock), walks the stack into a local array ([`super::unwind::capture_from`]) and
//! copies it into the slot's buffer.

use std::sync::Mutex;

use super::slots;
use super::unwind::{self, MAX_FRAMES};

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
pub(crate) fn install() -> Result<(), String> {
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
    let start = crate::clock::process_ns();
    // SAFETY: `context` is the handler's ucontext.
    let pc = unsafe { interrupted_pc(context) };
    let mut frames = [0usize; MAX_FRAMES];
    let got = unwind::capture_from(pc, &mut frames);
    let overrun = u64::try_from(info.si_overrun).unwrap_or(0);
    writing.push(
        start,
        overrun,
        &frames[..got.len.min(MAX_FRAMES)],
        got.truncated,
    );
    writing.add_handler_ns(crate::clock::process_ns().saturating_sub(start));
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
