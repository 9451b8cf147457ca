//! The page of a run's story (`candle-graph report RUN_DIR`, `series RUN_DIR --html FILE`): the
//! findings, the series plotted by captured step (step and pass times; peak, live and heap
//! after the step; the shares of the ops that changed or lead), the captures table (sortable)
//! and what the run directory did not keep — from the same [`RunStory`] the text prints, with
//! trace-report's page model (its strict Content-Security-Policy and escaping). Trace text goes
//! through [`Text::trace`].

use std::collections::BTreeMap;

use trace_format::{bytes, opt_duration};
use trace_report::page::{
    Block, Cell, Column, Fact, Page, Section, StepChart, StepSeries, StepUnit, Table, Text,
};
use trace_schema::Pass;

use super::findings::pct;
use super::RunStory;

fn series(name: &str, points: Vec<(u64, u64)>) -> Option<StepSeries> {
    (!points.is_empty()).then(|| StepSeries {
        name: Text::trace(name),
        points,
    })
}

fn chart(id: &str, caption: &str, unit: StepUnit, s: Vec<Option<StepSeries>>) -> Option<Block> {
    let series: Vec<StepSeries> = s.into_iter().flatten().collect();
    (!series.is_empty()).then(|| {
        Block::StepChart(StepChart {
            id: id.into(),
            caption: caption.into(),
            unit,
            series,
        })
    })
}

