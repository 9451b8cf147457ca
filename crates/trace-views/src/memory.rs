//! `candle-graph memory TRACE [--device D] [--top N]`: the peak and what was live at it (top N
//! and "M more = X bytes"), per-category and per-device tables, storages live at the end, a
//! sparkline of the timeline and the physical samples.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use serde::Serialize;
use trace_format::{at, bytes, checked_bytes, escape, opt_bytes, opt_duration};
use trace_graph::Analysis;
use trace_memory::{BytesOverflow, CategoryTotals, LogicalDeviceStats, PhysicalDeviceStats};
use trace_schema::{MemoryCategory, TraceDocument};

use crate::live::{self, GroupBy, StorageRow};
use crate::peak::{self, Peaks};
use crate::sparkline::sparkline;
use crate::summary::overflow_line;
use crate::table::{Align, Table};

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
    /// Bytes (`null` if the sum overflowed).
    pub bytes: Option<u64>,
    /// Bytes of those not in `largest` (`null` if the sum overflowed).
    pub rest_bytes: Option<u64>,
    /// The largest ones.
    pub largest: Vec<StorageRow>,
}

/// One point of the display timeline.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineRecord {
    /// Time, ns since session start (the bucket's start for a carried value).
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
    /// Start of the measured region, ns since session start: text times are relative to it.
    pub time_origin_ns: u64,
    /// The peaks: with `--device` or one device, that device's own peak; with several, each
    /// device's and their (labelled) sum.
    #[serde(flatten)]
    pub peaks: Option<Peaks>,
    /// Allocation sizes add up past 2^64: no logical figure is shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_overflow: Option<BytesOverflow>,
    /// Time range of the timeline, ns since session start: it starts at the measured region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline_range_ns: Option<(u64, u64)>,
    /// Per category (at the shown peak).
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
    /// Per step of a capture of several steps (absent for a single-step capture).
    #[serde(skip_serializing_if = "trace_graph::Steps::is_empty")]
    pub steps: trace_graph::Steps,
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
    group_by: Option<GroupBy>,
    ungrouped: bool,
) -> Result<MemoryReport> {
    let spans = &analysis.spans;
    let logical = analysis.memory.logical.as_ref();
    if let (Some(d), Some(l)) = (device, logical) {
        l.device(d)?;
    }
    if let (Some(d), None) = (device, logical) {
        return Err(Error::NoMemoryEvents {
            device: d.to_string(),
        });
    }
    let lower_bound = analysis.health.memory_lower_bound;
    let view = peak::HeldView {
        group_by,
        sites: analysis.sites.as_ref(),
        ungrouped,
        merge_without_sites: true,
    };
    let peaks = logical.map(|l| Peaks::of(doc, spans, l, device, top, lower_bound, view));
    let shown_peak = peaks.as_ref().and_then(|p| p.memory_peak.as_ref());
    let by_category = logical
        .map(|l| {
            MemoryCategory::ALL
                .iter()
                .filter_map(|c| {
                    let totals = l.totals.by_category.get(c)?.clone();
                    let at_peak = shown_peak
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
        // streamed twice (the live set at the end can be millions): the largest few as a
        // stable sort by (bytes descending, start) would list them, then count and bytes
        let ends = || {
            l.live_at_end_lifetimes()
                .filter(|x| device.is_none_or(|d| &*x.device == d))
        };
        let largest = trace_memory::first_k_by(ends(), END_ROWS, |a, b| {
            b.bytes.cmp(&a.bytes).then(a.start_ns.cmp(&b.start_ns))
        });
        let (count, all) = ends().fold((0u64, Some(0u64)), |(n, sum), x| {
            (n + 1, sum.and_then(|s| s.checked_add(x.bytes)))
        });
        let shown = trace_memory::sum_bytes(largest.iter().map(|x| x.bytes));
        LiveAtEndRecord {
            trace_truncated: l.live_at_end.trace_truncated,
            count,
            bytes: all,
            rest_bytes: all.zip(shown).and_then(|(a, s)| a.checked_sub(s)),
            largest: largest
                .iter()
                .map(|x| StorageRow::of(x, doc, spans, analysis.sites.as_ref()))
                .collect(),
        }
    });
    let series = match logical {
        Some(l) => l.display_timeline(TIMELINE_POINTS, device)?,
        None => Vec::new(),
    };
    let timeline_range_ns = match (logical, series.first(), series.last()) {
        (Some(l), Some(_), Some(_)) => Some((
            l.time_origin_ns.min(series[0].timestamp_ns),
            l.timeline.last_change_ns().unwrap_or(l.time_origin_ns),
        )),
        _ => None,
    };
    let timeline = series
        .into_iter()
        .map(|p| TimelineRecord {
            timestamp_ns: p.timestamp_ns,
            live_bytes: p.live_bytes,
        })
        .collect();
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
        time_origin_ns: analysis.time_origin_ns,
        peaks,
        memory_overflow: analysis.memory.logical_overflow.clone(),
        timeline_range_ns,
        by_category,
        by_device,
        live_at_end,
        timeline,
        physical,
        steps: analysis.steps.clone(),
    })
}

