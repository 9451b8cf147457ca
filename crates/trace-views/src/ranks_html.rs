//! The page of `candle-graph report DIR` on a directory of rank traces: the comparison across ranks as one
//! offline HTML page — the straggler (slowest rank, by how much, in which pass and span), the
//! imbalance of memory, the per-rank table (sortable by every figure), what is missing or cut
//! short, and the terminal text. Composed from the same [`RankReport`] that `summary DIR`
//! prints (trace-ranks), with trace-report's page model and renderer (the same strict
//! Content-Security-Policy, escaping, no network). Trace text goes through [`Text::trace`].

use trace_format::{bytes, duration, opt_duration};
use trace_ranks::{Excess, RankReport};
use trace_report::page::{Block, Cell, Column, Fact, Page, Section, Table, Text};
use trace_schema::Pass;

use crate::ranks::{excess_line, imbalance_line, render};

/// The `data-*` attributes of an excess (`<prefix>-ns`, `-median-ns`, `-excess-ns`), for tests.
fn excess_data(prefix: &str, e: &Excess) -> Vec<(String, String)> {
    vec![
        (format!("{prefix}-ns"), e.rank_ns.to_string()),
        (
            format!("{prefix}-median-ns"),
            e.others_median_ns.to_string(),
        ),
        (format!("{prefix}-excess-ns"), e.excess_ns.to_string()),
    ]
}

fn straggler_section(r: &RankReport) -> Section {
    let blocks = match &r.straggler {
        Some(s) => {
            let mut data = excess_data("step", &s.step);
            data.push(("rank".into(), s.rank.to_string()));
            let mut facts = vec![
                Fact {
                    label: "straggler".into(),
                    value: Text::from(format!("rank {}: step {}", s.rank, excess_line(&s.step))),
                    data,
                    items: Vec::new(),
                },
                Fact {
                    label: "fastest".into(),
                    value: Text::from(format!(
                        "rank {} at {} (of {} complete ranks)",
                        s.fastest_rank,
                        duration(s.fastest_ns),
                        s.ranks_compared
                    )),
                    data: vec![
                        ("rank".into(), s.fastest_rank.to_string()),
                        ("step-ns".into(), s.fastest_ns.to_string()),
                    ],
                    items: Vec::new(),
                },
            ];
            if let Some((pass, e)) = &s.pass {
                let name = <&'static str>::from(*pass);
                let mut data = excess_data("pass", e);
                data.push(("pass".into(), name.to_string()));
                facts.push(Fact {
                    label: "in pass".into(),
                    value: Text::from(format!("{name}: {}", excess_line(e))),
                    data,
                    items: Vec::new(),
                });
            }
            if let Some((path, e)) = &s.span {
                facts.push(Fact {
                    label: "in span".into(),
                    value: Text::trace(&format!("{path} (host self time): {}", excess_line(e))),
                    data: excess_data("span", e),
                    items: Vec::new(),
                });
            }
            vec![Block::Facts(facts)]
        }
        None => vec![Block::Paragraph(Text::from(
            "Not ranked: fewer than two complete ranks with a measured step.",
        ))],
    };
    Section {
        id: "straggler".into(),
        title: "Straggler".into(),
        blocks,
    }
}

fn memory_section(r: &RankReport) -> Section {
    let blocks = match &r.memory {
        Some(m) => {
            vec![Block::Facts(vec![Fact {
                label: "imbalance".into(),
                value: Text::from(imbalance_line(m)),
                data: vec![
                    ("max-rank".into(), m.max_rank.to_string()),
                    ("max-bytes".into(), m.max_bytes.to_string()),
                    ("min-rank".into(), m.min_rank.to_string()),
                    ("min-bytes".into(), m.min_bytes.to_string()),
                    ("spread-bytes".into(), m.spread_bytes.to_string()),
                ],
                items: Vec::new(),
            }])]
        }
        None => vec![Block::Paragraph(Text::from(
            "Not compared: fewer than two ranks with a logical peak.",
        ))],
    };
    Section {
        id: "memory".into(),
        title: "Memory across ranks".into(),
        blocks,
    }
}

fn number(v: Option<u64>, text: impl Fn(u64) -> String) -> Cell {
    match v {
        Some(x) => Cell::number(text(x), Some(x as f64)),
        None => Cell::number("-", None),
    }
}

