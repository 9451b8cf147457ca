//! `candle-graph diff … --html FILE`: the comparison as one offline HTML page, composed from
//! trace-diff's [`TraceDiff`] with trace-report's page model and rendered by its renderer (the
//! same strict Content-Security-Policy, embedded script and style, escaping, no network).
//!
//! Sections: the headline deltas (timing compared or refused and why, wall time, the peak of
//! each device, gradients), memory (where each side peaked, bytes by category at the peak, the
//! storages live at the peak on one side only), passes by role, aligned spans ranked by impact
//! (sortable by every figure), spans on one side only, gradient verdict and norm changes, and
//! the terminal text. Figures read as the terminal prints them (trace-format); numeric cells
//! sort by their exact value. Trace text goes through [`Text::trace`] or was escaped by the
//! terminal helpers it shares with the text output.

use trace_diff::{AlignmentMode, Delta, DeviceDelta, StorageGroup, TraceDiff, UnmatchedSpan};
use trace_format::{bytes, escape};
use trace_report::page::{
    Block, Cell, Column, Fact, Overlay, OverlaySeries, Page, Section, Table, Text,
};

use crate::diff::{
    cell, identity, line, percent_share, place, ratio, render, shape_dtype, stat, storages,
    verdict_text, verdicts, Unit,
};

/// Rows of each live-at-peak table (the rest is counted in its footer).
pub const STORAGE_ROWS: usize = 200;
/// Rows of the aligned-span table (the rest is counted in its footer).
pub const SPAN_ROWS: usize = 300;
/// Rows of each one-side-only table and gradient table.
pub const LIST_ROWS: usize = 200;

/// A signed figure as a sort key (`None` when not observed or not compared).
fn key(d: &Delta) -> Option<f64> {
    d.delta.map(|v| v as f64)
}

/// The `data-*` attributes of a headline delta, for tests and scripts.
fn delta_data(prefix: &str, d: &Delta) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(b) = d.baseline {
        out.push((format!("{prefix}-baseline"), b.median.to_string()));
    }
    if let Some(c) = d.candidate {
        out.push((format!("{prefix}-candidate"), c.median.to_string()));
    }
    if let Some(v) = d.delta {
        out.push((format!("{prefix}-delta"), v.to_string()));
    }
    out.push((format!("{prefix}-verdict"), d.verdict.as_str().to_string()));
    out
}

/// Builds the page of a comparison; `top` is the text output's row count (its `<pre>` copy).
pub fn build(diff: &TraceDiff, top: usize) -> Page {
    let side = |runs: &[trace_diff::RunIdentity]| match runs {
        [one] => one.label.clone(),
        [first, ..] => format!("{} (+{} runs)", first.label, runs.len() - 1),
        [] => "-".to_string(),
    };
    let entry = |runs: &[trace_diff::RunIdentity]| {
        runs.first()
            .map(|r| r.entrypoint.clone())
            .unwrap_or_default()
    };
    let (b, c) = (&diff.identity.baseline, &diff.identity.candidate);
    let title = if entry(b) == entry(c) {
        format!("candle-graph diff · {}", entry(b))
    } else {
        format!("candle-graph diff · {} vs {}", entry(b), entry(c))
    };
    Page {
        title: Text::trace(&title),
        subtitle: Text::trace(&format!("baseline {} → candidate {}", side(b), side(c))),
        sections: vec![
            headline_section(diff),
            memory_section(diff),
            passes_section(diff),
            ops_section(diff),
            spans_section(diff),
            gradients_section(diff),
            Section {
                id: "text".into(),
                title: "As the terminal prints it".into(),
                blocks: vec![Block::Pre {
                    summary: "candle-graph diff (text)".into(),
                    text: Text::from(render(diff, top)),
                }],
            },
        ],
        // no charts: the script only makes the tables sortable
        data: serde_json::json!({ "view": "diff" }),
    }
}

fn runs_fact(label: &str, runs: &[trace_diff::RunIdentity]) -> Fact {
    Fact {
        label: label.into(),
        value: Text::from(match runs {
            [one] => escape(&one.label).into_owned(),
            _ => format!("{} runs", runs.len()),
        }),
        data: vec![("runs".into(), runs.len().to_string())],
        items: runs
            .iter()
            .map(|r| {
                Text::from(if runs.len() == 1 {
                    escape(&identity(r)).into_owned()
                } else {
                    format!("{} ({})", escape(&r.label), escape(&identity(r)))
                })
            })
            .collect(),
    }
}

