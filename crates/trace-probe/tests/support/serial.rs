//! The tracking allocator and its capture window are one per process: the tests of a binary
//! that capture take this lock, so they run one at a time (`cargo test` runs a binary's tests
//! on several threads).

use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the binary's capture slot until dropped (a panicking test does not poison it).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
