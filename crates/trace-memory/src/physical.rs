//! The physical plane: device memory samples, kept apart from the logical plane, and the
//! logical-vs-physical comparison.

use serde::Serialize;
use trace_schema::TraceDocument;

use crate::logical::LogicalMemoryProfile;
use crate::replay::CATEGORIES;

/// An observed extreme of one sample field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Observed {
    /// Bytes.
    pub bytes: u64,
    /// Time of the first sample reaching it, ns.
    pub timestamp_ns: u64,
}

/// One sample with the logical live bytes of the same device at that time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhysicalSample {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Used bytes.
    pub used_bytes: Option<u64>,
    /// Free bytes.
    pub free_bytes: Option<u64>,
    /// Reserved bytes (caching allocator).
    pub reserved_bytes: Option<u64>,
    /// Capacity.
    pub capacity_bytes: Option<u64>,
    /// Process resident set size.
    pub resident_bytes: Option<u64>,
    /// Logical live bytes on this device after every memory batch at or before the sample
    /// (step function); `None` without a logical plane for this device.
    pub logical_live_bytes: Option<u64>,
    /// `reserved − logical live`: the allocator cache (negative when logical tracking exceeds
    /// the reservation); `None` unless both exist.
    pub allocator_cache_bytes: Option<i128>,
}

/// Logical-vs-physical figures of one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogicalVsPhysical {
    /// Logical peak of this device.
    pub logical_peak_bytes: u64,
    /// Physical peak used of this device.
    pub physical_peak_used_bytes: Option<u64>,
    /// `logical peak ÷ physical peak used` (`None` when either is missing or used is 0).
    pub coverage_ratio: Option<f64>,
    /// Largest `reserved − logical` over samples with both, and its time.
    pub max_allocator_cache_bytes: Option<i128>,
    /// Time of that sample, ns.
    pub max_allocator_cache_timestamp_ns: Option<u64>,
    /// How to read the ratio on this device (set for CPU devices).
    pub note: Option<String>,
}

/// Physical statistics of one device. Every figure is `None` when never observed; nothing is
/// derived from another field (capacity is never used + free).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhysicalDeviceStats {
    /// Device label.
    pub device: String,
    /// Samples.
    pub sample_count: u64,
    /// Samples with `used_bytes`.
    pub used_sample_count: u64,
    /// Samples with `free_bytes`.
    pub free_sample_count: u64,
    /// Samples with `reserved_bytes`.
    pub reserved_sample_count: u64,
    /// Samples with `capacity_bytes`.
    pub capacity_sample_count: u64,
    /// Samples with `resident_bytes`.
    pub resident_sample_count: u64,
    /// Peak used.
    pub peak_used: Option<Observed>,
    /// Peak reserved.
    pub peak_reserved: Option<Observed>,
    /// Peak resident.
    pub peak_resident: Option<Observed>,
    /// Minimum free.
    pub minimum_free: Option<Observed>,
    /// Maximum capacity.
    pub maximum_capacity: Option<Observed>,
    /// Comparison with the logical plane of the same device; `None` without logical events on it.
    pub logical_comparison: Option<LogicalVsPhysical>,
    /// The samples in time order.
    pub samples: Vec<PhysicalSample>,
}

/// Evidence derived only from `device_memory` samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhysicalMemoryProfile {
    /// Samples over all devices.
    pub sample_count: u64,
    /// Per device, sorted by label.
    pub by_device: Vec<PhysicalDeviceStats>,
}

/// The note attached to CPU comparisons.
pub const CPU_RATIO_NOTE: &str = "on CPU the physical figure counts all process heap \
(tensors, buffers, the runtime), so logical ÷ physical is below 1 when a sample lands on the \
logical peak; samples are taken only at span boundaries (and RSS lags freed or untouched pages), \
so a ratio above 1 means the samples missed the peak, not that storages were over-counted";

fn max_obs(cur: &mut Option<Observed>, v: Option<u64>, t: u64) {
    if let Some(b) = v {
        if cur.is_none_or(|c| b > c.bytes) {
            *cur = Some(Observed {
                bytes: b,
                timestamp_ns: t,
            });
        }
    }
}

fn min_obs(cur: &mut Option<Observed>, v: Option<u64>, t: u64) {
    if let Some(b) = v {
        if cur.is_none_or(|c| b < c.bytes) {
            *cur = Some(Observed {
                bytes: b,
                timestamp_ns: t,
            });
        }
    }
}