fn headline_section(diff: &TraceDiff) -> Section {
    // the answer first: the changes ranked by size (the pass whose peak changed most first),
    // then the findings compared
    let lines = crate::diff::headline(diff);
    let mut facts = vec![Fact {
        label: "headline".into(),
        value: Text::trace(lines.first().map_or("", String::as_str)),
        data: vec![("headline".into(), "ranked".into())],
        items: lines.iter().skip(1).map(|l| Text::trace(l)).collect(),
    }];
    let f = crate::diff::findings_lines(diff);
    if let Some(why) = &diff.findings_unavailable {
        facts.push(Fact {
            label: "findings".into(),
            value: Text::trace(&format!("not compared: {why}")),
            data: vec![("findings".into(), "unavailable".into())],
            items: Vec::new(),
        });
    } else if !f.is_empty() {
        facts.push(Fact {
            label: "findings".into(),
            value: Text::trace(&f[0]),
            data: vec![("findings".into(), "compared".into())],
            items: f.iter().skip(1).map(|l| Text::trace(l)).collect(),
        });
    }
    facts.push(runs_fact("baseline", &diff.identity.baseline));
    facts.push(runs_fact("candidate", &diff.identity.candidate));
    let spread = if diff.spread_known {
        format!(
            "{} vs {} runs: differences inside the run-to-run range are called noise",
            diff.baseline_runs, diff.candidate_runs
        )
    } else {
        "one run on a side: the run-to-run spread is unknown (pass several traces per side)"
            .to_string()
    };
    facts.push(if diff.identity.timing_comparable {
        Fact {
            label: "timing".into(),
            value: Text::from(format!("compared; {spread}")),
            data: vec![("timing-comparable".into(), "true".into())],
            items: vec![],
        }
    } else {
        Fact {
            label: "timing".into(),
            value: Text::from(format!(
                "NOT compared (memory and gradients are compared); {spread}"
            )),
            data: vec![("timing-comparable".into(), "false".into())],
            items: diff
                .identity
                .refusals
                .iter()
                .map(|r| Text::from(format!("{}: {}", r.code.as_str(), escape(&r.message))))
                .collect(),
        }
    });
    facts.push(Fact {
        label: "wall time".into(),
        value: Text::from(line(&diff.wall_time_ns, Unit::Time)),
        data: delta_data("ns", &diff.wall_time_ns),
        items: vec![],
    });
    match &diff.memory {
        Some(m) => {
            for d in &m.devices {
                let mut items = Vec::new();
                if let Some(live) = &d.live_at_peak {
                    items.push(Text::from(format!(
                        "left the live-at-peak set: {}, {}",
                        storages(live.baseline_only_count),
                        bytes(live.baseline_only_bytes)
                    )));
                    items.push(Text::from(format!(
                        "entered the live-at-peak set: {}, {}",
                        storages(live.candidate_only_count),
                        bytes(live.candidate_only_bytes)
                    )));
                }
                let mut data = delta_data("bytes", &d.peak_bytes);
                data.push(("device".into(), d.device.clone()));
                facts.push(Fact {
                    label: Text::trace(&format!("peak on {}", d.device)),
                    value: Text::from(line(&d.peak_bytes, Unit::Bytes)),
                    data,
                    items,
                });
            }
            if m.devices.len() > 1 {
                facts.push(Fact {
                    label: "peak, all devices".into(),
                    value: Text::from(format!(
                        "{} (a sum, not one device's memory)",
                        line(&m.peak_bytes, Unit::Bytes)
                    )),
                    data: delta_data("bytes", &m.peak_bytes),
                    items: vec![],
                });
            }
        }
        None => facts.push(Fact {
            label: "memory".into(),
            value: Text::from(format!(
                "not compared: {}",
                escape(
                    diff.memory_unavailable
                        .as_deref()
                        .unwrap_or("no memory plane")
                )
            )),
            ..Fact::default()
        }),
    }
    facts.push(Fact {
        label: "gradients".into(),
        value: Text::from(match &diff.gradients {
            Some(g) => format!(
                "{} compared: {} unchanged, {} verdict changes, {} norm changes beyond ×{}",
                g.compared,
                g.unchanged,
                g.verdict_changes.len(),
                g.norm_changes.len(),
                g.norm_ratio_threshold
            ),
            None => format!(
                "not compared: {}",
                escape(
                    diff.gradients_unavailable
                        .as_deref()
                        .unwrap_or("no gradient facts")
                )
            ),
        }),
        data: diff
            .gradients
            .as_ref()
            .map(|g| {
                vec![
                    (
                        "verdict-changes".into(),
                        g.verdict_changes.len().to_string(),
                    ),
                    ("norm-changes".into(), g.norm_changes.len().to_string()),
                ]
            })
            .unwrap_or_default(),
        items: vec![],
    });
    Section {
        id: "headline".into(),
        title: "What changed".into(),
        blocks: vec![Block::Facts(facts)],
    }
}

