//! Putting it together: raw events → span tree, memory, GPU intervals, metadata → candle-graph
//! trace events in time order.
//!
//! Times become nanoseconds since the window start (the earliest imported event). Output order
//! is by time; at one timestamp, span ends (innermost first), then span starts (outermost
//! first), then memory events and their device samples in the allocator's order. A span of
//! length 0 ends right after it starts.

use std::collections::{BTreeMap, HashMap};

use trace_schema::{
    DeviceIntervalEvent, DeviceMemoryEvent, MemoryAction, MemoryEvent, MemorySource, MetaEvent,
    Pass, SpanEndEvent, SpanStartEvent, TerminalEvent, TerminalOutcome, TraceEvent, WRITE_VERSION,
};

use crate::chrome::RawTrace;
use crate::collect::{collect, Collected, HostCat, NodeClass};
use crate::error::ImportError;
use crate::imported::Imported;
use crate::memory::MemOut;
use crate::meta::{run_meta, Observed};
use crate::report::ImportReport;
use crate::tree;

fn span_id(tree: &tree::Tree, node: u32) -> String {
    format!("s{}", tree.position[node as usize] + 1)
}

/// Converts the raw events of one document. `cut_short` says why the text ended early.
pub(crate) fn assemble(
    raw: &RawTrace<'_>,
    gzip: bool,
    cut_short: Option<String>,
    mut report: ImportReport,
) -> Result<Imported, ImportError> {
    report.gzip = gzip;
    report.trace_events = raw.events.len() as u64;
    report.cut_short = cut_short.clone();
    let mut c = collect(&raw.events, &mut report);
    if c.nodes.is_empty() && c.mems.is_empty() && c.gpus.is_empty() {
        return Err(ImportError::NoEvents {
            read: raw.events.len() as u64,
            detail: describe_skipped(&report),
        });
    }
    let origin = window_origin(&c);
    let tree = tree::build(&mut c, origin, &mut report);
    let rel = |t: i128| u64::try_from(t - origin).unwrap_or(u64::MAX);
    let memory = crate::memory::convert(&c, &tree, &mut report);
    if memory.is_none() {
        report.warn(if cut_short.is_some() {
            "no [memory] events before the cut (Kineto writes them after the ops): the memory plane is absent, not empty"
        } else {
            "no [memory] events: the memory plane is absent, not empty (profile the step with profile_memory=True)"
        });
    }
    let intervals = device_intervals(&c, &tree, &mut report, &rel);
    flows(&c, &mut report);
    let train = count_spans(&c, &mut report);
    if let Some(cut) = &cut_short {
        report.warn(format!(
            "{cut}: {} whole events were read; the imported trace has no terminal event and its figures are lower bounds",
            raw.events.len()
        ));
    }
    let steps = profiler_steps(&c);
    let meta = run_meta(
        &raw.header,
        Observed {
            memory_events: memory.is_some(),
            device_samples: memory
                .iter()
                .flatten()
                .any(|m| m.sample.is_some_and(|s| s.0.is_some())),
            gpu_intervals: !intervals.is_empty(),
            train,
            devices: devices(memory.as_deref(), &intervals),
            origin_ns: origin,
            step_warmup: crate::side::warmup_from_steps(steps.iter().copied()),
            tags: tags(&steps, &report),
        },
    );
    let mut keyed = span_events(&c, &tree, &rel);
    keyed.extend(memory_events(memory.as_deref(), &tree, &rel));
    keyed.sort_by_key(|(k, _)| *k);
    let mut events = Vec::with_capacity(keyed.len() + intervals.len() + 2);
    events.push(TraceEvent::Meta(MetaEvent {
        schema: WRITE_VERSION.as_str().to_string(),
        run: meta,
    }));
    events.extend(keyed.into_iter().map(|(_, e)| e));
    events.extend(intervals.into_iter().map(TraceEvent::DeviceInterval));
    if cut_short.is_none() {
        events.push(TraceEvent::Terminal(TerminalEvent {
            coverage_lost: Default::default(),
            outcome: TerminalOutcome::Complete,
            timestamp_ns: rel(c.nodes[0].end),
            reason: None,
            dropped_events: None,
        }));
    }
    Ok(Imported { events, report })
}

/// The window start: the earliest span, memory event, GPU activity or profiler window start.
fn window_origin(c: &Collected) -> i128 {
    [
        c.nodes.iter().map(|n| n.start).min(),
        c.mems.iter().map(|m| m.ts).min(),
        c.gpus.iter().map(|g| g.start).min(),
        c.window.map(|w| w.0),
    ]
    .into_iter()
    .flatten()
    .min()
    .expect("at least one event")
}