/// Renders the report as text.
pub fn render(r: &MemoryReport) -> String {
    let mut out = String::new();
    let origin = r.time_origin_ns;
    if let Some(o) = &r.memory_overflow {
        let _ = writeln!(out, "logical memory  {}", overflow_line(o));
        render_physical(&mut out, r);
        return out;
    }
    let Some(peaks) = r.peaks.as_ref().filter(|p| p.memory_peak.is_some()) else {
        out.push_str("logical memory  no memory events in this trace\n");
        render_physical(&mut out, r);
        return out;
    };
    peak::render(&mut out, peaks, origin);
    if !r.steps.is_empty() {
        out.push('\n');
        crate::summary::render_steps(&mut out, &r.steps);
    }
    if r.aliases_detectable == Some(false) {
        out.push_str("  note: storages are identified by tensor (trace/6): shared storages count once per tensor\n");
    }
    out.push('\n');
    out.push_str(if peaks.device_peaks.is_empty() {
        "by category\n"
    } else {
        "by category (AT PEAK: all devices together)\n"
    });
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
            bytes(c.at_peak_bytes),
            bytes(c.totals.total_allocated_bytes),
            c.totals.allocation_count.to_string(),
            bytes(c.totals.pre_existing_bytes),
            bytes(c.totals.live_at_end_bytes),
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
            Table::text(&d.device),
            opt_bytes(d.peak.as_ref().map(|p| p.live_bytes)),
            d.peak
                .as_ref()
                .map_or_else(|| opt_duration(None), |p| at(p.timestamp_ns, origin)),
            bytes(d.total_allocated_bytes),
            d.allocation_count.to_string(),
            d.matched_free_count.to_string(),
            bytes(d.live_at_end_bytes),
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
            checked_bytes(end.bytes)
        );
        if !end.largest.is_empty() {
            out.push_str(&live::table(&end.largest).render("  "));
            let rest = end.count as usize - end.largest.len();
            if rest > 0 {
                let _ = writeln!(out, "  {rest} more = {}", checked_bytes(end.rest_bytes));
            }
        }
    }
    if let (false, Some((first, last))) = (r.timeline.is_empty(), r.timeline_range_ns) {
        out.push('\n');
        let values: Vec<u64> = r.timeline.iter().map(|p| p.live_bytes).collect();
        let max = values.iter().copied().max().unwrap_or(0);
        let _ = writeln!(
            out,
            "timeline ({} points spaced by time, {} → {}{}, 0 → {})",
            values.len(),
            at(first, origin),
            at(last, origin),
            r.device
                .as_deref()
                .map(|d| format!(", {}", escape(d)))
                .unwrap_or_default(),
            bytes(max)
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
            Table::text(&d.device),
            d.sample_count.to_string(),
            opt_bytes(d.peak_used.as_ref().map(|o| o.bytes)),
            opt_bytes(d.peak_resident.as_ref().map(|o| o.bytes)),
            opt_bytes(d.peak_reserved.as_ref().map(|o| o.bytes)),
            opt_bytes(d.minimum_free.as_ref().map(|o| o.bytes)),
            opt_bytes(d.maximum_capacity.as_ref().map(|o| o.bytes)),
        ]);
    }
    out.push_str(&t.render("  "));
    for d in devices {
        if let Some(line) = logical_vs_physical(d, r.time_origin_ns) {
            let _ = writeln!(out, "  {line}");
        }
        if let Some(note) = d
            .logical_comparison
            .as_ref()
            .and_then(|c| c.note.as_deref())
        {
            let _ = writeln!(out, "  note: {note}");
        }
    }
}

