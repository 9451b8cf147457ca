//! Internal extension points for capture plug-ins (the storage capture with its registry and
//! device memory samples, the stack sampler). Nothing here is public API.
//!
//! # How a plug-in joins a session
//! Implement [`CapturePlugin`] and list it where the session is built (`session/mod.rs`,
//! `builtin_plugins`: the one place a plug-in is listed; it receives the run config and may
//! return nothing, e.g. when the allocator is not installed). A plug-in depends on this module
//! only, never on the session's state. Every [`crate::TraceSession`] calls its plug-ins at these moments, always on the
//! thread that caused them:
//!
//! | method | when | typical use |
//! |---|---|---|
//! | [`CapturePlugin::on_meta`] | capture start, before `meta` is written | declare coverage (`logical_memory`), reasons, `tracking_allocator_installed` |
//! | [`CapturePlugin::on_parameters`] | `ProbedOptimizer` construction, before the inner optimizer is built | the named parameters (sorted by name) |
//! | [`CapturePlugin::around_optimizer_construction`] | `ProbedOptimizer` builds the inner optimizer (`O::new(vars, config)`) | arm the allocator briefly so AdamW's private moments become known pre-existing storages, each tied to its parameter when they match the optimizer's known layout |
//! | [`CapturePlugin::on_capture_start`] | right after the root span (`s1`, the measured region) opened | arm; write pre-existing storages as `pre_existing` allocs |
//! | [`CapturePlugin::on_loss`] / [`CapturePlugin::on_gradients`] | `ProbedOptimizer::backward_step`, before and after `loss.backward()` | register graph nodes (`loss.sorted_nodes()`) and gradients |
//! | [`CapturePlugin::on_span_end`] | a span is about to close (before its `span_end` is written) | device memory sample (the storage capture's events reach the writer from the drainer thread) |
//! | [`CapturePlugin::on_capture_end`] | the root span is about to close, or the step panicked | disarm, final drain |
//! | [`CapturePlugin::on_finish`] | `finish()` or a panic, before the terminal | late frees, return the dropped-event count; add raw stacks to the shared symbol table |
//! | [`CapturePlugin::after_stacks`] | after every `on_finish`, once the session wrote the symbol table's frames and stacks | events referring to stacks (sites, samples) |
//! | [`CapturePlugin::storage_id`] | a tensor fact is recorded (with its label and category) | register it; the storage identity for `tensor.storage_id` |
//! | [`CapturePlugin::on_thread_join`] / [`CapturePlugin::on_thread_leave`] | `TraceSession::sample_this_thread()` on some thread / its guard dropped (on that thread) | the sampler samples that thread too |
//! | [`CapturePlugin::on_module_enter`] | the tracing layer opened a module span | the backward spans record the module call |
//! | [`CapturePlugin::on_backward_end`] / [`CapturePlugin::on_step_end`] | `loss.backward()` returned or an optimizer pass began / a captured step ends | the backward spans close what is open |
//!
//! # What a plug-in can use ([`CaptureContext`])
//! - [`CaptureContext::emit`]: queue any event to the writer thread, from any thread (never
//!   blocks, never does I/O on the caller's thread); [`CaptureContext::emit_deferred`] and
//!   [`CaptureContext::deferred_sender`] queue work the writer thread turns into events at that
//!   place in the order (attribution off the training thread, over [`CaptureContext::span_log`]).
//! - The session clock: [`CaptureContext::clock`] (`now_ns`, and conversion of a timestamp taken
//!   by the allocator hook with `trace_alloc::clock::process_ns` via
//!   `SessionClock::process_ns_to_session_ns`).
//! - Span attribution: [`CaptureContext::span_at`]`(thread, ts_ns)` answers which span was the
//!   innermost open one on a thread at a session time (binary search in a per-thread span-change
//!   log), and [`CaptureContext::span_info`] gives its pass (inherited from ancestors), kind and
//!   module path. Threads are identified by [`thread_key`], which is allocation-free and
//!   lock-free, so the allocator hook records it with each ring event.
//! - [`CaptureContext::span_id`] formats a span number as the wire id `s<n>`.
//!
//! In deterministic mode the clock is logical; timestamps the allocator hook took have no logical
//! value: [`CaptureContext::span_change_at_real`] finds the span change that preceded one in real
//! time (each change keeps its real time too), and the storage plug-in places its memory events
//! 1 ns apart after that change's logical reading.

