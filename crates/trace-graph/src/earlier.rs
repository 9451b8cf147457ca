//! The `earlier_steps_retained` finding: storages live at capture start that are neither
//! parameters, optimizer state nor labelled (the unlabelled `other` storages the probe's
//! session tracker adopted, `source: allocator`) — what earlier steps left alive: a loss kept in
//! a `Vec` holds that step's whole graph. Their bytes and count, the largest, and their ratio to
//! the bytes this step allocated in its forward pass (its own activations): "≈ 3.0× this step's
//! activations" means about three earlier graphs are still alive.
//!
//! One pass over the memory events in file order, O(n), plus a sort of the retained storages.

use trace_format::bytes as human_bytes;
use trace_schema::{
    MemoryAction, MemoryCategory, MemoryOrder, MemorySource, Pass, Sym, TraceDocument,
};

use crate::capability::{CapabilityKind, CapabilityMatrix};
use crate::findings::{Evidence, Finding, FindingCode};
use crate::health::Severity;

/// The ratio to this step's activations from which the finding is written (below, the
/// storages are at most half a step's graph: a batch, a buffer).
pub const MIN_RATIO: f64 = 0.5;

/// The ratio from which it is a warning (at least one whole step's activations retained).
pub const WARNING_RATIO: f64 = 1.0;

/// Storages from before the captured step, live at its start, that nothing names.
#[derive(Debug, Clone, PartialEq)]
pub struct EarlierStepsRetained {
    /// How many.
    pub count: u64,
    /// Their heap bytes (saturating).
    pub bytes: u64,
    /// Bytes this step allocated in its forward pass (saturating).
    pub forward_bytes: u64,
    /// The largest, largest first (at most 5): `(memory index, bytes, dtype)`.
    pub largest: Vec<(u32, u64, Option<String>)>,
}

impl EarlierStepsRetained {
    /// Finds them in `doc`; `None` when there are none or the step allocated nothing in its
    /// forward pass. `pass_of` gives a span's pass (its own or inherited).
    pub fn find(doc: &TraceDocument, pass_of: impl Fn(Sym) -> Option<Pass>) -> Option<Self> {
        let mut count = 0u64;
        let mut bytes = 0u64;
        let mut forward_bytes = 0u64;
        let mut all: Vec<(u32, u64, Option<String>)> = Vec::new();
        doc.for_each_memory(MemoryOrder::File, |m| {
            if m.action != MemoryAction::Alloc {
                return;
            }
            let b = m.bytes.unwrap_or(0);
            if m.pre_existing {
                if m.category == MemoryCategory::Other
                    && m.label.is_none()
                    && m.source == Some(MemorySource::Allocator)
                {
                    count += 1;
                    bytes = bytes.saturating_add(b);
                    all.push((m.index, b, m.dtype.map(|d| doc.str(d).to_string())));
                }
            } else if m.span.and_then(&pass_of) == Some(Pass::Forward) {
                forward_bytes = forward_bytes.saturating_add(b);
            }
        });
        if count == 0 || forward_bytes == 0 {
            return None;
        }
        all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(5);
        Some(Self {
            count,
            bytes,
            forward_bytes,
            largest: all,
        })
    }

    /// Their bytes over this step's forward bytes.
    pub fn ratio(&self) -> f64 {
        self.bytes as f64 / self.forward_bytes as f64
    }
}

/// The finding, when the retained storages make at least [`MIN_RATIO`] of this step's
/// activations (a warning from [`WARNING_RATIO`]).
pub(crate) fn finding(
    doc: &TraceDocument,
    spans: &trace_memory::SpanIndex,
    caps: &CapabilityMatrix,
    out: &mut Vec<Finding>,
) {
    let requires = vec![CapabilityKind::LogicalMemory];
    if !caps.allows(&requires) {
        return;
    }
    // In a capture of several steps, "this step" is the first captured one: the storages live
    // at capture start are compared with its own forward bytes.
    let step_of = crate::steps::step_of_spans(doc, spans);
    let first_step = trace_memory::steps::step_spans(doc)
        .first()
        .map(|&(i, _)| i);
    let pass_of = |s: Sym| {
        doc.span_index(s)
            .filter(|&i| first_step.is_none() || step_of[i] == first_step)
            .and_then(|i| spans.pass[i])
    };
    let Some(r) = EarlierStepsRetained::find(doc, pass_of) else {
        return;
    };
    let ratio = r.ratio();
    if ratio < MIN_RATIO {
        return;
    }
    let largest: Vec<String> = r
        .largest
        .iter()
        .map(|(_, b, dtype)| match dtype {
            Some(d) => format!("{} {d}", human_bytes(*b)),
            None => human_bytes(*b),
        })
        .collect();
    let summary = format!(
        "{} storages from earlier steps ({}) are live at capture start and are neither parameters, optimizer state nor a labelled input: ≈ {ratio:.1}× this step's activations ({} allocated in its forward pass): something keeps earlier steps' graphs alive (a loss or an output kept across steps, e.g. in a Vec); largest: {}",
        r.count,
        human_bytes(r.bytes),
        human_bytes(r.forward_bytes),
        largest.join(", "),
    );
    out.push(Finding {
        code: FindingCode::EarlierStepsRetained,
        severity: if ratio >= WARNING_RATIO {
            Severity::Warning
        } else {
            Severity::Info
        },
        summary,
        evidence: Evidence {
            bytes: Some(r.bytes),
            count: Some(r.count),
            allocated_bytes: Some(r.forward_bytes),
            share: Some(ratio),
            pass: Some(Pass::Forward),
            ..Evidence::default()
        },
        requires,
    });
}
