//! The captured step and its passes. The step guard of the captured step opens the root span
//! (the measured region) and right under it the forward pass; the optimizer wrapper's backward
//! closes the forward pass and opens `backward`, then `optimizer`. A user writes no pass spans
//! unless they want them (see [`TraceSession::pass`]).
//!
//! A capture of several steps ([`crate::ProfileRun::capture_steps`]) opens the root span with
//! the first step's guard and closes it with the last one's; each step's guard opens a step
//! span (`step <n>` / `call <n>`, with its `step_index`) under the root, and the passes under
//! it.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use candle_core::Device;
use trace_wire::{ExecutionStep as Pass, SpanEndEvent, SpanKind, SpanStartEvent, TraceEvent};

use super::open_span::OpenSpan;
use super::spans::SpanGuard;
use super::{stack, Inner, Phase, TraceSession};
use crate::error::ProbeError;
use crate::session::attribution::SpanInfo;
use crate::session::plugin::{span_wire_id, thread_key, ROOT_SPAN};
use crate::writer::lock;

/// Guard of the captured step (the root span); inactive on every other step. Dropping it closes
/// the forward pass if still open and the root span (synchronizing CUDA/Metal first), and stops
/// recording. `!Send`.
#[must_use = "the captured step ends when this guard drops"]
#[derive(Debug)]
pub struct StepGuard {
    inner: Option<Arc<Inner>>,
    step: u64,
    _not_send: PhantomData<*const ()>,
}

impl StepGuard {
    pub(crate) fn inactive() -> Self {
        Self {
            inner: None,
            step: 0,
            _not_send: PhantomData,
        }
    }

    /// Whether this guard is the captured step.
    pub fn is_active(&self) -> bool {
        self.inner.is_some()
    }
}

impl Drop for StepGuard {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.end_step(self.step);
        }
    }
}

/// The wire name of a pass span.
fn pass_name(pass: Pass) -> &'static str {
    match pass {
        Pass::Forward => "forward",
        Pass::Backward => "backward",
        Pass::Optimizer => "optimizer",
    }
}

impl TraceSession {
    /// Begins training step (or inference call) `step` of the loop, one-based, counted with any
    /// integer type (a negative or oversized number is never the captured step). On the
    /// configured capture step this writes `meta`, opens the root span (named after the
    /// entrypoint, the single measured region, synchronizing CUDA/Metal devices first) and the
    /// forward pass, and records until the guard drops. In a capture of several steps
    /// ([`crate::ProfileRun::capture_steps`]) every step of the range opens its step span and
    /// its forward pass, and the root span stays open from the first step's start to the last
    /// step's end. On every other step it costs two integer comparisons and returns an
    /// inactive guard.
    pub fn step<N: TryInto<u64>>(&self, step: N) -> StepGuard {
        if let Some(route) = &self.inner.route {
            return match step.try_into() {
                Ok(n) => route.step(n),
                Err(_) => StepGuard::inactive(),
            };
        }
        let run = &self.inner.run;
        match step.try_into() {
            Ok(n) if n == run.capture_step => self.inner.begin_capture(&self.inner, n),
            Ok(n) if n > run.capture_step && n <= run.last_capture_step => {
                self.inner.begin_next_step(&self.inner, n)
            }
            _ => StepGuard::inactive(),
        }
    }

    /// Opens a pass span (`forward`, `backward` or `optimizer`) under the innermost open span
    /// of this thread. Opening `backward` or `optimizer` first closes the forward pass the step
    /// guard opened; opening `forward` while that pass is still open does nothing (an inactive
    /// guard). Only needed without [`crate::ProbedOptimizer`], or for finer passes.
    pub fn pass(&self, pass: Pass) -> SpanGuard {
        if !self.is_capturing() {
            return SpanGuard::inactive();
        }
        let inner = self.cur();
        if lock(&inner.auto_forward).is_some() {
            if pass == Pass::Forward {
                return SpanGuard::inactive();
            }
            inner.close_auto_forward();
        }
        if pass == Pass::Optimizer {
            // A backward the user ran themselves is over.
            for plugin in &inner.plugins {
                plugin.on_backward_end(false);
            }
        }
        match inner.open_span_raw(pass_name(pass), SpanKind::Function, Some(pass), None) {
            Some(open) => SpanGuard::active(&inner, open),
            None => SpanGuard::inactive(),
        }
    }

