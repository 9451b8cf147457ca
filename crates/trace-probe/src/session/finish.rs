//! How a session ends: the meta written once, capture-end plug-ins run once, the terminal
//! (`complete`, or `failed` with the reason: a panic in the captured step, a capture step never
//! reached, `finish` inside the step), and the writer stopped.

use std::time::Duration;

use trace_wire::{MetaEvent, TerminalEvent, TerminalOutcome, TraceEvent, WRITE_VERSION};

use super::{Finished, Inner, Phase, State, TraceSummary};
use crate::error::ProbeError;
use crate::writer::lock;

impl Inner {
    /// Writes the `meta` event once (at capture start, or at `finish` when the step never ran).
    pub(super) fn write_meta(&self, state: &mut State) {
        if state.meta_written {
            return;
        }
        let mut meta = crate::meta::run_meta(&self.run, self.device, state.contract.clone());
        for plugin in &self.plugins {
            plugin.on_meta(&mut meta);
        }
        if self.run.late_session {
            late_session_contract(&mut meta, self.run.capture_step);
        }
        self.emit(TraceEvent::Meta(MetaEvent {
            schema: WRITE_VERSION.as_str().to_string(),
            run: meta,
        }));
        state.meta_written = true;
    }

    /// Runs every plug-in's capture end, once.
    pub(super) fn run_capture_end_plugins(&self) {
        {
            let mut state = lock(&self.state);
            if state.capture_end_plugins_ran {
                return;
            }
            state.capture_end_plugins_ran = true;
        }
        for plugin in &self.plugins {
            plugin.on_capture_end(&self.plugin_context());
        }
    }

    /// At the capture's end (host-clock mode): starts the plug-ins' finish — symbolising the
    /// samples' and sites' stacks, building their events — on the helper thread, so that a
    /// loop going on after the capture does not pay it on its training thread; `finish()` then
    /// only joins it. Where the helper is not running, `finish()` does the work itself.
    pub(super) fn finish_beside(&self) {
        if self.run.deterministic {
            return;
        }
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let job = crate::beside::run(move || me.finish_plugins());
        *lock(&self.finishing) = job;
    }

    /// The plug-ins' finish started at the capture's end, joined; else run here.
    fn joined_or_finish_plugins(&self) -> Finished {
        let started = lock(&self.finishing).take();
        started
            .and_then(crate::beside::Pending::join)
            .unwrap_or_else(|| self.finish_plugins())
    }

    fn finish_plugins(&self) -> Finished {
        let mut dropped: Option<u64> = None;
        let mut lost = std::collections::BTreeMap::new();
        for plugin in &self.plugins {
            if let Some(n) = plugin.on_finish(&self.plugin_context()) {
                dropped = Some(dropped.unwrap_or(0).saturating_add(n));
            }
            for (field, why) in plugin.coverage_lost() {
                lost.insert(field.into(), why);
            }
        }
        self.unfulfilled(&mut lost);
        // The one symbol table the plug-ins filled, then what refers to it.
        self.stacks.write(|e| self.emit(e));
        for plugin in &self.plugins {
            plugin.after_stacks(&self.plugin_context());
        }
        Finished { dropped, lost }
    }

    /// What the run asked for and the captured step did not give, in the terminal's
    /// `coverage_lost` under keys of their own (`module_spans`, `backward_spans`): a model
    /// without module spans, backward spans on with no marker placed.
    fn unfulfilled(&self, lost: &mut std::collections::BTreeMap<trace_wire::ReasonKey, String>) {
        let modules = self.module_spans.load(std::sync::atomic::Ordering::Relaxed);
        if modules == 0 {
            lost.insert(
                "module_spans".into(),
                "no module spans: no layer of this model opened a tracing span in the captured \
                 step, so nothing names the module that ran (build it with trace_probe::nn's \
                 constructors or candle-transformers' with_tracing layers, or open spans with \
                 session.span)"
                    .to_string(),
            );
        }
        let (markers, _) = self.backward.copies();
        if self.run.backward_spans && markers == 0 {
            lost.insert(
                "backward_spans".into(),
                format!(
                    "backward_spans(true) placed 0 markers: {}",
                    if modules == 0 {
                        "the model has no module spans to mark (see module_spans)"
                    } else {
                        "no module span of this model marks its tensors (only trace_probe::nn's \
                         constructors do; with_tracing layers and user spans do not)"
                    }
                ),
            );
        }
    }

