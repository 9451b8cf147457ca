//! Health issues and the capability matrix.

use super::cells::count;
use crate::check;
use crate::summary::health_line;
use trace_graph::Analysis;
use trace_report::page::{Block, Cell, Column, Section, Table, Text};

pub(super) fn health_section(analysis: &Analysis) -> Section {
    let r = check::build(analysis);
    let mut blocks = vec![Block::Paragraph(Text::from(format!(
        "health  {}",
        health_line(&r.health)
    )))];
    if r.issues.is_empty() {
        blocks.push(Block::Paragraph("issues  none".into()));
    } else {
        blocks.push(Block::Table(Table {
            id: "issues".into(),
            caption: "issues".into(),
            columns: vec![
                Column::text("SEVERITY"),
                Column::text("CODE"),
                Column::text("WHERE"),
                Column::text("MESSAGE"),
            ],
            rows: r
                .issues
                .iter()
                .map(|i| {
                    vec![
                        Cell::text(i.severity.as_str()),
                        Cell::text(i.code.as_str()),
                        Cell::trace(&check::location(&i.location)),
                        Cell::trace(&i.message),
                    ]
                })
                .collect(),
            footer: (!r.omitted_issues.is_empty()).then(|| {
                Text::from(
                    r.omitted_issues
                        .iter()
                        .map(|(code, n)| format!("{n} more {code} issues"))
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            }),
        }));
    }
    blocks.push(Block::Table(Table {
        id: "capabilities".into(),
        caption: "capabilities".into(),
        columns: vec![
            Column::text("CAPABILITY"),
            Column::text("LEVEL"),
            Column::text("DECLARED"),
            Column::number("OBSERVED"),
            Column::text("REASON"),
        ],
        rows: r
            .capabilities
            .capabilities
            .iter()
            .map(|c| {
                vec![
                    Cell::text(c.kind.as_str()),
                    Cell::text(c.level.as_str()),
                    Cell::text(c.declared.map_or("-", |d| d.as_str())),
                    count(c.observed),
                    Cell::trace(&c.reason),
                ]
            })
            .collect(),
        footer: None,
    }));
    Section {
        id: "health".into(),
        title: "Health and capabilities".into(),
        blocks,
    }
}
