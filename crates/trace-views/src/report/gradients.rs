//! Gradient verdicts and norms, and tensor statistics.

use super::cells::count;
use crate::live::{self};
use trace_format::opt_bytes;
use trace_graph::Analysis;
use trace_report::page::{Block, Cell, Column, Section, Table, Text};
use trace_schema::TraceDocument;

/// A float as the report shows it: 4 significant decimals, exponent form outside 1e-3..1e6.
pub(super) fn float(v: f64) -> String {
    if v == 0.0 || (1e-3..1e6).contains(&v.abs()) {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

pub(super) fn opt_float(v: Option<f64>) -> Cell {
    Cell::number(v.map_or_else(|| "-".to_string(), float), v)
}

pub(super) fn gradients_section(analysis: &Analysis) -> Section {
    let g = &analysis.gradients;
    if g.parameter_count() == 0 && g.non_parameter.is_empty() {
        // Nothing to tabulate: say so instead of "0 of 0 parameters" over an empty table.
        let level = analysis
            .capabilities
            .level(trace_graph::CapabilityKind::Gradients);
        return Section {
            id: "gradients".into(),
            title: "Gradients".into(),
            blocks: vec![Block::Paragraph(Text::from(format!(
                "Gradients: not in this trace (coverage: {}){}",
                level.as_str(),
                if level == trace_graph::CapabilityLevel::Unavailable {
                    ": the producer recorded no gradient facts (a PyTorch profiler trace has none; a Candle capture needs a ProbedOptimizer or `.varmap()`)"
                } else {
                    ""
                }
            )))],
        };
    }
    let mut blocks = vec![Block::Paragraph(Text::from(format!(
        "{} of {} parameters present · {} missing · {} zero · {} non-finite{} (coverage: {})",
        g.counts.present,
        g.parameter_count(),
        g.counts.missing,
        g.counts.zero,
        g.counts.non_finite,
        if g.counts.not_reported > 0 {
            format!(" · {} not reported", g.counts.not_reported)
        } else {
            String::new()
        },
        analysis
            .capabilities
            .level(trace_graph::CapabilityKind::Gradients)
            .as_str()
    )))];
    blocks.push(Block::Table(Table {
        id: "gradients-table".into(),
        caption: "per parameter".into(),
        columns: vec![
            Column::text("PARAMETER"),
            Column::text("FAMILY"),
            Column::text("VERDICT"),
            Column::number("NORM"),
        ],
        rows: g
            .parameters
            .iter()
            .map(|p| {
                vec![
                    Cell::trace(&format!("{}/{}", p.root, p.key)),
                    Cell::trace(p.family.as_deref().unwrap_or("-")),
                    Cell::text(p.state.map_or("not reported", |s| s.as_str())),
                    opt_float(p.norm),
                ]
            })
            .collect(),
        footer: None,
    }));
    if !g.non_parameter.is_empty() {
        blocks.push(Block::Table(Table {
            id: "non-parameter-gradients".into(),
            caption: Text::from(format!(
                "{} non-parameter gradients ({}): tensors that are not parameters kept a gradient",
                g.non_parameter.len(),
                if g.non_parameter_bytes_overflowed {
                    trace_format::OVERFLOWED.to_string()
                } else {
                    opt_bytes(g.non_parameter_bytes)
                }
            )),
            columns: vec![
                Column::text("TENSOR"),
                Column::text("VERDICT"),
                Column::number("NORM"),
                Column::number("BYTES"),
            ],
            rows: g
                .non_parameter
                .iter()
                .map(|p| {
                    vec![
                        Cell::trace(&format!("{}/{}", p.root, p.key)),
                        Cell::text(p.state.as_str()),
                        opt_float(p.norm),
                        Cell::number(opt_bytes(p.bytes), p.bytes.map(|b| b as f64)),
                    ]
                })
                .collect(),
            footer: None,
        }));
    }
    Section {
        id: "gradients".into(),
        title: "Gradients".into(),
        blocks,
    }
}

pub(super) fn tensor_stats_section(doc: &TraceDocument) -> Section {
    let blocks = if doc.tensor_stats.is_empty() {
        vec![Block::Paragraph(
            "no tensor statistics in this trace".into(),
        )]
    } else {
        vec![Block::Table(Table {
            id: "tensor-stats".into(),
            caption: "statistics over the finite elements".into(),
            columns: vec![
                Column::text("LABEL"),
                Column::text("SHAPE/DTYPE"),
                Column::number("ELEMENTS"),
                Column::number("NON-FINITE"),
                Column::number("RMS"),
                Column::number("ABS MAX"),
                Column::number("MEAN"),
                Column::number("MIN"),
                Column::number("MAX"),
            ],
            rows: doc
                .tensor_stats
                .iter()
                .map(|s| {
                    vec![
                        Cell::trace(&s.label),
                        Cell::trace(&live::shape_dtype_of(Some(&s.shape), Some(&s.dtype))),
                        count(s.elements),
                        count(s.non_finite),
                        opt_float(s.rms),
                        opt_float(s.abs_max),
                        opt_float(s.mean),
                        opt_float(s.min),
                        opt_float(s.max),
                    ]
                })
                .collect(),
            footer: None,
        })]
    };
    Section {
        id: "tensors".into(),
        title: "Tensor statistics".into(),
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_well() {
        assert_eq!(float(0.0), "0.0000");
        assert_eq!(float(1.5), "1.5000");
        assert_eq!(float(1e-5), "1.000e-5");
        assert_eq!(float(-2.5e7), "-2.500e7");
    }
}
