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
/// the session's span attribution looks threads up by it.
pub fn thread_key() -> u64 {
    THREAD_KEY.with(|key| {
        let k = key.get();
        if k != 0 {
            return k;
        }
        let k = NEXT_THREAD_KEY.fetch_add(1, Ordering::Relaxed);
        key.set(k);
        k
    })
}
