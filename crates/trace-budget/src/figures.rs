//! The figures of a captured step (or steps) as typed values, read from a trace by the same
//! analyses the CLI prints (trace-graph, trace-memory, trace-ops, trace-views): nothing is
//! recomputed here. Unobserved figures are `None` (or a reason), never 0.

use std::collections::BTreeMap;

use trace_graph::optimizer::OptimizerTemporaries;
use trace_graph::{Analysis, CapabilityKind, StepFigures, StepRow};
use trace_memory::steps::MemoryGrowth;
use trace_ops::{OpRow, SampleTotals, SiteOpRow};
use trace_schema::{ContractField, MemoryCategory, MemorySource, Pass, ReasonKey, TraceDocument};
use trace_views::peak::{HeldView, PeakRecord};

/// Merged rows kept of what held the peak (identical storages merged: `op · module · pass`).
pub const HELD_ROWS: usize = 8;

/// The figures of one trace (see the module docs).
#[derive(Debug, Clone)]
pub struct Figures {
    /// The headline figures (`candle-graph series` reads the same): wall and pass times, the
    /// logical peaks (global, per device, per pass), tensor statistics, gradient norms.
    pub headline: StepFigures,
    /// The global logical peak with what held it: bytes by category, each pass's peak, and the
    /// largest [`HELD_ROWS`] merged rows live at it (`None` without memory events).
    pub peak: Option<PeakRecord>,
    /// Why memory budgets cannot be checked on this trace (no tracking allocator, no memory
    /// events); `None` when they can.
    pub memory_unavailable: Option<String>,
    /// Bytes allocated in each pass (every storage made there, freed or not).
    pub allocated_by_pass: BTreeMap<Pass, u64>,
    /// Each pass's peak by category: the bytes of each category live at that pass's peak.
    pub pass_peak_by_category: BTreeMap<Pass, BTreeMap<MemoryCategory, u64>>,
    /// The optimizer pass's temporaries (storages allocated and freed inside it); `None`
    /// when the trace has none or no optimizer pass.
    pub optimizer_temporaries: Option<OptimizerTemporaries>,
    /// Live bytes (all devices) at the last memory event: what outlived the capture.
    pub live_after_bytes: Option<u64>,
    /// The captured steps of a multi-step capture (empty for one step), with their memory.
    pub steps: Vec<StepRow>,
    /// Live memory growing at every captured step, when it does (a leak's signature).
    pub growth: Option<MemoryGrowth>,
    /// Steps run before the first captured one (the warm-up), as the trace declares.
    pub warmup_steps: Option<u64>,
    /// The exact allocating calls per op · pass · module, from the allocation sites; `None`
    /// when the trace has no sites.
    pub call_rows: Option<Vec<SiteOpRow>>,
    /// The sampled op table (every row: op · pass · module, samples, share with its 95%
    /// interval, exact allocating calls), or why there is none.
    pub ops: Result<OpTable, String>,
}

/// The sampled operations of a trace.
#[derive(Debug, Clone)]
pub struct OpTable {
    /// The sampler's totals.
    pub totals: SampleTotals,
    /// Rows by op · pass · module, most samples first.
    pub rows: Vec<OpRow>,
}

impl Figures {
    /// Analyses `doc` at full detail and reads its figures.
    pub fn of(doc: &TraceDocument) -> Self {
        let analysis = trace_views::analyze(doc);
        Self::from_analysis(doc, &analysis)
    }

    /// The figures of `doc` from an analysis already made at full detail (`trace_views::analyze`).
    pub fn from_analysis(doc: &TraceDocument, analysis: &Analysis) -> Self {
        let logical = analysis.memory.logical.as_ref();
        let peak = logical.and_then(|l| {
            let view = HeldView {
                sites: analysis.sites.as_ref(),
                ..Default::default()
            };
            let lower = analysis.health.memory_lower_bound;
            PeakRecord::of(doc, &analysis.spans, l, None, HELD_ROWS, lower, view)
        });
        let spans = &analysis.spans;
        let pass_of = |s| doc.span_index(s).and_then(|i| spans.pass[i]);
        let optimizer_temporaries = spans
            .pass
            .contains(&Some(Pass::Optimizer))
            .then(|| OptimizerTemporaries::find(doc, pass_of))
            .flatten();
        let ops = match &analysis.operations {
            Ok(p) => Ok(OpTable {
                totals: p.totals.clone(),
                rows: p.rows.clone(),
            }),
            Err(why) => Err(why.reason.clone()),
        };
        Self {
            headline: StepFigures::of(doc, analysis),
            peak,
            memory_unavailable: memory_unavailable(doc, analysis),
            allocated_by_pass: logical
                .map(|l| {
                    l.pass_peaks
                        .iter()
                        .map(|p| (p.pass, p.allocated_bytes))
                        .collect()
                })
                .unwrap_or_default(),
            pass_peak_by_category: logical
                .map(|l| {
                    l.pass_peaks
                        .iter()
                        .map(|p| (p.pass, p.peak.by_category.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            optimizer_temporaries,
            live_after_bytes: logical.map(|l| l.live_at_end.bytes),
            steps: analysis.steps.rows.clone(),
            growth: analysis.steps.growth.clone(),
            warmup_steps: doc.meta.warmup_steps,
            call_rows: analysis.sites.as_ref().map(|s| s.rows.clone()),
            ops,
        }
    }

    /// The peak's bytes, when memory was captured.
    pub fn peak_bytes(&self) -> Option<u64> {
        self.peak.as_ref().map(|p| p.live_bytes)
    }
}

/// Why memory figures cannot be budgeted: no memory at all, or none seen by the tracking
/// allocator (then only registered storages at registration time are in the trace).
fn memory_unavailable(doc: &TraceDocument, analysis: &Analysis) -> Option<String> {
    let why_declared = || {
        doc.meta
            .capture_contract
            .as_ref()
            .and_then(|c| {
                c.reasons
                    .get(&ReasonKey::Field(ContractField::LogicalMemory))
                    .cloned()
            })
            .map(|r| format!(" (the capture says: {r})"))
            .unwrap_or_default()
    };
    if !analysis
        .capabilities
        .allows(&[CapabilityKind::LogicalMemory])
    {
        return Some(format!(
            "the trace has no storage lifetimes{}",
            why_declared()
        ));
    }
    let by_allocator = analysis.memory.logical.as_ref().is_some_and(|l| {
        l.lifetimes
            .iter()
            .any(|s| s.source == Some(MemorySource::Allocator))
    });
    (!by_allocator).then(|| {
        format!(
            "no storage in the trace was seen by the tracking allocator{}: install it in the test binary \
             (`#[global_allocator] static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();`)",
            why_declared()
        )
    })
}
