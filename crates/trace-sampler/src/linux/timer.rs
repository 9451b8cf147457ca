//! Per-thread POSIX timers: `timer_create(CLOCK_MONOTONIC)` with `SIGEV_THREAD_ID`, so each
//! expiration sends `SIGPROF` to one chosen thread (wall-clock time: a thread waiting for
//! rayon or gemm workers is sampled while it waits), carrying the slot token in `si_value`.

/// The calling thread's kernel thread id.
pub(super) fn current_tid() -> libc::pid_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// A running timer aimed at one thread; deleted on drop.
#[derive(Debug)]
pub(super) struct ThreadTimer {
    id: libc::timer_t,
}

// SAFETY: a timer id is a process-wide handle, usable from any thread.
unsafe impl Send for ThreadTimer {}
// SAFETY: as above; the value is only read.
unsafe impl Sync for ThreadTimer {}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

impl ThreadTimer {
    /// Starts a timer that sends `SIGPROF` with `token` to thread `tid` every `period_ns`
    /// (first after one period).
    ///
    /// # Errors
    /// `timer_create` or `timer_settime` failed (e.g. the thread has exited), with the OS error.
    pub(super) fn start(tid: libc::pid_t, token: usize, period_ns: u64) -> Result<Self, String> {
        // SAFETY: a zeroed sigevent is valid; the fields set below are the ones
        // SIGEV_THREAD_ID reads.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = libc::SIGPROF;
        event.sigev_value = libc::sigval {
            sival_ptr: token as *mut libc::c_void,
        };
        event.sigev_notify_thread_id = tid;
        let mut id: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid pointers to an initialised sigevent and an out-parameter.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut id) } != 0 {
            return Err(format!(
                "timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID) failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        let timer = Self { id };
        let period = timespec(period_ns.max(1));
        let spec = libc::itimerspec {
            it_interval: period,
            it_value: period,
        };
        // SAFETY: `id` is the timer just created; valid pointer to the spec.
        if unsafe { libc::timer_settime(timer.id, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(format!(
                "timer_settime failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(timer)
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: `id` is a timer this value created and has not deleted.
        unsafe {
            libc::timer_delete(self.id);
        }
    }
}
