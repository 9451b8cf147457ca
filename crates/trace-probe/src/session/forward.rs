//! One span per model forward call inside a captured inference call: `prefill` for the first
//! call with more than one token, `decode` for every other one (or the caller's name), so the
//! prompt's pass and each decoded token's are separate rows with their own time and memory.

use std::sync::atomic::Ordering;

use trace_wire::SpanKind;

use super::TraceSession;

/// The span name of forward call number `index` (zero-based, in the captured call) over
/// `tokens` new tokens: `prefill` for the first call with more than one token, else `decode`.
pub(crate) fn forward_span_name(index: u64, tokens: usize) -> &'static str {
    if index == 0 && tokens > 1 {
        "prefill"
    } else {
        "decode"
    }
}

impl TraceSession {
    /// Runs `f` (one model forward call over `tokens` new tokens, e.g. the prompt, then one
    /// token per decode step) in its own span: `prefill` for the captured call's first forward
    /// call with more than one token, `decode` for the others. Outside the captured step it is
    /// `f()` plus one atomic load.
    ///
    /// ```no_run
    /// # fn demo(profiler: &trace_probe::TraceSession) {
    /// let logits = profiler.forward(4, || 0.0f32 /* model.forward(&prompt, 0, &mut cache) */);
    /// # }
    /// ```
    pub fn forward<R>(&self, tokens: usize, f: impl FnOnce() -> R) -> R {
        if !self.is_capturing() {
            return f();
        }
        let index = self.cur().forward_calls.fetch_add(1, Ordering::Relaxed);
        let _span = self.span(forward_span_name(index, tokens), SpanKind::Function);
        f()
    }

    /// Runs `f` in a span named `name` (the user's name for a forward call: `prefill`, `decode`,
    /// `encode`, ...); counts as a forward call for [`TraceSession::forward`]'s naming.
    pub fn forward_named<R>(&self, name: &str, f: impl FnOnce() -> R) -> R {
        if !self.is_capturing() {
            return f();
        }
        self.cur().forward_calls.fetch_add(1, Ordering::Relaxed);
        let _span = self.span(name, SpanKind::Function);
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::forward_span_name;

    #[test]
    fn first_multi_token_call_is_prefill_then_decode() {
        assert_eq!(forward_span_name(0, 4), "prefill");
        assert_eq!(forward_span_name(1, 1), "decode");
        assert_eq!(forward_span_name(2, 1), "decode");
        // A one-token prompt has no prefill; a later multi-token call is not a prefill.
        assert_eq!(forward_span_name(0, 1), "decode");
        assert_eq!(forward_span_name(3, 5), "decode");
    }
}
