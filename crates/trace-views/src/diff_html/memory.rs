//! The memory section: for each device where each side peaked, the live-bytes overlay, bytes
//! by category at the peak and the storages live at one side's peak only.

use trace_diff::{AlignmentMode, DeviceDelta, LiveSetDiff, StorageGroup, TraceDiff};
use trace_format::{bytes, escape};
use trace_report::page::{Block, Cell, Column, Fact, Overlay, OverlaySeries, Section, Table, Text};

use super::{key, STORAGE_ROWS};
use crate::diff::figures::{cell, place, shape_dtype, stat, storages, verdict_text, Unit};

fn storage_table(id: String, caption: String, groups: &[StorageGroup]) -> Table {
    let rows = groups
        .iter()
        .take(STORAGE_ROWS)
        .map(|g| {
            vec![
                Cell::number(bytes(g.bytes), Some(g.bytes as f64)),
                Cell::number(g.count.to_string(), Some(g.count as f64)),
                Cell::text(g.category.as_str()),
                Cell::text(g.pass_text()),
                Cell::trace(g.span_text()),
                Cell::trace(&shape_dtype(g)),
                Cell::trace(g.label.as_deref().unwrap_or("-")),
            ]
        })
        .collect();
    let footer = (groups.len() > STORAGE_ROWS).then(|| {
        let rest = &groups[STORAGE_ROWS..];
        let (n, b) = rest.iter().fold((0u64, 0u64), |(n, b), g| {
            (n.saturating_add(g.count), b.saturating_add(g.bytes))
        });
        Text::from(format!(
            "{} = {} ({})",
            trace_format::more(rest.len() as u64, "group", "groups"),
            bytes(b),
            storages(n)
        ))
    });
    Table {
        id,
        caption: caption.into(),
        columns: vec![
            Column::number("BYTES"),
            Column::number("COUNT"),
            Column::text("CATEGORY"),
            Column::text("PASS"),
            Column::text("SPAN"),
            Column::text("SHAPE/DTYPE"),
            Column::text("LABEL"),
        ],
        rows,
        footer,
    }
}

/// One device's blocks: where each side peaked, the overlay, the categories and the live sets.
fn device_blocks(i: usize, d: &DeviceDelta, blocks: &mut Vec<Block>) {
    blocks.push(Block::Heading(Text::trace(&format!(
        "{}: peak {}",
        d.device,
        verdict_text(&d.peak_bytes, Unit::Bytes)
    ))));
    let places = |side: &str, list: &[trace_diff::PeakPlace]| Fact {
        label: side.into(),
        value: Text::from(match list.first() {
            Some(p) => place(p),
            None => "no peak on this device".to_string(),
        }),
        data: list
            .first()
            .and_then(|p| p.pass)
            .map(|p| vec![("pass".into(), p.as_str().to_string())])
            .unwrap_or_default(),
        items: if list.len() > 1 {
            list.iter()
                .map(|p| Text::from(format!("{}: {}", escape(&p.run), place(p))))
                .collect()
        } else {
            vec![]
        },
    };
    blocks.push(Block::Facts(vec![
        places("baseline peak", &d.baseline_peaks),
        places("candidate peak", &d.candidate_peaks),
    ]));
    if let Some(overlay) = overlay(i, d) {
        blocks.push(Block::Overlay(overlay));
    }
    if let Some(table) = category_table(i, d) {
        blocks.push(Block::Table(table));
    }
    if let Some(split) = crate::diff::figures::batch_split_text(d) {
        blocks.push(Block::Paragraph(Text::from(format!("By batch: {split}."))));
    }
    if let Some(live) = &d.live_at_peak {
        live_blocks(i, live, blocks);
    }
}

/// Both first runs' live bytes over time on one chart (`None` without a timeline).
fn overlay(i: usize, d: &DeviceDelta) -> Option<Overlay> {
    if d.baseline_timeline.is_empty() && d.candidate_timeline.is_empty() {
        return None;
    }
    let run = |list: &[trace_diff::PeakPlace]| {
        list.first()
            .map_or_else(String::new, |p| format!(" ({})", escape(&p.run)))
    };
    Some(Overlay {
        id: format!("overlay-{i}"),
        caption: Text::trace(&format!(
            "Live bytes on {} over time, both first runs overlaid; time from each run's measured-region start",
            d.device
        )),
        series: vec![
            OverlaySeries {
                name: Text::from(format!("baseline{}", run(&d.baseline_peaks))),
                points: d.baseline_timeline.clone(),
            },
            OverlaySeries {
                name: Text::from(format!("candidate{}", run(&d.candidate_peaks))),
                points: d.candidate_timeline.clone(),
            },
        ],
    })
}