    /// Runs `loss.backward()` in a `backward` pass, telling the capture plug-ins about the
    /// autograd graph first (as [`crate::ProbedOptimizer`]'s `backward_step` does), for loops
    /// that free the graph before the optimizer runs:
    /// `let grads = profiler.backward(&loss)?; drop(loss); opt.step(&grads)?;` — the advice of
    /// the `activations_retained_into_optimizer` finding. Outside the captured step it is
    /// `loss.backward()`.
    ///
    /// # Errors
    /// The error of `loss.backward()`.
    pub fn backward(
        &self,
        loss: &candle_core::Tensor,
    ) -> candle_core::Result<candle_core::backprop::GradStore> {
        if self.is_capturing() {
            let inner = self.cur();
            for plugin in &inner.plugins {
                plugin.on_loss(&inner.plugin_context(), loss);
            }
        }
        let _backward = self.pass(Pass::Backward);
        let grads = loss.backward();
        // The backward call returned: backward module spans still open end here, exactly.
        for plugin in &self.cur().plugins {
            plugin.on_backward_end(true);
        }
        grads
    }
}

impl Inner {
    fn synchronizes(&self) -> bool {
        !matches!(self.run.device, Device::Cpu)
    }

    pub(super) fn sync_device(&self) {
        if self.synchronizes() {
            if let Err(err) = self.run.device.synchronize() {
                self.record_error(ProbeError::Candle {
                    context: "synchronizing the device at the measured region's boundary",
                    source: err,
                });
            }
        }
    }

    fn begin_capture(&self, this: &Arc<Inner>, n: u64) -> StepGuard {
        let mut state = lock(&self.state);
        if state.phase != Phase::Waiting {
            return StepGuard::inactive();
        }
        self.write_meta(&mut state);
        self.sync_device();
        let (start_ns, start_real) = self.clock.now_with_process_ns();
        self.emit(TraceEvent::SpanStart(SpanStartEvent {
            id: span_wire_id(ROOT_SPAN),
            parent_id: None,
            name: self.run.entrypoint.clone(),
            start_ns,
            span_kind: SpanKind::Function,
            measured: true,
            step: None,
            module_path: None,
            instance_key: None,
            module_kind: None,
            forward_span_id: None,
            step_index: None,
        }));
        self.spans.opened(
            SpanInfo {
                id: ROOT_SPAN,
                parent: None,
                name: self.run.entrypoint.clone(),
                kind: SpanKind::Function,
                pass: None,
                module_path: None,
                start_ns,
                thread: thread_key(),
            },
            start_real,
        );
        stack::push(self.uid, ROOT_SPAN);
        self.root_start_ns.store(start_ns, Ordering::Relaxed);
        self.last_step_begun.store(n, Ordering::Relaxed);
        state.phase = Phase::Capturing;
        crate::panic_hook::register(self.uid, Arc::downgrade(this));
        state.panic_hook_registered = true;
        self.capturing.store(true, Ordering::Release);
        drop(state);
        for plugin in &self.plugins {
            plugin.on_capture_start(&self.plugin_context());
        }
        self.open_step_passes(n);
        StepGuard {
            inner: Some(Arc::clone(this)),
            step: n,
            _not_send: PhantomData,
        }
    }

    /// A later step of a multi-step capture begins: its step span and forward pass, when the
    /// capture is running and no step is open (a step begun twice, or inside another, gets an
    /// inactive guard).
    fn begin_next_step(&self, this: &Arc<Inner>, n: u64) -> StepGuard {
        {
            let state = lock(&self.state);
            if state.phase != Phase::Capturing
                || lock(&self.step_span).is_some()
                || n <= self.last_step_begun.load(Ordering::Relaxed)
            {
                return StepGuard::inactive();
            }
        }
        self.last_step_begun.store(n, Ordering::Relaxed);
        self.forward_calls.store(0, Ordering::Relaxed);
        self.open_step_passes(n);
        StepGuard {
            inner: Some(Arc::clone(this)),
            step: n,
            _not_send: PhantomData,
        }
    }

