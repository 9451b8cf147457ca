//! Module calls of the captured forward pass: one per module span the `tracing` layer opens
//! while backward spans are on, kept on a per-thread frame stack so that the module's own code
//! (the probed constructors' [`crate::nn::Traced`]) can mark its input and output.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Weak};

use crate::session::host::SessionHost;
use crate::writer::lock;

/// Which boundary of a module call a marker sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Boundary {
    /// On an input: its `bwd` runs once the input's gradient is complete (the module's
    /// backward is done with this input).
    Input,
    /// On the output: its `bwd` runs once the output's gradient is complete (the module's
    /// backward begins).
    Output,
}

/// What a call's markers report to: the backward spans of the session that opened the call.
pub(crate) trait CallOwner: Send + Sync {
    /// The session, while it lives.
    fn host(&self) -> Option<Arc<dyn SessionHost>>;
    /// A marker's `bwd` ran: backprop reached `boundary` of `call`.
    fn marker_reached(&self, call: &ModuleCall, boundary: Boundary);
    /// A marker was applied in the captured step, copying `copy_bytes`: counts it and returns
    /// whether it is the step's first.
    fn marker_applied(&self, copy_bytes: u64) -> bool;
}

/// One forward call of a module (one enter of its module span).
#[derive(Debug)]
pub(crate) struct ModuleCall {
    /// Index in the session's call table.
    pub(crate) index: usize,
    /// Which forward pass of the step (the call table's generation) it belongs to.
    pub(crate) generation: u64,
    /// The backward spans of the session that opened its forward span.
    pub(crate) owner: Weak<dyn CallOwner>,
    /// Its forward module span (trace span number).
    pub(crate) forward_span: u64,
    /// Span name (the instance name, e.g. `fc1`, or the kind).
    pub(crate) name: String,
    /// Module path of the forward span.
    pub(crate) module_path: Option<String>,
    /// Module kind (e.g. `linear`), when the name is the instance's.
    pub(crate) module_kind: Option<String>,
    /// The enclosing module call in the forward pass (its index).
    pub(crate) parent: Option<usize>,
    /// What the forward pass marked.
    pub(crate) marks: Mutex<Marks>,
}

/// What the forward pass marked for a call.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Marks {
    /// Its output carries a marker (its backward span opens there).
    pub(crate) output: bool,
    /// Inputs that carry a marker (each closes part of its backward span).
    pub(crate) inputs: u32,
}

impl ModuleCall {
    /// A copy of the marks.
    pub(crate) fn marks(&self) -> Marks {
        *lock(&self.marks)
    }
}

/// An entered module span of this thread with its call.
struct Frame {
    session_uid: u64,
    span: u64,
    tracing_id: u64,
    call: Arc<ModuleCall>,
}

thread_local! {
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
}

/// The innermost call of session `uid` on this thread.
pub(crate) fn innermost_call(uid: u64) -> Option<Arc<ModuleCall>> {
    FRAMES
        .try_with(|f| {
            f.try_borrow().ok().and_then(|f| {
                f.iter()
                    .rev()
                    .find(|fr| fr.session_uid == uid)
                    .map(|fr| Arc::clone(&fr.call))
            })
        })
        .ok()
        .flatten()
}

/// The call of the innermost frame on this thread when it is an enter of tracing span
/// `tracing_id` (`None` otherwise: that span opened no module span).
pub(crate) fn call_of_tracing_span(tracing_id: u64) -> Option<Arc<ModuleCall>> {
    FRAMES
        .try_with(|f| {
            f.try_borrow().ok().and_then(|f| {
                f.last()
                    .filter(|fr| fr.tracing_id == tracing_id)
                    .map(|fr| Arc::clone(&fr.call))
            })
        })
        .ok()
        .flatten()
}

/// Pushes the call of a module span just opened on this thread.
pub(crate) fn push(session_uid: u64, span: u64, tracing_id: u64, call: Arc<ModuleCall>) {
    let _ = FRAMES.try_with(|f| {
        if let Ok(mut f) = f.try_borrow_mut() {
            f.push(Frame {
                session_uid,
                span,
                tracing_id,
                call,
            });
        }
    });
}

/// Pops the frame of module span `span` of session `uid` (wherever it is on the stack).
pub(crate) fn pop(session_uid: u64, span: u64) {
    let _ = FRAMES.try_with(|f| {
        if let Ok(mut f) = f.try_borrow_mut() {
            if let Some(pos) = f
                .iter()
                .rposition(|fr| fr.session_uid == session_uid && fr.span == span)
            {
                f.remove(pos);
            }
        }
    });
}
