//! Hierarchy checks: one root, one measured span, closed spans, known parents, children inside
//! their parents, no cycles, ends that fit in u64, siblings that do not overlap, spans that
//! recorded no duration but hold timed children. O(S log S).

use trace_format::{at, duration};
use trace_schema::TraceDocument;

use super::issues::{CaptureState, HealthCode, IssueLocation, Issues, Severity};
use crate::index::{recorded_end, TraceIndex};

pub(super) fn check(
    doc: &TraceDocument,
    index: &TraceIndex,
    state: CaptureState,
    origin_ns: u64,
    issues: &mut Issues,
) {
    let t = |ns: u64| at(ns, origin_ns);
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
        let here = || IssueLocation {
            line: Some(span.line as u64),
            node: Some(id.to_string()),
            ..IssueLocation::default()
        };
        if span.duration_ns.is_none() {
            issues.push(
                open_severity,
                HealthCode::OpenSpan,
                format!("span {id} ({}) was never closed", doc.str(span.name)),
                here(),
            );
        }
        if span
            .duration_ns
            .is_some_and(|d| span.start_ns.checked_add(d).is_none())
        {
            issues.error(
                HealthCode::TimeOverflow,
                format!(
                    "span {id} starts at {} ns and lasts {} ns: it would end past 2^64 ns, an impossible duration",
                    span.start_ns,
                    span.duration_ns.unwrap_or(0)
                ),
                here(),
            );
        }
        if index.parent_unknown[i] {
            let parent = span.parent.map(|p| doc.str(p)).unwrap_or_default();
            issues.error(
                HealthCode::UnknownParent,
                format!("span {id} names unknown parent {parent}"),
                here(),
            );
        }
        if index.in_cycle[i] {
            issues.error(
                HealthCode::SpanCycle,
                format!("span {id} is on or below a parent cycle"),
                here(),
            );
            continue;
        }
        let Some(p) = index.parent[i] else {
            continue;
        };
        let parent = &doc.spans[p as usize];
        let pid = doc.str(parent.id);
        let parent_end = recorded_end(parent);
        let outside =
            span.start_ns < parent.start_ns || parent_end.is_some_and(|e| span.start_ns > e);
        if outside {
            issues.error(
                HealthCode::ChildOutsideParent,
                format!(
                    "span {id} starts at {}, outside its parent {pid} [{}, {}]",
                    t(span.start_ns),
                    t(parent.start_ns),
                    parent_end.map_or("open".to_string(), t)
                ),
                here(),
            );
        } else if let Some(pe) = parent_end {
            match span.duration_ns.map(|d| span.start_ns.saturating_add(d)) {
                Some(end) if end > pe => issues.warning(
                    HealthCode::ChildOutlivesParent,
                    format!(
                        "span {id} ends at {}, after its closed parent {pid} ended at {}; its time is clipped to the parent",
                        t(end),
                        t(pe)
                    ),
                    here(),
                ),
                None => issues.warning(
                    HealthCode::ChildOutlivesParent,
                    format!("span {id} is still open after its parent {pid} closed at {}", t(pe)),
                    here(),
                ),
                _ => {}
            }
        }
    }
    siblings_and_unrecorded_durations(doc, index, &t, issues);
}

/// Overlapping children of one span (one warning per parent) and spans closed with a duration
/// of 0 whose children or ops take time.
fn siblings_and_unrecorded_durations(
    doc: &TraceDocument,
    index: &TraceIndex,
    t: &dyn Fn(u64) -> String,
    issues: &mut Issues,
) {
    let end = |i: usize| {
        let s = &doc.spans[i];
        match s.duration_ns {
            None => Some(u64::MAX), // open: runs to the end
            Some(d) => s.start_ns.checked_add(d),
        }
    };
    for (p, children) in index.children.iter().enumerate() {
        // children are sorted by start: an overlap is a start before the latest end so far
        let mut latest: Option<(usize, u64)> = None;
        for &c in children {
            let c = c as usize;
            let Some(e) = end(c) else { continue };
            if let Some((prev, pe)) = latest {
                if doc.spans[c].start_ns < pe {
                    let (a, b) = (doc.str(doc.spans[prev].id), doc.str(doc.spans[c].id));
                    issues.warning(
                        HealthCode::OverlappingSiblings,
                        format!(
                            "spans {a} and {b}, children of {}, overlap in time ({b} starts at {}, before {a} ends): siblings on one thread cannot overlap, so their time is counted once (the union of their intervals)",
                            doc.str(doc.spans[p].id),
                            t(doc.spans[c].start_ns)
                        ),
                        IssueLocation::node(b),
                    );
                    break;
                }
            }
            if latest.is_none_or(|(_, pe)| e > pe) {
                latest = Some((c, e));
            }
        }
    }
    for (i, span) in doc.spans.iter().enumerate() {
        if span.duration_ns != Some(0) || index.in_cycle[i] {
            continue;
        }
        let child_ends = index.children[i]
            .iter()
            .filter_map(|&c| end(c as usize).filter(|&e| e != u64::MAX));
        let op_ends = index.ops_by_span[i].iter().filter_map(|&o| {
            let op = &doc.ops[o as usize];
            op.timestamp_ns.checked_add(op.duration_ns)
        });
        let last = child_ends.chain(op_ends).max();
        if let Some(covered) = last
            .map(|l| l.saturating_sub(span.start_ns))
            .filter(|&c| c > 0)
        {
            let id = doc.str(span.id);
            issues.warning(
                HealthCode::SpanShorterThanChildren,
                format!(
                    "span {id} recorded a duration of 0 ns but its children and ops cover {}: its time is taken from them",
                    duration(covered)
                ),
                IssueLocation::node(id),
            );
        }
    }
}