use std::sync::Arc;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use trace_alloc::clock::SessionClock;
use trace_sampler::SessionStacks;
use trace_wire::{MemoryCategory, RunMeta, TraceEvent};

pub(crate) use crate::session::attribution::SpanInfo;
use crate::session::attribution::{SpanChange, SpanLog};
use crate::writer::{Deferred, DeferredSender, WriterHandle};
pub(crate) use trace_alloc::thread_key;

/// A capture plug-in. Every method has a no-op default.
pub(crate) trait CapturePlugin: Send + Sync {
    /// Adjusts the run meta (contract coverage, reasons, allocator flag) before it is written.
    fn on_meta(&self, _meta: &mut RunMeta) {}
    /// Wraps the construction of the inner optimizer of a `ProbedOptimizer`; must call
    /// `construct` exactly once. `layout`: the storages the optimizer's `new` allocates, in
    /// order, when the probe knows them ([`crate::optim_state`]).
    fn around_optimizer_construction(
        &self,
        _layout: Option<&[crate::optim_state::StateSlot]>,
        construct: &mut dyn FnMut(),
    ) {
        construct()
    }
    /// A `ProbedOptimizer` is being built: its named parameters, sorted by name.
    fn on_parameters(&self, _params: &[(String, Var)]) {}
    /// Weights declared on the session after it started
    /// ([`crate::TraceSession::declare_parameters`]), before the capture.
    fn on_declared_parameters(&self, _named: &[(String, Tensor)]) {}
    /// Right after the root span opened.
    fn on_capture_start(&self, _ctx: &CaptureContext<'_>) {}
    /// `ProbedOptimizer::backward_step`, before `loss.backward()` (e.g. walk
    /// `loss.sorted_nodes()` to register graph nodes).
    fn on_loss(&self, _ctx: &CaptureContext<'_>, _loss: &Tensor) {}
    /// Right after the gradients were computed (register gradients).
    fn on_gradients(&self, _ctx: &CaptureContext<'_>, _grads: &GradStore) {}
    /// Before a span's `span_end` is written.
    fn on_span_end(&self, _ctx: &CaptureContext<'_>, _span: &SpanInfo) {}
    /// Before the root span closes, or after a panic in the captured step.
    fn on_capture_end(&self, _ctx: &CaptureContext<'_>) {}
    /// Before the terminal is written; returns the total dropped-event count, if counted.
    fn on_finish(&self, _ctx: &CaptureContext<'_>) -> Option<u64> {
        None
    }
    /// After every plug-in's [`Self::on_finish`] and after the session wrote the symbol table
    /// they filled ([`CaptureContext::stacks`]): write the events that refer to its stacks.
    fn after_stacks(&self, _ctx: &CaptureContext<'_>) {}
    /// After [`Self::on_finish`]: coverage this plug-in declared in the meta but lost during
    /// the capture (contract field, why), written into the terminal's `coverage_lost`.
    fn coverage_lost(&self) -> Vec<(trace_wire::ContractField, String)> {
        Vec::new()
    }
    /// A thread asked to be sampled (`TraceSession::sample_this_thread`), called on that
    /// thread: a token handed back to [`Self::on_thread_leave`], or `None` when this plug-in
    /// has nothing to do for it.
    fn on_thread_join(&self, _ctx: &CaptureContext<'_>) -> Option<u64> {
        None
    }
    /// The guard of an [`Self::on_thread_join`] that returned `token` dropped (on its thread).
    fn on_thread_leave(&self, _ctx: &CaptureContext<'_>, _token: u64) {}
    /// The tracing layer opened module span `span` (named `name`, of kind `module_kind`) for an
    /// enter of tracing span `tracing_id`, in the captured step.
    fn on_module_enter(
        &self,
        _tracing_id: u64,
        _span: u64,
        _name: &str,
        _module_kind: Option<&str>,
    ) {
    }
    /// The backward call returned (`exact`), or a later point was reached without its return
    /// being seen (an optimizer pass began).
    fn on_backward_end(&self, _exact: bool) {}
    /// A captured step is ending (before its passes and span close), the capture's last too.
    fn on_step_end(&self) {}
    /// The storage identity of `tensor`, if the plug-in knows it; `label`, `category` and
    /// `inferred` (whether the category was inferred rather than declared) are the tensor
    /// fact's: the storage registry registers labelled tensors with them.
    fn storage_id(
        &self,
        _tensor: &Tensor,
        _label: &str,
        _category: MemoryCategory,
        _inferred: bool,
    ) -> Option<String> {
        None
    }
}

/// A session as seen by a plug-in: the handles it may use (the writer, the clock, the span
/// log, the symbol table), not the session's state.
pub(crate) struct CaptureContext<'a> {
    writer: &'a WriterHandle,
    clock: &'a SessionClock,
    spans: &'a Arc<SpanLog>,
    stacks: &'a SessionStacks,
}

impl<'a> CaptureContext<'a> {
    /// The view of a session made of these handles.
    pub(crate) fn new(
        writer: &'a WriterHandle,
        clock: &'a SessionClock,
        spans: &'a Arc<SpanLog>,
        stacks: &'a SessionStacks,
    ) -> Self {
        Self {
            writer,
            clock,
            spans,
            stacks,
        }
    }

    /// Queues an event to the writer thread.
    pub fn emit(&self, event: TraceEvent) {
        self.writer.send(event);
    }
    /// Queues events built later on the writer thread, written at this place in the event
    /// order: work taken off the training thread (memory events' attribution to spans).
    pub fn emit_deferred(&self, build: Deferred) {
        self.writer.send_deferred(build);
    }
    /// A handle queueing deferred events into this session's writer from another thread (the
    /// storage capture's drainer).
    pub fn deferred_sender(&self) -> DeferredSender {
        self.writer.sender()
    }
    /// The session's span log, shared (for attribution off the training thread: the host-clock
    /// lookups of [`Self::span_at`] and [`Self::span_info`] on it give the same answers later,
    /// since a thread's log only grows with later changes).
    pub fn span_log(&self) -> Arc<SpanLog> {
        Arc::clone(self.spans)
    }
    /// The session clock.
    pub fn clock(&self) -> &SessionClock {
        self.clock
    }
    /// The wire id of a span number.
    pub fn span_id(&self, span: u64) -> String {
        span_wire_id(span)
    }
    /// The root span number (the measured region).
    pub fn root_span(&self) -> u64 {
        ROOT_SPAN
    }
    /// Innermost open span of `thread` at session time `ts_ns` (`None`: none open there, e.g.
    /// a thread that never opened a span: attribute to the root).
    pub fn span_at(&self, thread: u64, ts_ns: u64) -> Option<u64> {
        self.spans.span_at(thread, ts_ns)
    }
    /// The last span change of `thread` at or before real time `real_ns` (ns since the process
    /// clock base, as an allocator-hook timestamp): deterministic mode maps hook times onto the
    /// logical clock with it.
    pub fn span_change_at_real(&self, thread: u64, real_ns: u64) -> Option<SpanChange> {
        self.spans.span_change_at_real(thread, real_ns)
    }
    /// The trace's symbol table: add raw stacks in [`CapturePlugin::on_finish`], write what
    /// refers to them in [`CapturePlugin::after_stacks`].
    pub fn stacks(&self) -> &SessionStacks {
        self.stacks
    }
    /// Facts about a span.
    pub fn span_info(&self, span: u64) -> Option<SpanInfo> {
        self.spans.span_info(span)
    }
}

/// The root span's number: the step guard's measured region.
pub(crate) const ROOT_SPAN: u64 = 1;

/// `s<n>`.
pub(crate) fn span_wire_id(span: u64) -> String {
    format!("s{span}")
}
