//! Reference checks (every op, tensor, stats, memory and device event names a known span; ops
//! inside their spans and in time order; non-empty samples and intervals; host-timed device
//! ops) and edge checks. O(n) with hash lookups.

use std::collections::{BTreeMap, HashSet};

use trace_schema::{EdgeRecord, MemoryItem, Sym, TimingMode, TraceDocument};

use super::issues::{HealthCode, IssueLocation, Issues};
use crate::index::{recorded_end, TraceIndex, NONE};

fn known_span(doc: &TraceDocument, id: &str) -> bool {
    doc.sym(id).and_then(|s| doc.span_index(s)).is_some()
}

/// Memory events naming a span that does not exist, and memory events outside the interval of
/// the span they name: gathered while the memory replay runs (any order: counts, and the
/// first event in file order by its index).
#[derive(Debug, Default)]
pub(crate) struct MemorySpans {
    /// Per unknown span: events naming it, and `(index, time)` of the first in file order.
    unknown: BTreeMap<Sym, (u64, (u32, u64))>,
    /// Per span: events outside, and `(index, time)` of the first of them in file order.
    outside: BTreeMap<Sym, (u64, (u32, u64))>,
}

/// Counts one more event at `(index, time)` and keeps the first in file order.
fn count_first(e: &mut (u64, (u32, u64)), index: u32, timestamp_ns: u64) {
    e.0 += 1;
    if index < e.1 .0 {
        e.1 = (index, timestamp_ns);
    }
}

impl MemorySpans {
    /// Takes one memory event into account.
    pub fn observe(&mut self, doc: &TraceDocument, m: &MemoryItem<'_>) {
        let Some(s) = m.span else { return };
        let first = (0, (m.index, m.timestamp_ns));
        let Some(span) = doc.span(s) else {
            let e = self.unknown.entry(s).or_insert(first);
            count_first(e, m.index, m.timestamp_ns);
            return;
        };
        let after_end = span.end_ns().is_some_and(|end| m.timestamp_ns > end);
        if m.timestamp_ns < span.start_ns || after_end {
            let e = self.outside.entry(span.id).or_insert(first);
            count_first(e, m.index, m.timestamp_ns);
        }
    }
}

pub(super) fn check(
    doc: &TraceDocument,
    index: &TraceIndex,
    memory_spans: &MemorySpans,
    origin_ns: u64,
    issues: &mut Issues,
) {
    op_references(doc, index, origin_ns, issues);
    record_references(doc, issues);
    memory_span_references(doc, memory_spans, origin_ns, issues);
    device_memory_samples(doc, origin_ns, issues);
    host_timed_device_ops(doc, issues);
}

/// Each op's span exists and holds it in time; the ops of a span are in time order.
fn op_references(doc: &TraceDocument, index: &TraceIndex, origin_ns: u64, issues: &mut Issues) {
    let t = |ns: u64| trace_format::at(ns, origin_ns);
    for (i, op) in doc.ops.iter().enumerate() {
        let node = || index.op_node_id(doc, i);
        let si = index.op_span[i];
        if si == NONE {
            issues.error(
                HealthCode::UnknownSpan,
                format!(
                    "op {} names unknown span {}",
                    doc.str(op.op_name),
                    doc.str(op.span)
                ),
                IssueLocation::node(node()),
            );
            continue;
        }
        let span = &doc.spans[si as usize];
        let Some(op_end) = op.timestamp_ns.checked_add(op.duration_ns) else {
            let node = node();
            issues.error(
                HealthCode::TimeOverflow,
                format!(
                    "op {node} ({}) starts at {} ns and lasts {} ns: it would end past 2^64 ns, an impossible duration",
                    doc.str(op.op_name),
                    op.timestamp_ns,
                    op.duration_ns
                ),
                IssueLocation::node(node),
            );
            continue;
        };
        let span_end = recorded_end(span);
        if op.timestamp_ns < span.start_ns || span_end.is_some_and(|e| op.timestamp_ns > e) {
            let node = node();
            issues.error(
                HealthCode::OperationOutsideSpan,
                format!(
                    "op {node} ({}) starts at {}, outside its span {} starting at {}",
                    doc.str(op.op_name),
                    t(op.timestamp_ns),
                    doc.str(span.id),
                    t(span.start_ns)
                ),
                IssueLocation::node(node),
            );
        } else if let Some(e) = span_end.filter(|&e| op_end > e) {
            let node = node();
            issues.warning(
                HealthCode::OperationOutlivesSpan,
                format!(
                    "op {node} ({}) ends at {}, after its closed span {} ended at {}; its time is clipped to the span",
                    doc.str(op.op_name),
                    t(op_end),
                    doc.str(span.id),
                    t(e)
                ),
                IssueLocation::node(node),
            );
        }
    }
    for (si, ops) in index.ops_by_span.iter().enumerate() {
        if let Some(w) = ops
            .windows(2)
            .position(|w| doc.ops[w[1] as usize].timestamp_ns < doc.ops[w[0] as usize].timestamp_ns)
        {
            let node = index.op_node_id(doc, ops[w + 1] as usize);
            issues.warning(
                HealthCode::OperationsOutOfOrder,
                format!(
                    "ops of span {} are out of time order: {node} starts before the op recorded before it",
                    doc.str(doc.spans[si].id)
                ),
                IssueLocation::node(node),
            );
        }
    }
}

