//! The per-thread span stack: which spans this thread opened and has not closed, innermost
//! last, for every session. A new span's parent is the innermost open span of its session on
//! its thread; the panic hook asks which sessions have a span open on the panicking thread.

use std::cell::RefCell;

thread_local! {
    /// `(session uid, span number)` of the spans this thread opened, innermost last.
    static SPAN_STACK: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Session uids with an open span on this thread (used by the panic hook; never blocks).
pub(crate) fn sessions_open_on_this_thread() -> Vec<u64> {
    SPAN_STACK
        .try_with(|stack| match stack.try_borrow() {
            Ok(stack) => {
                let mut uids: Vec<u64> = stack.iter().map(|(uid, _)| *uid).collect();
                uids.sort_unstable();
                uids.dedup();
                uids
            }
            Err(_) => Vec::new(),
        })
        .unwrap_or_default()
}

/// The innermost open span of session `uid` on this thread.
pub(crate) fn innermost(uid: u64) -> Option<u64> {
    SPAN_STACK
        .try_with(|stack| {
            stack
                .try_borrow()
                .ok()
                .and_then(|s| s.iter().rev().find(|(u, _)| *u == uid).map(|(_, id)| *id))
        })
        .ok()
        .flatten()
}

/// The innermost span of `uid` on this thread once `span` is closed (0 = none).
pub(crate) fn innermost_without(uid: u64, span: u64) -> u64 {
    SPAN_STACK
        .try_with(|stack| {
            stack.try_borrow().ok().and_then(|s| {
                s.iter()
                    .rev()
                    .find(|e| e.0 == uid && e.1 != span)
                    .map(|e| e.1)
            })
        })
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Pushes `span` of session `uid` on this thread's stack.
pub(crate) fn push(uid: u64, span: u64) {
    let _ = SPAN_STACK.try_with(|stack| {
        if let Ok(mut s) = stack.try_borrow_mut() {
            s.push((uid, span));
        }
    });
}

/// Removes `span` of session `uid` from this thread's stack (wherever it is).
pub(crate) fn pop(uid: u64, span: u64) {
    let _ = SPAN_STACK.try_with(|stack| {
        if let Ok(mut s) = stack.try_borrow_mut() {
            if let Some(pos) = s.iter().rposition(|e| *e == (uid, span)) {
                s.remove(pos);
            }
        }
    });
}
