//! One capture as the run log records it ([`CaptureRecord`]) and what became of it.

use serde::{Deserialize, Serialize};

/// What became of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureState {
    /// Its bundle is in the run directory.
    Kept,
    /// Its bundle was deleted to bound the directory (its figures stay in the log).
    Dropped,
    /// No bundle: the capture or its bundling failed (`reason` says why).
    Failed,
}

/// One capture of the run, as the log records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureRecord {
    /// The captured step.
    pub step: u64,
    /// Kept, dropped or failed.
    pub state: CaptureState,
    /// The bundle's directory name, while kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// Why it was dropped or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why a kept bundle stays ([`super::retention`]'s reasons).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_for: Vec<String>,
    /// The trace's run id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Wall time of the measured step, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_time_ns: Option<u64>,
    /// The logical peak, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_peak_bytes: Option<u64>,
    /// Logical bytes live when the trace ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_live_end_bytes: Option<u64>,
    /// The process's live heap bytes at the step's end (the last device sample's `used_bytes`:
    /// the counting tracking allocator, absolute since process start, less the probe's symbol
    /// cache and what its bundler's threads hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_end_bytes: Option<u64>,
    /// The process's resident bytes at the step's end (the last device sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_end_bytes: Option<u64>,
    /// The trace's size, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_bytes: Option<u64>,
    /// The bundle's size on disk (its files and manifest), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_bytes: Option<u64>,
    /// From the trace finished to its bundle published (load, figures, publish), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_to_bundle_ns: Option<u64>,
}

impl CaptureRecord {
    /// A record with no figures.
    pub fn new(step: u64, state: CaptureState) -> Self {
        Self {
            step,
            state,
            bundle: None,
            reason: None,
            kept_for: Vec::new(),
            run_id: None,
            wall_time_ns: None,
            logical_peak_bytes: None,
            logical_live_end_bytes: None,
            heap_end_bytes: None,
            resident_end_bytes: None,
            trace_bytes: None,
            bundle_bytes: None,
            finish_to_bundle_ns: None,
        }
    }

    /// Live memory at the step's end for growth across captures: the process heap when
    /// counted, else the logical bytes live when the trace ended.
    pub fn live_end_bytes(&self) -> Option<u64> {
        self.heap_end_bytes.or(self.logical_live_end_bytes)
    }
}
