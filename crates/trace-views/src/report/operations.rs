//! The operations: measured (a producer timed each op) or sampled (the sampler's account, the
//! op table, file I/O inside ops, the flame graph).

use super::cells::{count, MEASURED_OP_ROWS, OP_ROWS};
use crate::ops::{few_samples_line, lost_samples_line, pct};
use trace_format::{duration, opt_duration};
use trace_ops::OpProfile;
use trace_report::page::{Block, Cell, Column, Fact, Section, Table, Text};

/// The operations a producer timed one by one (a PyTorch import's `op` spans): calls, self and
/// total time per op and pass with PyTorch's `key_averages()` definitions, and the top-level
/// time (calls no other op encloses).
pub(super) fn measured_ops_section(m: &trace_ops::MeasuredOps) -> Section {
    let calls: u64 = m.rows.iter().map(|r| r.calls).sum();
    let shown = m.rows.len().min(MEASURED_OP_ROWS);
    let rows = m.rows[..shown]
        .iter()
        .map(|r| {
            vec![
                Cell::trace(&r.op),
                Cell::text(r.pass.map_or("-", |p| p.as_str())),
                Cell::number(r.calls.to_string(), Some(r.calls as f64)),
                Cell::number(duration(r.self_ns), Some(r.self_ns as f64)),
                Cell::number(duration(r.total_ns), Some(r.total_ns as f64)),
                Cell::number(
                    r.top_level_calls.to_string(),
                    Some(r.top_level_calls as f64),
                ),
                Cell::number(duration(r.top_level_ns), Some(r.top_level_ns as f64)),
            ]
        })
        .collect();
    Section {
        id: "ops".into(),
        title: "Operations (measured)".into(),
        blocks: vec![
            Block::Paragraph(Text::from(format!(
                "{calls} op calls, each timed by the producer (PyTorch's profiler): self and total time as key_averages() computes them; top level = calls no other op encloses.{}",
                if m.open_calls > 0 {
                    format!(" {} calls never closed and are not counted.", m.open_calls)
                } else {
                    String::new()
                }
            ))),
            Block::Table(Table {
                id: "measured-ops".into(),
                caption: Text::from(format!("{} ops by pass", m.rows.len())),
                columns: vec![
                    Column::text("OPERATION"),
                    Column::text("PASS"),
                    Column::number("CALLS"),
                    Column::number("SELF"),
                    Column::number("TOTAL"),
                    Column::number("TOP-LEVEL CALLS"),
                    Column::number("TOP-LEVEL TIME"),
                ],
                rows,
                footer: (m.rows.len() > shown)
                    .then(|| Text::from(format!("{} more rows", m.rows.len() - shown))),
            }),
        ],
    }
}

/// The sampled operations: the sampler's account, the op table (trace-ops's rows: op × pass ×
/// module with samples, estimated self time and share, each with its 95% interval), file I/O
/// inside ops, and the flame graph per thread and pass; one line when the trace has no
/// samples (with the reason).
pub(super) fn ops_section(profile: &Result<OpProfile, trace_ops::Unavailable>) -> Section {
    let mut blocks = Vec::new();
    let profile = match profile {
        Ok(p) => p,
        Err(u) => {
            blocks.push(Block::Paragraph(Text::trace(&format!(
                "operations: unavailable — {}",
                u.reason
            ))));
            return Section {
                id: "ops".into(),
                title: "Operations (sampled)".into(),
                blocks,
            };
        }
    };
    let t = &profile.totals;
    blocks.push(Block::Facts(sampler_facts(t)));
    for line in few_samples_line(t).into_iter().chain(lost_samples_line(t)) {
        blocks.push(Block::Paragraph(Text::from(line)));
    }
    if t.outside_region > 0 {
        blocks.push(Block::Paragraph(Text::from(format!(
            "{} outside the measured region {} not in the table.",
            trace_format::count(t.outside_region, "sample", "samples"),
            if t.outside_region == 1 { "is" } else { "are" }
        ))));
    }
    if let Some(d) = t.dropped.describe(t.samples) {
        blocks.push(Block::Paragraph(Text::from(format!("{d}."))));
    }
    if t.backward_line_unknown > 0 {
        blocks.push(Block::Paragraph(Text::from(format!(
            "{} backward samples could not be assigned to a backward op (no line tables, or another Candle version): counted as `backward`.",
            t.backward_line_unknown
        ))));
    }
    blocks.push(Block::Table(op_table(profile)));
    if let Some(table) = file_io_table(profile) {
        blocks.push(Block::Table(table));
    }
    blocks.push(Block::Heading(
        "Flame graph of the sampled call stacks".into(),
    ));
    blocks.push(Block::Paragraph(
        "One tree per pass (the pass of the span open when the sample was taken; per thread when several were sampled), the outermost frame on top, each frame as wide as the samples whose stack passes through it; backward frames carry the backward op of their samples. Wall-clock samples: waiting counts as much as computing. Small frames are merged into “(other)”.".into(),
    ));
    blocks.push(Block::FlameGraph);
    Section {
        id: "ops".into(),
        title: "Operations (sampled)".into(),
        blocks,
    }
}

