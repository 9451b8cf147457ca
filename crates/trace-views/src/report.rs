//! `candle-graph report TRACE [-o report.html]`: one self-contained HTML file (no network:
//! script, style and data embedded; a strict Content-Security-Policy) that opens on the summary
//! and shows the memory timeline per device, what held each peak, the span tree, gradients,
//! tensor statistics, health, capabilities and findings.
//!
//! The page is composed from the records `summary`, `memory` and `check` print (their builders
//! and trace-format's formatter), so it says what they say; the charts draw trace-report's
//! pre-aggregated, peak-preserving data. Rendering is trace-report's: see `trace_report::html`.

use trace_format::{at, bytes, checked_bytes, duration, opt_bytes, opt_duration};
use trace_graph::{Analysis, CapabilityLevel, NodeKind};
use trace_ops::OpProfile;
use trace_report::data::{chart_data, ChartOptions};
use trace_report::page::{Block, Cell, Column, Fact, Page, Section, Table, Text};
use trace_schema::TraceDocument;

use crate::live::{self, GroupBy};
use crate::ops::{few_samples_line, lost_samples_line, pct};
use crate::peak::{self, categories_line, PeakRecord, Peaks};
use crate::summary::{self, finding_texts, health_line, overflow_line, SummaryReport};
use crate::{check, memory};

/// Rows of each live-at-peak table (the rest is counted in its footer).
pub const HELD_ROWS: usize = 200;
/// Groups of each grouped table.
pub const GROUP_ROWS: usize = 30;
/// Rows of the span-cost table.
pub const SPAN_ROWS: usize = 300;

/// Builds the page of a trace. `path` is shown as the trace's name.
pub fn build(doc: &TraceDocument, analysis: &Analysis, path: &str) -> Page {
    let summary = summary::build(doc, analysis);
    let mut data = chart_data(doc, analysis, ChartOptions::default());
    let profile = &analysis.operations;
    if let Ok(p) = profile {
        let trees = trace_ops::flame_trees(doc, p, &trace_ops::FlameOptions::default());
        data["flame"] = trace_report::flame::flame_data(&trees);
    }
    // the answer first: the summary, then the findings ranked by what acting on them changes
    let mut sections = vec![
        summary_section(&summary, path),
        Section {
            id: "findings".into(),
            title: "Findings".into(),
            blocks: vec![Block::Findings(finding_texts(analysis))],
        },
    ];
    sections.push(memory_section(doc, analysis, &summary));
    sections.push(held_section(doc, analysis));
    sections.push(time_section(doc, analysis));
    sections.push(
        match (profile, trace_ops::MeasuredOps::from_document(doc)) {
            (Err(_), Some(measured)) => measured_ops_section(&measured),
            _ => ops_section(profile),
        },
    );
    sections.push(gradients_section(analysis));
    sections.push(tensor_stats_section(doc));
    sections.push(health_section(analysis));
    let run = &summary.run;
    Page {
        title: Text::trace(&format!("candle-graph report · {}", run.entrypoint)),
        subtitle: Text::trace(&identity(&summary)),
        sections,
        data,
    }
}

/// The run line of `summary`: `entrypoint · run id · phase · step N after W warm-up · device ·
/// candle V`.
fn identity(r: &SummaryReport) -> String {
    let run = &r.run;
    let mut s = format!("{} · {}", run.entrypoint, run.run_id);
    if let Some(phase) = &run.phase {
        s.push_str(&format!(" · {phase}"));
    }
    if let Some(step) = run.capture_step {
        s.push_str(&format!(" · step {step}"));
        if let Some(w) = run.warmup_steps {
            s.push_str(&format!(" after {w} warm-up"));
        }
    }
    if let Some(d) = &run.device {
        s.push_str(&format!(" · {d}"));
    }
    if let Some(c) = &run.candle_version {
        s.push_str(&format!(" · candle {c}"));
    }
    s
}