/// Builds the physical plane; `None` when the trace has no device memory sample.
pub(crate) fn analyze_physical(
    doc: &TraceDocument,
    logical: Option<&LogicalMemoryProfile>,
) -> Option<PhysicalMemoryProfile> {
    if doc.device_memory.is_empty() {
        return None;
    }
    let mut order: Vec<usize> = (0..doc.device_memory.len()).collect();
    order.sort_by_key(|&i| doc.device_memory[i].timestamp_ns);

    // Logical live bytes of each sample's device after every change at or before it (in
    // `order`), from one pass over the timeline.
    let timeline = logical.map(|l| &l.timeline);
    let logical_devices: Vec<&str> = timeline.map_or(Vec::new(), |t| {
        t.devices.iter().map(String::as_str).collect()
    });
    let device_of = |i: usize| {
        let name = doc.str(doc.device_memory[i].device);
        logical_devices.iter().position(|d| *d == name)
    };
    let mut live_at: Vec<Option<u64>> = Vec::with_capacity(order.len());
    if let Some(tl) = timeline {
        let mut cells = vec![0u64; logical_devices.len() * CATEGORIES];
        let sum =
            |cells: &[u64], d: usize| cells[d * CATEGORIES..(d + 1) * CATEGORIES].iter().sum();
        tl.for_each(|_, ch| {
            while let Some(&i) = order.get(live_at.len()) {
                if doc.device_memory[i].timestamp_ns >= ch.timestamp_ns {
                    break;
                }
                live_at.push(device_of(i).map(|d| sum(&cells, d)));
            }
            cells[ch.device as usize * CATEGORIES + crate::replay::category_index(ch.category)] =
                ch.live_bytes;
        });
        while let Some(&i) = order.get(live_at.len()) {
            live_at.push(device_of(i).map(|d| sum(&cells, d)));
        }
    } else {
        live_at.resize(order.len(), None);
    }

    let mut stats: Vec<PhysicalDeviceStats> = Vec::new();
    let mut index: std::collections::HashMap<trace_schema::Sym, usize> = Default::default();
    for (pos, &i) in order.iter().enumerate() {
        let s = &doc.device_memory[i];
        let t = s.timestamp_ns;
        let name = doc.str(s.device);
        let k = *index.entry(s.device).or_insert_with(|| {
            stats.push(PhysicalDeviceStats {
                device: name.to_string(),
                sample_count: 0,
                used_sample_count: 0,
                free_sample_count: 0,
                reserved_sample_count: 0,
                capacity_sample_count: 0,
                resident_sample_count: 0,
                peak_used: None,
                peak_reserved: None,
                peak_resident: None,
                minimum_free: None,
                maximum_capacity: None,
                logical_comparison: None,
                samples: Vec::new(),
            });
            stats.len() - 1
        });
        let st = &mut stats[k];
        st.sample_count += 1;
        st.used_sample_count += s.used_bytes.is_some() as u64;
        st.free_sample_count += s.free_bytes.is_some() as u64;
        st.reserved_sample_count += s.reserved_bytes.is_some() as u64;
        st.capacity_sample_count += s.capacity_bytes.is_some() as u64;
        st.resident_sample_count += s.resident_bytes.is_some() as u64;
        max_obs(&mut st.peak_used, s.used_bytes, t);
        max_obs(&mut st.peak_reserved, s.reserved_bytes, t);
        max_obs(&mut st.peak_resident, s.resident_bytes, t);
        min_obs(&mut st.minimum_free, s.free_bytes, t);
        max_obs(&mut st.maximum_capacity, s.capacity_bytes, t);
        let logical_live_bytes = live_at[pos];
        st.samples.push(PhysicalSample {
            timestamp_ns: t,
            used_bytes: s.used_bytes,
            free_bytes: s.free_bytes,
            reserved_bytes: s.reserved_bytes,
            capacity_bytes: s.capacity_bytes,
            resident_bytes: s.resident_bytes,
            logical_live_bytes,
            allocator_cache_bytes: match (s.reserved_bytes, logical_live_bytes) {
                (Some(r), Some(l)) => Some(r as i128 - l as i128),
                _ => None,
            },
        });
    }
    for st in &mut stats {
        let Some(dev) = logical.and_then(|l| l.device(&st.device).ok()) else {
            continue;
        };
        let Some(peak) = &dev.peak else { continue };
        let physical = st.peak_used.map(|o| o.bytes);
        let best_cache = st
            .samples
            .iter()
            .filter_map(|s| s.allocator_cache_bytes.map(|c| (c, s.timestamp_ns)))
            .fold(None, |acc: Option<(i128, u64)>, x| match acc {
                Some(a) if a.0 >= x.0 => Some(a),
                _ => Some(x),
            });
        st.logical_comparison = Some(LogicalVsPhysical {
            logical_peak_bytes: peak.live_bytes,
            physical_peak_used_bytes: physical,
            coverage_ratio: physical
                .filter(|&p| p > 0)
                .map(|p| peak.live_bytes as f64 / p as f64),
            max_allocator_cache_bytes: best_cache.map(|c| c.0),
            max_allocator_cache_timestamp_ns: best_cache.map(|c| c.1),
            note: trace_schema::Device::parse(&st.device)
                .is_host()
                .then(|| CPU_RATIO_NOTE.to_string()),
        });
    }
    stats.sort_by(|a, b| a.device.cmp(&b.device));
    Some(PhysicalMemoryProfile {
        sample_count: doc.device_memory.len() as u64,
        by_device: stats,
    })
}