fn storage_table(id: String, caption: String, groups: &[StorageGroup]) -> Table {
    let rows = groups
        .iter()
        .take(STORAGE_ROWS)
        .map(|g| {
            vec![
                Cell::number(bytes(g.bytes), Some(g.bytes as f64)),
                Cell::number(g.count.to_string(), Some(g.count as f64)),
                Cell::text(g.category.as_str()),
                Cell::text(g.pass_text()),
                Cell::trace(g.span_text()),
                Cell::trace(&shape_dtype(g)),
                Cell::trace(g.label.as_deref().unwrap_or("-")),
            ]
        })
        .collect();
    let footer = (groups.len() > STORAGE_ROWS).then(|| {
        let rest = &groups[STORAGE_ROWS..];
        let (n, b) = rest.iter().fold((0u64, 0u64), |(n, b), g| {
            (n.saturating_add(g.count), b.saturating_add(g.bytes))
        });
        Text::from(format!(
            "{} = {} ({})",
            trace_format::more(rest.len() as u64, "group", "groups"),
            bytes(b),
            storages(n)
        ))
    });
    Table {
        id,
        caption: caption.into(),
        columns: vec![
            Column::number("BYTES"),
            Column::number("COUNT"),
            Column::text("CATEGORY"),
            Column::text("PASS"),
            Column::text("SPAN"),
            Column::text("SHAPE/DTYPE"),
            Column::text("LABEL"),
        ],
        rows,
        footer,
    }
}

fn device_blocks(i: usize, d: &DeviceDelta, blocks: &mut Vec<Block>) {
    blocks.push(Block::Heading(Text::trace(&format!(
        "{}: peak {}",
        d.device,
        verdict_text(&d.peak_bytes, Unit::Bytes)
    ))));
    let places = |side: &str, list: &[trace_diff::PeakPlace]| Fact {
        label: side.into(),
        value: Text::from(match list.first() {
            Some(p) => place(p),
            None => "no peak on this device".to_string(),
        }),
        data: list
            .first()
            .and_then(|p| p.pass)
            .map(|p| vec![("pass".into(), p.as_str().to_string())])
            .unwrap_or_default(),
        items: if list.len() > 1 {
            list.iter()
                .map(|p| Text::from(format!("{}: {}", escape(&p.run), place(p))))
                .collect()
        } else {
            vec![]
        },
    };
    blocks.push(Block::Facts(vec![
        places("baseline peak", &d.baseline_peaks),
        places("candidate peak", &d.candidate_peaks),
    ]));
    if !d.baseline_timeline.is_empty() || !d.candidate_timeline.is_empty() {
        let run = |list: &[trace_diff::PeakPlace]| {
            list.first()
                .map_or_else(String::new, |p| format!(" ({})", escape(&p.run)))
        };
        blocks.push(Block::Overlay(Overlay {
            id: format!("overlay-{i}"),
            caption: Text::trace(&format!(
                "Live bytes on {} over time, both first runs overlaid; time from each run's measured-region start",
                d.device
            )),
            series: vec![
                OverlaySeries {
                    name: Text::from(format!("baseline{}", run(&d.baseline_peaks))),
                    points: d.baseline_timeline.clone(),
                },
                OverlaySeries {
                    name: Text::from(format!("candidate{}", run(&d.candidate_peaks))),
                    points: d.candidate_timeline.clone(),
                },
            ],
        }));
    }
    let adds_up = d
        .live_at_peak
        .as_ref()
        .filter(|_| d.baseline_peaks.len() == 1 && d.candidate_peaks.len() == 1);
    if !d.by_category.is_empty() {
        let mut columns = vec![
            Column::text("CATEGORY"),
            Column::number("BASELINE"),
            Column::number("CANDIDATE"),
            Column::number("CHANGE"),
        ];
        if adds_up.is_some() {
            columns.extend([
                Column::number("= ENTERED"),
                Column::number("- LEFT"),
                Column::number("+ AT BOTH"),
            ]);
        }
        blocks.push(Block::Table(Table {
            id: format!("categories-{i}"),
            caption: "Bytes by category at each side's peak: the change is what entered the live-at-peak set, minus what left it, plus the change of the storages live at both peaks".into(),
            columns,
            rows: d
                .by_category
                .iter()
                .map(|c| {
                    let mut row = vec![
                        Cell::text(c.category.as_str()),
                        Cell::number(
                            stat(c.bytes.baseline, Unit::Bytes),
                            c.bytes.baseline.map(|s| s.median as f64),
                        ),
                        Cell::number(
                            stat(c.bytes.candidate, Unit::Bytes),
                            c.bytes.candidate.map(|s| s.median as f64),
                        ),
                        Cell::number(cell(&c.bytes, Unit::Bytes), key(&c.bytes)),
                    ];
                    if let Some(live) = adds_up {
                        let l = live.by_category.iter().find(|l| l.category == c.category);
                        let (entered, left, both) = l.map_or((0, 0, 0), |l| {
                            (l.entered_bytes, l.left_bytes, l.matched_change_bytes())
                        });
                        row.extend([
                            Cell::number(bytes(entered), Some(entered as f64)),
                            Cell::number(bytes(left), Some(left as f64)),
                            Cell::number(
                                if both == 0 { "=".to_string() } else { trace_format::delta_bytes(both) },
                                Some(both as f64),
                            ),
                        ]);
                    }
                    row
                })
                .collect(),
            footer: None,
        }));
    }
    if let Some(split) = crate::diff::batch_split_text(d) {
        blocks.push(Block::Paragraph(Text::from(format!("By batch: {split}."))));
    }
    if let Some(live) = &d.live_at_peak {
        for (what, side, count, total, groups) in [
            (
                "Left",
                "the baseline's peak only",
                live.baseline_only_count,
                live.baseline_only_bytes,
                &live.baseline_only,
            ),
            (
                "Entered",
                "the candidate's peak only",
                live.candidate_only_count,
                live.candidate_only_bytes,
                &live.candidate_only,
            ),
        ] {
            if count == 0 {
                blocks.push(Block::Paragraph(Text::from(format!(
                    "{what} the live-at-peak set: none."
                ))));
            } else {
                blocks.push(Block::Table(storage_table(
                    format!("{}-{i}", what.to_lowercase()),
                    format!(
                        "{what} the live-at-peak set (live at {side}): {}, {}",
                        storages(count),
                        bytes(total)
                    ),
                    groups,
                )));
            }
        }
        blocks.push(Block::Paragraph(Text::from(format!(
            "Live at both peaks: {}. Storages are matched by allocating span path, shape, dtype and category, never by address.",
            crate::diff::matched_text(live)
        ))));
    }
}

