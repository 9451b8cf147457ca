//! Per-module backward spans (opt-in: [`crate::ProfileRun::backward_spans`]), a capture
//! plug-in of the session (the module enters, the backward's end and the step's end reach it
//! through [`CapturePlugin`]); it opens and closes spans through [`SessionHost`].
//!
//! Candle's `loss.backward()` is one call with no hooks, but it calls the `bwd` of custom ops
//! while it walks the graph. While backward spans are on, a probed module
//! ([`crate::nn::Traced`]) wraps its input and its output in an identity custom op (the
//! [`marker`]) during the captured forward pass. When backprop reaches the output marker, the
//! gradient of the module's output is complete and its backward begins: a `module` span named
//! after the forward one opens under the `backward` pass (same module path, `forward_span_id`
//! pointing at the forward span); when it reaches the input marker, the module's backward is
//! done with that input and the span closes. Memory allocated in between is attributed to the
//! span like any other. The [`tracker`] turns the order of the markers into spans and writes a
//! span as `inferred` (with the reason) when Candle's order interleaved another module's backward
//! with it.
//!
//! Costs, stated in the trace-probe README with the command that measures them: each marker
//! copies its tensor in the forward pass (not in the trace's logical memory: the copies are
//! made with the allocator log off and counted in [`crate::TraceSummary`]), and Candle's
//! backward adds the passed-through gradient into a fresh zero tensor for each marker (visible
//! in the trace, inside the module's span).

mod call;
mod marker;
mod tracker;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use candle_core::Tensor;
use trace_wire::SpanKind;

pub(crate) use call::ModuleCall;
use call::{Boundary, CallOwner};
use marker::Marker;
use tracker::{Action, CallFacts, Event, Tracker};

use crate::error::ProbeError;
use crate::session::host::SessionHost;
use crate::session::open_span::{OpenSpan, SpanExtras};
use crate::session::plugin::CapturePlugin;
use crate::writer::lock;

/// Storage keys ([`crate::storage::bytes::StorageFacts::key`]) of the markers' copies: the
/// storage capture neither registers them (graph nodes and their views) nor writes their free as
/// an anonymous storage that lived before the capture, so the copies never reach the trace. A key
/// is forgotten when its free is seen, and the set starts afresh at a session's first marker of a
/// captured step (a copy freed outside any capture window leaves a stale key until then).
static MARKER_STORAGES: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

/// Whether storage `key` is a backward-span marker's copy (the probe's, not the user's).
pub(crate) fn is_marker_storage(key: usize) -> bool {
    lock(&MARKER_STORAGES)
        .as_ref()
        .is_some_and(|set| set.contains(&key))
}

/// A freed storage: true (and the key forgotten) when it was a marker's copy.
pub(crate) fn forget_marker_storage(key: usize) -> bool {
    lock(&MARKER_STORAGES)
        .as_mut()
        .is_some_and(|set| set.remove(&key))
}

/// The backward-span state of a session. It reaches its session only through
/// [`SessionHost`] (opening and closing spans, the capturing flag, the first error).
pub(crate) struct BackwardSpans {
    enabled: bool,
    host: Weak<dyn SessionHost>,
    state: Mutex<State>,
    copies: AtomicU64,
    copy_bytes: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// Calls of the current forward pass, by index.
    calls: Vec<Arc<ModuleCall>>,
    /// Bumped when the call table is cleared (a backward ended).
    generation: u64,
    /// Built when the first marker of a backward pass is reached.
    tracker: Option<Tracker>,
    /// Open backward spans by call index.
    open: HashMap<usize, OpenSpan>,
    /// Markers applied in the current captured step.
    markers_in_step: u64,
}

