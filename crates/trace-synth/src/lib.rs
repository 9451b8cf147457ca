//! Deterministic generator of realistic candle-graph event streams (the schema version this
//! workspace writes, `trace_schema::WRITE_VERSION`: trace/13), for tests and
//! benchmarks of every analysis crate (a dev crate: nothing ships it).
//!
//! The stream is produced lazily by [`SynthEvents`], an iterator of [`TraceEvent`], so a trace
//! of 10^7 memory events is written without holding it in memory. The same [`SynthConfig`]
//! (including `seed`) always yields the same events; the generator uses its own xorshift PRNG and
//! no clock, no environment, no hash-map iteration order.
//!
//! # What a generated trace looks like
//! One training step, in this order:
//! - `meta` (a capture contract declaring complete operations and logical memory,
//!   partial physical memory, complete gradients with an exact gradient contract over the
//!   generated parameters, host info, `tracking_allocator_installed: true`);
//! - the single measured root span `s1` (`train_step`), then `parameters` pre-existing parameter
//!   allocs (`pre_existing: true`, category `parameter`, source `registry`) at the root's start;
//! - three pass spans, `forward`, `backward`, `optimizer` (with `step` set), each holding its
//!   share of module spans nested up to three levels below it (forward:
//!   `layers.N` → `attn` → `q_proj`/`k_proj`/`v_proj`/`o_proj`, `mlp` → `fc1`/`fc2`, with
//!   `module_path` and `instance_key`; backward: `layers.N.backward` → `attn.backward`,
//!   `mlp.backward`, layers in reverse order; optimizer: `adamw.group N` → `update`). Intervals are
//!   well nested, start times increase, every span is closed;
//! - inside each span, its share of `op` events (timestamps increasing, durations within the
//!   span) interleaved with `memory` events:
//!   - forward: activations allocated (freed in reverse order during backward), temporaries
//!     allocated and freed soon after, and **aliases**: a second `alloc` of a live storage from
//!     another tensor id (a view);
//!   - backward: activations freed, gradients allocated (category `gradient`), temporaries;
//!   - optimizer: optimizer state allocated once per parameter (two moments, live at the end),
//!     gradients freed, temporaries;
//!   - storage ids are `<address hex>.<generation>` as the probe writes them. A freed address is
//!     reused immediately by the next alloc on that device (same address, next generation, so a
//!     new lifetime), and in about 1 in 8 reuses the very **same storage id string** is
//!     allocated again after its free (a new lifetime with a reused id);
//!   - about 1 in 10 allocs is seen only by the allocator (`source: allocator`, no tensor id,
//!     shape, dtype or op name); about 1 in 4 frees has no `bytes`;
//! - `device_memory` samples spread over the span starts, one per sample on a rotating device,
//!   with used (logical live bytes on that device plus a fixed overhead), reserved, capacity and,
//!   on the host, resident bytes;
//! - one `gradient` fact per parameter at the end of backward (mostly `present`, some `zero`
//!   and `missing`, as a real run may show), a `tensor_stats` summary of the loss, and a final
//!   `terminal` (`complete`) no earlier than any evidence.
//!
//! # Several steps
//! With `steps` above one the trace is a multi-step capture: the meta names the steps
//! (`capture_step` 2, `last_capture_step` 1 + `steps`), the root holds one `step <n>` span per
//! step (with its `step_index`, n from 2), and each step span holds its own forward, backward and
//! optimizer pass with the layout above; the spans, ops and memory events are shared evenly
//! among the steps (at least `1 + 4 × steps` spans), the memory events 45/35/20% among the
//! passes (one step: 45/40/15%). The optimizer state is allocated once, in the first steps'
//! optimizer passes, and each optimizer pass ends by freeing what its step left live
//! (activations, gradients, temporaries; at most one storage stays, a temporary the pass's last
//! event may allocate after the others are freed, and the next step frees it), so each step
//! begins with the parameters and the optimizer state: the steps are alike and the live set does
//! not grow with the number of steps. Gradient facts come once, in the last step's backward.
//!
//! Counts are **exact**: the loaded document has [`SynthConfig::spans_generated`] spans (`spans`,
//! or the layout's minimum when that is more), `ops` op events and
//! `memory_events` memory events (of which `min(parameters, memory_events)` are the pre-existing
//! parameter allocs). `device_memory_samples`, `parameters` gradient facts, one `tensor_stats`,
//! meta and terminal come on top.
//!
//! ```
//! use trace_synth::{SynthConfig, synth_events};
//! use trace_schema::TraceDocument;
//! let config = SynthConfig { memory_events: 1_000, spans: 100, ops: 500, ..SynthConfig::default() };
//! let doc = TraceDocument::from_events(synth_events(&config));
//! assert_eq!(doc.memory.len(), 1_000);
//! assert_eq!(doc.spans.len(), 100);
//! assert_eq!(doc.ops.len(), 500);
//! assert!(doc.semantic_issues.is_empty());
//! ```

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

