//! The words of advice findings: who holds the activations retained into the optimizer (from
//! [`crate::retention`]) and what to change, and the capture taken without warm-up. Each
//! sentence says only what the trace shows; where it cannot tell, it says so.

use trace_format::{at, checked_bytes};
use trace_memory::SpanIndex;
use trace_schema::{ExecutionPhase, TraceDocument};

use crate::finding::{describe, Evidence, Finding, FindingCode, Holder, Holding, TOP_STORAGES};
use crate::health::Severity;
use crate::retention::{ranked, LossState, Member, Release, Retention};

/// The advice for a loss still holding its graph (the finding's words since its first version).
const DROP_LOSS: &str =
    "run backward, drop the loss, then step, so they are freed before the optimizer runs";

/// What a reader does about storages the gradient store holds.
const DROP_STORE: &str = "drop the gradient store right after the step; to free them before it, keep only the parameters' gradients, detached, in a new store and drop the original one before stepping";

fn holding(
    doc: &TraceDocument,
    holder: Holder,
    members: &[&Member],
    released_ns: Option<u64>,
    listed: usize,
) -> Holding {
    Holding {
        holder,
        count: members.len() as u64,
        bytes: trace_memory::sum_bytes(members.iter().map(|m| m.bytes)),
        storages: members.iter().take(listed).map(|m| m.label(doc)).collect(),
        released_ns,
    }
}

fn figures(members: &[&Member]) -> String {
    format!(
        "{} ({} storage{})",
        checked_bytes(trace_memory::sum_bytes(members.iter().map(|m| m.bytes))),
        members.len(),
        if members.len() == 1 { "" } else { "s" }
    )
}

fn largest(doc: &TraceDocument, spans: &SpanIndex, members: &[&Member]) -> String {
    let names: Vec<String> = members
        .iter()
        .take(TOP_STORAGES)
        .map(|m| describe(doc, spans, &m.lifetime(doc)))
        .collect();
    names.join(", ")
}

/// ` (at T in PATH)` of a gradient release.
fn release_at(doc: &TraceDocument, spans: &SpanIndex, r: &Release, origin_ns: u64) -> String {
    let path = r
        .span
        .and_then(|s| spans.indexed_path_of_id(doc, doc.str(s)))
        .map(|p| format!(" in {p}"))
        .unwrap_or_default();
    format!("at {}{path}", at(r.timestamp_ns, origin_ns))
}

/// The tail of the `activations_retained_into_optimizer` summary (from `: ` or `, `) and the
/// holders for its evidence. `listed`: how many storage ids a holding lists.
pub(crate) fn retention_advice(
    doc: &TraceDocument,
    spans: &SpanIndex,
    r: &Retention,
    origin_ns: u64,
    listed: usize,
) -> (String, Vec<Holding>) {
    let with: Vec<&Member> = r.with_gradients.members.iter().collect();
    let apart: Vec<&Member> = r.apart.members.iter().collect();
    let release = r.release.map(|x| release_at(doc, spans, &x, origin_ns));
    match r.loss {
        LossState::Live { free_ns } => {
            let all = ranked(doc, with.iter().chain(&apart).copied().collect());
            let (graph, other): (Vec<&Member>, Vec<&Member>) =
                all.into_iter().partition(|m| m.graph_node());
            let freed = free_ns
                .map(|t| format!("freed at {}", at(t, origin_ns)))
                .unwrap_or_else(|| "never freed".to_string());
            let mut text = format!(
                ": the loss is still live then (its storage is among them, {freed}) and holds its autograd graph; {DROP_LOSS}"
            );
            if let (true, Some(rel)) = (r.loss_freed_with_gradients, &release) {
                text.push_str(&format!(
                    "; the loss is freed in one run of frees with the gradients ({rel}), so the trace cannot tell yet which of them the gradient store holds too: those would stay live until it is dropped"
                ));
            }
            let mut held = vec![holding(doc, Holder::Loss, &graph, free_ns, listed)];
            if !other.is_empty() {
                held.push(holding(doc, Holder::Unknown, &other, None, listed));
            }
            (text, held)
        }
        LossState::Dropped { free_ns } => {
            let mut parts = Vec::new();
            let mut held = Vec::new();
            if let Some(rel) = &release {
                parts.push(format!(
                    "{} of them are freed only with the gradients, when the gradient store is dropped ({rel}): the gradient store holds them (Candle keeps them until the store is dropped); largest: {}; {DROP_STORE}",
                    figures(&with),
                    largest(doc, spans, &with)
                ));
                held.push(holding(
                    doc,
                    Holder::GradientStore,
                    &with,
                    r.release.map(|x| x.timestamp_ns),
                    listed,
                ));
            }
            if !apart.is_empty() {
                let never = if apart.iter().any(|m| m.freed()) {
                    ""
                } else {
                    " (never freed in the trace)"
                };
                parts.push(format!(
                    "{} {} freed apart from the gradients{never}: the trace does not show what holds them (a tensor the loop keeps past the step); largest: {}",
                    figures(&apart),
                    if with.is_empty() { "of them are" } else { "are" },
                    largest(doc, spans, &apart)
                ));
                held.push(holding(doc, Holder::Unknown, &apart, None, listed));
            }
            if parts.is_empty() {
                parts.push("the trace does not show what holds them".to_string());
            }
            (
                format!(
                    ", though the loss was dropped before it (its storage was freed at {}): {}",
                    at(free_ns, origin_ns),
                    parts.join("; ")
                ),
                held,
            )
        }
        LossState::Unknown => match &release {
            Some(rel) => {
                let mut held = vec![holding(
                    doc,
                    Holder::LossOrGradientStore,
                    &with,
                    r.release.map(|x| x.timestamp_ns),
                    listed,
                )];
                if !apart.is_empty() {
                    held.push(holding(doc, Holder::Unknown, &apart, None, listed));
                }
                (
                    format!(
                        ": {} of them are freed with the gradients ({rel}); the probe did not see the loss (backward ran outside ProbedOptimizer::backward_step and Profiler::backward), so the trace cannot tell whether the loss or the gradient store held them: {DROP_LOSS}; what then stays live until the gradient store is dropped is held by it",
                        figures(&with)
                    ),
                    held,
                )
            }
            None => (format!(": {DROP_LOSS}"), Vec::new()),
        },
    }
}

/// `captured_without_warm_up`: the captured step had no warm-up step before it (`warmup_steps`
/// 0, or no `warmup_steps` and capture step 1). Not for a trace whose capture never started (no
/// span): there is no captured step to qualify.
pub(crate) fn warm_up_finding(doc: &TraceDocument) -> Option<Finding> {
    let m = &doc.meta;
    let without = match m.warmup_steps {
        Some(w) => w == 0,
        None => m.capture_step == Some(1),
    };
    if !without || doc.spans.is_empty() {
        return None;
    }
    let unit = match m.phase {
        Some(ExecutionPhase::Infer) => "call",
        _ => "step",
    };
    let what = m
        .capture_step
        .map(|s| format!("{unit} {s}"))
        .unwrap_or_else(|| format!("the captured {unit}"));
    Some(Finding {
        code: FindingCode::CapturedWithoutWarmUp,
        severity: Severity::Warning,
        summary: format!(
            "{what} was captured with no warm-up {unit} before it: its times and memory may include one-time costs (first-call allocations, lazy initialisation, kernel compilation and caches) that later {unit}s do not pay; capture a later {unit} (e.g. {unit} 2) for steady-state figures"
        ),
        evidence: Evidence {
            count: Some(0),
            ..Evidence::default()
        },
        requires: Vec::new(),
    })
}
