//! The memory peak as `summary` and `memory` show it: the record (from trace-memory's peak and
//! its [`trace_memory::PeakContext`], never re-derived here) and its text. With more than one
//! device the headline is per device (the out-of-memory question is per device) and the
//! cross-device sum is labelled as such.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use trace_format::{at, bytes, checked_bytes, escape};
use trace_memory::{LogicalMemoryProfile, PassPeak, SpanIndex, StorageLifetime};
use trace_schema::{MemoryCategory, Pass, TraceDocument};

use crate::live::{self, GroupBy, HeldGroup, StorageRow};

/// How the storages held at a peak are shown.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeldView<'a> {
    /// Group everything live at the peak (`--group-by`).
    pub group_by: Option<GroupBy>,
    /// The allocation sites read as ops, when the trace has them (op, module, merged rows).
    pub sites: Option<&'a trace_ops::SiteProfile>,
    /// List identical storages one by one (`--ungrouped`) instead of merged with a count.
    pub ungrouped: bool,
    /// Merge identical storages also without allocation sites (`memory` and the report page,
    /// which read the whole live set; `summary` keeps its rows as the summary detail lists
    /// them, so both details print the same).
    pub merge_without_sites: bool,
}

/// How much of the peak carries its allocating op (trace/13 sites).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OpCoverage {
    /// Bytes live at the peak allocated inside the capture (not pre-existing).
    pub allocated_in_step_bytes: u64,
    /// Of those, the bytes whose storage carries an allocation site (an op).
    pub with_op_bytes: u64,
}

impl OpCoverage {
    /// `with_op / allocated_in_step` in [0, 1]; `None` when nothing was allocated inside.
    pub fn share(&self) -> Option<f64> {
        (self.allocated_in_step_bytes > 0)
            .then(|| self.with_op_bytes as f64 / self.allocated_in_step_bytes as f64)
    }

    /// The coverage line: `ops named for 97.1% of the 30.12 MiB allocated in the step and live
    /// at the peak`.
    pub fn line(&self) -> String {
        match self.share() {
            Some(share) => format!(
                "ops named for {:.1}% of the {} allocated in the step and live at the peak (storages older than the step keep their labels)",
                share * 100.0,
                bytes(self.allocated_in_step_bytes)
            ),
            None => "nothing live at the peak was allocated in the step".to_string(),
        }
    }
}

/// The peak of one pass.
#[derive(Debug, Clone, Serialize)]
pub struct PassPeakRecord {
    /// Forward, backward or optimizer.
    pub pass: Pass,
    /// Live bytes at the pass's peak.
    pub live_bytes: u64,
    /// When, ns since session start.
    pub timestamp_ns: u64,
    /// Largest category at that moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dominant_category: Option<MemoryCategory>,
}

impl PassPeakRecord {
    fn of(p: &PassPeak) -> Self {
        Self {
            pass: p.pass,
            live_bytes: p.peak.live_bytes,
            timestamp_ns: p.peak.timestamp_ns,
            dominant_category: p.peak.context.dominant_category,
        }
    }
}

/// A logical memory peak and what held it.
#[derive(Debug, Clone, Serialize)]
pub struct PeakRecord {
    /// The device of a per-device peak; `None` for the sum over all devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Live bytes at the peak (pre-existing storages included).
    pub live_bytes: u64,
    /// When it was first reached, ns since session start (trace time; subtract the report's
    /// `time_origin_ns` for the time in the measured region).
    pub timestamp_ns: u64,
    /// Live bytes per device.
    pub by_device: BTreeMap<String, u64>,
    /// The span holding the peak (trace-memory's rule), its path and pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// `/`-joined path of that span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_path: Option<String>,
    /// Its pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// The category holding the most bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dominant_category: Option<MemoryCategory>,
    /// Live bytes per category.
    pub by_category: BTreeMap<MemoryCategory, u64>,
    /// The peak of each pass (all devices together).
    pub pass_peaks: Vec<PassPeakRecord>,
    /// The largest storages live at the peak.
    pub held: Vec<StorageRow>,
    /// Storages live at the peak not listed in `held`.
    pub held_more_count: usize,
    /// Their bytes (`null` if the sum overflowed).
    pub held_more_bytes: Option<u64>,
    /// Figures are lower bounds (truncated, failed or lossy capture).
    pub lower_bound: bool,
    /// Everything live at the peak grouped (`memory --group-by`), when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_groups: Option<HeldGroups>,
    /// The share of the peak's bytes allocated in the step that carry their op, when the
    /// trace has allocation sites and the whole live set is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_coverage: Option<OpCoverage>,
}