fn peak_fact(label: &str, p: &PeakRecord, on: &str, origin: u64) -> Fact {
    let mut data = vec![("peak-bytes".to_string(), p.live_bytes.to_string())];
    if let Some(d) = &p.device {
        data.push(("device".to_string(), d.clone()));
    }
    Fact {
        label: label.into(),
        value: Text::from(peak::headline(p, on, origin)),
        data,
        items: vec![Text::from(format!(
            "by category: {}",
            categories_line(&p.by_category)
        ))],
    }
}

/// The answer's facts after the peak: what held it, what would lower it most (replayed), the
/// time — in `summary`'s order and words.
fn answer_facts(r: &SummaryReport, facts: &mut Vec<Fact>) {
    let a = &r.answer;
    let peak = r
        .peaks
        .as_ref()
        .and_then(|p| p.memory_peak.as_ref())
        .map_or(0, |m| m.live_bytes);
    if r.memory_overflow.is_none() && peak > 0 && !a.held_by.is_empty() {
        let (cats, split) = super::summary::held_by_text(a, peak);
        let mut items: Vec<Text> = split.into_iter().map(Text::from).collect();
        let bound = if a.groups_lower_bound { "≥ " } else { "" };
        for g in &a.top_groups {
            items.push(Text::trace(&format!(
                "{bound}{} {} ({} storage{})",
                bytes(g.bytes),
                g.key,
                g.storages,
                if g.storages == 1 { "" } else { "s" }
            )));
        }
        facts.push(Fact {
            label: "held by".into(),
            value: Text::from(cats),
            data: vec![("held-by".to_string(), "categories".to_string())],
            items,
        });
    }
    if !a.lower_the_peak.is_empty() {
        let first = &a.lower_the_peak[0];
        facts.push(Fact {
            label: "to lower it".into(),
            value: Text::trace(&format!("{} [{}]", first.text, first.code)),
            data: vec![
                ("finding".to_string(), first.code.clone()),
                ("exact".to_string(), first.exact.to_string()),
            ],
            items: a.lower_the_peak[1..]
                .iter()
                .map(|f| Text::trace(&format!("{} [{}]", f.text, f.code)))
                .collect(),
        });
    }
    let mut time = opt_duration(r.outer_wall_time_ns);
    if r.timing_from_incomplete_capture && r.outer_wall_time_ns.is_some() {
        time.push_str(" (from an incomplete capture)");
    }
    let mut items = Vec::new();
    if let Some(s) = r.slowest_spans.first() {
        items.push(Text::trace(&format!(
            "slowest span {} ({} self)",
            s.path,
            duration(s.host_self_time_ns)
        )));
    }
    if let Some(t) = &a.save_time {
        items.push(Text::trace(&format!(
            "most to gain: {}, {}",
            t.code, t.text
        )));
    }
    facts.push(Fact {
        label: "time".into(),
        value: Text::from(time),
        items,
        ..Fact::default()
    });
}

