//! Opening and closing spans. A new span's parent is the innermost open span of the same
//! session on the same thread, or the root (`s1`) when the thread has none, so the trace
//! always has exactly one root. Its pass is its own or its parent's; a module span's path is
//! the enclosing module span's path plus `/name`.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use trace_wire::{ExecutionStep as Pass, SpanEndEvent, SpanKind, SpanStartEvent, TraceEvent};

use super::open_span::{OpenSpan, SpanExtras};
use super::{stack, Inner, TraceSession};
use crate::session::attribution::SpanInfo;
use crate::session::plugin::{span_wire_id, thread_key, ROOT_SPAN};

/// Guard of one span; inactive outside the captured step. The span ends when it drops.
/// `!Send`: a span ends on the thread that opened it.
#[must_use = "the span ends when this guard drops"]
#[derive(Debug)]
pub struct SpanGuard {
    inner: Option<Arc<Inner>>,
    open: OpenSpan,
    _not_send: PhantomData<*const ()>,
}

impl SpanGuard {
    pub(crate) fn inactive() -> Self {
        Self {
            inner: None,
            open: OpenSpan { id: 0, start_ns: 0 },
            _not_send: PhantomData,
        }
    }

    pub(crate) fn active(inner: &Arc<Inner>, open: OpenSpan) -> Self {
        Self {
            inner: Some(Arc::clone(inner)),
            open,
            _not_send: PhantomData,
        }
    }

    /// The wire id (`s<n>`) of an active span.
    pub fn id(&self) -> Option<String> {
        self.inner.as_ref().map(|_| span_wire_id(self.open.id))
    }
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.end_span(self.open.id, self.open.start_ns);
        }
    }
}

impl TraceSession {
    /// Opens a span of `kind` named `name` under the innermost open span of this thread (one
    /// atomic load outside the captured step). For a pass use [`TraceSession::pass`].
    pub fn span(&self, name: &str, kind: SpanKind) -> SpanGuard {
        if !self.is_capturing() {
            return SpanGuard::inactive();
        }
        let inner = self.cur();
        match inner.open_span_raw(name, kind, None, None) {
            Some(open) => SpanGuard::active(&inner, open),
            None => SpanGuard::inactive(),
        }
    }
}

impl Inner {
    /// Opens a module span (the tracing layer's); the path extends the enclosing module span's.
    /// `kind` is the layer kind when `name` is the instance's (a probed constructor's
    /// `VarBuilder` path).
    pub(crate) fn open_module_span_raw(
        &self,
        name: &str,
        kind: Option<&str>,
        instance_key: Option<u64>,
    ) -> Option<OpenSpan> {
        let key = instance_key.map(|k| self.ids.instance_wire_key(k));
        let open = self.open_span_with(
            name,
            SpanKind::Module,
            None,
            SpanExtras {
                instance_key: key,
                module_kind: kind.map(str::to_string),
                ..SpanExtras::default()
            },
        );
        if open.is_some() {
            self.module_spans.fetch_add(1, Ordering::Relaxed);
        }
        open
    }

    /// The name of module instance `instance` (its tracing span id) called `name`, opened under
    /// this thread's innermost open span: `name` for the first instance of that name there,
    /// `name#2`, `name#3`, … for other instances in the order they are first called (two
    /// candle-transformers `with_tracing` linears of one attention block both read `linear`).
    /// The same instance called again keeps its name.
    pub(crate) fn module_instance_name(&self, name: &str, instance: u64) -> String {
        let parent = stack::innermost(self.uid).unwrap_or(ROOT_SPAN);
        let mut seen = crate::writer::lock(&self.module_instances);
        let list = seen.entry((parent, name.to_string())).or_default();
        let ordinal = match list.iter().position(|&i| i == instance) {
            Some(p) => p + 1,
            None => {
                list.push(instance);
                list.len()
            }
        };
        if ordinal == 1 {
            name.to_string()
        } else {
            format!("{name}#{ordinal}")
        }
    }