/// The storages live at a peak in groups: the largest `top` groups, and the rest counted.
#[derive(Debug, Clone, Serialize)]
pub struct HeldGroups {
    /// The grouping.
    pub by: GroupBy,
    /// The largest groups, bytes descending.
    pub groups: Vec<HeldGroup>,
    /// Groups not listed.
    pub more_groups: usize,
    /// Their storages.
    pub more_storages: u64,
    /// Their bytes.
    pub more_bytes: u64,
}

/// The largest `top` groups of `live` by `by`, the rest counted.
pub fn held_groups(
    live: &[&StorageLifetime],
    doc: &TraceDocument,
    spans: &SpanIndex,
    sites: Option<&trace_ops::SiteProfile>,
    by: GroupBy,
    top: usize,
) -> HeldGroups {
    let mut groups = live::group(live, doc, spans, sites, by);
    let rest = groups.split_off(top.min(groups.len()));
    HeldGroups {
        by,
        groups,
        more_groups: rest.len(),
        more_storages: rest.iter().map(|g| g.storages).sum(),
        // Distinct live storages: bounded by the peak.
        more_bytes: rest.iter().map(|g| g.bytes).sum(),
    }
}

impl PeakRecord {
    /// The sum over all devices (`device` `None`) or one device's own peak; `None` when there is
    /// none.
    pub fn of(
        doc: &TraceDocument,
        spans: &SpanIndex,
        logical: &LogicalMemoryProfile,
        device: Option<&str>,
        top: usize,
        lower_bound: bool,
        view: HeldView<'_>,
    ) -> Option<Self> {
        let (live_bytes, timestamp_ns, by_device, by_category, context, live, count) = match device
        {
            None => {
                let p = logical.peak.as_ref()?;
                (
                    p.live_bytes,
                    p.timestamp_ns,
                    p.by_device.clone(),
                    p.by_category.clone(),
                    p.context.clone(),
                    p.live_allocations.iter().collect::<Vec<&StorageLifetime>>(),
                    p.live_allocation_count,
                )
            }
            Some(d) => {
                let p = logical.device(d).ok()?.peak.as_ref()?;
                (
                    p.live_bytes,
                    p.timestamp_ns,
                    BTreeMap::from([(d.to_string(), p.live_bytes)]),
                    p.by_category.clone(),
                    p.context.clone(),
                    logical.live_allocations_after(p.event_index, Some(d)),
                    p.live_allocation_count,
                )
            }
        };
        // The listed storages come first in rank order (a summary analysis lists the first
        // trace_memory::SUMMARY_TOP); the rest is every other storage live at the peak.
        // Identical storages are merged first: `top` merged rows are shown.
        let sites = view.sites;
        // merged counts are exact only over the whole live set (a summary analysis holds the
        // largest trace_memory::SUMMARY_TOP): otherwise storages are listed one by one
        let whole_set = live.len() as u64 == count;
        let merge = (sites.is_some() || view.merge_without_sites) && !view.ungrouped && whole_set;
        let (held, shown_storages, shown_bytes) = if merge {
            let rows: Vec<StorageRow> = live
                .iter()
                .map(|l| StorageRow::of(l, doc, spans, sites))
                .collect();
            let mut merged = live::merge(rows);
            merged.truncate(top);
            let n: u64 = merged.iter().map(StorageRow::storages).sum();
            let b = trace_memory::sum_bytes(merged.iter().map(StorageRow::total_bytes));
            (merged, n, b)
        } else {
            let shown = top.min(live.len());
            let rows: Vec<StorageRow> = live[..shown]
                .iter()
                .map(|l| StorageRow::of(l, doc, spans, sites))
                .collect();
            let b = trace_memory::sum_bytes(live[..shown].iter().map(|l| l.bytes));
            (rows, shown as u64, b)
        };
        let op_coverage = sites.filter(|_| whole_set).map(|s| {
            let (with_op_bytes, allocated_in_step_bytes) = live::op_coverage(&live, s);
            OpCoverage {
                allocated_in_step_bytes,
                with_op_bytes,
            }
        });
        let span_id = context.span_id.as_deref().map(str::to_string);
        Some(Self {
            device: device.map(str::to_string),
            live_bytes,
            timestamp_ns,
            by_device,
            span_path: span_id
                .as_deref()
                .and_then(|s| spans.indexed_path_of_id(doc, s)),
            span_id,
            pass: context.pass,
            dominant_category: context.dominant_category,
            by_category,
            pass_peaks: logical.pass_peaks.iter().map(PassPeakRecord::of).collect(),
            held,
            held_more_count: usize::try_from(count.saturating_sub(shown_storages))
                .unwrap_or(usize::MAX),
            held_more_bytes: shown_bytes
                .and_then(|shown_bytes| live_bytes.checked_sub(shown_bytes)),
            lower_bound,
            held_groups: view
                .group_by
                .map(|by| held_groups(&live, doc, spans, sites, by, top)),
            op_coverage,
        })
    }
}

