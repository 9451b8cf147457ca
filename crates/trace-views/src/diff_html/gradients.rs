//! The gradients section: verdict and norm changes, parameters on one side only.

use trace_diff::TraceDiff;
use trace_format::escape;
use trace_report::page::{Block, Cell, Column, Section, Table, Text};

use super::LIST_ROWS;
use crate::diff::figures::{ratio, verdicts};

pub(super) fn section(diff: &TraceDiff) -> Section {
    let mut blocks = Vec::new();
    match &diff.gradients {
        None => blocks.push(Block::Paragraph(Text::from(format!(
            "Not compared: {}",
            escape(
                diff.gradients_unavailable
                    .as_deref()
                    .unwrap_or("no gradient facts")
            )
        )))),
        Some(g) => {
            blocks.push(Block::Paragraph(Text::from(format!(
                "{} parameters compared: {} unchanged, {} verdict changes, {} norm changes beyond ×{}{}.",
                g.compared,
                g.unchanged,
                g.verdict_changes.len(),
                g.norm_changes.len(),
                g.norm_ratio_threshold,
                g.extreme_norm_ratio
                    .map(|r| format!(" (norm ratio farthest from 1: {})", ratio(r)))
                    .unwrap_or_default()
            ))));
            if !g.verdict_changes.is_empty() {
                blocks.push(Block::Table(Table {
                    id: "verdict-changes".into(),
                    caption: "Verdict changes".into(),
                    columns: vec![
                        Column::text("PARAMETER"),
                        Column::text("BASELINE"),
                        Column::text("CANDIDATE"),
                    ],
                    rows: g
                        .verdict_changes
                        .iter()
                        .take(LIST_ROWS)
                        .map(|c| {
                            vec![
                                Cell::trace(&c.parameter),
                                Cell::text(verdicts(&c.baseline)),
                                Cell::text(verdicts(&c.candidate)),
                            ]
                        })
                        .collect(),
                    footer: (g.verdict_changes.len() > LIST_ROWS).then(|| {
                        Text::from(format!("{} more", g.verdict_changes.len() - LIST_ROWS))
                    }),
                }));
            }
            if !g.norm_changes.is_empty() {
                blocks.push(Block::Table(Table {
                    id: "norm-changes".into(),
                    caption: Text::from(format!(
                        "Gradient norms changed beyond ×{}",
                        g.norm_ratio_threshold
                    )),
                    columns: vec![
                        Column::text("PARAMETER"),
                        Column::number("BASELINE NORM"),
                        Column::number("CANDIDATE NORM"),
                        Column::number("RATIO"),
                    ],
                    rows: g
                        .norm_changes
                        .iter()
                        .take(LIST_ROWS)
                        .map(|c| {
                            let finite = |x: f64| x.is_finite().then_some(x);
                            vec![
                                Cell::trace(&c.parameter),
                                Cell::number(
                                    format!("{:.4e}", c.baseline_norm),
                                    finite(c.baseline_norm),
                                ),
                                Cell::number(
                                    format!("{:.4e}", c.candidate_norm),
                                    finite(c.candidate_norm),
                                ),
                                Cell::number(ratio(c.ratio), finite(c.ratio)),
                            ]
                        })
                        .collect(),
                    footer: (g.norm_changes.len() > LIST_ROWS)
                        .then(|| Text::from(format!("{} more", g.norm_changes.len() - LIST_ROWS))),
                }));
            }
            for (side, list) in [
                ("baseline", &g.baseline_only),
                ("candidate", &g.candidate_only),
            ] {
                if !list.is_empty() {
                    blocks.push(Block::Heading(Text::from(format!(
                        "Parameters only in the {side}"
                    ))));
                    let mut items: Vec<Text> = list
                        .iter()
                        .take(LIST_ROWS)
                        .map(|p| Text::trace(p))
                        .collect();
                    if list.len() > LIST_ROWS {
                        items.push(Text::from(format!("{} more", list.len() - LIST_ROWS)));
                    }
                    blocks.push(Block::List(items));
                }
            }
        }
    }
    Section {
        id: "gradients".into(),
        title: "Gradients".into(),
        blocks,
    }
}
