//! [`SamplingGuard`]: a thread other than the capturing one (a data loader, a worker the user
//! owns) asks to be sampled too.

use std::marker::PhantomData;

use std::sync::Arc;

use super::host::SessionHost;

/// What `TraceSession::sample_this_thread` returns: while it lives, the thread that called it
/// is sampled during the captured step, like the capturing thread (its samples carry its
/// thread key, and the span open on it, if any). Inactive (nothing sampled) when sampling is
/// off, unavailable on this platform, the thread is already sampled, or the capture is over.
/// `!Send`: it belongs to the thread it samples; drop it on that thread (before the thread
/// ends). Dropping it during the step stops that thread's sampling there (its window ends).
#[must_use = "the thread is sampled while this guard lives"]
pub struct SamplingGuard {
    session: Option<Arc<dyn SessionHost>>,
    /// (plug-in index, token) of each plug-in that registered the thread.
    tokens: Vec<(usize, u64)>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for SamplingGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplingGuard")
            .field("active", &self.is_active())
            .finish()
    }
}

impl SamplingGuard {
    /// The guard of the plug-in registrations `tokens` ((plug-in index, token) pairs) of the
    /// calling thread in `session`.
    pub(crate) fn new(session: Arc<dyn SessionHost>, tokens: Vec<(usize, u64)>) -> Self {
        Self {
            session: (!tokens.is_empty()).then_some(session),
            tokens,
            _not_send: PhantomData,
        }
    }

    /// Whether the thread was registered for sampling.
    pub fn is_active(&self) -> bool {
        !self.tokens.is_empty()
    }
}

impl Drop for SamplingGuard {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let tokens = &self.tokens;
        session.with_plugins(&mut |ctx, plugins| {
            for &(i, token) in tokens {
                if let Some(plugin) = plugins.get(i) {
                    plugin.on_thread_leave(ctx, token);
                }
            }
        });
    }
}
