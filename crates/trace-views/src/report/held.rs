//! What held each device's peak: the icicle by span, the groups by span, shape, category and
//! op, and the storages one row each.

use super::cells::{count, num_bytes, GROUP_ROWS, HELD_ROWS};
use crate::live::{self, GroupBy};
use crate::peak::{self, PeakRecord, Peaks};
use trace_format::{bytes, checked_bytes};
use trace_graph::Analysis;
use trace_report::page::{Block, Cell, Column, Section, Table, Text};
use trace_schema::TraceDocument;

/// The caption of the held rows: rows and storages counted apart (`41 rows for 52 of 61
/// storages`), never one "of" the other.
pub(super) fn held_caption(rows: usize, shown: u64, total: u64, merged: bool) -> String {
    let storages = trace_format::count(total, "storage", "storages");
    let what = match (merged, shown < total) {
        (true, true) => format!(
            "{} for {shown} of {storages}, identical storages merged with their count",
            trace_format::count(rows as u64, "row", "rows")
        ),
        (true, false) => format!(
            "{} for all {storages}, identical storages merged with their count",
            trace_format::count(rows as u64, "row", "rows")
        ),
        (false, true) => format!("the {shown} largest of {storages}"),
        (false, false) => format!("all {storages}"),
    };
    format!("held at the peak ({what}; * category inferred from the pass it was allocated in)")
}

/// The section of what held each device's peak (`#held`).
pub(super) fn held_section(doc: &TraceDocument, analysis: &Analysis) -> Section {
    let mut blocks = Vec::new();
    let lower_bound = analysis.health.memory_lower_bound;
    let Some(l) = analysis.memory.logical.as_ref() else {
        blocks.push(Block::Paragraph("no memory events in this trace".into()));
        return Section {
            id: "held".into(),
            title: "What held the peak".into(),
            blocks,
        };
    };
    let origin = analysis.time_origin_ns;
    for (d, name) in l.timeline.devices.iter().enumerate() {
        let view = peak::HeldView {
            sites: analysis.sites.as_ref(),
            merge_without_sites: true,
            ..Default::default()
        };
        let peaks = Peaks::of(
            doc,
            &analysis.spans,
            l,
            Some(name),
            HELD_ROWS,
            lower_bound,
            view,
        );
        let Some(p) = peaks.memory_peak else { continue };
        let total =
            p.held.iter().map(live::StorageRow::storages).sum::<u64>() as usize + p.held_more_count;
        blocks.push(Block::Heading(Text::from(format!(
            "{} · {}",
            trace_format::escape(name),
            peak::headline(&p, "", origin)
        ))));
        let (rows_summary, held_rows) = held_rows_table(d, &p, total);
        blocks.push(Block::Paragraph(
            "By allocating span path (every storage live at the peak; width is bytes; click a span to zoom into it):".into(),
        ));
        blocks.push(Block::HeldIcicle { device: d });
        let live = l.live_allocations_after(
            l.device(name)
                .ok()
                .and_then(|s| s.peak.as_ref())
                .map_or(usize::MAX, |p| p.event_index),
            Some(name),
        );
        let mut groupings = vec![GroupBy::Span, GroupBy::Shape, GroupBy::Category];
        if analysis.sites.is_some() {
            groupings.push(GroupBy::Op);
        }
        for by in groupings {
            let g = peak::held_groups(
                &live,
                doc,
                &analysis.spans,
                analysis.sites.as_ref(),
                by,
                GROUP_ROWS,
            );
            blocks.push(Block::Table(group_table(d, &g, p.live_bytes)));
        }
        blocks.push(Block::Collapsed {
            summary: rows_summary,
            table: held_rows,
        });
    }
    Section {
        id: "held".into(),
        title: "What held the peak".into(),
        blocks,
    }
}