fn memory_section(diff: &TraceDiff) -> Section {
    let mut blocks = Vec::new();
    match &diff.memory {
        None => blocks.push(Block::Paragraph(Text::from(format!(
            "Not compared: {}",
            escape(
                diff.memory_unavailable
                    .as_deref()
                    .unwrap_or("no memory plane")
            )
        )))),
        Some(m) => {
            for (i, d) in m.devices.iter().enumerate() {
                device_blocks(i, d, &mut blocks);
            }
            if m.lower_bound {
                blocks.push(Block::Paragraph(
                    "A capture ended early or dropped events: its figures are lower bounds.".into(),
                ));
            }
            if m.storages_matched_by == AlignmentMode::Passes {
                blocks.push(Block::Paragraph(
                    "Storages matched by pass, shape, dtype and category: span paths do not match."
                        .into(),
                ));
            }
        }
    }
    Section {
        id: "memory".into(),
        title: "Memory at the peak".into(),
        blocks,
    }
}

fn passes_section(diff: &TraceDiff) -> Section {
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
fn ops_section(diff: &TraceDiff) -> Section {
    let mut blocks = Vec::new();
    match diff.ops.as_ref() {
        None => blocks.push(Block::Paragraph(Text::from(format!(
            "Not compared: {}",
            escape(diff.ops_unavailable.as_deref().unwrap_or("no op table"))
        )))),
        Some(d) => {
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
            blocks.push(Block::Facts(facts));
            for p in &d.passes {
                let pass = p.pass.map_or("outside", |p| p.as_str());
                let side = |s: &trace_diff::RoleSide| -> (String, String, Option<f64>) {
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
                };
                let rows = p
                    .roles
                    .iter()
                    .map(|r| {
                        let (bo, bt, bn) = side(&r.baseline);
                        let (co, ct, cn) = side(&r.candidate);
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
                                super::diff_ops::gap_cell(r),
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
                                a.as_ref().map(|a| {
                                    format!("; {who}: {}", super::diff_ops::account_line(a))
                                })
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
                                    Cell::number(
                                        trace_format::opt_duration(o.ns),
                                        o.ns.map(|n| n as f64),
                                    ),
                                ]
                            })
                            .collect(),
                        footer: (list.len() > LIST_ROWS)
                            .then(|| Text::from(format!("{} more", list.len() - LIST_ROWS))),
                    }));
                }
            }
        }
    }
    Section {
        id: "operations".into(),
        title: "Operations by role".into(),
        blocks,
    }
}

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

fn spans_section(diff: &TraceDiff) -> Section {
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

fn gradients_section(diff: &TraceDiff) -> Section {
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

/// The self-contained HTML file of the diff page (what `diff --html` writes); `top` rows per
/// table as in the text.
pub fn html(diff: &TraceDiff, top: usize) -> String {
    trace_report::html::render(&build(diff, top))
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