fn summary_section(r: &SummaryReport, path: &str) -> Section {
    let origin = r.time_origin_ns;
    let mut facts = vec![
        Fact {
            label: "trace".into(),
            value: Text::trace(path),
            ..Fact::default()
        },
        Fact {
            label: "run".into(),
            value: Text::trace(&identity(r)),
            ..Fact::default()
        },
    ];
    match (&r.peaks, &r.memory_overflow) {
        (_, Some(o)) => facts.push(Fact {
            label: "memory peak".into(),
            value: overflow_line(o).into(),
            ..Fact::default()
        }),
        (Some(p), None) if p.memory_peak.is_some() => {
            if p.device_peaks.is_empty() {
                let m = p.memory_peak.as_ref().expect("checked");
                let on = m
                    .device
                    .as_deref()
                    .map(|d| format!(" on {}", trace_format::escape(d)))
                    .unwrap_or_default();
                facts.push(peak_fact("memory peak", m, &on, origin));
            } else {
                for d in &p.device_peaks {
                    let label = format!("peak on {}", d.device.as_deref().unwrap_or("?"));
                    facts.push(peak_fact(&label, d, "", origin));
                }
                let m = p.memory_peak.as_ref().expect("checked");
                let mut f = peak_fact("all devices (a sum)", m, "", origin);
                f.data.clear();
                facts.push(f);
            }
        }
        _ => facts.push(Fact {
            label: "memory peak".into(),
            value: "no memory events in this trace".into(),
            ..Fact::default()
        }),
    }
    answer_facts(r, &mut facts);
    facts.push(Fact {
        label: "health".into(),
        value: health_line(&r.health).into(),
        ..Fact::default()
    });
    facts.push(Fact {
        label: "coverage".into(),
        value: Text::trace(&r.coverage.text()),
        data: vec![("coverage".to_string(), "line".to_string())],
        ..Fact::default()
    });
    let g = &r.gradients;
    facts.push(Fact {
        label: "gradients".into(),
        value: if g.parameters == 0 && g.coverage == CapabilityLevel::Unavailable {
            "not captured".into()
        } else {
            Text::from(format!(
                "{} of {} parameters present · {} missing · {} zero · {} non-finite",
                g.present, g.parameters, g.missing, g.zero, g.non_finite
            ))
        },
        ..Fact::default()
    });
    Section {
        id: "summary".into(),
        title: "Summary".into(),
        blocks: vec![
            Block::Facts(facts),
            Block::Paragraph(Text::trace(&format!(
                "Open in Perfetto: `candle-graph export {path} --format chrome -o trace.json`, then load trace.json at ui.perfetto.dev (or chrome://tracing): spans, passes and memory counters on one timeline."
            ))),
            Block::Pre {
                summary: "candle-graph summary, as the terminal shows it".into(),
                text: Text::from(summary::render(r, path)),
            },
        ],
    }
}