    fn terminal(&self, outcome: TerminalOutcome, reason: Option<String>, finished: Finished) {
        let Finished { dropped, lost } = finished;
        self.emit(TraceEvent::Terminal(TerminalEvent {
            coverage_lost: lost,
            outcome,
            timestamp_ns: self.clock.now_ns(),
            reason,
            dropped_events: dropped,
        }));
    }

    /// Called by the panic hook on a thread with one of this session's spans open.
    pub(crate) fn fail_from_panic(&self, reason: &str) {
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        if state.phase != Phase::Capturing {
            return;
        }
        state.phase = Phase::Failed;
        self.capturing
            .store(false, std::sync::atomic::Ordering::Release);
        drop(state);
        self.run_capture_end_plugins();
        let dropped = self.finish_plugins();
        self.terminal(TerminalOutcome::Failed, Some(reason.to_string()), dropped);
        // The process may abort right after the hook (`panic = "abort"`): wait for the writer.
        self.writer.flush_sync(Duration::from_secs(1));
    }

    pub(super) fn finish(&self) -> Result<TraceSummary, ProbeError> {
        let mut state = lock(&self.state);
        let mut result_err = None;
        let (outcome, dropped) = match state.phase {
            Phase::Finished => return Err(ProbeError::AlreadyFinished),
            Phase::Failed => (TerminalOutcome::Failed, None),
            Phase::Waiting => {
                self.write_meta(&mut state);
                let reason = format!(
                    "capture step {} was never reached before finish()",
                    self.run.capture_step
                );
                self.terminal(
                    TerminalOutcome::Failed,
                    Some(reason),
                    Finished {
                        dropped: None,
                        lost: Default::default(),
                    },
                );
                result_err = Some(ProbeError::CaptureStepNotReached {
                    step: self.run.capture_step,
                });
                (TerminalOutcome::Failed, None)
            }
            Phase::Capturing => {
                // Finished now, so a concurrent `finish` or the step guard's drop writes nothing.
                state.phase = Phase::Finished;
                self.capturing
                    .store(false, std::sync::atomic::Ordering::Release);
                drop(state);
                self.run_capture_end_plugins();
                let reason = match self.steps_cut_short() {
                    Some(after) => format!(
                        "the capture of steps {}..={} ended after step {after}: finish() ran before step {} began",
                        self.run.capture_step,
                        self.run.last_capture_step,
                        after + 1
                    ),
                    None => "finish() was called inside the captured step".to_string(),
                };
                let finished = self.finish_plugins();
                let dropped = finished.dropped;
                self.terminal(TerminalOutcome::Failed, Some(reason), finished);
                state = lock(&self.state);
                (TerminalOutcome::Failed, dropped)
            }
            Phase::Captured => {
                state.phase = Phase::Finished;
                drop(state);
                let finished = self.joined_or_finish_plugins();
                let dropped = finished.dropped;
                self.terminal(TerminalOutcome::Complete, None, finished);
                state = lock(&self.state);
                (TerminalOutcome::Complete, dropped)
            }
        };
        state.phase = Phase::Finished;
        let registered = std::mem::replace(&mut state.panic_hook_registered, false);
        drop(state);
        if registered {
            crate::panic_hook::release(self.uid);
        }
        let written = self.writer.finish()?;
        if let Some(err) = result_err {
            return Err(err);
        }
        if let Some(err) = lock(&self.first_error).take() {
            return Err(err);
        }
        let (backward_markers, backward_marker_copy_bytes) = self.backward.copies();
        Ok(TraceSummary {
            outcome,
            events_written: written,
            dropped_events: dropped,
            backward_markers,
            backward_marker_copy_bytes,
        })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let registered = lock(&self.state).panic_hook_registered;
        if registered {
            crate::panic_hook::release(self.uid);
        }
    }
}

/// A scheduled capture's session opened one step before its capture: storages allocated
/// earlier and still live are unseen, so logical memory is at most `partial`, saying why.
fn late_session_contract(meta: &mut trace_wire::RunMeta, step: u64) {
    use trace_wire::CoverageLevel;
    let Some(contract) = meta.capture_contract.as_mut() else {
        return;
    };
    if contract.logical_memory != CoverageLevel::Complete {
        return;
    }
    contract.logical_memory = CoverageLevel::Partial;
    contract.reasons.insert(
        "logical_memory".into(),
        format!(
            "a scheduled capture (every n steps): its session opened at step {}, so storages \
             allocated before then and still live (optimizer state, tensors the loop keeps) are \
             absent unless declared (parameters are); the device samples' used_bytes count \
             the whole process heap",
            step.saturating_sub(1)
        ),
    );
}
