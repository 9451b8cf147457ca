//! Allocation-free stack capture: the calling thread's return addresses into a caller's buffer,
//! through the `backtrace` crate's `trace_unsynchronized` (libgcc's `_Unwind_Backtrace`, which
//! reads the DWARF call-frame information every Rust binary carries; glibc 2.35+ finds it
//! with the lock-free `_dl_find_object`).
//!
//! [`capture`] and [`capture_cut`] are the reusable entry points (the allocator hook's
//! allocation sites call [`capture_cut`] on its own path): it takes no lock of its own, allocates nothing and formats
//! nothing. libgcc's unwinder is not formally async-signal-safe, which is why
//! [`warm_up`] runs it once outside any handler (libgcc initialises its register tables on the
//! first call).
//!
//! [`capture_from`] is a signal handler's (the stack sampler's): it drops the handler's own
//! frames and the signal trampoline, keeping the stack from the interrupted program counter
//! outward.
//!
//! Built where the cfg `dwarf_walk` is set (Linux on x86_64 and aarch64); elsewhere
//! `no_dwarf.rs` stands in with the same functions writing nothing.

/// Whether this target walks stacks by DWARF call-frame information (true here).
pub const SUPPORTED: bool = true;

/// Most frames a signal handler's stack keeps (deeper stacks lose their outermost frames and
/// are counted as truncated): the size of the sampler's stack buffer.
pub const MAX_FRAMES: usize = 128;

/// Frames of the handler and the trampoline skipped at most while looking for the interrupted
/// program counter.
const MAX_SKIPPED: usize = 24;

/// What a capture wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captured {
    /// Addresses written at the start of the buffer.
    pub len: usize,
    /// The stack had more frames than the buffer holds, or unwinding did not reach the
    /// interrupted frame (then only the program counter is written).
    pub truncated: bool,
}

/// Writes the calling thread's stack into `buf`, innermost first: the return address into the
/// caller of `capture`, then return addresses outward. Returns the number written (`buf.len()`
/// when the stack may be deeper). Allocation-free and lock-free (see the module docs).
#[inline(never)]
pub fn capture(buf: &mut [usize]) -> usize {
    // Frames inside `capture` (its own and the unwinder's entry) have their stack pointer below
    // this local; its caller's frame is the first above it.
    let marker = 0u8;
    let below = std::hint::black_box(&marker) as *const u8 as usize;
    walk(buf, Start::Caller { below })
}

/// [`capture`] that also says whether the stack was cut at the buffer's length (the allocation
/// sites' walk: [`crate::sites`]). Allocation-free and lock-free.
#[inline(never)]
pub fn capture_cut(buf: &mut [usize]) -> Captured {
    let marker = 0u8;
    let below = std::hint::black_box(&marker) as *const u8 as usize;
    let mut truncated = false;
    let len = walk_with(buf, Start::Caller { below }, &mut truncated);
    Captured { len, truncated }
}

/// The signal handler's capture: the stack from `pc` (the interrupted program counter, read
/// from the signal's `ucontext`) outward; the frames inside the handler and the signal
/// trampoline are skipped.
#[inline(never)]
pub fn capture_from(pc: usize, buf: &mut [usize]) -> Captured {
    let mut truncated = false;
    let len = walk_with(buf, Start::Pc(pc), &mut truncated);
    if len == 0 && !buf.is_empty() {
        // The unwinder did not step through the trampoline: keep what is certain.
        buf[0] = pc;
        return Captured {
            len: 1,
            truncated: true,
        };
    }
    Captured { len, truncated }
}

/// Initialises the unwinder outside any signal handler (its first call sets up tables).
pub fn warm_up() {
    let mut buf = [0usize; 8];
    let _ = capture(&mut buf);
}

/// Where the kept stack starts.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// At the first frame whose stack pointer is above `below` (the address of a local of the
    /// capturing function: the frame of its caller).
    Caller { below: usize },
    /// At the frame whose instruction pointer is this program counter.
    Pc(usize),
}

fn walk(buf: &mut [usize], start: Start) -> usize {
    let mut truncated = false;
    walk_with(buf, start, &mut truncated)
}

#[inline(always)]
fn walk_with(buf: &mut [usize], start: Start, truncated: &mut bool) -> usize {
    let mut len = 0usize;
    let mut started = false;
    let mut skipped = 0usize;
    // SAFETY: `trace_unsynchronized` is unsafe only because it does not take the `backtrace`
    // crate's global lock; the callback touches nothing but these locals and `buf`.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as usize;
            if !started {
                match start {
                    // `frame.sp()` is the stack pointer of the frame `ip` is in: `capture`'s
                    // and its callees' lie below its local, its caller's above.
                    Start::Caller { below } if frame.sp() as usize > below => started = true,
                    Start::Caller { .. } => return true,
                    Start::Pc(pc) if ip == pc => started = true,
                    Start::Pc(_) => {
                        skipped += 1;
                        return skipped < MAX_SKIPPED;
                    }
                }
            }
            if ip == 0 {
                return false;
            }
            match buf.get_mut(len) {
                Some(slot) => {
                    *slot = ip;
                    len += 1;
                    true
                }
                None => {
                    *truncated = true;
                    false
                }
            }
        });
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn inner_for_test(buf: &mut [usize]) -> usize {
        let n = capture(buf);
        std::hint::black_box(n)
    }

    #[test]
    fn capture_walks_past_the_caller_without_allocating_and_stops_at_the_buffer() {
        let mut buf = [0usize; MAX_FRAMES];
        let n = inner_for_test(&mut buf);
        assert!(n >= 3, "{n} frames");
        assert!(buf[..n].iter().all(|&a| a != 0));
        let mut small = [0usize; 2];
        assert_eq!(inner_for_test(&mut small), 2);
        assert_eq!(small[0], buf[0], "the same innermost frame, the rest cut");
        // The innermost address resolves to this test's helper (or what inlined it).
        let mut names = Vec::new();
        backtrace::resolve(buf[0] as *mut std::ffi::c_void, |s| {
            names.push(s.name().map(|n| format!("{n:#}")).unwrap_or_default());
        });
        assert!(
            names.iter().any(|n| n.contains("inner_for_test")),
            "{names:?}"
        );
    }

    #[test]
    fn capture_from_an_unknown_pc_keeps_only_the_pc() {
        let mut buf = [0usize; 16];
        let got = capture_from(0x1234, &mut buf);
        assert_eq!(got.len, 1);
        assert!(got.truncated);
        assert_eq!(buf[0], 0x1234);
    }
}
