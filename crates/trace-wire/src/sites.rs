//! The wire types of allocation sites (trace/13): where each storage's data buffer was
//! allocated, as a call stack of the symbol table that sampled stacks use ([`crate::sampling`]).
//!
//! A storage-sized allocation (at least [`AllocSitesEvent::threshold_bytes`]) inside the capture
//! window has its stack copied by the allocator hook (return addresses only; resolved after the
//! step). Equal address stacks are one site. A `memory` alloc event names its site by id
//! ([`crate::MemoryEvent::site`]); the analysis reads the site's stack as the allocating
//! operation with the op rules of `trace-ops`.
//!
//! # Order on the wire
//! Memory events are written while the step runs, before symbols exist, so they refer to site
//! ids that are defined later: after the step a producer writes every `frame`, every `stack`,
//! then every `site` (referring only to stacks already written), then the one `alloc_sites`
//! account. A reader resolves a memory event's `site` at the end of the load; a site id never
//! defined is a semantic issue and the event keeps no site.
//!
//! # Example
//! ```text
//! {"kind":"memory","timestamp_ns":20,"action":"alloc","device":"cpu","storage_id":"st1","bytes":4096,"span_id":"s2","category":"activation","source":"allocator","site":0,"thread":1}
//! {"kind":"frame","id":0,"function":"candle_core::tensor::Tensor::matmul","file":"/src/candle-core-0.11.1/src/tensor.rs","line":1234}
//! {"kind":"frame","id":1,"function":"mlp::train_step","file":"examples/src/mlp.rs","line":80}
//! {"kind":"stack","id":0,"frames":[0,1]}
//! {"kind":"site","id":0,"stack_id":0}
//! {"kind":"alloc_sites","threshold_bytes":4096,"unwinder":"frame_pointers","symbols":"line_tables","captured":1,"lost":0,"truncated":0,"small_allocs":12,"small_bytes":960,"sites":1}
//! ```

use serde::{Deserialize, Serialize};

use crate::sampling::SymbolQuality;

/// One allocation site (trace/13): a distinct call stack at which at least one storage's data
/// was allocated.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SiteEvent {
    /// Id, unique among sites; [`crate::MemoryEvent::site`] refers to it.
    pub id: u32,
    /// The call stack (a [`crate::StackEvent`] id), innermost first: the allocator's caller,
    /// then outward.
    pub stack_id: u32,
}

/// The allocation-site capture's account of itself (trace/13): exactly one in a trace whose
/// memory events carry sites. Counts cover the capture window, all threads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AllocSitesEvent {
    /// Allocations of at least this many bytes had their stack captured; smaller ones are
    /// only counted ([`Self::small_allocs`], [`Self::small_bytes`]).
    pub threshold_bytes: u64,
    /// How stacks were walked: `frame_pointers` (the frame-pointer chain, when the binary was
    /// built with `-C force-frame-pointers=yes` and a calibration walk agreed with the DWARF
    /// unwinder) or `libgcc` (the DWARF unwinder through `backtrace`).
    pub unwinder: String,
    /// How well the sites' frames were symbolised.
    pub symbols: SymbolQuality,
    /// Allocations at or above the threshold whose stack was captured.
    pub captured: u64,
    /// Allocations at or above the threshold whose stack was not captured (the stack pool was
    /// full, or the hook re-entered itself); their storages carry no site.
    pub lost: u64,
    /// Captured stacks cut at the depth limit (their outermost frames are missing).
    #[serde(default)]
    pub truncated: u64,
    /// Of [`Self::lost`]: captures the producer skipped to bound its own cost (the probe's
    /// DWARF walks may take at most a share of the step), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_budget: Option<u64>,
    /// Allocations below the threshold inside the window (counted, no stack).
    pub small_allocs: u64,
    /// Their bytes (sum of requested sizes; saturating).
    pub small_bytes: u64,
    /// Distinct sites written.
    pub sites: u64,
    /// Time spent walking stacks inside the allocator hook, all threads, ns (measured with the
    /// hook's clock), when the producer measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_ns: Option<u64>,
}

impl AllocSitesEvent {
    /// The account's own rules: a threshold above 0, `sites ≤ captured`, `truncated ≤
    /// captured`, an unwinder named. Returns every problem found (empty when it holds).
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.threshold_bytes == 0 {
            problems.push("alloc_sites `threshold_bytes` is 0".to_string());
        }
        if self.sites > self.captured {
            problems.push(format!(
                "alloc_sites: {} sites from only {} captured stacks",
                self.sites, self.captured
            ));
        }
        if self.truncated > self.captured {
            problems.push(format!(
                "alloc_sites: {} truncated stacks exceed the {} captured",
                self.truncated, self.captured
            ));
        }
        if self.lost_budget.is_some_and(|b| b > self.lost) {
            problems.push(format!(
                "alloc_sites: {} captures skipped for the budget exceed the {} lost",
                self.lost_budget.unwrap_or(0),
                self.lost
            ));
        }
        if self.unwinder.trim().is_empty() {
            problems.push("alloc_sites `unwinder` is empty".to_string());
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_states_its_own_rules() {
        let ok = AllocSitesEvent {
            threshold_bytes: 4096,
            unwinder: "frame_pointers".into(),
            symbols: SymbolQuality::LineTables,
            captured: 10,
            lost: 0,
            truncated: 1,
            lost_budget: None,
            small_allocs: 3,
            small_bytes: 300,
            sites: 4,
            capture_ns: Some(10_000),
        };
        assert!(ok.validate().is_empty());
        let bad = AllocSitesEvent {
            threshold_bytes: 0,
            sites: 11,
            truncated: 12,
            unwinder: " ".into(),
            ..ok
        };
        assert_eq!(bad.validate().len(), 4, "{:?}", bad.validate());
    }
}
