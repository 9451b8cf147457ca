//! Hierarchy checks: one root, one measured span, closed spans, known parents, children inside
//! their parents, no cycles. O(S).

use trace_schema::TraceDocument;

use super::{CaptureState, HealthCode, IssueLocation, Issues, Severity};
use crate::index::{recorded_end, TraceIndex, NONE};

pub(super) fn check(
    doc: &TraceDocument,
    index: &TraceIndex,
    state: CaptureState,
    issues: &mut Issues,
) {
    let roots = doc.spans.iter().filter(|s| s.parent.is_none()).count();
    if roots != 1 {
        issues.error(
            HealthCode::RootCount,
            format!("expected exactly one root span, found {roots}"),
            IssueLocation::document(),
        );
    }
    if !state.ended_early() {
        let measured = doc.spans.iter().filter(|s| s.measured).count();
        if measured != 1 {
            issues.error(
                HealthCode::MeasurementCount,
                format!("expected exactly one measured span, found {measured}"),
                IssueLocation::document(),
            );
        }
    }
    let open_severity = if state.ended_early() {
        Severity::Warning
    } else {
        Severity::Error
    };
    for (i, span) in doc.spans.iter().enumerate() {
        let id = doc.str(span.id);
        let at = || IssueLocation {
            line: Some(span.line as u64),
            node: Some(id.to_string()),
            ..IssueLocation::default()
        };
        if span.duration_ns.is_none() {
            issues.push(
                open_severity,
                HealthCode::OpenSpan,
                format!("span {id} ({}) was never closed", doc.str(span.name)),
                at(),
            );
        }
        if index.parent_unknown[i] {
            let parent = span.parent.map(|p| doc.str(p)).unwrap_or_default();
            issues.error(
                HealthCode::UnknownParent,
                format!("span {id} names unknown parent {parent}"),
                at(),
            );
        }
        if index.in_cycle[i] {
            issues.error(
                HealthCode::SpanCycle,
                format!("span {id} is on or below a parent cycle"),
                at(),
            );
            continue;
        }
        let p = index.parent[i];
        if p == NONE {
            continue;
        }
        let parent = &doc.spans[p as usize];
        let pid = doc.str(parent.id);
        let parent_end = recorded_end(parent);
        let outside =
            span.start_ns < parent.start_ns || parent_end.is_some_and(|e| span.start_ns > e);
        if outside {
            issues.error(
                HealthCode::ChildOutsideParent,
                format!(
                    "span {id} starts at {} ns, outside its parent {pid} [{}, {}]",
                    span.start_ns,
                    parent.start_ns,
                    parent_end.map_or("open".to_string(), |e| e.to_string())
                ),
                at(),
            );
        } else if let Some(pe) = parent_end {
            match span.duration_ns.map(|d| span.start_ns.saturating_add(d)) {
                Some(end) if end > pe => issues.warning(
                    HealthCode::ChildOutlivesParent,
                    format!(
                        "span {id} ends at {end} ns, after its closed parent {pid} ended at {pe} ns; its time is clipped to the parent"
                    ),
                    at(),
                ),
                None => issues.warning(
                    HealthCode::ChildOutlivesParent,
                    format!("span {id} is still open after its parent {pid} closed at {pe} ns"),
                    at(),
                ),
                _ => {}
            }
        }
    }
}