impl std::fmt::Debug for BackwardSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackwardSpans")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl BackwardSpans {
    /// Backward spans on or off for the whole session `host`.
    pub(crate) fn new(enabled: bool, host: Weak<dyn SessionHost>) -> Self {
        Self {
            enabled,
            host,
            state: Mutex::new(State::default()),
            copies: AtomicU64::new(0),
            copy_bytes: AtomicU64::new(0),
        }
    }

    /// Markers applied, and the bytes they copied (probe overhead, not in the trace's memory).
    pub(crate) fn copies(&self) -> (u64, u64) {
        (
            self.copies.load(Ordering::Relaxed),
            self.copy_bytes.load(Ordering::Relaxed),
        )
    }

    /// The tracing layer opened module span `span` for an enter of tracing span `tracing_id`:
    /// records the call and pushes its frame (only while backward spans are on).
    fn forward_call_entered(
        self: &Arc<Self>,
        tracing_id: u64,
        span: u64,
        name: &str,
        module_kind: Option<&str>,
    ) {
        if !self.enabled {
            return;
        }
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let module_path = host.span_info(span).and_then(|i| i.module_path);
        let mut state = lock(&self.state);
        let generation = state.generation;
        let parent = call::innermost_call(host.uid())
            .filter(|c| c.generation == generation)
            .map(|c| c.index);
        let call = Arc::new(ModuleCall {
            index: state.calls.len(),
            generation,
            owner: Arc::downgrade(self) as Weak<dyn CallOwner>,
            forward_span: span,
            name: name.to_string(),
            module_path,
            module_kind: module_kind.map(str::to_string),
            parent,
            marks: Mutex::default(),
        });
        state.calls.push(Arc::clone(&call));
        drop(state);
        call::push(host.uid(), span, tracing_id, call);
    }

    /// A marker's `bwd` ran: feeds the tracker and opens or closes spans.
    fn on_marker(&self, call: &ModuleCall, boundary: Boundary) {
        let Some(host) = self.host.upgrade() else {
            return;
        };
        if !host.is_capturing() {
            return;
        }
        let mut state = lock(&self.state);
        if call.generation != state.generation {
            return;
        }
        if state.tracker.is_none() {
            let facts = state
                .calls
                .iter()
                .map(|c| {
                    let marks = c.marks();
                    CallFacts {
                        parent: c.parent,
                        has_span: marks.output,
                        inputs: marks.inputs,
                    }
                })
                .collect();
            state.tracker = Some(Tracker::new(facts, true));
        }
        let event = match boundary {
            Boundary::Output => Event::Enter(call.index),
            Boundary::Input => Event::InputDone(call.index),
        };
        feed(&*host, &mut state, event);
    }

    /// The backward call returned (`exact`) or a later point was reached (the optimizer pass,
    /// the step's end): closes every open backward span and starts a new call table. Does
    /// nothing before the first marker of a backward was reached (the forward pass's calls are
    /// kept for it).
    fn end(&self, exact: bool) {
        if !self.enabled {
            return;
        }
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let mut state = lock(&self.state);
        let Some(tracker) = state.tracker.as_mut() else {
            return;
        };
        tracker.set_end_exact(exact);
        feed(&*host, &mut state, Event::End);
        reset(&mut state);
    }

    /// The captured step ended: closes what is open and forgets every call.
    fn end_of_capture(&self) {
        if !self.enabled {
            return;
        }
        self.end(false);
        let mut state = lock(&self.state);
        reset(&mut state);
        state.markers_in_step = 0;
    }
}

/// The plug-in side: `Arc<BackwardSpans>` is what the session lists (the module calls keep a
/// `Weak` of it).
pub(crate) struct BackwardPlugin(pub(crate) Arc<BackwardSpans>);

impl CapturePlugin for BackwardPlugin {
    fn on_module_enter(&self, tracing_id: u64, span: u64, name: &str, module_kind: Option<&str>) {
        self.0
            .forward_call_entered(tracing_id, span, name, module_kind);
    }

    fn on_backward_end(&self, exact: bool) {
        self.0.end(exact);
    }

    fn on_step_end(&self) {
        self.0.end_of_capture();
    }
}

impl CallOwner for BackwardSpans {
    fn host(&self) -> Option<Arc<dyn SessionHost>> {
        self.host.upgrade()
    }

    fn marker_reached(&self, call: &ModuleCall, boundary: Boundary) {
        self.on_marker(call, boundary);
    }

    fn marker_applied(&self, copy_bytes: u64) -> bool {
        let first = {
            let mut state = lock(&self.state);
            state.markers_in_step += 1;
            state.markers_in_step == 1
        };
        self.copies.fetch_add(1, Ordering::Relaxed);
        self.copy_bytes.fetch_add(copy_bytes, Ordering::Relaxed);
        first
    }
}

