//! The passes by role and the operations aligned by role, one table per pass.

use trace_diff::{Delta, TraceDiff};
use trace_format::escape;
use trace_report::page::{Block, Cell, Column, Fact, Section, Table, Text};

use super::{key, LIST_ROWS};
use crate::diff::figures::{cell, stat, Unit};

pub(super) fn passes_section(diff: &TraceDiff) -> Section {
    let blocks = if diff.passes.is_empty() {
        vec![Block::Paragraph("No passes declared.".into())]
    } else {
        let both = |d: &Delta, unit: Unit| {
            format!("{} → {}", stat(d.baseline, unit), stat(d.candidate, unit))
        };
        vec![Block::Table(Table {
            id: "passes-table".into(),
            caption: "Forward, backward and optimizer by role, whatever the spans are named".into(),
            columns: vec![
                Column::text("PASS"),
                Column::text("TIME"),
                Column::number("TIME Δ"),
                Column::text("PEAK"),
                Column::number("PEAK Δ"),
                Column::number("ALLOCATED Δ"),
            ],
            rows: diff
                .passes
                .iter()
                .map(|p| {
                    vec![
                        Cell::text(p.pass.as_str()),
                        Cell::text(both(&p.time_ns, Unit::Time)),
                        Cell::number(cell(&p.time_ns, Unit::Time), key(&p.time_ns)),
                        Cell::text(both(&p.peak_bytes, Unit::Bytes)),
                        Cell::number(cell(&p.peak_bytes, Unit::Bytes), key(&p.peak_bytes)),
                        Cell::number(
                            cell(&p.allocated_bytes, Unit::Bytes),
                            key(&p.allocated_bytes),
                        ),
                    ]
                })
                .collect(),
            footer: None,
        })]
    };
    Section {
        id: "passes".into(),
        title: "Passes".into(),
        blocks,
    }
}

fn fact(label: &str, value: String) -> Fact {
    Fact {
        label: label.into(),
        value: Text::from(value),
        data: Vec::new(),
        items: Vec::new(),
    }
}

/// Operations aligned by role, one table per pass (ids `ops-<pass>`), ops without a role listed.
pub(super) fn section(diff: &TraceDiff) -> Section {
    let mut blocks = Vec::new();
    match diff.ops.as_ref() {
        None => blocks.push(Block::Paragraph(Text::from(format!(
            "Not compared: {}",
            escape(diff.ops_unavailable.as_deref().unwrap_or("no op table"))
        )))),
        Some(d) => {
            blocks.push(Block::Facts(ops_facts(d)));
            for p in &d.passes {
                pass_blocks(p, &mut blocks);
            }
        }
    }
    Section {
        id: "operations".into(),
        title: "Operations by role".into(),
        blocks,
    }
}

/// Whether op times are compared, the refusals, notes and sampling warnings.
fn ops_facts(d: &trace_diff::OpsDiff) -> Vec<Fact> {
    let mut facts = vec![fact(
        "op times",
        if d.timing_comparable {
            "compared".to_string()
        } else {
            "NOT compared".to_string()
        },
    )];
    for r in &d.refusals {
        facts.push(fact("refused", escape(r).into_owned()));
    }
    for n in &d.notes {
        facts.push(fact("note", escape(n).into_owned()));
    }
    for t in [&d.baseline_sampling, &d.candidate_sampling]
        .into_iter()
        .flatten()
    {
        for l in crate::ops::few_samples_line(t)
            .into_iter()
            .chain(crate::ops::lost_samples_line(t))
        {
            facts.push(fact("warning", escape(&l).into_owned()));
        }
    }
    facts
}