/// Counts the spans per pass and kind into `report`; whether the run trains (has a backward or
/// optimizer pass).
fn count_spans(c: &Collected, report: &mut ImportReport) -> bool {
    let mut passes: BTreeMap<String, u64> = BTreeMap::new();
    for n in &c.nodes {
        if let Some(step) = n.step {
            *passes.entry(step_name(step).to_string()).or_default() += 1;
        }
    }
    let train = passes.contains_key("backward") || passes.contains_key("optimizer");
    report.passes = passes;
    report.spans.total = c.nodes.len() as u64;
    report.spans.threads = c.threads.len() as u64;
    for n in &c.nodes {
        match n.class {
            NodeClass::Host(HostCat::CpuOp | HostCat::Runtime) => report.spans.ops += 1,
            NodeClass::Host(_) => report.spans.functions += 1,
            _ => {}
        }
    }
    train
}

/// The names of the `ProfilerStep#N` spans, in node order.
fn profiler_steps(c: &Collected) -> Vec<&str> {
    c.nodes
        .iter()
        .filter(|n| n.name.starts_with("ProfilerStep#"))
        .map(|n| n.name.as_str())
        .collect()
}

/// The devices of the memory events and GPU intervals, sorted, each once.
fn devices(memory: Option<&[MemOut]>, intervals: &[DeviceIntervalEvent]) -> Vec<String> {
    let mut devices: Vec<String> = memory
        .into_iter()
        .flatten()
        .map(|m| m.device.clone())
        .chain(intervals.iter().map(|d| d.device.clone()))
        .collect();
    devices.sort();
    devices.dedup();
    devices
}

/// The run's tags: the profiler steps, the spans the import added, the bytes allocated before
/// the window per device.
fn tags(steps: &[&str], report: &ImportReport) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::new();
    if !steps.is_empty() {
        tags.insert("kineto.profiler_steps".to_string(), steps.join(","));
    }
    if report.spans.derived_backward > 0 {
        tags.insert(
            "import.derived_spans".to_string(),
            format!(
                "{} `{}` spans group runs of autograd ops (added by the import)",
                report.spans.derived_backward,
                tree::DERIVED_BACKWARD
            ),
        );
    }
    if let Some(m) = &report.memory {
        for d in &m.devices {
            if let Some(gap) = d.constant_gap_bytes() {
                tags.insert(
                    match &d.process {
                        Some(p) => format!("kineto.before_window_bytes.{}.p{p}", d.device),
                        None => format!("kineto.before_window_bytes.{}", d.device),
                    },
                    gap.to_string(),
                );
            }
        }
    }
    tags
}

/// A body event's sort key: (time, rank at that time, order within the rank).
type SortKey = (u64, u8, u64);

/// Span starts and ends with their sort keys: at one time, ends (rank 0, innermost first), then
/// starts (rank 1, outermost first); a span of length 0 ends right after it starts.
fn span_events(
    c: &Collected,
    tree: &tree::Tree,
    rel: &dyn Fn(i128) -> u64,
) -> Vec<(SortKey, TraceEvent)> {
    let mut keyed = Vec::with_capacity(2 * tree.order.len());
    for (pos, &i) in tree.order.iter().enumerate() {
        let n = &c.nodes[i as usize];
        let pos = pos as u64;
        let (start, end) = (rel(n.start), rel(n.end));
        keyed.push((
            (start, 1, 2 * pos),
            TraceEvent::SpanStart(SpanStartEvent {
                id: span_id(tree, i),
                parent_id: n.parent.map(|p| span_id(tree, p)),
                name: n.name.clone(),
                start_ns: start,
                span_kind: n.kind,
                measured: n.class == NodeClass::Root,
                step: n.step,
                module_path: n.module_path.clone(),
                instance_key: None,
                module_kind: None,
                forward_span_id: None,
                step_index: None,
            }),
        ));
        let end_key = if end == start {
            (start, 1, 2 * pos + 1)
        } else {
            (end, 0, u64::MAX - pos)
        };
        keyed.push((
            end_key,
            TraceEvent::SpanEnd(SpanEndEvent {
                id: span_id(tree, i),
                duration_ns: end - start,
                inferred: false,
                inferred_reason: None,
            }),
        ));
    }
    keyed
}

/// Memory events, each followed by its device sample, with their sort keys (rank 2: after the
/// spans at that time, in the allocator's order).
fn memory_events(
    memory: Option<&[MemOut]>,
    tree: &tree::Tree,
    rel: &dyn Fn(i128) -> u64,
) -> Vec<(SortKey, TraceEvent)> {
    let mut keyed = Vec::new();
    for (seq, m) in memory.into_iter().flatten().enumerate() {
        let ts = rel(m.ts);
        let seq = 2 * seq as u64;
        keyed.push((
            (ts, 2, seq),
            TraceEvent::Memory(MemoryEvent {
                timestamp_ns: ts,
                action: if m.alloc {
                    MemoryAction::Alloc
                } else {
                    MemoryAction::Free
                },
                device: m.device.clone(),
                storage_id: Some(m.storage_id.clone()),
                bytes: Some(m.bytes),
                logical_bytes: None,
                tensor_id: None,
                span_id: Some(span_id(tree, m.span)),
                op_name: m.op_name.clone(),
                shape: None,
                dtype: None,
                category: trace_schema::MemoryCategory::Other,
                category_source: None,
                source: Some(MemorySource::Allocator),
                pre_existing: m.pre_existing,
                label: None,
                site: None,
                thread: None,
            }),
        ));
        if let Some((used, reserved)) = m.sample {
            if used.is_some() || reserved.is_some() {
                keyed.push((
                    (ts, 2, seq + 1),
                    TraceEvent::DeviceMemory(DeviceMemoryEvent {
                        timestamp_ns: ts,
                        device: m.device.clone(),
                        used_bytes: used,
                        free_bytes: None,
                        reserved_bytes: reserved,
                        capacity_bytes: None,
                        resident_bytes: None,
                    }),
                ));
            }
        }
    }
    keyed
}