/// The spans named by tensors, tensor statistics and device intervals exist; no device
/// interval is empty.
fn record_references(doc: &TraceDocument, issues: &mut Issues) {
    for t in &doc.tensors {
        if doc.span_index(t.span).is_none() {
            issues.error(
                HealthCode::UnknownSpan,
                format!(
                    "tensor {} names unknown span {}",
                    doc.str(t.tensor_id),
                    doc.str(t.span)
                ),
                IssueLocation::node(format!("tensor/{}", doc.str(t.tensor_id))),
            );
        }
    }
    for s in &doc.tensor_stats {
        if !known_span(doc, &s.span_id) {
            issues.error(
                HealthCode::UnknownSpan,
                format!("tensor_stats {} names unknown span {}", s.label, s.span_id),
                IssueLocation::document(),
            );
        }
    }
    for d in &doc.device_intervals {
        if !known_span(doc, &d.span_id) {
            issues.error(
                HealthCode::UnknownSpan,
                format!(
                    "device interval on {} names unknown span {}",
                    d.device, d.span_id
                ),
                IssueLocation::document(),
            );
        }
        if d.duration_ns == 0 {
            issues.error(
                HealthCode::EmptyDeviceInterval,
                format!(
                    "device interval of span {} on {} has duration 0",
                    d.span_id, d.device
                ),
                IssueLocation::node(d.span_id.clone()),
            );
        }
    }
}

/// One warning per missing span id (allocator events may name spans that were lost), and
/// memory events at times their span did not run (a clock mix-up or hand-written times).
fn memory_span_references(
    doc: &TraceDocument,
    memory_spans: &MemorySpans,
    origin_ns: u64,
    issues: &mut Issues,
) {
    let t = |ns: u64| trace_format::at(ns, origin_ns);
    let unknown_memory_spans = &memory_spans.unknown;
    let mut unknown: Vec<(&str, (u64, u64))> = unknown_memory_spans
        .iter()
        .map(|(&s, &(n, (_, first_ns)))| (doc.str(s), (n, first_ns)))
        .collect();
    unknown.sort();
    for (span, (n, first_ns)) in unknown {
        issues.warning(
            HealthCode::MemoryUnknownSpan,
            format!("{n} memory event(s) name span {span}, which does not exist (first at {}); they are kept but attributed to no node", t(first_ns)),
            IssueLocation::node(span),
        );
    }
    let mut outside: Vec<(&str, (u64, u64))> = memory_spans
        .outside
        .iter()
        .map(|(&s, &(n, (_, first_ns)))| (doc.str(s), (n, first_ns)))
        .collect();
    outside.sort();
    for (span, (n, first_ns)) in outside {
        issues.warning(
            HealthCode::MemoryOutsideSpan,
            format!("{n} memory event(s) of span {span} lie outside its interval (first at {}); memory figures by time and pass may be wrong", t(first_ns)),
            IssueLocation::node(span),
        );
    }
}

/// Every device memory sample has a field and a plausible capacity.
fn device_memory_samples(doc: &TraceDocument, origin_ns: u64, issues: &mut Issues) {
    let t = |ns: u64| trace_format::at(ns, origin_ns);
    for d in &doc.device_memory {
        let device = doc.str(d.device);
        if d.used_bytes.is_none()
            && d.free_bytes.is_none()
            && d.reserved_bytes.is_none()
            && d.capacity_bytes.is_none()
            && d.resident_bytes.is_none()
        {
            issues.error(
                HealthCode::EmptyDeviceMemorySample,
                format!(
                    "device memory sample on {device} at {} has no field",
                    t(d.timestamp_ns)
                ),
                IssueLocation::document(),
            );
        }
        let problem = match (d.capacity_bytes, d.used_bytes) {
            (Some(0), _) => Some("a capacity of 0 B".to_string()),
            (Some(c), Some(u)) if u > c => Some(format!(
                "{} used, more than its capacity of {}",
                trace_format::bytes(u),
                trace_format::bytes(c)
            )),
            _ => None,
        };
        if let Some(problem) = problem {
            issues.warning(
                HealthCode::ImplausibleDeviceMemorySample,
                format!(
                    "device memory sample on {device} at {} reports {problem}: the sample cannot be right, so physical figures of {device} are doubtful",
                    t(d.timestamp_ns)
                ),
                IssueLocation::document(),
            );
        }
    }
}