/// The peaks a report shows: one per device with several devices, plus their sum.
#[derive(Debug, Clone, Serialize)]
pub struct Peaks {
    /// The headline with one device; with several, the sum over devices (`device` absent),
    /// which is not any one device's memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<PeakRecord>,
    /// Each device's own peak, when the trace has more than one device.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_peaks: Vec<PeakRecord>,
}

impl Peaks {
    /// The peaks of `logical`, or of one device when `device` is given.
    pub fn of(
        doc: &TraceDocument,
        spans: &SpanIndex,
        logical: &LogicalMemoryProfile,
        device: Option<&str>,
        top: usize,
        lower_bound: bool,
        view: HeldView<'_>,
    ) -> Self {
        if device.is_some() || logical.by_device.len() == 1 {
            let d = device.or(logical.by_device.first().map(|d| d.device.as_str()));
            return Self {
                memory_peak: PeakRecord::of(doc, spans, logical, d, top, lower_bound, view),
                device_peaks: Vec::new(),
            };
        }
        Self {
            memory_peak: PeakRecord::of(doc, spans, logical, None, top, lower_bound, view),
            device_peaks: logical
                .by_device
                .iter()
                .filter_map(|d| {
                    PeakRecord::of(doc, spans, logical, Some(&d.device), top, lower_bound, view)
                })
                .collect(),
        }
    }
}

/// `parameter 1.00 MiB · activation 2.00 KiB …` in category order, zeros omitted; "nothing
/// live" when all are zero.
pub fn categories_line(by_category: &BTreeMap<MemoryCategory, u64>) -> String {
    let parts: Vec<String> = MemoryCategory::ALL
        .iter()
        .filter_map(|c| by_category.get(c).filter(|&&b| b > 0).map(|b| (c, b)))
        .map(|(c, b)| format!("{} {}", c.as_str(), bytes(*b)))
        .collect();
    if parts.is_empty() {
        "nothing live".to_string()
    } else {
        parts.join(" · ")
    }
}

/// `X[ on D] at T, in the P pass (path)` of a peak, times relative to `origin_ns`.
pub fn headline(p: &PeakRecord, on: &str, origin_ns: u64) -> String {
    let mut s = format!(
        "{}{}{on} at {}",
        if p.lower_bound { "≥ " } else { "" },
        bytes(p.live_bytes),
        at(p.timestamp_ns, origin_ns)
    );
    if let Some(pass) = p.pass {
        let _ = write!(s, ", in the {} pass", pass.as_str());
    }
    if let Some(path) = &p.span_path {
        let _ = write!(s, " ({})", escape(path));
    }
    s
}