/// The storages live at a device's peak, one row each (identical ones merged with their count),
/// the rest counted in the footer; with the summary line of the collapsed block.
fn held_rows_table(d: usize, p: &PeakRecord, total: usize) -> (Text, Table) {
    let ops = p.held.iter().any(|r| r.op.is_some());
    let footer = (p.held_more_count > 0).then(|| {
        Text::from(format!(
            "{} more storages, each at most {}, = {} (all {total} are in the icicle and the groups below)",
            p.held_more_count,
            p.held.last().map_or_else(|| "-".to_string(), |r| bytes(r.bytes)),
            checked_bytes(p.held_more_bytes)
        ))
    });
    let shown_storages: u64 = p.held.iter().map(live::StorageRow::storages).sum();
    let rows_summary = Text::from(format!(
        "One row per storage: {} ({} rows, identical storages merged with their count) — show the rows",
        if p.held_more_count > 0 {
            format!("the {shown_storages} largest of {total}")
        } else {
            format!("all {total}")
        },
        p.held.len()
    ));
    let held_rows = Table {
        id: format!("held-{d}"),
        caption: Text::from(held_caption(
            p.held.len(),
            shown_storages,
            total as u64,
            p.held.iter().any(|r| r.count.is_some()),
        )),
        columns: {
            let mut c = vec![
                Column::number("BYTES"),
                Column::text("CATEGORY"),
                Column::text("PASS"),
                Column::text("SPAN"),
            ];
            if ops {
                c.push(Column::text("OPERATION"));
            }
            c.extend([Column::text("SHAPE/DTYPE"), Column::text("LABEL")]);
            c
        },
        rows: p
            .held
            .iter()
            .map(|r| {
                let mut cells = vec![
                    if r.count.is_some() {
                        Cell::text(r.bytes_cell())
                    } else {
                        num_bytes(r.bytes)
                    },
                    Cell::text(format!(
                        "{}{}",
                        r.category.as_str(),
                        if r.category_inferred { "*" } else { "" }
                    )),
                    Cell::text(match (r.pass, r.pre_existing) {
                        (Some(p), _) => p.as_str(),
                        (None, true) => "before capture",
                        (None, false) => "-",
                    }),
                    Cell::trace(r.span_path.as_deref().unwrap_or("-")),
                ];
                if ops {
                    cells.push(Cell::trace(r.operation().as_deref().unwrap_or("-")));
                }
                cells.extend([
                    Cell::trace(&live::shape_dtype_of(
                        r.shape.as_deref(),
                        r.dtype.as_deref(),
                    )),
                    Cell::trace(&match (&r.label, &r.op_name) {
                        (Some(x), _) => x.clone(),
                        (None, Some(op)) => format!("op {op}"),
                        (None, None) => "-".to_string(),
                    }),
                ]);
                cells
            })
            .collect(),
        footer,
    };
    (rows_summary, held_rows)
}

/// One grouping of what was live at the peak (`memory --group-by`), the rest counted.
fn group_table(d: usize, g: &peak::HeldGroups, live_bytes: u64) -> Table {
    let by = g.by;
    let category = by == GroupBy::Category;
    let mut columns = vec![
        Column::number("BYTES"),
        Column::number("SHARE"),
        Column::number("STORAGES"),
    ];
    if category {
        columns.push(Column::number("INFERRED"));
    }
    columns.push(Column::text(by.title()));
    Table {
        id: format!("held-{d}-by-{}", by.as_str()),
        caption: Text::from(format!(
            "by {} (memory --group-by {})",
            by.as_str(),
            by.as_str()
        )),
        columns,
        rows: g
            .groups
            .iter()
            .map(|x| {
                let mut row = vec![
                    num_bytes(x.bytes),
                    Cell::number(live::share(x.bytes, live_bytes), Some(x.bytes as f64)),
                    count(x.storages),
                ];
                if category {
                    row.push(count(x.inferred_category));
                }
                row.push(Cell::trace(&x.key));
                row
            })
            .collect(),
        footer: (g.more_groups > 0).then(|| {
            Text::from(format!(
                "{} ({}) = {}",
                trace_format::more(g.more_groups as u64, "group", "groups"),
                trace_format::count(g.more_storages, "storage", "storages"),
                bytes(g.more_bytes)
            ))
        }),
    }
}
