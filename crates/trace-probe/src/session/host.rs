//! [`SessionHost`]: what a session offers the parts built on top of it — the per-module
//! backward spans, the sampling guard — without their seeing its state (`Inner`). The session
//! implements it; they hold an `Arc` or a `Weak` of `dyn SessionHost`.

use std::sync::Arc;

use trace_wire::{ExecutionStep as Pass, SpanKind};

use super::attribution::SpanInfo;
use super::open_span::{OpenSpan, SpanExtras};
use super::plugin::{CaptureContext, CapturePlugin};
use crate::error::ProbeError;

/// What [`SessionHost::with_plugins`] calls: the plug-in view of the session and its plug-ins.
pub(crate) type WithPlugins<'f> = dyn FnMut(&CaptureContext<'_>, &[Arc<dyn CapturePlugin>]) + 'f;

/// A session as the parts built on it see it.
pub(crate) trait SessionHost: Send + Sync {
    /// The session's process-unique number (per-thread span stacks are keyed by it).
    fn uid(&self) -> u64;
    /// Whether the captured step is running now.
    fn is_capturing(&self) -> bool;
    /// Facts about span `span` (`None`: unknown).
    fn span_info(&self, span: u64) -> Option<SpanInfo>;
    /// Opens a span on this thread under its innermost open span (`None` outside the captured
    /// step).
    fn open_span_with(
        &self,
        name: &str,
        kind: SpanKind,
        pass: Option<Pass>,
        extras: SpanExtras,
    ) -> Option<OpenSpan>;
    /// Ends span `id` opened at `start_ns`, `inferred` with the reason when given.
    fn end_span_inferred(&self, id: u64, start_ns: u64, inferred_reason: Option<String>);
    /// Keeps the first error the probe met inside the user's loop (returned by `finish`).
    fn record_error(&self, err: ProbeError);
    /// Calls `f` with the plug-in view of the session and its plug-ins, in order.
    fn with_plugins(&self, f: &mut WithPlugins<'_>);
}
