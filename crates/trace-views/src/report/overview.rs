//! The report's first section: the run, the answer (the peak, what held it, the findings that
//! would change it most) and the time.

use crate::peak::{self, categories_line, PeakRecord};
use crate::summary::{self, health_line, overflow_line, SummaryReport};
use trace_format::{bytes, duration, opt_duration};
use trace_graph::CapabilityLevel;
use trace_report::page::{Block, Fact, Section, Text};

/// The run line of `summary`: `entrypoint · run id · phase · step N after W warm-up · device ·
/// candle V`.
pub(super) fn identity(r: &SummaryReport) -> String {
    let run = &r.run;
    let mut s = format!(
        "{} · {}",
        trace_format::elide_middle(&run.entrypoint, trace_format::NAME_COLUMNS),
        trace_format::elide_middle(&run.run_id, trace_format::NAME_COLUMNS)
    );
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

pub(super) fn peak_fact(label: &str, p: &PeakRecord, on: &str, origin: u64) -> Fact {
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
pub(super) fn answer_facts(r: &SummaryReport, facts: &mut Vec<Fact>) {
    let a = &r.answer;
    let peak = r
        .peaks
        .as_ref()
        .and_then(|p| p.memory_peak.as_ref())
        .map_or(0, |m| m.live_bytes);
    if r.memory_overflow.is_none() && peak > 0 && !a.held_by.is_empty() {
        let (cats, split) = crate::summary::held_by_text(a, peak);
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

pub(super) fn summary_section(r: &SummaryReport, path: &str) -> Section {
    let origin = r.time_origin_ns;
    // the answer first: the run line is the page's subtitle, the trace's path follows it
    let mut facts = Vec::new();
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
    if let Some(i) = &r.inference {
        facts.push(crate::inference::fact(i));
    }
    facts.push(Fact {
        label: "trace".into(),
        value: Text::trace(path),
        ..Fact::default()
    });
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