    /// Opens a span without a guard (the caller must call [`Inner::end_span`]).
    pub(crate) fn open_span_raw(
        &self,
        name: &str,
        kind: SpanKind,
        pass: Option<Pass>,
        instance_key: Option<String>,
    ) -> Option<OpenSpan> {
        self.open_span_with(
            name,
            kind,
            pass,
            SpanExtras {
                instance_key,
                ..SpanExtras::default()
            },
        )
    }

    /// Opens a span with the optional fields of `span_start`.
    pub(crate) fn open_span_with(
        &self,
        name: &str,
        kind: SpanKind,
        pass: Option<Pass>,
        extras: SpanExtras,
    ) -> Option<OpenSpan> {
        if !self.is_capturing() {
            return None;
        }
        let SpanExtras {
            instance_key,
            module_kind,
            module_path,
            forward_span,
            step_index,
        } = extras;
        let id = self.next_span.fetch_add(1, Ordering::Relaxed);
        let parent = stack::innermost(self.uid).unwrap_or(ROOT_SPAN);
        let inherited = self.spans.parent_context(parent);
        let module_path = module_path.or_else(|| {
            (kind == SpanKind::Module).then(|| match &inherited.module_path {
                Some(p) => format!("{p}/{name}"),
                None => name.to_string(),
            })
        });
        let (start_ns, start_real) = self.clock.now_with_process_ns();
        self.emit(TraceEvent::SpanStart(SpanStartEvent {
            id: span_wire_id(id),
            parent_id: Some(span_wire_id(parent)),
            name: name.to_string(),
            start_ns,
            span_kind: kind,
            measured: false,
            step: pass,
            module_path: module_path.clone(),
            instance_key,
            module_kind,
            forward_span_id: forward_span.map(span_wire_id),
            step_index,
        }));
        self.spans.opened(
            SpanInfo {
                id,
                parent: Some(parent),
                name: name.to_string(),
                kind,
                pass: pass.or(inherited.pass),
                module_path,
                start_ns,
                thread: thread_key(),
            },
            start_real,
        );
        stack::push(self.uid, id);
        Some(OpenSpan { id, start_ns })
    }

    /// Closes a span opened by [`Inner::open_span_raw`]; outside the capture it only forgets it.
    pub(crate) fn end_span(&self, id: u64, start_ns: u64) {
        self.end_span_inferred(id, start_ns, None);
    }

    /// [`Inner::end_span`], marking the span's extent as inferred when `inferred_reason` is
    /// given (the reason goes to the trace).
    pub(crate) fn end_span_inferred(
        &self,
        id: u64,
        start_ns: u64,
        inferred_reason: Option<String>,
    ) {
        if !self.is_capturing() {
            stack::pop(self.uid, id);
            return;
        }
        if !self.plugins.is_empty() {
            if let Some(info) = self.spans.span_info(id) {
                for plugin in &self.plugins {
                    plugin.on_span_end(&self.plugin_context(), &info);
                }
            }
        }
        let (end_ns, end_real) = self.clock.now_with_process_ns();
        self.emit(TraceEvent::SpanEnd(SpanEndEvent {
            id: span_wire_id(id),
            duration_ns: end_ns.saturating_sub(start_ns),
            inferred: inferred_reason.is_some(),
            inferred_reason,
        }));
        self.writer.flush_async();
        self.log_close(id, end_ns, end_real);
        stack::pop(self.uid, id);
    }

    /// Logs in the span log that `span` closed on this thread.
    pub(super) fn log_close(&self, span: u64, end_ns: u64, real_ns: u64) {
        let after = stack::innermost_without(self.uid, span);
        self.spans.closed(thread_key(), after, end_ns, real_ns);
    }

    /// The innermost open span of this thread for recording a fact (root when none).
    pub(crate) fn current_span(&self) -> u64 {
        stack::innermost(self.uid).unwrap_or(ROOT_SPAN)
    }

    /// The pass of the innermost open span of this thread.
    pub(crate) fn current_pass(&self) -> Option<Pass> {
        self.spans
            .span_info(self.current_span())
            .and_then(|i| i.pass)
    }
}
