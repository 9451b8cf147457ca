//! The headline figures of one captured step ([`StepFigures`]): what a series of captures
//! (`candle-graph series`) and a comparison of ranks (`summary` on a directory of rank traces)
//! read side by side — wall time, the time of each pass, the logical peaks (global, per device,
//! per pass) and what held the peak, tensor statistics and gradient norms.
//!
//! Every figure is `None` (or absent from its map) when the trace did not observe it; none is
//! ever 0 for "unknown". Built in O(n log n) in the spans (pass intervals are sorted and merged)
//! and O(n) in the other events.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use trace_schema::{MemoryCategory, Pass, TraceDocument};

use crate::intervals::merged_length;
use crate::Analysis;

/// Schema of the serialized [`StepFigures`].
pub const STEP_FIGURES_SCHEMA: &str = "candle-graph/step-figures/1";

/// The headline figures of one captured step (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    /// [`STEP_FIGURES_SCHEMA`].
    pub schema: String,
    /// The trace's run id.
    pub run_id: String,
    /// The entrypoint (e.g. `llama::train_step`).
    pub entrypoint: String,
    /// `train` or `infer`, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The one-based step captured, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_step: Option<u64>,
    /// Device label of the run (`cpu`, `cuda:0`), when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Global rank of the process (trace/13 `rank`), when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Number of ranks of the job (trace/13 `world_size`), when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// The trace was cut short: its figures are lower bounds.
    pub truncated: bool,
    /// Wall time of the single measured region, ns; `None` without exactly one closed
    /// measured region (or when the execution graph was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outer_wall_time_ns: Option<u64>,
    /// Per pass: wall time covered by the closed spans declaring it (their intervals merged,
    /// so nested spans of one pass count once), ns. Passes without a closed span are absent.
    pub pass_time_ns: BTreeMap<Pass, u64>,
    /// The global logical peak (live storage bytes over all devices); `None` without memory
    /// events or when the sizes overflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_peak_bytes: Option<u64>,
    /// When the global peak was first reached, ns since session start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_peak_timestamp_ns: Option<u64>,
    /// The pass of the span that held the global peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_peak_pass: Option<Pass>,
    /// Path of the span that held the global peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_peak_span: Option<String>,
    /// The category with the most bytes live at the global peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_peak_dominant_category: Option<MemoryCategory>,
    /// Each device's own logical peak, bytes (devices with one).
    pub device_peak_bytes: BTreeMap<String, u64>,
    /// The peak inside each pass, bytes (everything live, on all devices).
    pub pass_peak_bytes: BTreeMap<Pass, u64>,
    /// Tensor statistics by label (the first event of each label, in file order).
    pub tensor_stats: BTreeMap<String, TensorStatFigures>,
    /// Gradient facts by `root/key` (the first event of each, in file order).
    pub gradients: BTreeMap<String, GradientFigures>,
}

/// Statistics of one labelled tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorStatFigures {
    /// Elements.
    pub elements: u64,
    /// Non-finite elements.
    pub non_finite: u64,
    /// Root mean square over the finite elements, when computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rms: Option<f64>,
    /// Largest absolute finite value, when computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abs_max: Option<f64>,
    /// Mean of the finite elements, when computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
}

/// One gradient fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradientFigures {
    /// `present`, `missing`, `zero` or `non_finite`.
    pub state: String,
    /// L2 norm, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
}

/// Wall time covered by each pass: the closed spans declaring a pass, their `[start, end)`
/// intervals sorted and merged, summed (checked: a sum past `u64::MAX` saturates, which no
/// real trace reaches and a hostile one cannot use to wrap).
pub fn pass_times(doc: &TraceDocument) -> BTreeMap<Pass, u64> {
    let mut by_pass: BTreeMap<Pass, Vec<(u64, u64)>> = BTreeMap::new();
    for s in &doc.spans {
        if let (Some(pass), Some(d)) = (s.pass, s.duration_ns) {
            by_pass
                .entry(pass)
                .or_default()
                .push((s.start_ns, s.start_ns.saturating_add(d)));
        }
    }
    by_pass
        .into_iter()
        .map(|(pass, mut iv)| (pass, merged_length(&mut iv)))
        .collect()
}

impl StepFigures {
    /// The figures of `doc` from its analysis.
    pub fn of(doc: &TraceDocument, analysis: &Analysis) -> Self {
        let m = &doc.meta;
        let logical = analysis.memory.logical.as_ref();
        let peak = logical.and_then(|l| l.peak.as_ref());
        let mut tensor_stats = BTreeMap::new();
        for t in &doc.tensor_stats {
            tensor_stats
                .entry(t.label.clone())
                .or_insert_with(|| TensorStatFigures {
                    elements: t.elements,
                    non_finite: t.non_finite,
                    rms: t.rms,
                    abs_max: t.abs_max,
                    mean: t.mean,
                });
        }
        let mut gradients = BTreeMap::new();
        for g in &doc.gradients {
            let state: &'static str = g.state.into();
            gradients
                .entry(format!("{}/{}", g.root, g.key))
                .or_insert_with(|| GradientFigures {
                    state: state.to_string(),
                    norm: g.norm,
                });
        }
        Self {
            schema: STEP_FIGURES_SCHEMA.to_string(),
            run_id: m.run_id.clone(),
            entrypoint: m.entrypoint.clone(),
            phase: m.phase.map(|p| <&'static str>::from(p).to_string()),
            capture_step: m.capture_step,
            device: m.device.clone(),
            rank: m.rank,
            world_size: m.world_size,
            truncated: doc.is_truncated(),
            outer_wall_time_ns: analysis.graph.as_ref().and_then(|g| g.outer_wall_time_ns),
            pass_time_ns: pass_times(doc),
            logical_peak_bytes: peak.map(|p| p.live_bytes),
            logical_peak_timestamp_ns: peak.map(|p| p.timestamp_ns),
            logical_peak_pass: peak.and_then(|p| p.context.pass),
            logical_peak_span: peak
                .and_then(|p| p.context.span_id.as_deref())
                .and_then(|id| analysis.spans.indexed_path_of_id(doc, id)),
            logical_peak_dominant_category: peak.and_then(|p| p.context.dominant_category),
            device_peak_bytes: logical
                .map(|l| {
                    l.by_device
                        .iter()
                        .filter_map(|d| d.peak.as_ref().map(|p| (d.device.clone(), p.live_bytes)))
                        .collect()
                })
                .unwrap_or_default(),
            pass_peak_bytes: logical
                .map(|l| {
                    l.pass_peaks
                        .iter()
                        .map(|p| (p.pass, p.peak.live_bytes))
                        .collect()
                })
                .unwrap_or_default(),
            tensor_stats,
            gradients,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_intervals_count_overlaps_once() {
        assert_eq!(merged_length(&mut []), 0);
        assert_eq!(merged_length(&mut [(10, 20), (0, 5), (15, 30)]), 25);
        assert_eq!(merged_length(&mut [(0, 10), (2, 3), (10, 12)]), 12);
    }
}
