//! The sampler plug-in: arms a timer per sampled thread when the captured step begins,
//! disarms them before it ends, and after the step (in `on_finish`, outside the measured
//! region) symbolises the stacks into the session's symbol table (shared with the allocation
//! sites) and attributes each sample to the span open on its thread then; once the session
//! wrote the table's frames and stacks (`after_stacks`) it writes the samples and the sampler
//! event.

use std::sync::Mutex;
use std::time::Instant;

use trace_alloc::thread_key;
use trace_sampler::{current_tid, SampleBuffer, SlotCounts, ThreadSampler, Tid};
use trace_wire::{
    ContractField, CoverageLevel, RunMeta, SampleEvent, SampledThread, SamplerEvent, TraceEvent,
};

use super::{declare_off, SamplerSettings};
use crate::session::plugin::{CaptureContext, CapturePlugin};
use crate::writer::lock;

/// A thread to sample.
#[derive(Debug, Clone)]
struct Thread {
    key: u64,
    tid: Tid,
    name: Option<String>,
}

impl Thread {
    fn current() -> Self {
        Self {
            key: thread_key(),
            tid: current_tid(),
            name: std::thread::current().name().map(str::to_string),
        }
    }
}

/// A thread being sampled, or sampled and waiting for `on_finish`.
#[derive(Debug)]
struct Run {
    thread: Thread,
    /// The `sample_this_thread` registration that armed it (`None`: the capturing thread).
    token: Option<u64>,
    sampler: ThreadSampler,
    start_ns: u64,
    end_ns: Option<u64>,
}

#[derive(Debug, Default)]
struct State {
    /// `on_meta` found the handler in place and declared `operations: sampled`.
    active: bool,
    /// Between capture start and capture end.
    armed: bool,
    /// Threads that called `sample_this_thread` (token, thread).
    registered: Vec<(u64, Thread)>,
    next_token: u64,
    /// Threads sampled now.
    running: Vec<Run>,
    /// Threads sampled, waiting for `on_finish`.
    done: Vec<Run>,
    /// Why a thread could not be sampled.
    problems: Vec<String>,
    /// `on_finish` wrote the events.
    written: bool,
    /// Built in `on_finish`, written in `after_stacks`: the samples (by time) and the sampler
    /// event (its symbol figures filled from the written table).
    to_write: Option<(Vec<SampleEvent>, SamplerEvent)>,
}

/// The sampler of one session.
#[derive(Debug)]
pub(crate) struct SamplerPlugin {
    settings: SamplerSettings,
    state: Mutex<State>,
}

impl SamplerPlugin {
    pub(crate) fn new(settings: SamplerSettings) -> Self {
        Self {
            settings,
            state: Mutex::new(State::default()),
        }
    }

    fn period_ns(&self) -> u64 {
        self.settings.period_ns()
    }

    /// Starts sampling `thread` now.
    fn arm(&self, state: &mut State, ctx: &CaptureContext<'_>, thread: Thread, token: Option<u64>) {
        if state.running.iter().any(|r| r.thread.key == thread.key) {
            return;
        }
        let armed = SampleBuffer::reserve(self.settings.buffer_bytes).and_then(|buffer| {
            let start_ns = ctx.clock().now_ns();
            let sampler = buffer.start(thread.tid, self.period_ns())?;
            Ok((sampler, start_ns))
        });
        match armed {
            Ok((sampler, start_ns)) => state.running.push(Run {
                thread,
                token,
                sampler,
                start_ns,
                end_ns: None,
            }),
            Err(why) => state.problems.push(format!(
                "thread {} not sampled: {why}",
                thread.name.as_deref().unwrap_or("(unnamed)")
            )),
        }
    }

    /// Stops sampling run `index` of `state.running` and keeps its samples for `on_finish`.
    fn disarm(state: &mut State, ctx: &CaptureContext<'_>, index: usize) {
        let mut run = state.running.swap_remove(index);
        run.sampler.stop();
        run.end_ns = Some(ctx.clock().now_ns());
        state.done.push(run);
    }