fn step_name(step: Pass) -> &'static str {
    match step {
        Pass::Forward => "forward",
        Pass::Backward => "backward",
        Pass::Optimizer => "optimizer",
    }
}

fn describe_skipped(report: &ImportReport) -> String {
    let mut parts: Vec<String> = report
        .skipped
        .iter()
        .map(|(why, n)| format!("{n} {why}"))
        .collect();
    parts.extend(report.warnings.iter().cloned());
    if parts.is_empty() {
        "the event array is empty".to_string()
    } else {
        parts.join("; ")
    }
}

/// GPU activities → device intervals on the span that launched them: the op enclosing the
/// runtime call with the same CUPTI correlation id, else the op with the same External id,
/// else the root. Zero-length activities are left out (a device interval has a duration).
fn device_intervals(
    c: &Collected,
    tree: &tree::Tree,
    report: &mut ImportReport,
    rel: &dyn Fn(i128) -> u64,
) -> Vec<DeviceIntervalEvent> {
    let mut by_correlation: HashMap<i128, u32> = HashMap::new();
    let mut by_external: HashMap<i128, u32> = HashMap::new();
    for (i, n) in c.nodes.iter().enumerate() {
        match n.class {
            NodeClass::Host(HostCat::Runtime) => {
                if let Some(k) = n.correlation {
                    by_correlation.insert(k, i as u32);
                }
            }
            NodeClass::Host(HostCat::CpuOp) => {
                if let Some(k) = n.external_id {
                    by_external.entry(k).or_insert(i as u32);
                }
            }
            _ => {}
        }
    }
    let launcher = |runtime: u32| {
        let mut p = c.nodes[runtime as usize].parent;
        while let Some(i) = p {
            if c.nodes[i as usize].class == NodeClass::Host(HostCat::CpuOp) {
                return i;
            }
            p = c.nodes[i as usize].parent;
        }
        runtime
    };
    let mut unlinked = 0u64;
    let mut out = Vec::with_capacity(c.gpus.len());
    for g in &c.gpus {
        if g.end == g.start {
            report.skip("GPU events of zero duration");
            continue;
        }
        let span = g
            .correlation
            .and_then(|k| by_correlation.get(&k).copied())
            .map(launcher)
            .or_else(|| g.external_id.and_then(|k| by_external.get(&k).copied()))
            .unwrap_or_else(|| {
                unlinked += 1;
                0
            });
        out.push(DeviceIntervalEvent {
            span_id: span_id(tree, span),
            device: g.device.clone(),
            stream_id: g.stream.clone(),
            clock_id: "kineto".to_string(),
            backend: format!("kineto:{}", g.category),
            start_ns: rel(g.start),
            duration_ns: u64::try_from(g.end - g.start).unwrap_or(u64::MAX),
        });
    }
    report.device_intervals = out.len() as u64;
    if unlinked > 0 {
        report.warn(format!(
            "{unlinked} GPU events match no runtime call or op (by correlation or External id); they are attributed to the root"
        ));
    }
    out
}

fn flows(c: &Collected, report: &mut ImportReport) {
    let mut unpaired: BTreeMap<&str, u64> = BTreeMap::new();
    for ((cat, _), &(starts, finishes)) in &c.flows {
        match (starts > 0, finishes > 0) {
            (true, true) => report.flows.paired += 1,
            (true, false) => {
                report.flows.unpaired_starts += 1;
                *unpaired.entry(cat.as_str()).or_default() += 1;
            }
            (false, true) => {
                report.flows.unpaired_finishes += 1;
                *unpaired.entry(cat.as_str()).or_default() += 1;
            }
            (false, false) => {}
        }
    }
    if !unpaired.is_empty() {
        let cats: Vec<String> = unpaired
            .iter()
            .map(|(cat, n)| format!("{n} `{}`", trace_format::escape(cat)))
            .collect();
        report.warn(format!(
            "{} flow ids have a start without a finish or a finish without a start ({}); flows only link events and nothing else depends on them",
            report.flows.unpaired_starts + report.flows.unpaired_finishes,
            cats.join(", ")
        ));
    }
}
