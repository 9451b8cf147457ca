//! The per-step table of a capture of several steps (step spans with a `step_index`,
//! trace/13): each step's wall time, the time of each of its passes, and its memory
//! ([`trace_memory::StepMemory`]), with [`trace_memory::MemoryGrowth`] when live memory grows
//! at every step; and the `memory_growth` finding that states the rate and its projection.
//!
//! O(S) in spans (one pre-order pass gives each span its step) plus O(S log S) for the merged
//! pass intervals, and the memory module's O(n log n) pass over memory events.

use std::collections::BTreeMap;

use serde::Serialize;
use trace_format::bytes as human_bytes;
use trace_memory::{memory_growth, step_memory, MemoryGrowth, SpanIndex, StepMemory};
use trace_schema::{ExecutionPhase, Pass, TraceDocument};

use crate::capability::{CapabilityKind, CapabilityMatrix};
use crate::findings::{Evidence, Finding, FindingCode};
use crate::health::Severity;

/// How many more training steps the growth finding projects to.
pub const PROJECTED_STEPS: u64 = 1_000;

/// How many more inference calls (decoded tokens, at one call per token) it projects to.
pub const PROJECTED_CALLS: u64 = 4_096;

/// One captured step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRow {
    /// The step (or call) number, one-based.
    pub step_index: u64,
    /// The step span's id.
    pub span_id: String,
    /// Its name (`step 3`, `call 3`).
    pub name: String,
    /// Its wall time, ns; `None` when it never closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// Per pass: wall time of its closed pass spans inside this step (merged), ns.
    pub pass_time_ns: BTreeMap<Pass, u64>,
    /// Its memory; `None` without memory events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<StepMemory>,
}

/// The per-step table and whether memory grows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Steps {
    /// The steps, in start order.
    pub rows: Vec<StepRow>,
    /// Live memory growing at every step, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub growth: Option<MemoryGrowth>,
}

impl Steps {
    /// Whether the trace has no step spans (a single-step capture).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Per span: the step span it is in (itself for a step span), by a pre-order pass.
pub fn step_of_spans(doc: &TraceDocument, spans: &SpanIndex) -> Vec<Option<usize>> {
    let mut step_of: Vec<Option<usize>> = vec![None; doc.spans.len()];
    for &i in &spans.preorder {
        let i = i as usize;
        step_of[i] = if doc.spans[i].step_index.is_some() {
            Some(i)
        } else {
            spans.parent[i].and_then(|p| step_of[p as usize])
        };
    }
    step_of
}

/// The per-step table of `doc` (empty without step spans).
pub fn steps(doc: &TraceDocument, spans: &SpanIndex) -> Steps {
    steps_with(doc, spans, step_memory(doc, spans))
}

/// [`steps`] with the steps' memory already measured (by a [`trace_memory::steps::StepMemoryPass`]
/// that rode along the memory replay).
pub fn steps_with(doc: &TraceDocument, spans: &SpanIndex, memory: Vec<StepMemory>) -> Steps {
    let order = trace_memory::steps::step_spans(doc);
    if order.is_empty() {
        return Steps::default();
    }
    let step_of = step_of_spans(doc, spans);
    let mut intervals: BTreeMap<(usize, Pass), Vec<(u64, u64)>> = BTreeMap::new();
    for (i, s) in doc.spans.iter().enumerate() {
        if let (Some(pass), Some(end), Some(step)) = (s.pass, s.end_ns(), step_of[i]) {
            intervals
                .entry((step, pass))
                .or_default()
                .push((s.start_ns, end));
        }
    }
    let mut pass_time: BTreeMap<usize, BTreeMap<Pass, u64>> = BTreeMap::new();
    for ((step, pass), mut iv) in intervals {
        pass_time
            .entry(step)
            .or_default()
            .insert(pass, crate::intervals::merged_length(&mut iv));
    }
    let mut memory = memory.into_iter();
    let mut pending = memory.next();
    let mut rows = Vec::with_capacity(order.len());
    for (i, n) in order {
        let s = &doc.spans[i];
        let span_id = doc.str(s.id).to_string();
        let mem = match &pending {
            Some(m) if m.span_id == span_id => {
                let m = pending.take();
                pending = memory.next();
                m
            }
            _ => None,
        };
        rows.push(StepRow {
            step_index: n,
            span_id,
            name: doc.str(s.name).to_string(),
            duration_ns: s.duration_ns,
            pass_time_ns: pass_time.remove(&i).unwrap_or_default(),
            memory: mem,
        });
    }
    let mems: Option<Vec<StepMemory>> = rows.iter().map(|r| r.memory.clone()).collect();
    let growth = mems.as_deref().and_then(memory_growth);
    Steps { rows, growth }
}

/// `n` with thousands separators (`4,096`).
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Step numbers as a list, `1, 5, 9` (at most 8, then `… (12 in all)`).
fn numbers(steps: &[u64]) -> String {
    const SHOWN: usize = 8;
    let mut list: Vec<String> = steps.iter().take(SHOWN).map(|n| grouped(*n)).collect();
    if steps.len() > SHOWN {
        list.push(format!("… ({} in all)", steps.len()));
    }
    list.join(", ")
}

/// `(32, 256) f32` style description of a retained group, with its span.
fn group_text(g: &trace_memory::RetainedGroup) -> String {
    let mut out = format!("{} × ", g.count);
    match &g.shape {
        Some(shape) => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            out.push_str(&format!("({})", dims.join(", ")));
        }
        None => out.push_str("storage"),
    }
    if let Some(d) = &g.dtype {
        out.push_str(&format!(" {d}"));
    }
    if let Some(op) = &g.op {
        out.push_str(&format!(" from {op}"));
    }
    if let Some(span) = &g.span {
        out.push_str(&format!(" in {span}"));
    }
    out.push_str(&format!(" ({})", human_bytes(g.bytes)));
    out
}

