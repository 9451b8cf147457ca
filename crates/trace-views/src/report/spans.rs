//! The span tree over time and the span-cost table.

use super::cells::SPAN_ROWS;
use trace_format::{duration, opt_bytes, opt_duration};
use trace_graph::{Analysis, NodeKind};
use trace_report::page::{Block, Cell, Column, Section, Table, Text};
use trace_schema::TraceDocument;

pub(super) fn time_section(doc: &TraceDocument, analysis: &Analysis) -> Section {
    let mut blocks = vec![
        Block::Paragraph("The span tree over time, one band per host lane (the trace records no thread ids: root spans that overlap in time get separate lanes); spans that do not nest are drawn apart, dashed. Hover for total and self time and the subtree's peak memory.".into()),
        Block::SpanIcicle,
    ];
    match (&analysis.graph, &analysis.graph_refusal) {
        (Some(g), _) => {
            // A producer that timed every op (a PyTorch import) has one span per op call: those
            // are the measured operations table's rows, not span rows here.
            let measured_ops = doc
                .spans
                .iter()
                .any(|s| s.kind == trace_schema::SpanKind::Op)
                && analysis.operations.is_err();
            let is_op_span = |id: &str| {
                doc.sym(id)
                    .and_then(|s| doc.span_index(s))
                    .is_some_and(|i| doc.spans[i].kind == trace_schema::SpanKind::Op)
            };
            let mut op_spans = 0usize;
            let mut spans: Vec<&trace_graph::GraphNode> = g
                .nodes
                .iter()
                .filter(|n| !matches!(n.kind, NodeKind::Operation | NodeKind::Tensor))
                .filter(|n| {
                    let op = measured_ops && is_op_span(&n.id);
                    op_spans += usize::from(op);
                    !op
                })
                .collect();
            if op_spans > 0 {
                blocks.push(Block::Paragraph(Text::from(format!(
                    "{op_spans} op spans (one per op call) are summarised in the Operations (measured) table below, not listed here."
                ))));
            }
            spans.sort_by(|a, b| {
                b.host_self_time_ns
                    .cmp(&a.host_self_time_ns)
                    .then_with(|| a.id.cmp(&b.id))
            });
            let shown = spans.len().min(SPAN_ROWS);
            let rest = &spans[shown..];
            let footer = (!rest.is_empty()).then(|| {
                let self_ns: Option<u64> = rest
                    .iter()
                    .try_fold(0u64, |a, n| a.checked_add(n.host_self_time_ns.unwrap_or(0)));
                Text::from(format!(
                    "{}, {} of self time together",
                    trace_format::more(rest.len() as u64, "span", "spans"),
                    self_ns.map_or_else(|| trace_format::OVERFLOWED.to_string(), duration)
                ))
            });
            blocks.push(Block::Table(Table {
                id: "span-cost".into(),
                caption: Text::from(format!(
                    "span cost ({}{})",
                    trace_format::count(spans.len() as u64, "span", "spans"),
                    if g.incomplete_capture {
                        "; closed spans of an incomplete capture"
                    } else {
                        ""
                    }
                )),
                columns: vec![
                    Column::number("SELF"),
                    Column::number("TOTAL"),
                    Column::number("ALLOCATED"),
                    Column::number("SUBTREE PEAK"),
                    Column::text("PASS"),
                    Column::text("SCOPE"),
                    Column::text("SPAN"),
                ],
                rows: spans[..shown]
                    .iter()
                    .map(|n| {
                        let path = analysis
                            .spans
                            .indexed_path_of_id(doc, &n.id)
                            .unwrap_or_else(|| n.name.to_string());
                        let pass = doc
                            .sym(&n.id)
                            .and_then(|s| doc.span_index(s))
                            .and_then(|i| analysis.spans.pass[i]);
                        vec![
                            Cell::number(
                                opt_duration(n.host_self_time_ns),
                                n.host_self_time_ns.map(|v| v as f64),
                            ),
                            Cell::number(
                                opt_duration(n.host_total_time_ns),
                                n.host_total_time_ns.map(|v| v as f64),
                            ),
                            Cell::number(
                                opt_bytes(n.memory.direct_allocated_bytes),
                                n.memory.direct_allocated_bytes.map(|v| v as f64),
                            ),
                            Cell::number(
                                opt_bytes(n.memory.subtree_peak_live_bytes),
                                n.memory.subtree_peak_live_bytes.map(|v| v as f64),
                            ),
                            Cell::text(pass.map_or("-", |p| p.as_str())),
                            Cell::text(n.scope.map_or("-", <&str>::from)),
                            Cell::trace(&path),
                        ]
                    })
                    .collect(),
                footer,
            }));
        }
        (None, Some(r)) => blocks.push(Block::Paragraph(Text::trace(&format!(
            "span costs unavailable: {}",
            r.reasons.join("; ")
        )))),
        (None, None) => {}
    }
    Section {
        id: "time".into(),
        title: "Time".into(),
        blocks,
    }
}