fn render_held(out: &mut String, p: &PeakRecord, indent: &str) {
    let total = p.held.iter().map(StorageRow::storages).sum::<u64>() as usize + p.held_more_count;
    if total == 0 {
        return;
    }
    if let Some(g) = &p.held_groups {
        let _ = writeln!(
            out,
            "{indent}held at the peak by {} ({total} storages in {} groups{}):",
            g.by.as_str(),
            g.groups.len() + g.more_groups,
            if g.more_groups > 0 {
                format!(", top {}", g.groups.len())
            } else {
                String::new()
            }
        );
        out.push_str(
            &live::group_table(&g.groups, g.by, p.live_bytes).render(&format!("{indent}  ")),
        );
        if g.more_groups > 0 {
            let _ = writeln!(
                out,
                "{indent}  {} ({}) = {}",
                trace_format::more(g.more_groups as u64, "group", "groups"),
                trace_format::count(g.more_storages, "storage", "storages"),
                bytes(g.more_bytes)
            );
        }
        if g.by == GroupBy::Category {
            let _ = writeln!(
                out,
                "{indent}  (INFERRED: storages whose category the probe inferred from the pass)"
            );
        }
        return;
    }
    let merged = p.held.iter().any(|r| r.count.is_some());
    let shown: u64 = p.held.iter().map(StorageRow::storages).sum();
    let storages = trace_format::count(total as u64, "storage", "storages");
    let _ = writeln!(
        out,
        "{indent}held at the peak ({}):",
        if merged {
            format!(
                "top {}, {shown} of {storages}; identical storages merged, --ungrouped lists them",
                trace_format::count(p.held.len() as u64, "row", "rows")
            )
        } else {
            format!("top {} of {storages}", p.held.len())
        }
    );
    out.push_str(&live::table(&p.held).render(&format!("{indent}  ")));
    if p.held_more_count > 0 {
        let _ = writeln!(
            out,
            "{indent}  {} more = {}",
            p.held_more_count,
            checked_bytes(p.held_more_bytes)
        );
    }
    // the legend explains a `*`: only under a table that shows one
    if p.held.iter().any(|r| r.category_inferred) {
        let _ = writeln!(out, "{indent}  ({})", live::LEGEND);
    }
    if let Some(c) = &p.op_coverage {
        let _ = writeln!(out, "{indent}  {}", c.line());
    }
}

/// Renders the peaks shared by `summary` and `memory`.
pub fn render(out: &mut String, peaks: &Peaks, origin_ns: u64) {
    let Some(p) = &peaks.memory_peak else {
        return;
    };
    if peaks.device_peaks.is_empty() {
        let on = p
            .device
            .as_deref()
            .map(|d| format!(" on {}", escape(d)))
            .unwrap_or_default();
        if p.live_bytes == 0 {
            let _ = writeln!(
                out,
                "memory peak  0 B{on}: no storage held any bytes at once"
            );
            return;
        }
        let _ = writeln!(out, "memory peak  {}", headline(p, &on, origin_ns));
        let _ = writeln!(out, "  by category: {}", categories_line(&p.by_category));
        render_pass_peaks(out, p, origin_ns);
        render_held(out, p, "  ");
        return;
    }
    out.push_str("memory peak per device (each device's own highest point)\n");
    for d in &peaks.device_peaks {
        let _ = writeln!(
            out,
            "  {}  {}",
            escape(d.device.as_deref().unwrap_or("?")),
            headline(d, "", origin_ns)
        );
        let _ = writeln!(out, "    by category: {}", categories_line(&d.by_category));
        render_held(out, d, "    ");
    }
    let _ = writeln!(
        out,
        "  all devices together (a sum, not one device's memory): {}",
        headline(p, "", origin_ns)
    );
    render_pass_peaks(out, p, origin_ns);
}

fn render_pass_peaks(out: &mut String, p: &PeakRecord, origin_ns: u64) {
    if p.pass_peaks.is_empty() {
        return;
    }
    out.push_str("  peak of each pass (all devices):\n");
    for s in &p.pass_peaks {
        let _ = writeln!(
            out,
            "    {:<10} {:>11} at {}{}",
            s.pass.as_str(),
            bytes(s.live_bytes),
            at(s.timestamp_ns, origin_ns),
            s.dominant_category
                .map(|c| format!(", mostly {}", c.as_str()))
                .unwrap_or_default()
        );
    }
}
