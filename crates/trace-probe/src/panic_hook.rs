//! The chained panic hook: a panic inside the captured step writes a `failed` terminal carrying
//! the panic message, then the previous hook runs.
//!
//! One process-wide hook serves every capturing session: it is installed (chaining to the hook
//! found) when the first session starts capturing and the previous hook is put back when the
//! last capturing session finishes or is dropped. A panic is attributed to a session when the
//! panicking thread has one of that session's spans open (the root span counts), so parallel
//! sessions (parallel tests) never fail each other.
//!
//! With `panic = "abort"` the hook still runs before the abort and waits up to one second for
//! the writer thread; no unwinding happens, so the trace may end without a terminal (it then
//! loads as truncated). A hook installed by someone else after capture started is replaced when
//! the previous hook is restored.

use std::panic::PanicHookInfo;
use std::sync::{Arc, Mutex, Weak};

use crate::session::stack::sessions_open_on_this_thread;
use crate::session::Inner;
use crate::writer::lock;

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

struct Registry {
    sessions: Vec<(u64, Weak<Inner>)>,
    previous: Option<Arc<Hook>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    sessions: Vec::new(),
    previous: None,
});

/// Registers a capturing session; installs the chained hook for the first one.
pub(crate) fn register(uid: u64, session: Weak<Inner>) {
    if std::thread::panicking() {
        return;
    }
    let mut reg = lock(&REGISTRY);
    if reg.sessions.is_empty() {
        let previous: Arc<Hook> = Arc::new(std::panic::take_hook());
        let chained = Arc::clone(&previous);
        std::panic::set_hook(Box::new(move |info| {
            on_panic(info);
            chained(info);
        }));
        reg.previous = Some(previous);
    }
    reg.sessions.push((uid, session));
}

/// Deregisters a session; restores the previous hook after the last one.
pub(crate) fn release(uid: u64) {
    if std::thread::panicking() {
        // `set_hook` panics on a panicking thread; the registration goes stale instead (a
        // `Weak` that no longer upgrades), and the next release cleans it.
        return;
    }
    let mut reg = lock(&REGISTRY);
    let before = reg.sessions.len();
    reg.sessions
        .retain(|(id, weak)| *id != uid && weak.strong_count() > 0);
    if before == 0 || !reg.sessions.is_empty() {
        return;
    }
    if let Some(previous) = reg.previous.take() {
        // Dropping our hook drops its clone of `previous`.
        drop(std::panic::take_hook());
        match Arc::try_unwrap(previous) {
            Ok(hook) => std::panic::set_hook(hook),
            Err(shared) => std::panic::set_hook(Box::new(move |info| shared(info))),
        }
    }
}

fn on_panic(info: &PanicHookInfo<'_>) {
    let uids = sessions_open_on_this_thread();
    if uids.is_empty() {
        return;
    }
    let sessions: Vec<Arc<Inner>> = match REGISTRY.try_lock() {
        Ok(reg) => reg
            .sessions
            .iter()
            .filter(|(uid, _)| uids.contains(uid))
            .filter_map(|(_, weak)| weak.upgrade())
            .collect(),
        Err(_) => return,
    };
    let reason = panic_reason(info);
    for session in sessions {
        session.fail_from_panic(&reason);
    }
}

fn panic_reason(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    match info.location() {
        Some(loc) => format!("panic at {}:{}: {message}", loc.file(), loc.line()),
        None => format!("panic: {message}"),
    }
}
