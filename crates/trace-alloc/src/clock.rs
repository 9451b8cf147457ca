//! The session clock: nanoseconds since the session started, derived from one [`Instant`] base.
//!
//! There is one process-wide base ([`process_base`], set the first time any session opens) and
//! each session stores its own start as an offset from it, so a timestamp taken anywhere in the
//! process — including inside the tracking allocator's hook, which must not touch a session — can
//! be taken as [`process_ns`] (an atomic-free `Instant::now()` minus a `OnceLock` read) and
//! converted later with [`SessionClock::process_ns_to_session_ns`]. On Linux `Instant` is
//! `CLOCK_MONOTONIC`, so a raw `CLOCK_MONOTONIC` reading converts through
//! [`SessionClock::instant_to_session_ns`] after building the `Instant` the same way.
//!
//! In deterministic mode the clock is logical: every reading advances a counter by
//! [`LOGICAL_TICK_NS`], so two identical runs write identical timestamps. Memory events, whose
//! hook times are real, are placed on this clock by the storage plug-in: the `k`-th memory event
//! after a span change (in real-time order) sits `k` ns after that change's logical reading, so
//! a tick leaves room for `LOGICAL_TICK_NS - 1` of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Step of the logical clock in deterministic mode, in ns per reading (1 ms: the ns in between
/// hold the memory events that happened between two readings, 1 ns apart).
pub const LOGICAL_TICK_NS: u64 = 1_000_000;

/// The base as an `Instant` and, on Linux, as a raw `CLOCK_MONOTONIC` reading in ns (the
/// midpoint of two readings around the `Instant`'s: the two bases agree within the readings'
/// ≈ 30 ns).
static PROCESS_BASE: OnceLock<(Instant, u64)> = OnceLock::new();

fn base() -> &'static (Instant, u64) {
    PROCESS_BASE.get_or_init(|| {
        let before = monotonic_ns();
        let at = Instant::now();
        let after = monotonic_ns();
        (at, before / 2 + after / 2)
    })
}

/// The process-wide clock base (the first call fixes it).
pub fn process_base() -> Instant {
    base().0
}

/// Nanoseconds since [`process_base`]. Allocation-free and lock-free once the base is set (any
/// session open sets it), so the allocator hook may call it. On Linux one `clock_gettime`
/// (vDSO) and integer arithmetic: the hook reads it at every logged call, and `Instant`'s
/// `Duration` arithmetic cost as much again as the reading (36–46 against 32 ns a reading on
/// this project's VM).
#[inline]
pub fn process_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        monotonic_ns().saturating_sub(base().1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        instant_to_process_ns(Instant::now())
    }
}

/// `CLOCK_MONOTONIC` in ns (the clock `Instant` reads on Linux); 0 elsewhere (unused there).
#[inline]
fn monotonic_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux
        // (on failure `ts` stays 0 and the reading saturates to the base).
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Converts an `Instant` to ns since [`process_base`] (0 for instants before the base).
pub fn instant_to_process_ns(at: Instant) -> u64 {
    let base = process_base();
    u64::try_from(at.saturating_duration_since(base).as_nanos()).unwrap_or(u64::MAX)
}

/// A session's clock: host time since the session opened, or a logical clock.
#[derive(Debug)]
pub struct SessionClock {
    /// Session start in ns since [`process_base`].
    start_process_ns: u64,
    /// `Some` in deterministic mode: the last logical reading.
    logical: Option<AtomicU64>,
}

impl SessionClock {
    /// A host clock starting now, or a logical clock starting at 0.
    pub fn new(deterministic: bool) -> Self {
        Self {
            start_process_ns: process_ns(),
            logical: deterministic.then(|| AtomicU64::new(0)),
        }
    }

    /// Whether the clock is logical (deterministic mode).
    pub fn is_logical(&self) -> bool {
        self.logical.is_some()
    }

    /// Ns since the session opened (host), or the next logical reading.
    pub fn now_ns(&self) -> u64 {
        match &self.logical {
            Some(counter) => {
                counter.fetch_add(LOGICAL_TICK_NS, Ordering::Relaxed) + LOGICAL_TICK_NS
            }
            None => process_ns().saturating_sub(self.start_process_ns),
        }
    }

    /// [`Self::now_ns`] together with the real time of the reading (ns since
    /// [`process_base`]), for mapping hook timestamps onto a logical clock.
    pub fn now_with_process_ns(&self) -> (u64, u64) {
        let real = process_ns();
        let ns = match &self.logical {
            Some(_) => self.now_ns(),
            None => real.saturating_sub(self.start_process_ns),
        };
        (ns, real)
    }

    /// The latest reading without advancing a logical clock (host: same as [`Self::now_ns`]).
    pub fn peek_ns(&self) -> u64 {
        match &self.logical {
            Some(counter) => counter.load(Ordering::Relaxed),
            None => process_ns().saturating_sub(self.start_process_ns),
        }
    }

    /// Converts an `Instant` to session ns (0 before the session opened). In deterministic mode
    /// real instants have no logical counterpart: this returns the next logical reading, so
    /// callers must convert in event order.
    pub fn instant_to_session_ns(&self, at: Instant) -> u64 {
        self.process_ns_to_session_ns(instant_to_process_ns(at))
    }

    /// Converts ns since [`process_base`] (e.g. an allocator-hook timestamp) to session ns; see
    /// [`Self::instant_to_session_ns`] for deterministic mode.
    pub fn process_ns_to_session_ns(&self, ns: u64) -> u64 {
        match &self.logical {
            Some(_) => self.now_ns(),
            None => ns.saturating_sub(self.start_process_ns),
        }
    }

    /// Session start in ns since [`process_base`].
    pub fn start_process_ns(&self) -> u64 {
        self.start_process_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_clock_is_monotonic_and_converts_instants() {
        let clock = SessionClock::new(false);
        let a = clock.now_ns();
        let at = Instant::now();
        let b = clock.now_ns();
        let converted = clock.instant_to_session_ns(at);
        // Readings are raw CLOCK_MONOTONIC, instants convert through the `Instant` base: the two
        // bases agree within the ≈ 30 ns of a reading (1 µs allowed).
        assert!(
            a <= converted + 1_000 && converted <= b + 1_000,
            "{a} {converted} {b}"
        );
        assert!(a <= b);
    }

    #[test]
    fn the_raw_reading_and_instants_agree() {
        // `process_ns` (raw CLOCK_MONOTONIC) and `instant_to_process_ns` (Instant arithmetic)
        // count from bases taken together: interleaved readings stay ordered within the
        // bases' difference (< 1 µs).
        for _ in 0..1000 {
            let a = process_ns();
            let b = instant_to_process_ns(Instant::now());
            let c = process_ns();
            assert!(a <= b + 1_000 && b <= c + 1_000, "{a} {b} {c}");
        }
    }

    #[test]
    fn logical_clock_steps_by_a_fixed_tick() {
        let clock = SessionClock::new(true);
        assert_eq!(clock.now_ns(), LOGICAL_TICK_NS);
        assert_eq!(clock.now_ns(), 2 * LOGICAL_TICK_NS);
        assert_eq!(clock.peek_ns(), 2 * LOGICAL_TICK_NS);
        assert_eq!(clock.process_ns_to_session_ns(123), 3 * LOGICAL_TICK_NS);
    }
}
