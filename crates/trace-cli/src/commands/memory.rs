//! `candle-graph memory TRACE [--device D] [--top N]`: the peak and what was live at it (top N
//! and "M more = X bytes"), per-category and per-device tables, storages live at the end, a
//! sparkline of the timeline and the physical samples.

use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;
use trace_graph::Analysis;
use trace_memory::{CategoryTotals, LogicalDeviceStats, PhysicalDeviceStats};
use trace_schema::{MemoryCategory, TraceDocument};

use crate::commands::summary::{render_peak, PeakRecord};
use crate::live::{self, StorageRow};
use crate::spans::SpanPaths;
use crate::sparkline::sparkline;
use crate::table::{Align, Table};
use crate::units;

/// Points of the timeline sparkline.
pub const TIMELINE_POINTS: usize = 60;
/// Rows of the live-at-end table.
pub const END_ROWS: usize = 8;

/// One category row.
#[derive(Debug, Clone, Serialize)]
pub struct CategoryRow {
    /// Category.
    pub category: MemoryCategory,
    /// Live at the peak.
    pub at_peak_bytes: u64,
    /// Whole-trace totals.
    #[serde(flatten)]
    pub totals: CategoryTotals,
}

/// Storages live when the trace ended.
#[derive(Debug, Clone, Serialize)]
pub struct LiveAtEndRecord {
    /// The trace was cut short: live *when the trace ended*, not necessarily retained.
    pub trace_truncated: bool,
    /// Count.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
    /// The largest ones.
    pub largest: Vec<StorageRow>,
}

/// One point of the display timeline.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineRecord {
    /// Time, ns.
    pub timestamp_ns: u64,
    /// Live bytes (of the selected device, or all devices).
    pub live_bytes: u64,
}

/// The `memory` report (`candle-graph/memory/1`).
#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    /// Device filter, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// False for trace/6 storages identified by tensor (aliases counted twice).
    pub aliases_detectable: Option<bool>,
    /// The peak (global; with `--device`, live rows of that device only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak: Option<PeakRecord>,
    /// Per category.
    pub by_category: Vec<CategoryRow>,
    /// Per device.
    pub by_device: Vec<LogicalDeviceStats>,
    /// Live at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_at_end: Option<LiveAtEndRecord>,
    /// Display timeline (always contains the exact peak).
    pub timeline: Vec<TimelineRecord>,
    /// Physical device samples per device; absent when none were captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical: Option<Vec<PhysicalDeviceStats>>,
}