fn ranks_table(r: &RankReport) -> Table {
    let rows = r
        .ranks
        .iter()
        .map(|row| {
            let f = &row.figures;
            let pass = |p: Pass| number(f.pass_time_ns.get(&p).copied(), duration);
            let mut rank = row.rank.to_string();
            if row.truncated {
                rank.push_str(" (cut)");
            }
            let devices: Vec<String> = f
                .device_peak_bytes
                .iter()
                .map(|(d, b)| format!("{d} {}", bytes(*b)))
                .collect();
            vec![
                Cell::number(rank, Some(f64::from(row.rank))),
                Cell::number(
                    opt_duration(f.outer_wall_time_ns),
                    f.outer_wall_time_ns.map(|x| x as f64),
                ),
                pass(Pass::Forward),
                pass(Pass::Backward),
                pass(Pass::Optimizer),
                number(f.logical_peak_bytes, bytes),
                if devices.is_empty() {
                    Cell::text("-")
                } else {
                    Cell::trace(&devices.join(", "))
                },
                Cell::text(f.logical_peak_pass.map(<&'static str>::from).unwrap_or("-")),
                Cell::text(
                    f.logical_peak_dominant_category
                        .map(<&'static str>::from)
                        .unwrap_or("-"),
                ),
                match &row.slowest_span {
                    Some(s) => Cell::trace(&format!("{} {}", s.path, duration(s.self_time_ns))),
                    None => Cell::text("-"),
                },
            ]
        })
        .collect();
    Table {
        id: "ranks-table".into(),
        caption: "One row per rank read: step time (measured region), pass times, logical peak (all devices) and per device, the pass and category that held it, the span with the most host self time".into(),
        columns: vec![
            Column::number("rank"),
            Column::number("step"),
            Column::number("forward"),
            Column::number("backward"),
            Column::number("optimizer"),
            Column::number("peak"),
            Column::text("peak per device"),
            Column::text("peak in"),
            Column::text("held mostly by"),
            Column::text("slowest span (self)"),
        ],
        rows,
        footer: None,
    }
}

/// What the directory lacks or the traces disagree on, one line each (empty when nothing).
fn problems(r: &RankReport) -> Vec<Text> {
    let mut out: Vec<Text> = r
        .missing
        .iter()
        .map(|rank| {
            Text::from(format!(
                "missing: rank {rank} has no trace in the directory"
            ))
        })
        .collect();
    out.extend(r.failed.iter().map(|f| {
        Text::trace(&format!(
            "unreadable: {}{}: {}",
            f.file.display(),
            f.rank.map(|r| format!(" (rank {r})")).unwrap_or_default(),
            f.reason
        ))
    }));
    out.extend(r.cut_short.iter().map(|rank| {
        Text::from(format!(
            "cut short: rank {rank}; its figures are lower bounds; not ranked for the straggler"
        ))
    }));
    out.extend(
        r.disagreements
            .iter()
            .map(|d| Text::trace(&format!("disagreement: {d}"))),
    );
    out
}

/// Builds the page of the ranks in `dir` (shown as the directory's name).
pub fn build(r: &RankReport, dir: &str) -> Page {
    let first = r.ranks.first().map(|x| &x.figures);
    let entrypoint = first.map(|f| f.entrypoint.as_str()).unwrap_or("-");
    let step = first
        .and_then(|f| f.capture_step)
        .map(|s| format!(" · step {s}"))
        .unwrap_or_default();
    let problems = problems(r);
    let mut sections = vec![
        straggler_section(r),
        memory_section(r),
        Section {
            id: "ranks".into(),
            title: "Ranks".into(),
            blocks: vec![
                Block::Facts(vec![Fact {
                    label: "ranks".into(),
                    value: Text::from(format!(
                        "{} of {} ranks read ({})",
                        r.ranks.len(),
                        r.world_size,
                        if r.world_size_declared {
                            "world size declared"
                        } else {
                            "world size counted from the files"
                        }
                    )),
                    data: vec![
                        ("read".into(), r.ranks.len().to_string()),
                        ("world-size".into(), r.world_size.to_string()),
                    ],
                    items: Vec::new(),
                }]),
                Block::Table(ranks_table(r)),
            ],
        },
    ];
    if !problems.is_empty() {
        sections.push(Section {
            id: "problems".into(),
            title: "Missing, unreadable, cut short".into(),
            blocks: vec![Block::List(problems)],
        });
    }
    sections.push(Section {
        id: "text".into(),
        title: "As the terminal prints it".into(),
        blocks: vec![Block::Pre {
            summary: "candle-graph summary DIR (text)".into(),
            text: Text::from(render(r, dir)),
        }],
    });
    Page {
        title: Text::trace(&format!(
            "candle-graph report · ranks · {}",
            trace_format::elide_middle(entrypoint, trace_format::NAME_COLUMNS)
        )),
        subtitle: Text::trace(&format!("{} ranks{step} · {dir}", r.ranks.len())),
        sections,
        // no charts: the script only makes the table sortable
        data: serde_json::json!({ "view": "ranks" }),
    }
}

/// The self-contained HTML file of the ranks page (what `report DIR` writes on a directory of
/// rank traces); `dir` is shown as the directory's name.
pub fn html(r: &RankReport, dir: &str) -> String {
    trace_report::html::render(&build(r, dir))
}
