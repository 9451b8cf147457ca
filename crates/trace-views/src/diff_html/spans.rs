//! The aligned spans ranked by impact, and the spans on one side only.

use trace_diff::{AlignmentMode, TraceDiff, UnmatchedSpan};
use trace_report::page::{Block, Cell, Column, Section, Table, Text};

use super::{key, LIST_ROWS, SPAN_ROWS};
use crate::diff::figures::{cell, percent_share, stat, Unit};

fn unmatched_table(id: &str, caption: &str, list: &[UnmatchedSpan], timing: bool) -> Table {
    Table {
        id: id.into(),
        caption: caption.into(),
        columns: vec![
            Column::text("SPAN"),
            Column::text("PASS"),
            Column::number("BELOW"),
            Column::number("TOTAL"),
            Column::number("SUBTREE PEAK"),
        ],
        rows: list
            .iter()
            .take(LIST_ROWS)
            .map(|u| {
                let total = u.total_time_ns.filter(|_| timing);
                vec![
                    Cell::trace(&u.path),
                    Cell::text(u.pass.map_or("-", |p| p.as_str())),
                    Cell::number(u.descendants.to_string(), Some(u.descendants as f64)),
                    Cell::number(stat(total, Unit::Time), total.map(|s| s.median as f64)),
                    Cell::number(
                        stat(u.subtree_peak_bytes, Unit::Bytes),
                        u.subtree_peak_bytes.map(|s| s.median as f64),
                    ),
                ]
            })
            .collect(),
        footer: (list.len() > LIST_ROWS)
            .then(|| Text::from(format!("{} more", list.len() - LIST_ROWS))),
    }
}

pub(super) fn section(diff: &TraceDiff) -> Section {
    let a = &diff.alignment;
    let timing = diff.identity.timing_comparable;
    let shares = format!(
        "{} of the baseline's spans, {} of the candidate's",
        percent_share(a.baseline_aligned_share),
        percent_share(a.candidate_aligned_share)
    );
    let mut blocks = Vec::new();
    if a.mode == AlignmentMode::Passes {
        blocks.push(Block::Paragraph(Text::from(format!(
            "Span paths do not match ({} aligned: {shares}): the runs are compared by pass.",
            a.aligned
        ))));
    } else {
        blocks.push(Block::Paragraph(Text::from(format!(
            "{} spans aligned by path of names ({shares}; repeated siblings by occurrence, name#n), ranked by impact{}. Δ: candidate − baseline median; = unchanged; ~ within the run-to-run spread; - not observed.",
            a.aligned,
            if timing { "" } else { "; times not compared" }
        ))));
        let mut columns = vec![Column::number("IMPACT")];
        if timing {
            columns.extend([Column::number("TOTAL Δ"), Column::number("SELF Δ")]);
        }
        columns.extend([
            Column::number("DIRECT Δ"),
            Column::number("SUBTREE PEAK Δ"),
            Column::text("PASS"),
            Column::text("SPAN"),
        ]);
        let rows = diff
            .spans
            .iter()
            .take(SPAN_ROWS)
            .map(|r| {
                let mut row = vec![Cell::number(
                    impact_text(r.impact, r.impact_metric),
                    Some(r.impact),
                )];
                if timing {
                    row.push(Cell::number(
                        cell(&r.total_time_ns, Unit::Time),
                        key(&r.total_time_ns),
                    ));
                    row.push(Cell::number(
                        cell(&r.self_time_ns, Unit::Time),
                        key(&r.self_time_ns),
                    ));
                }
                row.push(Cell::number(
                    cell(&r.direct_allocated_bytes, Unit::Bytes),
                    key(&r.direct_allocated_bytes),
                ));
                row.push(Cell::number(
                    cell(&r.subtree_peak_bytes, Unit::Bytes),
                    key(&r.subtree_peak_bytes),
                ));
                row.push(Cell::text(r.pass.map_or("-", |p| p.as_str())));
                row.push(Cell::trace(&r.path));
                row
            })
            .collect();
        let footer = (diff.spans.len() > SPAN_ROWS).then(|| {
            let s = trace_diff::summarize(&diff.spans[SPAN_ROWS..], timing);
            Text::from(format!(
                "{} more aligned spans: {} changed, {} within noise",
                s.rows, s.changed, s.within_noise
            ))
        });
        blocks.push(Block::Table(Table {
            id: "spans-table".into(),
            caption: "Aligned spans, ranked by impact".into(),
            columns,
            rows,
            footer,
        }));
    }
    for (id, side, list) in [
        ("baseline-only", "baseline", &a.baseline_only),
        ("candidate-only", "candidate", &a.candidate_only),
    ] {
        if !list.is_empty() {
            blocks.push(Block::Table(unmatched_table(
                id,
                &format!("Only in the {side} (top-most span of each subtree)"),
                list,
                timing,
            )));
        }
    }
    Section {
        id: "spans".into(),
        title: "Spans".into(),
        blocks,
    }
}

/// A span row's impact as a share of the whole figure it is scaled by (see trace-diff's
/// `spans` module): `1.1% of the baseline's wall time`, `12.5% of the logical peak`; `-`
/// when nothing changed.
fn impact_text(impact: f64, metric: Option<trace_diff::SpanMetric>) -> String {
    use trace_diff::SpanMetric;
    match metric {
        Some(SpanMetric::SelfTime | SpanMetric::TotalTime) => {
            format!("{:.1}% of the baseline's wall time", 100.0 * impact)
        }
        Some(SpanMetric::DirectAllocated | SpanMetric::SubtreePeak) => {
            format!("{:.1}% of the logical peak", 100.0 * impact)
        }
        None => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::impact_text;

    #[test]
    fn impact_reads_as_a_share_of_what_it_is_scaled_by() {
        use trace_diff::SpanMetric;
        assert_eq!(
            impact_text(0.0108, Some(SpanMetric::SelfTime)),
            "1.1% of the baseline's wall time"
        );
        assert_eq!(
            impact_text(0.0108, Some(SpanMetric::SubtreePeak)),
            "1.1% of the logical peak"
        );
        assert_eq!(impact_text(0.0, None), "-");
    }
}