    /// Opens step `n`'s span (multi-step captures only) and its forward pass.
    fn open_step_passes(&self, n: u64) {
        if self.run.is_multi_step() {
            let name = self.run.step_span_name(n);
            let extras = super::open_span::SpanExtras {
                step_index: Some(n),
                ..Default::default()
            };
            if let Some(open) = self.open_span_with(&name, SpanKind::Function, None, extras) {
                *lock(&self.step_span) = Some((open, n));
            }
        }
        if let Some(open) = self.open_span_raw(
            pass_name(Pass::Forward),
            SpanKind::Function,
            Some(Pass::Forward),
            None,
        ) {
            *lock(&self.auto_forward) = Some((open, thread_key()));
        }
    }

    /// Whether the step running now is the capture's last (gradient facts are recorded there).
    pub(crate) fn in_last_captured_step(&self) -> bool {
        self.last_step_begun.load(Ordering::Relaxed) >= self.run.last_capture_step
    }

    /// The guard of step `n` dropped: the step's passes and span close; the last step (or a
    /// single-step capture's) ends the capture.
    fn end_step(&self, n: u64) {
        if n >= self.run.last_capture_step {
            self.end_capture(self.root_start_ns.load(Ordering::Relaxed));
            return;
        }
        for plugin in &self.plugins {
            plugin.on_step_end();
        }
        self.close_auto_forward();
        *lock(&self.auto_forward) = None;
        self.close_step_span();
    }

    /// Closes the open step span, if any.
    fn close_step_span(&self) {
        let open = lock(&self.step_span).take();
        if let Some((open, _)) = open {
            self.end_span(open.id, open.start_ns);
        }
    }

    /// Where a multi-step capture stands when it did not reach its last step: `Some(k)` after
    /// step `k` of `first..=last` ended with later steps never begun.
    pub(crate) fn steps_cut_short(&self) -> Option<u64> {
        let begun = self.last_step_begun.load(Ordering::Relaxed);
        (self.run.is_multi_step()
            && begun >= self.run.capture_step
            && begun < self.run.last_capture_step
            && lock(&self.step_span).is_none())
        .then_some(begun)
    }

    /// Closes the forward pass the step guard opened, when it is still open and this is its
    /// thread.
    pub(crate) fn close_auto_forward(&self) {
        let open: Option<OpenSpan> = {
            let mut slot = lock(&self.auto_forward);
            match *slot {
                Some((open, thread)) if thread == thread_key() => {
                    *slot = None;
                    Some(open)
                }
                _ => None,
            }
        };
        if let Some(open) = open {
            self.end_span(open.id, open.start_ns);
        }
    }

    fn end_capture(&self, start_ns: u64) {
        for plugin in &self.plugins {
            plugin.on_step_end();
        }
        self.close_auto_forward();
        *lock(&self.auto_forward) = None;
        if lock(&self.state).phase == Phase::Capturing {
            self.close_step_span();
        } else {
            *lock(&self.step_span) = None;
        }
        if lock(&self.state).phase != Phase::Capturing {
            stack::pop(self.uid, ROOT_SPAN);
            return;
        }
        self.run_capture_end_plugins();
        self.sync_device();
        let (end_ns, end_real) = self.clock.now_with_process_ns();
        let mut state = lock(&self.state);
        if state.phase != Phase::Capturing {
            drop(state);
            stack::pop(self.uid, ROOT_SPAN);
            return;
        }
        self.capturing.store(false, Ordering::Release);
        state.phase = Phase::Captured;
        self.emit(TraceEvent::SpanEnd(SpanEndEvent {
            id: span_wire_id(ROOT_SPAN),
            duration_ns: end_ns.saturating_sub(start_ns),
            inferred: false,
            inferred_reason: None,
        }));
        self.writer.flush_async();
        drop(state);
        self.log_close(ROOT_SPAN, end_ns, end_real);
        stack::pop(self.uid, ROOT_SPAN);
        self.finish_beside();
    }
}
