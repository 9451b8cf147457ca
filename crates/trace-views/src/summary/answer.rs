//! The answer record: the peak, what held it by category, the findings that would change it
//! most with their savings, and what the trace could not see.

use super::records::{caveats, FindingRecord};
use serde::Serialize;
use trace_format::duration;
use trace_graph::{Analysis, CapabilityLevel};
use trace_schema::TraceDocument;

/// Groups of the peak's storages the answer names.
pub const ANSWER_GROUPS: usize = 3;

/// Findings the answer names as what would lower the peak.
pub const ANSWER_FINDINGS: usize = 2;

/// One category at the peak.
#[derive(Debug, Clone, Serialize)]
pub struct HeldCategory {
    /// The category.
    pub category: trace_schema::MemoryCategory,
    /// Its live bytes at the peak.
    pub bytes: u64,
}

/// A finding the answer names, with its figure.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerFinding {
    /// Its code.
    pub code: String,
    /// The figure: the what-if sentence (memory) or the estimated time and share (time).
    pub text: String,
    /// The share of the run's peak or time it would remove, in [0, 1].
    pub share: f64,
    /// The figure is exact (memory: the replay frees exactly what the advice frees).
    pub exact: bool,
}

/// The answer first: what held the peak (by category, its fixed and batch-scaled parts and
/// the largest merged groups), the findings that would lower it most with their replayed
/// figures, and the time finding with the most to gain.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AnswerRecord {
    /// Categories live at the peak, largest first.
    pub held_by: Vec<HeldCategory>,
    /// Bytes of the peak that do not scale with the batch (parameters, gradients, optimizer
    /// state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_bytes: Option<u64>,
    /// Bytes that scale with the batch (activations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_scaled_bytes: Option<u64>,
    /// The largest groups of storages live at the peak, identical ones merged (by op and pass
    /// with allocation sites, else by allocating span).
    pub top_groups: Vec<crate::live::HeldGroup>,
    /// The grouping of `top_groups`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_by: Option<crate::live::GroupBy>,
    /// The groups are over the largest storages only (a summary analysis lists the first
    /// `SUMMARY_TOP`): their bytes are lower bounds.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub groups_lower_bound: bool,
    /// The memory findings whose advice lowers the run's peak most, largest saving first.
    pub lower_the_peak: Vec<AnswerFinding>,
    /// The finding about time with the largest share of the measured region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save_time: Option<AnswerFinding>,
}

impl AnswerRecord {
    /// From the analysis and the ranked findings.
    pub fn of(doc: &TraceDocument, analysis: &Analysis, findings: &[FindingRecord]) -> Self {
        let mut a = Self::default();
        if let Some(p) = analysis
            .memory
            .logical
            .as_ref()
            .and_then(|l| l.peak.as_ref())
        {
            let mut held: Vec<HeldCategory> = p
                .by_category
                .iter()
                .filter(|(_, &b)| b > 0)
                .map(|(&category, &bytes)| HeldCategory { category, bytes })
                .collect();
            held.sort_by_key(|h| std::cmp::Reverse(h.bytes));
            a.held_by = held;
            let (fixed, scaled) = trace_graph::batch_split(&p.by_category);
            a.fixed_bytes = Some(fixed);
            a.batch_scaled_bytes = Some(scaled);
            // the first SUMMARY_TOP storages (largest first), in either detail: what
            // `summary` prints does not depend on how much the analysis kept
            let live: Vec<&trace_memory::StorageLifetime> = p
                .live_allocations
                .iter()
                .take(trace_memory::SUMMARY_TOP)
                .collect();
            let by = if analysis.sites.is_some() {
                crate::live::GroupBy::Op
            } else {
                crate::live::GroupBy::Span
            };
            let mut groups =
                crate::live::group(&live, doc, &analysis.spans, analysis.sites.as_ref(), by);
            groups.truncate(ANSWER_GROUPS);
            a.groups_lower_bound = (live.len() as u64) < p.live_allocation_count;
            a.groups_by = (!groups.is_empty()).then_some(by);
            a.top_groups = groups;
        }
        let mut memory: Vec<&FindingRecord> = findings
            .iter()
            .filter(|f| f.what_if.as_ref().is_some_and(|w| w.saving_bytes() > 0))
            .collect();
        memory
            .sort_by_key(|f| std::cmp::Reverse(f.what_if.as_ref().map_or(0, |w| w.saving_bytes())));
        a.lower_the_peak = memory
            .into_iter()
            .take(ANSWER_FINDINGS)
            .filter_map(|f| {
                let w = f.what_if.as_ref()?;
                Some(AnswerFinding {
                    code: f.code.clone(),
                    text: w.sentence(),
                    share: w.saving_share(),
                    exact: w.exact,
                })
            })
            .collect();
        a.save_time = findings
            .iter()
            .filter(|f| f.impact.is_some_and(|i| i.plane == "time"))
            .find_map(|f| {
                let i = f.impact?;
                let e = &analysis
                    .findings
                    .iter()
                    .find(|x| x.code.as_str() == f.code && x.summary == f.summary)?
                    .evidence;
                let d = e.duration_ns?;
                let est = if e.share.is_some() { "est. " } else { "" };
                Some(AnswerFinding {
                    code: f.code.clone(),
                    text: format!(
                        "{est}{} ({:.1}% of the measured region){}",
                        duration(d),
                        i.share * 100.0,
                        e.operation
                            .as_deref()
                            .map(|op| format!(" in {op}"))
                            .unwrap_or_default()
                    ),
                    share: i.share,
                    exact: e.share.is_none(),
                })
            });
        a
    }
}

/// The coverage statement: every capability below complete with its reason, dropped events, and
/// the host-handle caveat on GPU devices.
pub fn not_seen(doc: &TraceDocument, analysis: &Analysis) -> Vec<String> {
    let mut out = Vec::new();
    for c in &analysis.capabilities.capabilities {
        if c.level != CapabilityLevel::Complete {
            out.push(format!(
                "{} {}: {}",
                c.kind.as_str(),
                c.level.as_str(),
                c.reason
            ));
        }
    }
    out.extend(caveats(doc));
    out
}