use trace_schema::*;

/// What to generate. Every count is exact (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConfig {
    /// Memory events in total (pre-existing parameter allocs included).
    pub memory_events: u64,
    /// Spans in total, the root, the pass spans and any step spans included (at least
    /// [`SynthConfig::min_spans`] are generated).
    pub spans: u64,
    /// Op events.
    pub ops: u64,
    /// Number of devices (at least 1). One device: `cpu`. More: `cuda:0` … `cuda:{n-2}` plus
    /// `cpu` (host staging buffers); layers are spread over the accelerators.
    pub devices: u32,
    /// PRNG seed.
    pub seed: u64,
    /// Parameters (pre-existing allocs, gradient facts, gradient contract entries).
    pub parameters: u64,
    /// `device_memory` samples.
    pub device_memory_samples: u64,
    /// At most this many forward activations are kept live for backward; beyond it, forward
    /// allocs are temporaries (bounds the generator's own memory).
    pub max_live_activations: usize,
    /// Training steps (0 is taken as 1). One: the layout of the module docs. More: a multi-step
    /// capture (see *Several steps* in the module docs): each step a `step <n>` span under the
    /// root with its own forward, backward and optimizer, every step alike.
    pub steps: u64,
}

impl Default for SynthConfig {
    /// 10^4 memory events, 10^3 spans, 10^4 ops, one device, seed 1, 64 parameters, 100 samples.
    fn default() -> Self {
        Self {
            memory_events: 10_000,
            spans: 1_000,
            ops: 10_000,
            devices: 1,
            seed: 1,
            parameters: 64,
            device_memory_samples: 100,
            max_live_activations: 100_000,
            steps: 1,
        }
    }
}

impl SynthConfig {
    /// The benchmark mix for `n` events in total: 60% memory, 30% ops, 10% spans (a span is
    /// two events, start and end), two devices, 256 parameters, `n / 1000` device samples.
    pub fn mix(n: u64) -> Self {
        Self {
            memory_events: n * 6 / 10,
            spans: (n / 20).max(4),
            ops: n * 3 / 10,
            devices: 2,
            parameters: 256,
            device_memory_samples: n / 1000,
            ..Self::default()
        }
    }

    /// The benchmark mix of [`mix`](Self::mix) as a multi-step capture of steps of about 10^5
    /// events each (`n / 100_000` steps, at least one): every step alike, so the trace grows in
    /// length and not in shape. A scaling benchmark needs that; the one-step mix's single step
    /// grows its live set with its size (its backward allocates more gradients than its
    /// optimizer frees).
    pub fn steady(n: u64) -> Self {
        Self {
            steps: (n / 100_000).max(1),
            ..Self::mix(n)
        }
    }

    /// The fewest spans the layout has: the root and the three pass spans; in a multi-step
    /// capture the root and, per step, its step span and three pass spans (`1 + 4 × steps`,
    /// saturating).
    pub fn min_spans(&self) -> u64 {
        if self.steps > 1 {
            self.steps.saturating_mul(4).saturating_add(1)
        } else {
            4
        }
    }

    /// Spans generated: `spans`, or [`min_spans`](Self::min_spans) when that is more.
    pub fn spans_generated(&self) -> u64 {
        self.spans.max(self.min_spans())
    }

    /// Device labels, in index order.
    pub fn device_names(&self) -> Vec<String> {
        let n = self.devices.max(1);
        if n == 1 {
            return vec!["cpu".to_string()];
        }
        let mut names: Vec<String> = (0..n - 1).map(|i| format!("cuda:{i}")).collect();
        names.push("cpu".to_string());
        names
    }

    /// Number of events the stream yields in total.
    pub fn total_events(&self) -> u64 {
        2 + 2 * self.spans_generated()
            + self.ops
            + self.memory_events
            + self.device_memory_samples
            + self.parameters
            + 1
    }
}

/// Generates the stream described by `config` (see the module docs).
pub fn synth_events(config: &SynthConfig) -> SynthEvents {
    SynthEvents::new(config.clone())
}

/// Writes the stream described by `config` to `path` (one JSON line per event); returns the
/// number of events written.
///
/// # Errors
/// I/O errors creating or writing the file.
pub fn write_synth_trace(path: impl AsRef<Path>, config: &SynthConfig) -> io::Result<u64> {
    let file = File::create(path)?;
    let mut writer = TraceWriter::new(BufWriter::with_capacity(1 << 20, file));
    for event in synth_events(config) {
        writer.write_event(&event)?;
    }
    writer.flush()?;
    Ok(writer.events_written())
}

mod events;
mod rng;
#[cfg(test)]
mod tests;

pub use events::SynthEvents;
use rng::{share, Rng};
