//! [`CaptureSummary`]: the figures of one capture window, and what they say the window lost of
//! the logical-memory coverage.

use crate::device::DeviceLabel;
use crate::storage::device_window::DeviceStorages;
use crate::storage::join::JoinStats;
use crate::storage::sites::SiteCapture;

/// Figures of one capture window, for the summary and the README.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureSummary {
    /// What the join saw (signature matches, registered frees, …).
    pub join: JoinStats,
    /// Raw hook events drained in the window.
    pub raw_events: u64,
    /// Allocation calls seen by the armed hook in the window.
    pub armed_alloc_calls: u64,
    /// Events dropped because the ring was full (running count since process start).
    pub dropped_events: u64,
    /// Block-sized allocations of the window still live and unidentified at its end: an upper
    /// bound on unregistered storages missing from the trace.
    pub unidentified_live_blocks: u64,
    /// Unregistered storages allocated in the window and still live at its end (a cache that
    /// outlives the call, a tensor kept across steps): written as an `alloc` at their data
    /// buffer's allocation with their heap bytes and no `free` (live at the end of the trace).
    pub live_at_end_storages: u64,
    /// Their heap bytes.
    pub live_at_end_bytes: u64,
    /// Unregistered storages allocated before the window and freed in it: recognised at their
    /// free (drop signature confirmed by their tensor block) and written as `pre_existing` at
    /// capture start with their heap bytes, plus their free.
    pub unregistered_pre_window_frees: u64,
    /// Registered storages written as `pre_existing`.
    pub pre_existing_storages: u64,
    /// Storages registered in the window.
    pub registered_in_window: u64,
    /// Unregistered storages written (alloc + free pairs).
    pub anonymous_storages: u64,
    /// Registered CPU storages whose freed data buffer size (what an unregistered storage's
    /// bytes are taken from) differed from their `len × element size`; 0 means the allocator's
    /// size is the storage's own size for every storage checked.
    pub data_size_mismatches: u64,
    /// Registered CPU storages whose free showed the drop signature (the sample of that check).
    pub data_size_checked: u64,
    /// Storages registered while the watch table was full (not watched): on CPU their frees are
    /// still found by the confirmed drop signature; on other devices they are lost.
    pub unwatched_registrations: u64,
    /// Storages the session tracker found live at capture start (allocated since the session
    /// was created, neither parameters nor optimizer state): written as `pre_existing`.
    pub adopted_storages: u64,
    /// Their heap bytes.
    pub adopted_bytes: u64,
    /// The allocation-site capture of the window (`None`: sites off).
    pub sites: Option<SiteCapture>,
    /// CUDA storages written from the device-allocation ledger (feature `cuda-ledger`; zero
    /// elsewhere).
    pub device_storages: DeviceStorages,
}

impl CaptureSummary {
    /// What this window lost of the logical-memory coverage declared at its start, on `device`
    /// (one sentence per limit met); empty when nothing was lost. Written into the terminal's
    /// `coverage_lost["logical_memory"]`.
    pub fn logical_memory_lost(&self, device: DeviceLabel) -> Vec<String> {
        let mut lost = Vec::new();
        if self.unidentified_live_blocks > 0 {
            lost.push(format!(
                "{} storage-sized allocations of the window were still live and unidentified at \
                 its end (possible unregistered storages, missing from live bytes after their \
                 allocation)",
                self.unidentified_live_blocks
            ));
        }
        if self.data_size_mismatches > 0 {
            lost.push(format!(
                "{} registered storages freed a data buffer of another size than their recorded \
                 heap bytes",
                self.data_size_mismatches
            ));
        }
        if self.unwatched_registrations > 0 && !device.is_cpu() {
            lost.push(format!(
                "{} registered storages were not watched (watch table full): their frees are \
                 unknown",
                self.unwatched_registrations
            ));
        }
        lost
    }
}
