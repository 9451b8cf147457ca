//! The memory replay of [`crate::analyze`] and what rides along it: the passes over the memory
//! events that need no result of the replay are fed its events instead of reading the log
//! again (each pass over a spilled log decodes every record).

use trace_memory::{analyze_memory_observed, Detail, MemoryProfile, SpanIndex, StepMemory};
use trace_schema::{MemoryOrder, TraceDocument};

use crate::earlier::{self, EarlierStepsRetained};
use crate::gradients::{summarize_gradients, GradientSummary};
use crate::{health, index, optimizer};

/// What the replay and its riders found.
pub(crate) struct Ridden {
    /// The memory profile.
    pub(crate) memory: MemoryProfile,
    /// The op index (built beside the replay).
    pub(crate) ops: index::OpIndex,
    /// The gradients (beside the replay).
    pub(crate) gradients: GradientSummary,
    /// The memory events' span references.
    pub(crate) memory_spans: health::MemorySpans,
    /// The per-step memory.
    pub(crate) step_memory: Vec<StepMemory>,
    /// The allocation sites.
    pub(crate) sites: Option<trace_ops::SiteProfile>,
    /// The optimizer finding's first pass (`None` without an optimizer pass).
    pub(crate) temporary_marks: Option<optimizer::TemporaryMarks>,
    /// The earlier-steps finding's storages.
    pub(crate) earlier: Option<EarlierStepsRetained>,
}

/// Replays the memory events of `doc` once, in `detail`, with every rider.
pub(crate) fn replay(doc: &TraceDocument, spans: &SpanIndex, detail: Detail) -> Ridden {
    // The memory replay (the longest pass) runs beside the op index and the gradients, which
    // do not depend on it. With a core to spare the span references of the memory events are
    // checked there too, in a pass of their own; on one core they ride along the replay.
    let spare_core = rayon::current_num_threads() > 1;
    let mut memory_spans = health::MemorySpans::default();
    // the per-step memory and the allocation sites ride along the replay (no pass of their
    // own)
    let mut step_pass = trace_memory::steps::StepMemoryPass::new(doc);
    let mut site_pass = trace_ops::SitePass::new(doc, spans);
    // and so does the optimizer finding's first pass, when there is an optimizer pass
    let mut temporary_marks = spans
        .pass
        .contains(&Some(trace_schema::Pass::Optimizer))
        .then(|| optimizer::TemporaryMarks::new(doc));
    let pass_of = |s| doc.span_index(s).and_then(|i| spans.pass[i]);
    // and the earlier-steps finding's pass
    let mut earlier_tally = earlier::Tally::default();
    let earlier_pass = earlier::first_step_pass(doc, spans);
    let (memory, (ops, gradients, seen)) = rayon::join(
        || {
            let mut observe = |m: &trace_schema::MemoryItem<'_>| {
                if let Some(t) = &mut temporary_marks {
                    t.observe(doc, m, &pass_of);
                }
                earlier_tally.observe(doc, m, &earlier_pass);
                if !spare_core {
                    memory_spans.observe(doc, m)
                }
                if let Some(p) = &mut step_pass {
                    p.observe(m);
                }
                if let Some(p) = &mut site_pass {
                    p.observe(doc, spans, m);
                }
            };
            analyze_memory_observed(doc, spans, detail, &mut observe)
        },
        || {
            let seen = spare_core.then(|| {
                let mut seen = health::MemorySpans::default();
                doc.for_each_memory(MemoryOrder::File, |m| seen.observe(doc, m));
                seen
            });
            (index::OpIndex::build(doc), summarize_gradients(doc), seen)
        },
    );
    if let Some(seen) = seen {
        memory_spans = seen;
    }
    let step_memory = finish_step_memory(step_pass, &memory, doc, spans);
    let sites = site_pass.map(|p| p.finish(doc));
    let earlier = earlier_tally.finish();
    Ridden {
        memory,
        ops,
        gradients,
        memory_spans,
        step_memory,
        sites,
        temporary_marks,
        earlier,
    }
}

/// The steps' memory from the pass that rode along the memory replay: without any byte figure
/// when the replay refused the trace's byte counts (they add up past `u64::MAX`: no logical
/// figure is computed, so no step's byte figure is real either).
fn finish_step_memory(
    pass: Option<trace_memory::steps::StepMemoryPass>,
    memory: &MemoryProfile,
    doc: &TraceDocument,
    spans: &SpanIndex,
) -> Vec<StepMemory> {
    let mut steps = pass.map_or_else(Vec::new, |p| p.finish(doc, spans));
    if memory.logical_overflow.is_some() {
        steps.iter_mut().for_each(StepMemory::forget_bytes);
    }
    steps
}
