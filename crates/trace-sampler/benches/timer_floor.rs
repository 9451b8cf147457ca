//! The floor under any timer-driven stack sampler on this machine: what one timer signal costs
//! the interrupted thread when its handler does nothing.
//!
//! The same work runs in paired rounds, once with no timer and once with a per-thread POSIX
//! timer (`CLOCK_MONOTONIC`, `SIGEV_THREAD_ID`, as the probe's sampler arms it) that sends
//! `SIGPROF` to an empty handler `TF_HZ` times a second (default 10,000). The cost per signal
//! is the difference in the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) divided by the
//! signals delivered. Two workloads: a scalar loop, and an f32 matrix product compiled for AVX
//! where the CPU has it (its vector state is live when the signal lands, as in a training
//! step's gemm, so the kernel saves and restores more of it; no Candle here).
//!
//! The probe's sampler pays this floor plus its handler (`ab_overhead` prints the handler's
//! own time per sample). A sampler that does not use signals (`perf_event_open`) still takes
//! the timer interrupt: compare with `perf record -F 10000 -g` over `ab_overhead`, as in
//! `docs/cost.md`.
//!
//! `cargo bench -p trace-sampler --bench timer_floor` (env: `TF_HZ`, `TF_ROUNDS` default 10).

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::atomic::{AtomicU64, Ordering};

    static SIGNALS: AtomicU64 = AtomicU64::new(0);

    extern "C" fn on_sigprof(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
        SIGNALS.fetch_add(1, Ordering::Relaxed);
    }

    fn thread_cpu_s() -> f64 {
        // SAFETY: a valid out-pointer.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    }

    /// A running timer aimed at this thread; deleted on drop.
    struct Timer(libc::timer_t);

    impl Timer {
        fn start(hz: u64) -> Result<Self, String> {
            // SAFETY: a zeroed sigevent, then the fields SIGEV_THREAD_ID reads.
            let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
            ev.sigev_notify = libc::SIGEV_THREAD_ID;
            ev.sigev_signo = libc::SIGPROF;
            // SAFETY: gettid has no arguments.
            ev.sigev_notify_thread_id = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
            let mut id: libc::timer_t = std::ptr::null_mut();
            // SAFETY: valid pointers.
            if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut id) } != 0 {
                return Err(format!("timer_create: {}", std::io::Error::last_os_error()));
            }
            let ns = 1_000_000_000 / hz.max(1);
            let period = libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            };
            let spec = libc::itimerspec {
                it_interval: period,
                it_value: period,
            };
            // SAFETY: the timer just created.
            if unsafe { libc::timer_settime(id, 0, &spec, std::ptr::null_mut()) } != 0 {
                return Err(format!(
                    "timer_settime: {}",
                    std::io::Error::last_os_error()
                ));
            }
            Ok(Self(id))
        }
    }

    impl Drop for Timer {
        fn drop(&mut self) {
            // SAFETY: a timer this value created.
            unsafe { libc::timer_delete(self.0) };
        }
    }

    fn install() -> Result<(), String> {
        // SAFETY: a zeroed sigaction with an SA_SIGINFO handler and an empty mask.
        let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
        a.sa_sigaction = on_sigprof as *const () as libc::sighandler_t;
        a.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: valid pointers.
        let rc = unsafe {
            libc::sigemptyset(&mut a.sa_mask);
            libc::sigaction(libc::SIGPROF, &a, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// Per round: (CPU s without, CPU s with, signals); prints the medians and the cost.
    fn measure(name: &str, hz: u64, rounds: usize, work: &mut dyn FnMut()) -> Result<(), String> {
        let mut per_signal_us = Vec::new();
        let (mut without, mut with) = (Vec::new(), Vec::new());
        let mut signals = 0;
        work(); // warm-up
        for round in 0..rounds {
            let mut pair = [0.0f64; 2];
            let mut n = 0;
            // Alternate which half runs first.
            for half in [round % 2, 1 - round % 2] {
                let timer = (half == 1).then(|| Timer::start(hz)).transpose()?;
                let before = SIGNALS.load(Ordering::Relaxed);
                let t = thread_cpu_s();
                work();
                pair[half] = thread_cpu_s() - t;
                drop(timer);
                if half == 1 {
                    n = SIGNALS.load(Ordering::Relaxed) - before;
                }
            }
            signals += n;
            if n > 0 {
                per_signal_us.push((pair[1] - pair[0]) / n as f64 * 1e6);
            }
            without.push(pair[0]);
            with.push(pair[1]);
        }
        let base = median(without);
        println!(
            "{name}: {:.1} ms a round without the timer, {:.3}x with it at {hz} Hz; {} signals; \
             {:.1} µs per signal (median of {rounds} pairs; the handler does nothing)",
            base * 1e3,
            median(with) / base,
            signals,
            median(per_signal_us),
        );
        Ok(())
    }

    /// Side of the matrices of the vector workload.
    const N: usize = 256;

    /// `c = a · b` for `N`×`N` row-major matrices, the inner loop over `c`'s row (vectorised).
    fn matmul_kernel(a: &[f32], b: &[f32], c: &mut [f32]) {
        c.fill(0.0);
        for i in 0..N {
            for k in 0..N {
                let aik = a[i * N + k];
                let (row, brow) = (&mut c[i * N..(i + 1) * N], &b[k * N..(k + 1) * N]);
                for (x, y) in row.iter_mut().zip(brow) {
                    *x += aik * y;
                }
            }
        }
    }

    /// [`matmul_kernel`] compiled with AVX enabled.
    ///
    /// # Safety
    /// The CPU must support AVX.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn matmul_avx(a: &[f32], b: &[f32], c: &mut [f32]) {
        matmul_kernel(a, b, c);
    }

    fn matmul_f32(a: &[f32], b: &[f32], c: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: AVX was detected on this CPU just above.
            unsafe { matmul_avx(a, b, c) };
            return;
        }
        matmul_kernel(a, b, c);
    }

    pub fn main() -> Result<(), String> {
        let env = |k: &str, d: u64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d)
        };
        let (hz, rounds) = (env("TF_HZ", 10_000), env("TF_ROUNDS", 10).max(1) as usize);
        install()?;
        let mut scalar = || {
            let mut x = 0.0f64;
            for i in 0..20_000_000u64 {
                x += (i as f64) * 1e-9;
            }
            std::hint::black_box(x);
        };
        measure("scalar loop", hz, rounds, &mut scalar)?;
        let a = vec![1.0f32; N * N];
        let mut c = vec![0.0f32; N * N];
        let mut matmul = || {
            for _ in 0..8 {
                matmul_f32(&a, &a, &mut c);
                std::hint::black_box(&c);
            }
        };
        measure(
            "f32 matmul 256x256 (AVX where present)",
            hz,
            rounds,
            &mut matmul,
        )
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    if let Err(e) = linux::main() {
        eprintln!("timer_floor: {e}");
        std::process::exit(1);
    }
    #[cfg(not(target_os = "linux"))]
    println!("timer_floor: Linux only (per-thread POSIX timers)");
}