fn memory_section(doc: &TraceDocument, analysis: &Analysis, r: &SummaryReport) -> Section {
    let mut blocks = Vec::new();
    let origin = analysis.time_origin_ns;
    if let Some(o) = &analysis.memory.logical_overflow {
        blocks.push(Block::Paragraph(overflow_line(o).into()));
    }
    let Some(l) = analysis.memory.logical.as_ref() else {
        if analysis.memory.logical_overflow.is_none() {
            blocks.push(Block::Paragraph("no memory events in this trace".into()));
        }
        return Section {
            id: "memory".into(),
            title: "Memory".into(),
            blocks,
        };
    };
    blocks.push(Block::Paragraph(
        "Logical live bytes (tensor storages) stacked by category, each device on the measured region's time axis; every point is the highest value of its time slice, so the peak is always drawn. The logical stack sets the left axis; physical device samples are dots (joined by dashed lines) on their own axis, right. Drag, ctrl/⌘ + wheel (or the wheel once the chart was clicked), +/− or a two-finger pinch zooms; shift+wheel or a one-finger drag pans; Escape or Whole timeline resets.".into(),
    ));
    let memory_report = memory::build(doc, analysis, None, 1, None, false).ok();
    for (d, name) in l.timeline.devices.iter().enumerate() {
        blocks.push(Block::Heading(Text::trace(name)));
        if let Some(p) = l.device(name).ok().and_then(|s| s.peak.as_ref()) {
            blocks.push(Block::Paragraph(Text::from(format!(
                "peak {} at {}",
                bytes(p.live_bytes),
                at(p.timestamp_ns, origin)
            ))));
        }
        blocks.push(Block::MemoryChart { device: d });
        if let Some(ph) = analysis
            .memory
            .physical
            .as_ref()
            .and_then(|p| p.by_device.iter().find(|x| &x.device == name))
        {
            if let Some(line) = memory::logical_vs_physical(ph, origin) {
                blocks.push(Block::Paragraph(line.into()));
            }
            if let Some(note) = ph.logical_comparison.as_ref().and_then(|c| c.note.as_ref()) {
                blocks.push(Block::Paragraph(Text::from(format!("note: {note}"))));
            }
        }
    }
    blocks.push(Block::Heading("What was live at a chosen time".into()));
    blocks.push(Block::LiveSetPanel);
    if let Some(p) = r.peaks.as_ref().and_then(|p| p.memory_peak.as_ref()) {
        if !p.pass_peaks.is_empty() {
            blocks.push(Block::Table(Table {
                id: "pass-peaks".into(),
                caption: "peak of each pass (all devices)".into(),
                columns: vec![
                    Column::text("PASS"),
                    Column::number("PEAK"),
                    Column::number("AT"),
                    Column::text("MOSTLY"),
                ],
                rows: p
                    .pass_peaks
                    .iter()
                    .map(|s| {
                        vec![
                            Cell::text(s.pass.as_str()),
                            Cell::number(bytes(s.live_bytes), Some(s.live_bytes as f64)),
                            Cell::number(at(s.timestamp_ns, origin), Some(s.timestamp_ns as f64)),
                            Cell::text(s.dominant_category.map_or("-", |c| c.as_str())),
                        ]
                    })
                    .collect(),
                footer: None,
            }));
        }
    }
    if let Some(m) = memory_report {
        blocks.push(Block::Table(Table {
            id: "by-category".into(),
            caption: if m.peaks.as_ref().is_some_and(|p| !p.device_peaks.is_empty()) {
                "by category (AT PEAK: all devices together)".into()
            } else {
                "by category".into()
            },
            columns: vec![
                Column::text("CATEGORY"),
                Column::number("AT PEAK"),
                Column::number("ALLOCATED"),
                Column::number("ALLOCS"),
                Column::number("BEFORE CAPTURE"),
                Column::number("LIVE AT END"),
            ],
            rows: m
                .by_category
                .iter()
                .map(|c| {
                    vec![
                        Cell::text(c.category.as_str()),
                        num_bytes(c.at_peak_bytes),
                        num_bytes(c.totals.total_allocated_bytes),
                        count(c.totals.allocation_count),
                        num_bytes(c.totals.pre_existing_bytes),
                        num_bytes(c.totals.live_at_end_bytes),
                    ]
                })
                .collect(),
            footer: None,
        }));
        blocks.push(Block::Table(Table {
            id: "by-device".into(),
            caption: "by device".into(),
            columns: vec![
                Column::text("DEVICE"),
                Column::number("PEAK"),
                Column::number("AT"),
                Column::number("ALLOCATED"),
                Column::number("ALLOCS"),
                Column::number("FREES"),
                Column::number("LIVE AT END"),
            ],
            rows: m
                .by_device
                .iter()
                .map(|d| {
                    vec![
                        Cell::trace(&d.device),
                        Cell::number(
                            opt_bytes(d.peak.as_ref().map(|p| p.live_bytes)),
                            d.peak.as_ref().map(|p| p.live_bytes as f64),
                        ),
                        Cell::number(
                            d.peak
                                .as_ref()
                                .map_or_else(|| "-".to_string(), |p| at(p.timestamp_ns, origin)),
                            d.peak.as_ref().map(|p| p.timestamp_ns as f64),
                        ),
                        num_bytes(d.total_allocated_bytes),
                        count(d.allocation_count),
                        count(d.matched_free_count),
                        num_bytes(d.live_at_end_bytes),
                    ]
                })
                .collect(),
            footer: None,
        }));
    }
    Section {
        id: "memory".into(),
        title: "Memory".into(),
        blocks,
    }
}

fn num_bytes(b: u64) -> Cell {
    Cell::number(bytes(b), Some(b as f64))
}

fn count(n: u64) -> Cell {
    Cell::number(n.to_string(), Some(n as f64))
}

