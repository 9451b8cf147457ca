//! The `earlier_steps_retained` finding: storages live at capture start that are neither
//! parameters, optimizer state nor labelled (the unlabelled `other` storages the probe's
//! session tracker adopted, `source: allocator`) — what earlier steps left alive: a loss kept in
//! a `Vec` holds that step's whole graph. Their bytes and count, the largest, and their ratio to
//! the bytes this step allocated in its forward pass (its own activations): "≈ 3.0× this step's
//! activations" means about three earlier graphs are still alive.
//!
//! One pass over the memory events, O(n) (in [`crate::analyze`] riding along the memory replay),
//! plus a sort of the retained storages.

use trace_format::bytes as human_bytes;
use trace_schema::{
    MemoryAction, MemoryCategory, MemoryItem, MemoryOrder, MemorySource, Pass, Sym, TraceDocument,
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
    /// forward pass. `pass_of` gives a span's pass (its own or inherited). One pass over the
    /// memory events.
    pub fn find(doc: &TraceDocument, pass_of: impl Fn(Sym) -> Option<Pass>) -> Option<Self> {
        let mut tally = Tally::default();
        doc.for_each_memory(MemoryOrder::File, |m| tally.observe(doc, m, &pass_of));
        tally.finish()
    }

    /// Their bytes over this step's forward bytes.
    pub fn ratio(&self) -> f64 {
        self.bytes as f64 / self.forward_bytes as f64
    }
}

/// [`EarlierStepsRetained::find`]'s pass, fed one memory event at a time in any order (its
/// sums are of non-negative figures, its list sorted at the end): on its own, or riding along
/// the memory replay in [`crate::analyze`].
#[derive(Default)]
pub(crate) struct Tally {
    count: u64,
    bytes: u64,
    forward_bytes: u64,
    all: Vec<(u32, u64, Option<String>)>,
}

impl Tally {
    /// Sees one memory event; `pass_of` gives a span's pass.
    pub(crate) fn observe(
        &mut self,
        doc: &TraceDocument,
        m: &MemoryItem<'_>,
        pass_of: &impl Fn(Sym) -> Option<Pass>,
    ) {
        if m.action != MemoryAction::Alloc {
            return;
        }
        let b = m.bytes.unwrap_or(0);
        if m.pre_existing {
            if m.category == MemoryCategory::Other
                && m.label.is_none()
                && m.source == Some(MemorySource::Allocator)
            {
                self.count += 1;
                self.bytes = self.bytes.saturating_add(b);
                self.all
                    .push((m.index, b, m.dtype.map(|d| doc.str(d).to_string())));
            }
        } else if m.span.and_then(pass_of) == Some(Pass::Forward) {
            self.forward_bytes = self.forward_bytes.saturating_add(b);
        }
    }

    /// The storages found; `None` when there are none or nothing was allocated in the forward
    /// pass.
    pub(crate) fn finish(self) -> Option<EarlierStepsRetained> {
        let Self {
            count,
            bytes,
            forward_bytes,
            mut all,
        } = self;
        if count == 0 || forward_bytes == 0 {
            return None;
        }
        all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(5);
        Some(EarlierStepsRetained {
            count,
            bytes,
            forward_bytes,
            largest: all,
        })
    }
}

/// A span's pass as this finding reads it: in a capture of several steps, "this step" is the
/// first captured one (the storages live at capture start are compared with its own forward
/// bytes), so a span of a later step has none.
pub(crate) fn first_step_pass<'a>(
    doc: &'a TraceDocument,
    spans: &'a trace_memory::SpanIndex,
) -> impl Fn(Sym) -> Option<Pass> + 'a {
    let step_of = crate::steps::step_of_spans(doc, spans);
    let first_step = trace_memory::steps::step_spans(doc)
        .first()
        .map(|&(i, _)| i);
    move |s: Sym| {
        doc.span_index(s)
            .filter(|&i| first_step.is_none() || step_of[i] == first_step)
            .and_then(|i| spans.pass[i])
    }
}

/// The finding, when the retained storages (`found`, by a [`Tally`] with [`first_step_pass`])
/// make at least [`MIN_RATIO`] of this step's activations (a warning from [`WARNING_RATIO`]).
pub(crate) fn finding(
    found: Option<EarlierStepsRetained>,
    caps: &CapabilityMatrix,
    out: &mut Vec<Finding>,
) {
    let requires = vec![CapabilityKind::LogicalMemory];
    if !caps.allows(&requires) {
        return;
    }
    let Some(r) = found else {
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
