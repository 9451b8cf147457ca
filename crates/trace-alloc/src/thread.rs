//! [`thread_key`]: a small unique id per thread, readable inside the allocator hook and a
//! signal handler.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_THREAD_KEY: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_KEY: Cell<u64> = const { Cell::new(0) };
}

/// A small unique id of the calling thread (1, 2, …). Allocation-free and lock-free (a const
/// thread-local and one atomic on first use), so the hook records it with every ring event and
/// the session's span attribution looks threads up by it. Inlined: the hook asks for it at
/// every counter it bumps (a thread-local read once the key is set).
#[inline]
pub fn thread_key() -> u64 {
    let k = THREAD_KEY.with(Cell::get);
    if k != 0 {
        return k;
    }
    first_key()
}

/// The calling thread's first [`thread_key`]: takes the next key.
#[cold]
#[inline(never)]
fn first_key() -> u64 {
    let k = NEXT_THREAD_KEY.fetch_add(1, Ordering::Relaxed);
    THREAD_KEY.with(|key| key.set(k));
    k
}