/// Ops on a non-CPU device timed on the host without synchronization measure launches.
fn host_timed_device_ops(doc: &TraceDocument, issues: &mut Issues) {
    if doc.meta.timing_mode.unwrap_or_default() != TimingMode::Host {
        return;
    }
    let mut per_device: BTreeMap<Sym, u64> = BTreeMap::new();
    for op in &doc.ops {
        *per_device.entry(op.device).or_default() += 1;
    }
    let mut devices: Vec<(&str, u64)> = per_device
        .into_iter()
        .map(|(d, n)| (doc.str(d), n))
        .filter(|(d, _)| !d.is_empty() && !trace_schema::Device::parse(d).is_host())
        .collect();
    devices.sort();
    for (device, n) in devices {
        let outer = if doc.meta.measured_region_device_synchronized {
            " (only the measured region is synchronized)"
        } else {
            ""
        };
        issues.warning(
            HealthCode::HostTimedDeviceOps,
            format!("{n} ops on {device} were timed on the host without synchronization{outer}: their durations are launch times, not device execution times"),
            IssueLocation::document(),
        );
    }
}

pub(super) fn check_edges(doc: &TraceDocument, index: &TraceIndex, issues: &mut Issues) {
    let mut known_tensors: HashSet<Sym> = HashSet::with_capacity(doc.tensors.len());
    let mut tensors_built = false;
    for edge in &doc.edges {
        match *edge {
            EdgeRecord::Call {
                from_span,
                to_span,
                host_duration_ns,
            } => {
                let (from, to) = (doc.span_index(from_span), doc.span_index(to_span));
                let (fs, ts) = (doc.str(from_span), doc.str(to_span));
                let (Some(fi), Some(ti)) = (from, to) else {
                    issues.error(
                        HealthCode::UnknownCallEdgeSpan,
                        format!("call edge {fs} -> {ts} names an unknown span"),
                        IssueLocation::node(if from.is_none() { fs } else { ts }),
                    );
                    continue;
                };
                if index.parent[ti] != Some(fi as u32) {
                    issues.error(
                        HealthCode::CallEdgeHierarchyMismatch,
                        format!("call edge {fs} -> {ts}: the parent of {ts} is not {fs}"),
                        IssueLocation::node(ts),
                    );
                }
                if let Some(d) = doc.spans[ti].duration_ns.filter(|&d| d != host_duration_ns) {
                    issues.error(
                        HealthCode::CallEdgeDurationMismatch,
                        format!("call edge {fs} -> {ts} says {host_duration_ns} ns but span {ts} lasted {d} ns"),
                        IssueLocation::node(ts),
                    );
                }
            }
            EdgeRecord::Data {
                from_tensor,
                to_tensor,
            } => {
                let (f, t) = (doc.str(from_tensor), doc.str(to_tensor));
                if f.trim().is_empty() || t.trim().is_empty() {
                    issues.error(
                        HealthCode::EmptyDataEdgeEndpoint,
                        format!("data edge '{f}' -> '{t}' has an empty endpoint"),
                        IssueLocation::document(),
                    );
                    continue;
                }
                if !tensors_built {
                    tensors_built = true;
                    known_tensors.extend(doc.tensors.iter().map(|t| t.tensor_id));
                    // A tensor id that is not interned names no edge endpoint.
                    doc.for_each_op_tensors(|_, inputs, output| {
                        let ids = inputs.iter().copied().chain(output);
                        known_tensors.extend(ids.filter_map(|t| doc.sym(t)));
                    });
                }
                for end in [from_tensor, to_tensor] {
                    if !known_tensors.contains(&end) {
                        let id = doc.str(end);
                        issues.error(
                            HealthCode::UnknownDataEdgeTensor,
                            format!("data edge {f} -> {t}: tensor {id} is neither a tensor event nor an op input or output"),
                            IssueLocation::node(format!("tensor/{id}")),
                        );
                    }
                }
            }
        }
    }
}