fn charts(story: &RunStory) -> Vec<Block> {
    let c = &story.captures;
    let pick = |f: &dyn Fn(&super::CaptureRow) -> Option<u64>| -> Vec<(u64, u64)> {
        c.iter().filter_map(|r| f(r).map(|v| (r.step, v))).collect()
    };
    let pass = |p: Pass| pick(&|r| r.pass_time_ns.get(&p).copied());
    let mut blocks = Vec::new();
    blocks.extend(chart(
        "chart-time",
        "Step time and pass times by captured step (wall time of the measured step)",
        StepUnit::Nanoseconds,
        vec![
            series("step", pick(&|r| r.wall_time_ns)),
            series("forward", pass(Pass::Forward)),
            series("backward", pass(Pass::Backward)),
            series("optimizer", pass(Pass::Optimizer)),
        ],
    ));
    blocks.extend(chart(
        "chart-memory",
        "Memory by captured step: the logical peak, what was live after the step, the process heap after the step",
        StepUnit::Bytes,
        vec![
            series("peak", pick(&|r| r.peak_bytes)),
            series("live after (logical)", pick(&|r| r.live_end_bytes)),
            series("heap after (process)", pick(&|r| r.heap_end_bytes)),
        ],
    ));
    // the ops with the most samples over the run, and any op a finding names
    let mut totals: BTreeMap<(String, Option<Pass>), u64> = BTreeMap::new();
    for r in c {
        for o in r.ops.iter().flat_map(|o| &o.rows) {
            *totals.entry((o.op.clone(), o.pass)).or_default() += o.samples;
        }
    }
    let mut ops: Vec<_> = totals.into_iter().collect();
    ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let named: Vec<(String, Option<Pass>)> = ops
        .iter()
        .filter(|((op, _), _)| {
            story
                .findings
                .iter()
                .any(|f| f.code == "op_share_change" && f.summary.starts_with(op.as_str()))
        })
        .map(|(k, _)| k.clone())
        .collect();
    let mut shown: Vec<(String, Option<Pass>)> =
        ops.iter().take(3).map(|(k, _)| k.clone()).collect();
    for k in named {
        if !shown.contains(&k) {
            shown.push(k);
        }
    }
    let share_series = shown
        .iter()
        .map(|(op, p)| {
            let points = c
                .iter()
                .filter_map(|r| {
                    let o = r.ops.as_ref()?;
                    let share = o
                        .rows
                        .iter()
                        .find(|x| &x.op == op && x.pass == *p)
                        .map_or(0.0, |x| x.share);
                    Some((r.step, (share * 1e6).round() as u64))
                })
                .collect();
            let name = match p {
                Some(p) => format!("{op} ({})", <&'static str>::from(*p)),
                None => op.clone(),
            };
            series(&name, points)
        })
        .collect();
    blocks.extend(chart(
        "chart-ops",
        "Op shares of the sampled step by captured step (the ops with the most samples, and those a finding names; intervals in the table)",
        StepUnit::PartsPerMillion,
        share_series,
    ));
    blocks
}

fn captures_table(story: &RunStory) -> Table {
    let n = |v: Option<u64>| v.map(|x| x as f64);
    let b = |v: Option<u64>| Cell::number(v.map(bytes).unwrap_or_else(|| "-".into()), n(v));
    let d = |v: Option<u64>| Cell::number(opt_duration(v), n(v));
    let rows = story
        .captures
        .iter()
        .map(|r| {
            let top = r.ops.as_ref().and_then(|o| o.rows.first());
            vec![
                Cell::number(r.step.to_string(), Some(r.step as f64)),
                d(r.wall_time_ns),
                d(r.pass_time_ns.get(&Pass::Forward).copied()),
                d(r.pass_time_ns.get(&Pass::Backward).copied()),
                d(r.pass_time_ns.get(&Pass::Optimizer).copied()),
                b(r.peak_bytes),
                Cell::text(r.peak_pass.map_or("-", <&'static str>::from)),
                Cell::trace(r.peak_span.as_deref().unwrap_or("-")),
                b(r.live_end_bytes),
                b(r.heap_end_bytes),
                Cell::trace(&top.map_or_else(
                    || "-".to_string(),
                    |o| {
                        format!(
                            "{} {} ({}–{})",
                            o.op,
                            pct(o.share),
                            pct(o.share_low),
                            pct(o.share_high)
                        )
                    },
                )),
            ]
        })
        .collect();
    Table {
        id: "captures-table".into(),
        caption: "Every kept capture (click a header to sort)".into(),
        columns: vec![
            Column::number("step"),
            Column::number("wall"),
            Column::number("forward"),
            Column::number("backward"),
            Column::number("optimizer"),
            Column::number("peak"),
            Column::text("peak in"),
            Column::text("peak span"),
            Column::number("live after"),
            Column::number("heap after"),
            Column::text("top op (95% interval)"),
        ],
        rows,
        footer: None,
    }
}

/// The page of `story`; `dir` names the run directory.
pub fn build(story: &RunStory, dir: &str) -> Page {
    let mut findings: Vec<Text> = story
        .findings
        .iter()
        .map(|f| {
            Text::trace(&format!(
                "[{}] {}: {} (captures before: {:?}; from the change: {:?})",
                f.severity, f.code, f.summary, f.before_steps, f.after_steps
            ))
        })
        .collect();
    if findings.is_empty() {
        findings.push(
            "none: no growth, step-time or op-share change beyond noise, no peak that moved".into(),
        );
    }
    let mut sections = vec![
        Section {
            id: "run".into(),
            title: "Run".into(),
            blocks: vec![Block::Facts(vec![Fact {
                label: "captures".into(),
                value: Text::from(format!(
                    "{} kept, {} not kept",
                    story.captures.len(),
                    story.not_kept.len()
                )),
                data: vec![
                    ("kept".into(), story.captures.len().to_string()),
                    ("findings".into(), story.findings.len().to_string()),
                ],
                items: Vec::new(),
            }])],
        },
        Section {
            id: "findings".into(),
            title: "Findings across captures".into(),
            blocks: vec![Block::List(findings)],
        },
        Section {
            id: "series".into(),
            title: "The series".into(),
            blocks: charts(story),
        },
        Section {
            id: "captures".into(),
            title: "Captures".into(),
            blocks: vec![Block::Table(captures_table(story))],
        },
    ];
    if !story.not_kept.is_empty() {
        sections.push(Section {
            id: "not-kept".into(),
            title: "Not kept (run.json)".into(),
            blocks: vec![Block::List(
                story
                    .not_kept
                    .iter()
                    .map(|r| {
                        Text::trace(&format!(
                            "step {}: {:?}: {}",
                            r.step,
                            r.state,
                            r.reason.as_deref().unwrap_or("-")
                        ))
                    })
                    .collect(),
            )],
        });
    }
    let left_out: Vec<Text> = story
        .left_out
        .iter()
        .map(|l| Text::trace(&format!("{}: {}", l.name, l.reason)))
        .chain(super::text::unbundled_line(story).map(|l| Text::trace(&l)))
        .collect();
    if !left_out.is_empty() {
        sections.push(Section {
            id: "left-out".into(),
            title: "Left out of the story".into(),
            blocks: vec![Block::List(left_out)],
        });
    }
    sections.push(Section {
        id: "text".into(),
        title: "As the terminal prints it".into(),
        blocks: vec![Block::Pre {
            summary: "candle-graph series RUN_DIR (text)".into(),
            text: Text::from(super::text::render(story)),
        }],
    });
    Page {
        title: Text::trace(&format!(
            "candle-graph report · run · {}",
            trace_format::elide_middle(&story.entrypoint, trace_format::NAME_COLUMNS)
        )),
        subtitle: Text::trace(&format!("{} captures · {dir}", story.captures.len())),
        sections,
        data: serde_json::json!({ "view": "run" }),
    }
}

/// The self-contained HTML file of the run's story.
pub fn html(story: &RunStory, dir: &str) -> String {
    trace_report::html::render(&build(story, dir))
}