/// Builds the report.
///
/// # Errors
/// `--device` naming a device without memory events (the message lists the known ones).
pub fn build(
    doc: &TraceDocument,
    analysis: &Analysis,
    device: Option<&str>,
    top: usize,
) -> Result<MemoryReport> {
    let mut paths = SpanPaths::new(doc);
    let logical = analysis.memory.logical.as_ref();
    if let (Some(d), Some(l)) = (device, logical) {
        l.device(d)?;
    }
    if let (Some(d), None) = (device, logical) {
        anyhow::bail!("device `{d}` has no memory events: this trace has no logical memory events");
    }
    let lower_bound = analysis.health.memory_lower_bound;
    let peak = logical.and_then(|l| PeakRecord::of(l, &mut paths, top, device, lower_bound));
    let by_category = logical
        .map(|l| {
            MemoryCategory::ALL
                .iter()
                .filter_map(|c| {
                    let totals = l.totals.by_category.get(c)?.clone();
                    let at_peak = l
                        .peak
                        .as_ref()
                        .and_then(|p| p.by_category.get(c).copied())
                        .unwrap_or(0);
                    Some(CategoryRow {
                        category: *c,
                        at_peak_bytes: at_peak,
                        totals,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let by_device = logical
        .map(|l| {
            l.by_device
                .iter()
                .filter(|d| device.is_none_or(|want| d.device == want))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let live_at_end = logical.map(|l| {
        let mut ends: Vec<_> = l
            .live_at_end_lifetimes()
            .filter(|x| device.is_none_or(|d| &*x.device == d))
            .collect();
        ends.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.start_ns.cmp(&b.start_ns)));
        LiveAtEndRecord {
            trace_truncated: l.live_at_end.trace_truncated,
            count: ends.len() as u64,
            bytes: ends.iter().map(|x| x.bytes).sum(),
            largest: ends
                .iter()
                .take(END_ROWS)
                .map(|x| StorageRow::of(x, &mut paths))
                .collect(),
        }
    });
    let timeline = logical
        .map(|l| {
            l.downsampled_timeline(TIMELINE_POINTS)
                .into_iter()
                .map(|p| TimelineRecord {
                    timestamp_ns: p.timestamp_ns,
                    live_bytes: match device {
                        Some(d) => p.by_device.get(d).copied().unwrap_or(0),
                        None => p.live_bytes,
                    },
                })
                .collect()
        })
        .unwrap_or_default();
    let physical = analysis.memory.physical.as_ref().map(|p| {
        p.by_device
            .iter()
            .filter(|d| device.is_none_or(|want| d.device == want))
            .map(|d| PhysicalDeviceStats {
                samples: Vec::new(),
                ..d.clone()
            })
            .collect()
    });
    Ok(MemoryReport {
        device: device.map(str::to_string),
        aliases_detectable: logical.map(|l| l.aliases_detectable),
        peak,
        by_category,
        by_device,
        live_at_end,
        timeline,
        physical,
    })
}

/// Renders the report as text.
pub fn render(r: &MemoryReport) -> String {
    let mut out = String::new();
    let Some(peak) = &r.peak else {
        out.push_str("logical memory  no memory events in this trace\n");
        render_physical(&mut out, r);
        return out;
    };
    render_peak(&mut out, peak);
    if r.aliases_detectable == Some(false) {
        out.push_str("  note: storages are identified by tensor (trace/6): shared storages count once per tensor\n");
    }
    out.push('\n');
    out.push_str("by category\n");
    let mut t = Table::new(&[
        ("CATEGORY", Align::Left),
        ("AT PEAK", Align::Right),
        ("ALLOCATED", Align::Right),
        ("ALLOCS", Align::Right),
        ("BEFORE CAPTURE", Align::Right),
        ("LIVE AT END", Align::Right),
    ]);
    for c in &r.by_category {
        t.row([
            c.category.as_str().to_string(),
            units::bytes(c.at_peak_bytes),
            units::bytes(c.totals.total_allocated_bytes),
            c.totals.allocation_count.to_string(),
            units::bytes(c.totals.pre_existing_bytes),
            units::bytes(c.totals.live_at_end_bytes),
        ]);
    }
    out.push_str(&t.render("  "));
    out.push('\n');
    out.push_str("by device\n");
    let mut t = Table::new(&[
        ("DEVICE", Align::Left),
        ("PEAK", Align::Right),
        ("AT", Align::Right),
        ("ALLOCATED", Align::Right),
        ("ALLOCS", Align::Right),
        ("FREES", Align::Right),
        ("LIVE AT END", Align::Right),
    ]);
    for d in &r.by_device {
        t.row([
            d.device.clone(),
            units::opt_bytes(d.peak.as_ref().map(|p| p.live_bytes)),
            units::opt_duration(d.peak.as_ref().map(|p| p.timestamp_ns)),
            units::bytes(d.total_allocated_bytes),
            d.allocation_count.to_string(),
            d.matched_free_count.to_string(),
            units::bytes(d.live_at_end_bytes),
        ]);
    }
    out.push_str(&t.render("  "));
    if let Some(end) = &r.live_at_end {
        out.push('\n');
        let when = if end.trace_truncated {
            "live when the trace ended (truncated: not necessarily retained)"
        } else {
            "live at the end of the capture"
        };
        let _ = writeln!(
            out,
            "{when}: {} storage{}, {}",
            end.count,
            if end.count == 1 { "" } else { "s" },
            units::bytes(end.bytes)
        );
        if !end.largest.is_empty() {
            out.push_str(&live::table(&end.largest).render("  "));
            let rest = end.count as usize - end.largest.len();
            if rest > 0 {
                let shown: u64 = end.largest.iter().map(|x| x.bytes).sum();
                let _ = writeln!(out, "  {rest} more = {}", units::bytes(end.bytes - shown));
            }
        }
    }
    if !r.timeline.is_empty() {
        out.push('\n');
        let values: Vec<u64> = r.timeline.iter().map(|p| p.live_bytes).collect();
        let max = values.iter().copied().max().unwrap_or(0);
        let (first, last) = (
            r.timeline[0].timestamp_ns,
            r.timeline[r.timeline.len() - 1].timestamp_ns,
        );
        let _ = writeln!(
            out,
            "timeline ({} points, {} → {}, 0 → {})",
            values.len(),
            units::duration(first),
            units::duration(last),
            units::bytes(max)
        );
        let _ = writeln!(out, "  {}", sparkline(&values));
    }
    render_physical(&mut out, r);
    out
}

fn render_physical(out: &mut String, r: &MemoryReport) {
    out.push('\n');
    let Some(devices) = &r.physical else {
        out.push_str("physical samples  none captured\n");
        return;
    };
    out.push_str("physical samples\n");
    let mut t = Table::new(&[
        ("DEVICE", Align::Left),
        ("SAMPLES", Align::Right),
        ("PEAK USED", Align::Right),
        ("PEAK RESIDENT", Align::Right),
        ("PEAK RESERVED", Align::Right),
        ("MIN FREE", Align::Right),
        ("CAPACITY", Align::Right),
    ]);
    for d in devices {
        t.row([
            d.device.clone(),
            d.sample_count.to_string(),
            units::opt_bytes(d.peak_used.as_ref().map(|o| o.bytes)),
            units::opt_bytes(d.peak_resident.as_ref().map(|o| o.bytes)),
            units::opt_bytes(d.peak_reserved.as_ref().map(|o| o.bytes)),
            units::opt_bytes(d.minimum_free.as_ref().map(|o| o.bytes)),
            units::opt_bytes(d.maximum_capacity.as_ref().map(|o| o.bytes)),
        ]);
    }
    out.push_str(&t.render("  "));
}
