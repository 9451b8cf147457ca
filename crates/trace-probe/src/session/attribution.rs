//! The span log that attributes memory to spans: what each span is (its parent, pass, module
//! path, thread) and, per thread, every change of the innermost open span with its session time
//! and real time. The storage capture asks it which span was open on a thread at a time.

use std::collections::HashMap;
use std::sync::Mutex;

use trace_wire::{ExecutionStep as Pass, SpanKind};

use crate::writer::lock;

/// What the probe knows about a span, for attribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpanInfo {
    /// Span number (`s<n>` on the wire).
    pub id: u64,
    /// Parent span number.
    pub parent: Option<u64>,
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: SpanKind,
    /// Pass, inherited from the nearest ancestor that has one.
    pub pass: Option<Pass>,
    /// Module path (modules only).
    pub module_path: Option<String>,
    /// Start, session ns.
    pub start_ns: u64,
    /// `thread_key` of the thread that opened it.
    pub thread: u64,
}

/// One entry of a thread's span-change log (see [`SpanLog::span_change_at_real`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanChange {
    /// Index in the thread's log.
    pub(crate) index: usize,
    /// Session ns of the change.
    pub(crate) session_ns: u64,
    /// Innermost open span after the change (0 = none).
    pub(crate) span: u64,
}

/// A change of a thread's innermost open span.
#[derive(Debug, Clone, Copy)]
struct Change {
    session_ns: u64,
    /// Innermost open span after the change (0 = none).
    span: u64,
    /// Real time in ns since the process clock base.
    real_ns: u64,
}

#[derive(Debug, Default)]
struct Tables {
    /// Index `n - 1` holds span `n`.
    info: Vec<Option<SpanInfo>>,
    /// Per thread, in time order.
    changes: HashMap<u64, Vec<Change>>,
}

/// The span log of one session.
#[derive(Debug, Default)]
pub(crate) struct SpanLog {
    tables: Mutex<Tables>,
}

/// What a new span inherits from its parent.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParentContext {
    /// The parent's pass (own or inherited).
    pub(crate) pass: Option<Pass>,
    /// The parent's module path, when the parent is a module span.
    pub(crate) module_path: Option<String>,
}

impl SpanLog {
    /// Records that `info` opened at real time `real_ns` on its thread.
    pub(crate) fn opened(&self, info: SpanInfo, real_ns: u64) {
        let mut t = lock(&self.tables);
        t.changes.entry(info.thread).or_default().push(Change {
            session_ns: info.start_ns,
            span: info.id,
            real_ns,
        });
        let idx = (info.id as usize).saturating_sub(1);
        if t.info.len() <= idx {
            t.info.resize(idx + 1, None);
        }
        t.info[idx] = Some(info);
    }

    /// Records that on `thread` the innermost span became `innermost_after` (0 = none) at
    /// session time `end_ns` / real time `real_ns` (a span closed).
    pub(crate) fn closed(&self, thread: u64, innermost_after: u64, end_ns: u64, real_ns: u64) {
        lock(&self.tables)
            .changes
            .entry(thread)
            .or_default()
            .push(Change {
                session_ns: end_ns,
                span: innermost_after,
                real_ns,
            });
    }

    /// Facts about span `span`.
    pub(crate) fn span_info(&self, span: u64) -> Option<SpanInfo> {
        let idx = usize::try_from(span).ok()?.checked_sub(1)?;
        lock(&self.tables).info.get(idx)?.clone()
    }

    /// The pass of span `span` (own or inherited), without copying its facts.
    pub(crate) fn span_pass(&self, span: u64) -> Option<Pass> {
        let idx = usize::try_from(span).ok()?.checked_sub(1)?;
        lock(&self.tables).info.get(idx)?.as_ref()?.pass
    }

    /// The pass and module path a child of `parent` inherits.
    pub(crate) fn parent_context(&self, parent: u64) -> ParentContext {
        let t = lock(&self.tables);
        let info = usize::try_from(parent)
            .ok()
            .and_then(|p| p.checked_sub(1))
            .and_then(|i| t.info.get(i))
            .and_then(Option::as_ref);
        ParentContext {
            pass: info.and_then(|i| i.pass),
            module_path: info
                .filter(|i| i.kind == SpanKind::Module)
                .and_then(|i| i.module_path.clone()),
        }
    }

    /// Innermost open span of `thread` at session time `ts_ns` (`None`: none open).
    pub(crate) fn span_at(&self, thread: u64, ts_ns: u64) -> Option<u64> {
        let t = lock(&self.tables);
        let changes = t.changes.get(&thread)?;
        let idx = changes.partition_point(|c| c.session_ns <= ts_ns);
        let span = changes.get(idx.checked_sub(1)?)?.span;
        (span != 0).then_some(span)
    }

    /// The last span change of `thread` at or before real time `real_ns` (ns since the process
    /// clock base): its index in the thread's log, session ns and innermost span after it (0 =
    /// none). `None` when the thread logged no change by then.
    pub(crate) fn span_change_at_real(&self, thread: u64, real_ns: u64) -> Option<SpanChange> {
        let t = lock(&self.tables);
        let changes = t.changes.get(&thread)?;
        let index = changes
            .partition_point(|c| c.real_ns <= real_ns)
            .checked_sub(1)?;
        let c = changes[index];
        Some(SpanChange {
            index,
            session_ns: c.session_ns,
            span: c.span,
        })
    }
}