    fn disarm_all(state: &mut State, ctx: &CaptureContext<'_>) {
        while !state.running.is_empty() {
            Self::disarm(state, ctx, state.running.len() - 1);
        }
    }

    /// Adds every sampled stack to the session's symbol table and builds the samples and the
    /// sampler event (written in `after_stacks`, once the table is).
    fn build(&self, ctx: &CaptureContext<'_>, runs: Vec<Run>) -> (Vec<SampleEvent>, SamplerEvent) {
        let started = Instant::now();
        let unique_before = ctx.stacks().unique_addresses();
        let mut threads = Vec::with_capacity(runs.len());
        let mut samples = Vec::new();
        let mut truncated_stacks = 0u64;
        let mut counted = SlotCounts::default();
        for run in &runs {
            for record in run.sampler.records() {
                let ts = ctx.clock().process_ns_to_session_ns(record.process_ns);
                let span_id = ctx.span_at(run.thread.key, ts).map(|s| ctx.span_id(s));
                let stack_id = ctx.stacks().add(record.frames, true);
                if record.truncated {
                    truncated_stacks += 1;
                }
                samples.push(SampleEvent {
                    timestamp_ns: ts,
                    thread: run.thread.key,
                    stack_id,
                    span_id,
                });
            }
            let c = run.sampler.counts();
            counted.samples = counted.samples.saturating_add(c.samples);
            counted.handler_ns = counted.handler_ns.saturating_add(c.handler_ns);
            counted.frame_pointer_samples = counted
                .frame_pointer_samples
                .saturating_add(c.frame_pointer_samples);
            threads.push(SampledThread {
                thread: run.thread.key,
                name: run.thread.name.clone(),
                start_ns: run.start_ns,
                end_ns: run.end_ns.unwrap_or(run.start_ns),
                ticks: c.ticks,
                samples: c.samples,
                lost_overrun: c.lost_overrun,
                lost_buffer: c.lost_buffer,
            });
        }
        samples.sort_by_key(|s| (s.timestamp_ns, s.thread));
        let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        trace_sampler::stats::add_finish(
            counted.samples,
            counted.handler_ns,
            counted.frame_pointer_samples,
            elapsed,
            ctx.stacks()
                .unique_addresses()
                .saturating_sub(unique_before),
        );
        let event = SamplerEvent {
            hz: u64::from(self.settings.hz),
            period_ns: self.period_ns(),
            clock: "wall".to_string(),
            unwinder: unwinder_name(counted.samples, counted.frame_pointer_samples).to_string(),
            // Filled from the written table in `after_stacks`.
            symbols: trace_wire::SymbolQuality::None,
            unresolved_frames: 0,
            truncated_stacks,
            threads,
        };
        (samples, event)
        // `runs` drop here: slots freed, buffers unmapped.
    }
}

/// The `sampler` event's `unwinder`: `frame_pointers` when every sample's stack was walked by
/// frame pointers, `libgcc` when none was, `frame_pointers+libgcc` for a mix (a sample whose
/// chain failed the handler's check — a shared C library's function that used the frame-pointer
/// register for something else — is walked by libgcc).
fn unwinder_name(samples: u64, frame_pointer_samples: u64) -> &'static str {
    match frame_pointer_samples {
        0 => "libgcc",
        n if n >= samples => "frame_pointers",
        _ => "frame_pointers+libgcc",
    }
}

impl CapturePlugin for SamplerPlugin {
    fn on_meta(&self, meta: &mut RunMeta) {
        let contract = meta.capture_contract.get_or_insert_with(Default::default);
        if let Some(reason) = self.settings.off_reason() {
            // Where the sampler cannot run, deterministic mode declares nothing.
            if !self.settings.deterministic || trace_sampler::SUPPORTED {
                declare_off(contract, reason);
            }
            return;
        }
        if self.settings.deterministic {
            return; // fixtures stay byte-identical: no sampling, nothing declared
        }
        match trace_sampler::install() {
            Ok(()) => {
                lock(&self.state).active = true;
                // Frame pointers where the process's walker calibration (one real allocation
                // walked both ways inside the tracking allocator) found the chain whole.
                trace_sampler::set_frame_pointers(
                    trace_alloc::is_installed()
                        && crate::storage::sites::walker().unwinder
                            == trace_alloc::sites::Unwinder::FramePointers,
                );
                if contract.operations < CoverageLevel::Sampled {
                    contract.operations = CoverageLevel::Sampled;
                }
                contract.reasons.insert(
                    ContractField::Operations.into(),
                    format!(
                        "wall-clock stack samples at {} Hz: time shares are estimates with \
                         intervals",
                        self.settings.hz
                    ),
                );
            }
            Err(why) => declare_off(contract, &why),
        }
    }