fn reset(state: &mut State) {
    state.calls.clear();
    state.tracker = None;
    state.open.clear();
    state.generation += 1;
}

/// Feeds `event` and carries out the span actions (opening spans on this thread, under its
/// innermost open span: the `backward` pass or an enclosing module's backward span).
fn feed(host: &dyn SessionHost, state: &mut State, event: Event) {
    let Some(mut tracker) = state.tracker.take() else {
        return;
    };
    let mut actions = Vec::new();
    tracker.feed(event, &mut |a| actions.push(a));
    for action in actions {
        match action {
            Action::Open(c) => {
                let Some(call) = state.calls.get(c) else {
                    continue;
                };
                let extras = SpanExtras {
                    module_kind: call.module_kind.clone(),
                    module_path: call.module_path.clone(),
                    forward_span: Some(call.forward_span),
                    ..SpanExtras::default()
                };
                if let Some(open) = host.open_span_with(&call.name, SpanKind::Module, None, extras)
                {
                    state.open.insert(c, open);
                }
            }
            Action::Close(c) => {
                if let Some(open) = state.open.remove(&c) {
                    let reason = tracker.faithfulness(c).reason();
                    host.end_span_inferred(open.id, open.start_ns, reason);
                }
            }
        }
    }
    state.tracker = Some(tracker);
}

/// The call a probed module's forward marks: the module span the tracing layer opened for this
/// enter of `span`, when backward spans are on (`None` otherwise, at the cost of one
/// thread-local read).
pub(crate) fn call_for(span: &tracing::Span) -> Option<Arc<ModuleCall>> {
    let id = span.id()?;
    call::call_of_tracing_span(id.into_u64())
}

/// The tracing layer closed module span `span` of session `uid`: pops its frame.
pub(crate) fn forward_call_exited(uid: u64, span: u64) {
    call::pop(uid, span);
}

/// Marks the module's input `xs` (its backward span closes when the gradient of `xs` is
/// complete). A tensor without a gradient (no op graph, or integer ids) is returned as is.
pub(crate) fn mark_input(call: &Arc<ModuleCall>, xs: &Tensor) -> Tensor {
    mark(call, xs, Boundary::Input)
}

/// Marks the module's output `ys` (its backward span opens when the gradient of `ys` is
/// complete).
pub(crate) fn mark_output(call: &Arc<ModuleCall>, ys: Tensor) -> Tensor {
    mark(call, &ys, Boundary::Output)
}

fn mark(call: &Arc<ModuleCall>, xs: &Tensor, boundary: Boundary) -> Tensor {
    if !xs.track_op() || !xs.dtype().is_float() {
        return xs.clone();
    }
    let Some(owner) = call.owner.upgrade() else {
        return xs.clone();
    };
    let Some(host) = owner.host() else {
        return xs.clone();
    };
    if !host.is_capturing() {
        return xs.clone();
    }
    let marked = {
        // The copy, its storage block and its tensor are the probe's, not the user's.
        let _ignore = trace_alloc::IgnoreAllocs::new();
        xs.apply_op1(Marker {
            call: Arc::clone(call),
            boundary,
        })
    };
    match marked {
        Ok(t) => {
            {
                let _ignore = trace_alloc::IgnoreAllocs::new(); // the probe's own bookkeeping
                let key = crate::storage::bytes::storage_facts(&t).key;
                let bytes =
                    (xs.elem_count() as u64).saturating_mul(xs.dtype().size_in_bytes() as u64);
                let first = owner.marker_applied(bytes);
                let mut keys = lock(&MARKER_STORAGES);
                let keys = keys.get_or_insert_with(HashSet::new);
                if first {
                    keys.clear();
                }
                keys.insert(key);
            }
            let mut marks = lock(&call.marks);
            match boundary {
                Boundary::Input => marks.inputs += 1,
                Boundary::Output => marks.output = true,
            }
            t
        }
        Err(err) => {
            host.record_error(ProbeError::Candle {
                context: "applying a backward-span marker",
                source: err,
            });
            xs.clone()
        }
    }
}