/// A side of a role row: its ops, its time (with the range across runs) and the sort key.
fn role_side(s: &trace_diff::RoleSide) -> (String, String, Option<f64>) {
    let ops = s
        .ops
        .iter()
        .map(|o| escape(o).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    let t = match (s.ns, s.low_ns, s.high_ns) {
        _ if s.ops.is_empty() && s.ns.is_none() => "-".to_string(),
        (Some(n), Some(l), Some(h)) => format!(
            "{} ({}–{})",
            trace_format::duration(n),
            trace_format::duration(l),
            trace_format::duration(h)
        ),
        (n, _, _) => trace_format::opt_duration(n),
    };
    (
        if ops.is_empty() { "-".into() } else { ops },
        t,
        s.ns.map(|n| n as f64),
    )
}

/// One pass's role table and its ops without a role on each side.
fn pass_blocks(p: &trace_diff::PassOps, blocks: &mut Vec<Block>) {
    let pass = p.pass.map_or("outside", |p| p.as_str());
    let rows = p
        .roles
        .iter()
        .map(|r| {
            let (bo, bt, bn) = role_side(&r.baseline);
            let (co, ct, cn) = role_side(&r.candidate);
            vec![
                Cell::trace(&match r.kind {
                    trace_diff::RowKind::Unmatched => format!("{} (unmatched)", r.role),
                    _ => r.role.clone(),
                }),
                Cell::text(bo),
                Cell::number(bt, bn),
                Cell::text(co),
                Cell::number(ct, cn),
                Cell::number(
                    crate::diff_ops::gap_cell(r),
                    r.gap_ns
                        .filter(|_| r.too_few_samples.is_none())
                        .map(|g| g as f64),
                ),
                Cell::number(
                    r.share_of_pass_gap
                        .map_or_else(|| "-".to_string(), crate::diff_ops::share_of_gap),
                    r.share_of_pass_gap,
                ),
                Cell::trace(r.note.as_deref().unwrap_or("")),
            ]
        })
        .collect();
    blocks.push(Block::Table(Table {
        id: format!("ops-{pass}"),
        caption: Text::from(format!(
            "{pass}: {} → {}{}",
            trace_format::opt_duration(p.baseline_pass_ns),
            trace_format::opt_duration(p.candidate_pass_ns),
            p.pass_gap_ns
                .map(|g| format!(", gap {}", trace_format::delta_duration(g)))
                .unwrap_or_default()
                + &[
                    ("baseline", &p.baseline_account),
                    ("candidate", &p.candidate_account)
                ]
                .iter()
                .filter_map(|(who, a)| {
                    a.as_ref()
                        .map(|a| format!("; {who}: {}", crate::diff_ops::account_line(a)))
                })
                .collect::<String>()
        )),
        columns: vec![
            Column::text("ROLE"),
            Column::text("BASELINE OPS"),
            Column::number("BASELINE"),
            Column::text("CANDIDATE OPS"),
            Column::number("CANDIDATE"),
            Column::number("GAP"),
            Column::number("OF PASS GAP"),
            Column::text("NOTE"),
        ],
        rows,
        footer: None,
    }));
    for (who, list) in [
        ("baseline", &p.baseline_unmatched),
        ("candidate", &p.candidate_unmatched),
    ] {
        if list.is_empty() {
            continue;
        }
        // a table, not a list: long op paths scroll inside it instead of widening
        // the page on a narrow screen
        blocks.push(Block::Table(Table {
            id: format!("ops-{pass}-{who}-unmatched"),
            caption: Text::from(format!("{pass}: ops without a role on the {who}")),
            columns: vec![Column::text("OP"), Column::number("TIME")],
            rows: list
                .iter()
                .take(LIST_ROWS)
                .map(|o| {
                    vec![
                        Cell::trace(&format!(
                            "{}{}",
                            o.op,
                            if o.probe { " (probe)" } else { "" }
                        )),
                        Cell::number(trace_format::opt_duration(o.ns), o.ns.map(|n| n as f64)),
                    ]
                })
                .collect(),
            footer: (list.len() > LIST_ROWS)
                .then(|| Text::from(format!("{} more", list.len() - LIST_ROWS))),
        }));
    }
}