/// The logical-vs-physical statement of one device: the logical peak against the highest
/// physical `used` sample and their ratio, and the largest `reserved − logical` gap (the
/// allocator cache); `None` without logical events on the device.
pub fn logical_vs_physical(d: &PhysicalDeviceStats, origin_ns: u64) -> Option<String> {
    let c = d.logical_comparison.as_ref()?;
    let mut s = format!(
        "{}: logical peak {}",
        escape(&d.device),
        bytes(c.logical_peak_bytes)
    );
    let resident = d.peak_resident.map(|o| o.bytes);
    match (c.physical_peak_used_bytes, c.coverage_ratio, resident) {
        (Some(used), Some(r), _) => {
            let _ = write!(
                s,
                " vs physical peak used {} (logical ÷ physical {r:.2})",
                bytes(used)
            );
        }
        (Some(used), None, _) => {
            let _ = write!(s, " vs physical peak used {}", bytes(used));
        }
        (None, _, Some(rss)) if rss > 0 => {
            let _ = write!(
                s,
                " vs peak resident set {} (logical ÷ resident {:.2}; no physical used figure)",
                bytes(rss),
                c.logical_peak_bytes as f64 / rss as f64
            );
        }
        (None, _, _) => s.push_str(" (no physical used or resident figure to compare)"),
    }
    if let (Some(cache), Some(t)) = (
        c.max_allocator_cache_bytes,
        c.max_allocator_cache_timestamp_ns,
    ) {
        let gap = if cache < 0 {
            format!(
                "-{}",
                bytes(cache.unsigned_abs().min(u64::MAX as u128) as u64)
            )
        } else {
            bytes(cache.min(u64::MAX as i128) as u64)
        };
        let _ = write!(
            s,
            "; largest reserved − logical {gap} at {}",
            at(t, origin_ns)
        );
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_memory::{LogicalVsPhysical, Observed};

    fn stats(device: &str, used: Option<u64>, resident: Option<u64>) -> PhysicalDeviceStats {
        let obs = |b: Option<u64>| {
            b.map(|bytes| Observed {
                bytes,
                timestamp_ns: 5,
            })
        };
        PhysicalDeviceStats {
            device: device.to_string(),
            sample_count: 1,
            used_sample_count: u64::from(used.is_some()),
            free_sample_count: 0,
            reserved_sample_count: 1,
            capacity_sample_count: 0,
            resident_sample_count: u64::from(resident.is_some()),
            peak_used: obs(used),
            peak_reserved: obs(Some(4096)),
            peak_resident: obs(resident),
            minimum_free: None,
            maximum_capacity: None,
            logical_comparison: Some(LogicalVsPhysical {
                logical_peak_bytes: 1024,
                physical_peak_used_bytes: used,
                coverage_ratio: used.map(|u| 1024.0 / u as f64),
                max_allocator_cache_bytes: Some(3072),
                max_allocator_cache_timestamp_ns: Some(1_500),
                note: None,
            }),
            samples: Vec::new(),
        }
    }

    #[test]
    fn the_logical_vs_physical_statement_names_what_it_compares() {
        assert_eq!(
            logical_vs_physical(&stats("cuda:0", Some(2048), None), 1_000).unwrap(),
            "cuda:0: logical peak 1.00 KiB vs physical peak used 2.00 KiB (logical ÷ physical 0.50); largest reserved − logical 3.00 KiB at 500 ns"
        );
        assert_eq!(
            logical_vs_physical(&stats("cpu", None, Some(4096)), 0).unwrap(),
            "cpu: logical peak 1.00 KiB vs peak resident set 4.00 KiB (logical ÷ resident 0.25; no physical used figure); largest reserved − logical 3.00 KiB at 1.5 µs"
        );
        let mut none = stats("cpu", None, None);
        none.logical_comparison
            .as_mut()
            .unwrap()
            .max_allocator_cache_bytes = None;
        assert_eq!(
            logical_vs_physical(&none, 0).unwrap(),
            "cpu: logical peak 1.00 KiB (no physical used or resident figure to compare)"
        );
        none.logical_comparison = None;
        assert_eq!(logical_vs_physical(&none, 0), None);
    }
}
