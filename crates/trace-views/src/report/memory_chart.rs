//! The memory section: each device's live bytes over time with its peak.

use super::cells::{count, num_bytes};
use crate::memory;
use crate::summary::{overflow_line, SummaryReport};
use trace_format::{at, bytes, opt_bytes};
use trace_graph::Analysis;
use trace_report::page::{Block, Cell, Column, Section, Table, Text};
use trace_schema::TraceDocument;

/// The memory section (`#memory`): each device's chart with its peak, the live-set panel, the
/// peak of each pass and the tables by category and device.
pub(super) fn memory_section(
    doc: &TraceDocument,
    analysis: &Analysis,
    r: &SummaryReport,
) -> Section {
    let mut blocks = Vec::new();
    let origin = analysis.time_origin_ns;
    if let Some(o) = &analysis.memory.logical_overflow {
        blocks.push(Block::Paragraph(overflow_line(o).into()));
    }
    let Some(l) = analysis.memory.logical.as_ref() else {
        if analysis.memory.logical_overflow.is_none() {
            blocks.push(Block::Paragraph("no memory events in this trace".into()));
        }
        return Section {
            id: "memory".into(),
            title: "Memory".into(),
            blocks,
        };
    };
    blocks.push(Block::Paragraph(
        "Logical live bytes (tensor storages) stacked by category, each device on the measured region's time axis; every point is the highest value of its time slice, so the peak is always drawn. The logical stack sets the left axis; physical device samples are dots (joined by dashed lines) on their own axis, right. Drag, ctrl/⌘ + wheel (or the wheel once the chart was clicked), +/− or a two-finger pinch zooms; shift+wheel or a one-finger drag pans; Escape or Whole timeline resets.".into(),
    ));
    let memory_report = memory::build(doc, analysis, None, 1, None, false).ok();
    for (d, name) in l.timeline.devices.iter().enumerate() {
        blocks.push(Block::Heading(Text::trace(name)));
        if let Some(p) = l.device(name).ok().and_then(|s| s.peak.as_ref()) {
            blocks.push(Block::Paragraph(Text::from(format!(
                "peak {} at {}",
                bytes(p.live_bytes),
                at(p.timestamp_ns, origin)
            ))));
        }
        blocks.push(Block::MemoryChart { device: d });
        if let Some(ph) = analysis
            .memory
            .physical
            .as_ref()
            .and_then(|p| p.by_device.iter().find(|x| &x.device == name))
        {
            if let Some(line) = memory::logical_vs_physical(ph, origin) {
                blocks.push(Block::Paragraph(line.into()));
            }
            if let Some(note) = ph.logical_comparison.as_ref().and_then(|c| c.note.as_ref()) {
                blocks.push(Block::Paragraph(Text::from(format!("note: {note}"))));
            }
        }
    }
    blocks.push(Block::Heading("What was live at a chosen time".into()));
    blocks.push(Block::LiveSetPanel);
    if let Some(p) = r.peaks.as_ref().and_then(|p| p.memory_peak.as_ref()) {
        if !p.pass_peaks.is_empty() {
            blocks.push(Block::Table(Table {
                id: "pass-peaks".into(),
                caption: "peak of each pass (all devices)".into(),
                columns: vec![
                    Column::text("PASS"),
                    Column::number("PEAK"),
                    Column::number("AT"),
                    Column::text("MOSTLY"),
                ],
                rows: p
                    .pass_peaks
                    .iter()
                    .map(|s| {
                        vec![
                            Cell::text(s.pass.as_str()),
                            Cell::number(bytes(s.live_bytes), Some(s.live_bytes as f64)),
                            Cell::number(at(s.timestamp_ns, origin), Some(s.timestamp_ns as f64)),
                            Cell::text(s.dominant_category.map_or("-", |c| c.as_str())),
                        ]
                    })
                    .collect(),
                footer: None,
            }));
        }
    }
    if let Some(m) = memory_report {
        blocks.push(Block::Table(category_table(&m)));
        blocks.push(Block::Table(device_table(&m, origin)));
    }
    Section {
        id: "memory".into(),
        title: "Memory".into(),
        blocks,
    }
}

/// Bytes by category: at the peak, allocated, allocs, before the capture, live at the end.
fn category_table(m: &memory::MemoryReport) -> Table {
    Table {
        id: "by-category".into(),
        caption: if m.peaks.as_ref().is_some_and(|p| !p.device_peaks.is_empty()) {
            "by category (AT PEAK: all devices together)".into()
        } else {
            "by category".into()
        },
        columns: vec![
            Column::text("CATEGORY"),
            Column::number("AT PEAK"),
            Column::number("ALLOCATED"),
            Column::number("ALLOCS"),
            Column::number("BEFORE CAPTURE"),
            Column::number("LIVE AT END"),
        ],
        rows: m
            .by_category
            .iter()
            .map(|c| {
                vec![
                    Cell::text(c.category.as_str()),
                    num_bytes(c.at_peak_bytes),
                    num_bytes(c.totals.total_allocated_bytes),
                    count(c.totals.allocation_count),
                    num_bytes(c.totals.pre_existing_bytes),
                    num_bytes(c.totals.live_at_end_bytes),
                ]
            })
            .collect(),
        footer: None,
    }
}

/// Each device's peak (and when), allocated bytes, allocs, frees and bytes live at the end.
fn device_table(m: &memory::MemoryReport, origin: u64) -> Table {
    Table {
        id: "by-device".into(),
        caption: "by device".into(),
        columns: vec![
            Column::text("DEVICE"),
            Column::number("PEAK"),
            Column::number("AT"),
            Column::number("ALLOCATED"),
            Column::number("ALLOCS"),
            Column::number("FREES"),
            Column::number("LIVE AT END"),
        ],
        rows: m
            .by_device
            .iter()
            .map(|d| {
                vec![
                    Cell::trace(&d.device),
                    Cell::number(
                        opt_bytes(d.peak.as_ref().map(|p| p.live_bytes)),
                        d.peak.as_ref().map(|p| p.live_bytes as f64),
                    ),
                    Cell::number(
                        d.peak
                            .as_ref()
                            .map_or_else(|| "-".to_string(), |p| at(p.timestamp_ns, origin)),
                        d.peak.as_ref().map(|p| p.timestamp_ns as f64),
                    ),
                    num_bytes(d.total_allocated_bytes),
                    count(d.allocation_count),
                    count(d.matched_free_count),
                    num_bytes(d.live_at_end_bytes),
                ]
            })
            .collect(),
        footer: None,
    }
}