/// Bytes by category at each side's peak; with one run a side, what entered, left and changed
/// at both peaks adds up to the change (`None` without categories).
fn category_table(i: usize, d: &DeviceDelta) -> Option<Table> {
    let adds_up = d
        .live_at_peak
        .as_ref()
        .filter(|_| d.baseline_peaks.len() == 1 && d.candidate_peaks.len() == 1);
    if d.by_category.is_empty() {
        return None;
    }
    let mut columns = vec![
        Column::text("CATEGORY"),
        Column::number("BASELINE"),
        Column::number("CANDIDATE"),
        Column::number("CHANGE"),
    ];
    if adds_up.is_some() {
        columns.extend([
            Column::number("= ENTERED"),
            Column::number("- LEFT"),
            Column::number("+ AT BOTH"),
        ]);
    }
    Some(Table {
        id: format!("categories-{i}"),
        caption: "Bytes by category at each side's peak: the change is what entered the live-at-peak set, minus what left it, plus the change of the storages live at both peaks".into(),
        columns,
        rows: d
            .by_category
            .iter()
            .map(|c| {
                let mut row = vec![
                    Cell::text(c.category.as_str()),
                    Cell::number(
                        stat(c.bytes.baseline, Unit::Bytes),
                        c.bytes.baseline.map(|s| s.median as f64),
                    ),
                    Cell::number(
                        stat(c.bytes.candidate, Unit::Bytes),
                        c.bytes.candidate.map(|s| s.median as f64),
                    ),
                    Cell::number(cell(&c.bytes, Unit::Bytes), key(&c.bytes)),
                ];
                if let Some(live) = adds_up {
                    let l = live.by_category.iter().find(|l| l.category == c.category);
                    let (entered, left, both) = l.map_or((0, 0, 0), |l| {
                        (l.entered_bytes, l.left_bytes, l.matched_change_bytes())
                    });
                    row.extend([
                        Cell::number(bytes(entered), Some(entered as f64)),
                        Cell::number(bytes(left), Some(left as f64)),
                        Cell::number(
                            if both == 0 { "=".to_string() } else { trace_format::delta_bytes(both) },
                            Some(both as f64),
                        ),
                    ]);
                }
                row
            })
            .collect(),
        footer: None,
    })
}

/// The storages that left and entered the live-at-peak set, and those live at both peaks.
fn live_blocks(i: usize, live: &LiveSetDiff, blocks: &mut Vec<Block>) {
    for (what, side, count, total, groups) in [
        (
            "Left",
            "the baseline's peak only",
            live.baseline_only_count,
            live.baseline_only_bytes,
            &live.baseline_only,
        ),
        (
            "Entered",
            "the candidate's peak only",
            live.candidate_only_count,
            live.candidate_only_bytes,
            &live.candidate_only,
        ),
    ] {
        if count == 0 {
            blocks.push(Block::Paragraph(Text::from(format!(
                "{what} the live-at-peak set: none."
            ))));
        } else {
            blocks.push(Block::Table(storage_table(
                format!("{}-{i}", what.to_lowercase()),
                format!(
                    "{what} the live-at-peak set (live at {side}): {}, {}",
                    storages(count),
                    bytes(total)
                ),
                groups,
            )));
        }
    }
    blocks.push(Block::Paragraph(Text::from(format!(
        "Live at both peaks: {}. Storages are matched by allocating span path, shape, dtype and category, never by address.",
        crate::diff::figures::matched_text(live)
    ))));
}

pub(super) fn section(diff: &TraceDiff) -> Section {
    let mut blocks = Vec::new();
    match &diff.memory {
        None => blocks.push(Block::Paragraph(Text::from(format!(
            "Not compared: {}",
            escape(
                diff.memory_unavailable
                    .as_deref()
                    .unwrap_or("no memory plane")
            )
        )))),
        Some(m) => {
            for (i, d) in m.devices.iter().enumerate() {
                device_blocks(i, d, &mut blocks);
            }
            if m.lower_bound {
                blocks.push(Block::Paragraph(
                    "A capture ended early or dropped events: its figures are lower bounds.".into(),
                ));
            }
            if m.storages_matched_by == AlignmentMode::Passes {
                blocks.push(Block::Paragraph(
                    "Storages matched by pass, shape, dtype and category: span paths do not match."
                        .into(),
                ));
            }
        }
    }
    Section {
        id: "memory".into(),
        title: "Memory at the peak".into(),
        blocks,
    }
}