    fn on_capture_start(&self, ctx: &CaptureContext<'_>) {
        let mut state = lock(&self.state);
        if !state.active || state.armed || state.written {
            return;
        }
        state.armed = true;
        trace_alloc::walk::frame_chain::note_thread_bounds();
        let mut threads = vec![(Thread::current(), None)];
        for (token, t) in &state.registered {
            if threads.iter().all(|(x, _)| x.key != t.key) {
                threads.push((t.clone(), Some(*token)));
            }
        }
        for (t, token) in threads {
            self.arm(&mut state, ctx, t, token);
        }
    }

    fn on_capture_end(&self, ctx: &CaptureContext<'_>) {
        let mut state = lock(&self.state);
        state.armed = false;
        Self::disarm_all(&mut state, ctx);
    }

    fn on_finish(&self, ctx: &CaptureContext<'_>) -> Option<u64> {
        let mut state = lock(&self.state);
        state.armed = false;
        Self::disarm_all(&mut state, ctx);
        if !state.active || state.written {
            return None;
        }
        state.written = true;
        let runs = std::mem::take(&mut state.done);
        drop(state);
        let built = self.build(ctx, runs);
        lock(&self.state).to_write = Some(built);
        None
    }

    fn after_stacks(&self, ctx: &CaptureContext<'_>) {
        let Some((samples, mut event)) = lock(&self.state).to_write.take() else {
            return;
        };
        let figures = ctx.stacks().figures();
        event.symbols = figures
            .and_then(|f| f.symbols)
            .unwrap_or_else(trace_sampler::stacks::build_quality);
        event.unresolved_frames = figures.map_or(0, |f| f.unresolved_frames);
        for s in samples {
            ctx.emit(TraceEvent::Sample(s));
        }
        ctx.emit(TraceEvent::Sampler(event));
    }

    fn coverage_lost(&self) -> Vec<(ContractField, String)> {
        let state = lock(&self.state);
        if state.problems.is_empty() {
            return Vec::new();
        }
        vec![(ContractField::Operations, state.problems.join("; "))]
    }

    fn on_thread_join(&self, ctx: &CaptureContext<'_>) -> Option<u64> {
        if self.settings.off_reason().is_some() || self.settings.deterministic {
            return None;
        }
        let thread = Thread::current();
        trace_alloc::walk::frame_chain::note_thread_bounds();
        let mut state = lock(&self.state);
        if state.written || state.registered.iter().any(|(_, t)| t.key == thread.key) {
            return None;
        }
        state.next_token += 1;
        let token = state.next_token;
        state.registered.push((token, thread.clone()));
        if state.armed {
            self.arm(&mut state, ctx, thread, Some(token));
        }
        Some(token)
    }

    fn on_thread_leave(&self, ctx: &CaptureContext<'_>, token: u64) {
        let mut state = lock(&self.state);
        let Some(at) = state.registered.iter().position(|(t, _)| *t == token) else {
            return;
        };
        state.registered.remove(at);
        if let Some(i) = state.running.iter().position(|r| r.token == Some(token)) {
            Self::disarm(&mut state, ctx, i);
        }
    }
}

impl Drop for SamplerPlugin {
    /// A session dropped without finishing: timers deleted, slots freed.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for run in state.running.iter_mut() {
            run.sampler.stop();
        }
        state.running.clear();
        state.done.clear();
    }
}
