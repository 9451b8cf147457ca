//! The answer and the slowest operations as the summary's text prints them.

use super::answer::AnswerRecord;
use super::record::SummaryReport;
use super::records::SlowestOperations;
use crate::peak::{self};
use std::fmt::Write as _;
use trace_format::{bytes, duration, escape, opt_duration};
use trace_memory::BytesOverflow;

/// The answer first: the peak (when, where, which pass), what held it, what would lower it
/// most (replayed), then the time.
pub fn render_answer(out: &mut String, r: &SummaryReport) {
    let a = &r.answer;
    match (&r.peaks, &r.memory_overflow) {
        (_, Some(o)) => {
            let _ = writeln!(out, "peak         {}", overflow_line(o));
        }
        (Some(p), None) => {
            if let Some(m) = p.memory_peak.as_ref().filter(|m| m.live_bytes > 0) {
                let on = m
                    .device
                    .as_deref()
                    .map(|d| format!(" on {}", escape(d)))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "peak         {}",
                    peak::headline(m, &on, r.time_origin_ns)
                );
                answer_held(out, a, m.live_bytes);
            }
        }
        _ => out.push_str("peak         no memory events in this trace\n"),
    }
    for (i, f) in a.lower_the_peak.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}{}. {} [{}]",
            if i == 0 {
                "to lower it  "
            } else {
                "             "
            },
            i + 1,
            escape(&f.text),
            f.code
        );
    }
    let mut time = opt_duration(r.outer_wall_time_ns);
    if r.timing_from_incomplete_capture && r.outer_wall_time_ns.is_some() {
        time.push_str(" (from an incomplete capture)");
    }
    if let Some(s) = r.slowest_spans.first() {
        let share = r
            .outer_wall_time_ns
            .filter(|&o| o > 0)
            .map(|o| format!(", {:.1}%", 100.0 * s.host_self_time_ns as f64 / o as f64))
            .unwrap_or_default();
        let _ = write!(
            time,
            "; slowest span {} ({} self{share})",
            escape(&s.path),
            duration(s.host_self_time_ns)
        );
    }
    if let Some(t) = &a.save_time {
        let _ = write!(time, "; most to gain: {}, {}", t.code, escape(&t.text));
    }
    let _ = writeln!(out, "time         {time}");
}

/// What held the peak, as the summary and the report's first screen both say it: the
/// categories with their bytes and share of `peak_bytes` (`category 1.00 MiB (40%) · …`), and
/// the fixed vs batch-scaled split when known.
pub(crate) fn held_by_text(a: &AnswerRecord, peak_bytes: u64) -> (String, Option<String>) {
    let pct = |b: u64| 100.0 * b as f64 / peak_bytes.max(1) as f64;
    let cats: Vec<String> = a
        .held_by
        .iter()
        .map(|c| {
            format!(
                "{} {} ({:.0}%)",
                c.category.as_str(),
                bytes(c.bytes),
                pct(c.bytes)
            )
        })
        .collect();
    let by_category: std::collections::BTreeMap<_, _> =
        a.held_by.iter().map(|c| (c.category, c.bytes)).collect();
    let split = match (a.fixed_bytes, a.batch_scaled_bytes) {
        (Some(fixed), Some(scaled)) => Some(format!(
            "fixed {} ({:.0}%: {}) · batch-scaled {} ({:.0}%: activations)",
            bytes(fixed),
            pct(fixed),
            trace_graph::findings::fixed_categories(&by_category),
            bytes(scaled),
            pct(scaled)
        )),
        _ => None,
    };
    (cats.join(" · "), split)
}

pub(super) fn answer_held(out: &mut String, a: &AnswerRecord, peak_bytes: u64) {
    let (cats, split) = held_by_text(a, peak_bytes);
    if !cats.is_empty() {
        let _ = writeln!(out, "held by      {cats}");
    }
    if let Some(split) = split {
        let _ = writeln!(out, "             {split}");
    }
    if !a.top_groups.is_empty() {
        let bound = if a.groups_lower_bound { "≥ " } else { "" };
        let groups: Vec<String> = a
            .top_groups
            .iter()
            .map(|g| {
                // a key in parentheses, "(before capture)", is read without them beside the count
                let key = g.key.strip_prefix('(').and_then(|k| k.strip_suffix(')'));
                format!(
                    "{bound}{} {} ({} storage{})",
                    bytes(g.bytes),
                    escape(&trace_format::elide_middle(key.unwrap_or(&g.key), 60)),
                    g.storages,
                    if g.storages == 1 { "" } else { "s" }
                )
            })
            .collect();
        let _ = writeln!(out, "  largest    {}", groups.join(" · "));
    }
}

/// Renders the slowest operations: one line when they were not captured.
pub fn render_operations(out: &mut String, s: &SlowestOperations) {
    use crate::ops::{few_samples_line, header, lost_samples_line, pct};
    let Some(t) = s.totals.as_ref().filter(|_| s.available) else {
        let _ = writeln!(
            out,
            "slowest operations  unavailable — {}",
            escape(s.reason.as_deref().unwrap_or("not captured"))
        );
        return;
    };
    let over = match s.steps {
        Some(n) => format!("; {n} captured steps together, PER STEP = their figure / {n}"),
        None => String::new(),
    };
    let _ = writeln!(out, "slowest operations ({}{over})", header(t));
    for line in few_samples_line(t).into_iter().chain(lost_samples_line(t)) {
        let _ = writeln!(out, "  warning: {line}");
    }
    use crate::table::Align;
    let mut cols = vec![("EST. SELF", Align::Right), ("95% INTERVAL", Align::Right)];
    if s.steps.is_some() {
        cols.push(("PER STEP", Align::Right));
    }
    cols.extend([
        ("SHARE", Align::Right),
        ("SAMPLES", Align::Right),
        ("PASS", Align::Left),
        ("OPERATION", Align::Left),
    ]);
    let mut table = crate::table::Table::new(&cols);
    for row in &s.rows {
        let mut cells = vec![opt_duration(row.self_ns), interval(row)];
        if let Some(n) = s.steps {
            cells.push(opt_duration(row.self_ns.map(|ns| ns / n.max(1))));
        }
        cells.extend([
            pct(row.share),
            row.samples.to_string(),
            row.pass.map_or("-", |p| p.as_str()).to_string(),
            crate::table::Table::path(row.op.as_deref().unwrap_or("-")),
        ]);
        table.row(cells);
    }
    out.push_str(&table.render("  "));
    if let Some(p) = &s.probe {
        let _ = writeln!(
            out,
            "  the probe's own frames (not in the rows above): {} samples, {} of the samples (95% {}–{}), est. {} ({})",
            p.samples,
            pct(p.share),
            pct(p.share_low),
            pct(p.share_high),
            opt_duration(p.self_ns),
            interval(p)
        );
    }
}

/// A row's 95% interval of its estimated self time.
fn interval(row: &trace_ops::OpRow) -> String {
    match (row.self_ns_low, row.self_ns_high) {
        (Some(l), Some(h)) => format!("{}–{}", duration(l), duration(h)),
        _ => "-".to_string(),
    }
}

/// The line shown instead of every logical figure when allocation sizes overflow.
pub fn overflow_line(o: &BytesOverflow) -> String {
    format!(
        "overflowed: allocation sizes add up past 2^64 bytes (at the alloc of {} on {}, {}); no logical memory figure is shown (health: memory_bytes_overflow)",
        escape(o.storage_id.as_deref().unwrap_or("?")),
        escape(&o.device),
        bytes(o.bytes)
    )
}