fn held_section(doc: &TraceDocument, analysis: &Analysis) -> Section {
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
        let ops = p.held.iter().any(|r| r.op.is_some());
        blocks.push(Block::Heading(Text::from(format!(
            "{} · {}",
            trace_format::escape(name),
            peak::headline(&p, "", origin)
        ))));
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
            caption: Text::from(format!(
                "held at the peak (top {} of {total}; * category inferred from the pass it was allocated in)",
                p.held.len()
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
                        Cell::trace(&live::shape_dtype_of(r.shape.as_deref(), r.dtype.as_deref())),
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
            blocks.push(Block::Table(Table {
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
                            Cell::number(live::share(x.bytes, p.live_bytes), Some(x.bytes as f64)),
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
                        "{} more groups ({} storages) = {}",
                        g.more_groups,
                        g.more_storages,
                        bytes(g.more_bytes)
                    ))
                }),
            }));
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

fn time_section(doc: &TraceDocument, analysis: &Analysis) -> Section {
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
                    "{} more spans, {} of self time together",
                    rest.len(),
                    self_ns.map_or_else(|| trace_format::OVERFLOWED.to_string(), duration)
                ))
            });
            blocks.push(Block::Table(Table {
                id: "span-cost".into(),
                caption: Text::from(format!(
                    "span cost ({} spans{})",
                    spans.len(),
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

/// Rows of the measured op table.
pub const MEASURED_OP_ROWS: usize = 300;

/// The operations a producer timed one by one (a PyTorch import's `op` spans): calls, self and
/// total time per op and pass with PyTorch's `key_averages()` definitions, and the top-level
/// time (calls no other op encloses).
fn measured_ops_section(m: &trace_ops::MeasuredOps) -> Section {
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
fn ops_section(profile: &Result<OpProfile, trace_ops::Unavailable>) -> Section {
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
    let mut facts = vec![Fact {
        label: "sampler".into(),
        value: Text::trace(&format!(
            "{} wall clock{} · {} samples ({} in the measured region) · {} lost · unwinder {} · symbols {}",
            t.hz.map_or_else(|| "rate unknown,".to_string(), |hz| format!("{hz} Hz")),
            t.period_ns
                .map(|p| format!(" ({} period)", duration(p)))
                .unwrap_or_default(),
            t.samples,
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
                    "thread {}{}: {} samples over {}{}",
                    th.thread,
                    th.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default(),
                    th.samples,
                    th.region_ns.map_or_else(|| "an unknown duration".to_string(), duration),
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
    blocks.push(Block::Facts(facts));
    for line in few_samples_line(t).into_iter().chain(lost_samples_line(t)) {
        blocks.push(Block::Paragraph(Text::from(line)));
    }
    if t.outside_region > 0 {
        blocks.push(Block::Paragraph(Text::from(format!(
            "{} samples outside the measured region are not in the table.",
            t.outside_region
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
    blocks.push(Block::Table(Table {
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
                "{} more rows, {} samples (each at most {})",
                rest.len(),
                rest.iter().map(|r| r.samples).sum::<u64>(),
                rest[0].samples
            ))
        }),
    }));
    if !profile.file_io.is_empty() {
        blocks.push(Block::Table(Table {
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
        }));
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

/// Rows of the op table (the rest is counted in its footer).
pub const OP_ROWS: usize = 300;

/// A float as the report shows it: 4 significant decimals, exponent form outside 1e-3..1e6.
fn float(v: f64) -> String {
    if v == 0.0 || (1e-3..1e6).contains(&v.abs()) {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

fn opt_float(v: Option<f64>) -> Cell {
    Cell::number(v.map_or_else(|| "-".to_string(), float), v)
}

fn gradients_section(analysis: &Analysis) -> Section {
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

fn tensor_stats_section(doc: &TraceDocument) -> Section {
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

fn health_section(analysis: &Analysis) -> Section {
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

/// The self-contained HTML file of the report of `doc` (what `report --html` writes);
/// `trace_path` is shown as the trace's name.
pub fn html(doc: &TraceDocument, analysis: &Analysis, trace_path: &str) -> String {
    trace_report::html::render(&build(doc, analysis, trace_path))
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