/// The sampler's account (rate, samples, lost, unwinder, symbols; one item per thread) and what
/// the figures are.
fn sampler_facts(t: &trace_ops::SampleTotals) -> Vec<Fact> {
    let mut facts = vec![Fact {
        label: "sampler".into(),
        value: Text::trace(&format!(
            "{} wall clock{} · {} ({} in the measured region) · {} lost · unwinder {} · symbols {}",
            t.hz.map_or_else(|| "rate unknown,".to_string(), |hz| format!("{hz} Hz")),
            t.period_ns
                .map(|p| format!(" ({} period)", duration(p)))
                .unwrap_or_default(),
            trace_format::count(t.samples, "sample", "samples"),
            t.counted,
            t.lost.map_or_else(|| "-".to_string(), |l| l.to_string()),
            t.unwinder.as_deref().unwrap_or("-"),
            t.symbols.map_or("-", <&str>::from)
        )),
        data: vec![
            ("samples".to_string(), t.samples.to_string()),
            ("counted".to_string(), t.counted.to_string()),
        ],
        items: t
            .threads
            .iter()
            .map(|th| {
                Text::trace(&format!(
                    "thread {}{}: {} over {}{}",
                    th.thread,
                    th.name
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default(),
                    trace_format::count(th.samples, "sample", "samples"),
                    th.region_ns
                        .map_or_else(|| "an unknown duration".to_string(), duration),
                    th.lost.map(|l| format!(", {l} lost")).unwrap_or_default()
                ))
            })
            .collect(),
    }];
    facts.push(Fact {
        label: "what the figures are".into(),
        value: "estimates from wall-clock samples: self time = share of the thread's samples × the measured region's duration, with a 95% Wilson interval from the sample count".into(),
        ..Fact::default()
    });
    facts
}

/// The op table: op × pass × module (× thread when several), most samples first, the rest
/// counted in the footer.
fn op_table(profile: &OpProfile) -> Table {
    let t = &profile.totals;
    let threads = t.threads.len();
    let mut columns = vec![
        Column::text("OP"),
        Column::text("KIND"),
        Column::text("PASS"),
        Column::text("MODULE"),
    ];
    if threads > 1 {
        columns.push(Column::number("THREAD"));
    }
    columns.extend([
        Column::number("SAMPLES"),
        Column::number("SELF (EST.)"),
        Column::number("95% INTERVAL"),
        Column::number("SHARE"),
        Column::number("SHARE 95%"),
        Column::text("INNER OP"),
    ]);
    let shown = profile.rows.len().min(OP_ROWS);
    let rows = profile.rows[..shown]
        .iter()
        .map(|r| {
            let mut row = vec![
                Cell::trace(r.op.as_deref().unwrap_or("-")),
                Cell::text(r.kind.map_or("-", trace_ops::OpKind::as_str)),
                Cell::text(r.pass.map_or("-", |p| p.as_str())),
                Cell::trace(&match (&r.module, r.module_source) {
                    (Some(m), Some(trace_ops::ModuleSource::Stack)) => {
                        format!("{m} (from the stack)")
                    }
                    (Some(m), _) => m.clone(),
                    (None, _) => "-".to_string(),
                }),
            ];
            if threads > 1 {
                row.push(count(r.thread));
            }
            row.extend([
                count(r.samples),
                Cell::number(opt_duration(r.self_ns), r.self_ns.map(|v| v as f64)),
                Cell::number(
                    match (r.self_ns_low, r.self_ns_high) {
                        (Some(l), Some(h)) => format!("{} – {}", duration(l), duration(h)),
                        _ => "-".to_string(),
                    },
                    r.self_ns_low.map(|v| v as f64),
                ),
                Cell::number(pct(r.share), Some(r.share)),
                Cell::number(
                    format!("{} – {}", pct(r.share_low), pct(r.share_high)),
                    Some(r.share_low),
                ),
                Cell::trace(r.inner_op.as_deref().unwrap_or("")),
            ]);
            row
        })
        .collect();
    let rest = &profile.rows[shown..];
    Table {
        id: "ops-table".into(),
        caption: Text::from(format!(
            "operations by op, pass and module (candle-graph ops), most samples first{}",
            if t.few_samples {
                " — few samples"
            } else {
                ""
            }
        )),
        columns,
        rows,
        footer: (!rest.is_empty()).then(|| {
            Text::from(format!(
                "{}, {} (each at most {})",
                trace_format::more(rest.len() as u64, "row", "rows"),
                trace_format::count(
                    rest.iter().map(|r| r.samples).sum::<u64>(),
                    "sample",
                    "samples"
                ),
                rest[0].samples
            ))
        }),
    }
}

/// The samples whose stack reads or opens a file below an op (`None` when there are none).
fn file_io_table(profile: &OpProfile) -> Option<Table> {
    if profile.file_io.is_empty() {
        return None;
    }
    Some(Table {
        id: "ops-file-io".into(),
        caption: "file I/O inside ops (samples whose stack reads or opens a file below the op)"
            .into(),
        columns: vec![
            Column::text("OP"),
            Column::number("SAMPLES"),
            Column::number("SHARE"),
            Column::number("OF THE OP"),
            Column::text("I/O"),
            Column::text("VIA"),
        ],
        rows: profile
            .file_io
            .iter()
            .take(OP_ROWS)
            .map(|f| {
                vec![
                    Cell::trace(&f.op),
                    count(f.samples),
                    Cell::number(pct(f.share.share), Some(f.share.share)),
                    Cell::number(
                        format!("{} of {}", f.samples, f.op_samples),
                        Some(f.samples as f64 / f.op_samples.max(1) as f64),
                    ),
                    Cell::trace(&f.io_function),
                    Cell::trace(&f.via.join(" → ")),
                ]
            })
            .collect(),
        footer: None,
    })
}