/// The `memory_growth` finding: live memory higher at the end of every captured step than at
/// the end of the one before — its rate per step (or call), its projection over
/// [`PROJECTED_STEPS`] steps ([`PROJECTED_CALLS`] calls in inference) and what the last step
/// left live, by span, op and shape.
pub(crate) fn finding(
    doc: &TraceDocument,
    steps: &Steps,
    caps: &CapabilityMatrix,
    out: &mut Vec<Finding>,
) {
    let requires = vec![CapabilityKind::LogicalMemory];
    if !caps.allows(&requires) {
        return;
    }
    let Some(g) = &steps.growth else {
        return;
    };
    let inference = doc.meta.phase == Some(ExecutionPhase::Infer);
    let (unit, units, projected) = if inference {
        ("call", "calls", PROJECTED_CALLS)
    } else {
        ("step", "steps", PROJECTED_STEPS)
    };
    let consecutive = g.consecutive();
    let rate = if g.constant {
        let exact = if g.bytes_per_step >= 1024 {
            format!(" ({} B)", grouped(g.bytes_per_step))
        } else {
            String::new()
        };
        if consecutive {
            format!(
                "+{}{exact} per {unit} (exactly: each {unit} ends that much above the one before; {} {units})",
                human_bytes(g.bytes_per_step),
                g.steps
            )
        } else {
            format!(
                "+{}{exact} per {unit} (exactly: each captured {unit} ends that much per {unit} number above the one captured before; {} {units} captured, {})",
                human_bytes(g.bytes_per_step),
                g.steps,
                numbers(&g.step_indices)
            )
        }
    } else {
        // per step number: each gap's growth over the step numbers it covers
        let rates = g.per_step_bytes[1..]
            .iter()
            .zip(g.step_indices.windows(2))
            .map(|(&b, w)| b / w[1].saturating_sub(w[0]).max(1));
        let min = rates.clone().min().unwrap_or(0);
        let max = rates.max().unwrap_or(0);
        format!(
            "+{} per {unit} on average over {} {units} (from {} to {})",
            human_bytes(g.bytes_per_step),
            g.steps,
            human_bytes(min),
            human_bytes(max)
        )
    };
    let projection = g
        .bytes_per_step
        .checked_mul(projected)
        .map(human_bytes)
        .unwrap_or_else(|| trace_format::OVERFLOWED.to_string());
    let last = steps.rows.iter().rev().find_map(|r| r.memory.as_ref());
    let left: Vec<String> = last
        .map(|m| m.retained.iter().map(group_text).collect())
        .unwrap_or_default();
    let left_text = match last {
        Some(m) if !left.is_empty() => {
            let n = m.retained_count.unwrap_or(0);
            format!(
                "; what {} {} left live ({} in {n} storage{}): {}",
                unit,
                m.step_index,
                human_bytes(m.retained_bytes.unwrap_or(0)),
                if n == 1 { "" } else { "s" },
                left.join(", ")
            )
        }
        _ => String::new(),
    };
    let cause = if inference {
        "something kept across calls grows: a cache (a KV cache grows by one position per decoded token) or outputs kept"
    } else {
        "something keeps each step's storages alive: a tensor kept across steps (e.g. pushed to a Vec), a stored loss holding its graph"
    };
    let seen = if consecutive {
        String::new()
    } else {
        format!(
            " (at the rate per {unit} number over {units} {}–{}, of which {} were captured)",
            g.step_indices.first().copied().unwrap_or(0),
            g.step_indices.last().copied().unwrap_or(0),
            numbers(&g.step_indices)
        )
    };
    let summary = format!(
        "live memory grows at every captured {unit}: {rate}, from {} to {}; {} more {units} → +{projection}{seen}; {cause}{left_text}",
        human_bytes(g.start_bytes),
        human_bytes(g.end_bytes),
        grouped(projected),
    );
    out.push(Finding {
        code: FindingCode::MemoryGrowth,
        severity: Severity::Warning,
        summary,
        evidence: Evidence {
            node_ids: steps.rows.iter().map(|r| r.span_id.clone()).collect(),
            bytes: Some(g.bytes_per_step),
            count: Some(g.steps),
            allocated_bytes: Some(g.end_bytes - g.start_bytes),
            of_bytes: Some(g.end_bytes),
            ..Evidence::default()
        },
        requires,
    });
}

#[cfg(test)]
mod tests {
    use super::grouped;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(4096), "4,096");
        assert_eq!(grouped(32_768_000), "32,768,000");
        assert_eq!(super::numbers(&[1, 5, 9]), "1, 5, 9");
        assert_eq!(
            super::numbers(&(1..=12).collect::<Vec<u64>>()),
            "1, 2, 3, 4, 5, 6, 7, 8, … (12 in all)"
        );
    }
}
