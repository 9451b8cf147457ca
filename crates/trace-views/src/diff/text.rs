//! The terminal text of `candle-graph diff`: the sides, the headline and findings, timing,
//! memory, passes, ops, spans and gradients, in that order.

use std::fmt::Write as _;

use trace_diff::{
    summarize, AlignmentMode, Delta, DeviceDelta, GradientDiff, LiveSetDiff, PeakPlace,
    RunIdentity, SpanDelta, StorageGroup, TraceDiff, Verdict,
};
use trace_format::{bytes, delta_bytes, delta_duration, escape};

use super::figures::{
    batch_split_text, cell, identity, line, matched_text, percent_share, place, ratio, shape_dtype,
    signed_cell, stat, storages, verdicts, Unit,
};
use super::headline::{findings_lines, headline};
use super::STORAGE_ROWS;
use crate::table::{Align, Table};

fn render_side(out: &mut String, name: &str, runs: &[RunIdentity]) {
    if let [one] = runs {
        let _ = writeln!(out, "{name:<12} {}", escape(&one.label));
        let _ = writeln!(out, "{:<12} {}", "", escape(&identity(one)));
        return;
    }
    let _ = writeln!(out, "{name:<12} {} runs", runs.len());
    for r in runs {
        let _ = writeln!(out, "  {}  ({})", escape(&r.label), escape(&identity(r)));
    }
}

fn render_places(out: &mut String, side: &str, places: &[PeakPlace], indent: &str) {
    let Some(first) = places.first() else {
        let _ = writeln!(out, "{indent}{side:<10} no peak on this device");
        return;
    };
    let same_pass = places.iter().all(|p| p.pass == first.pass);
    let _ = writeln!(
        out,
        "{indent}{side:<10} {}{}",
        place(first),
        match places.len() {
            1 => String::new(),
            n if same_pass => format!(" (first of {n} runs; same pass in all)"),
            n => format!(
                " (first of {n} runs; passes vary: {})",
                places
                    .iter()
                    .map(|p| p.pass.map_or("none", |x| x.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    );
}

fn storage_table(out: &mut String, groups: &[StorageGroup], indent: &str) {
    let mut t = Table::new(&[
        ("BYTES", Align::Right),
        ("COUNT", Align::Right),
        ("CATEGORY", Align::Left),
        ("PASS", Align::Left),
        ("SPAN", Align::Left),
        ("SHAPE/DTYPE", Align::Left),
        ("LABEL", Align::Left),
    ]);
    for g in groups.iter().take(STORAGE_ROWS) {
        t.row([
            bytes(g.bytes),
            g.count.to_string(),
            g.category.as_str().to_string(),
            g.pass_text().to_string(),
            Table::path(g.span_text()),
            Table::text(&shape_dtype(g)),
            Table::text(g.label.as_deref().unwrap_or("-")),
        ]);
    }
    out.push_str(&t.render(indent));
    if groups.len() > STORAGE_ROWS {
        let rest = &groups[STORAGE_ROWS..];
        // storages live at one moment on one device: bounded by its checked peak
        let (n, b): (u64, u64) = rest
            .iter()
            .fold((0, 0), |(n, b), g| (n + g.count, b + g.bytes));
        let _ = writeln!(
            out,
            "{indent}{} = {} ({})",
            trace_format::more(rest.len() as u64, "group", "groups"),
            bytes(b),
            trace_format::count(n, "storage", "storages")
        );
    }
}

fn render_live(out: &mut String, live: &LiveSetDiff, indent: &str) {
    if live.baseline_only_count == 0 {
        let _ = writeln!(out, "{indent}left the live-at-peak set: none");
    } else {
        let _ = writeln!(
            out,
            "{indent}left the live-at-peak set (live at the baseline's peak only): {}, {}",
            storages(live.baseline_only_count),
            bytes(live.baseline_only_bytes)
        );
        storage_table(out, &live.baseline_only, &format!("{indent}  "));
    }
    if live.candidate_only_count == 0 {
        let _ = writeln!(out, "{indent}entered the live-at-peak set: none");
    } else {
        let _ = writeln!(
            out,
            "{indent}entered the live-at-peak set (live at the candidate's peak only): {}, {}",
            storages(live.candidate_only_count),
            bytes(live.candidate_only_bytes)
        );
        storage_table(out, &live.candidate_only, &format!("{indent}  "));
    }
    let _ = writeln!(out, "{indent}live at both peaks: {}", matched_text(live));
}

/// Where each side peaked, the categories at the peak and the live-set difference.
fn render_device_body(out: &mut String, d: &DeviceDelta, indent: &str) {
    render_places(out, "baseline", &d.baseline_peaks, indent);
    render_places(out, "candidate", &d.candidate_peaks, indent);
    // with one run a side the live sets are the runs' own: each category's change is what
    // entered, minus what left, plus the change of the storages live at both peaks
    let adds_up = d
        .live_at_peak
        .as_ref()
        .filter(|_| d.baseline_peaks.len() == 1 && d.candidate_peaks.len() == 1);
    if !d.by_category.is_empty() {
        let mut columns = vec![
            ("AT THE PEAK", Align::Left),
            ("BASELINE", Align::Right),
            ("CANDIDATE", Align::Right),
            ("CHANGE", Align::Right),
        ];
        if adds_up.is_some() {
            columns.extend([
                ("= ENTERED", Align::Right),
                ("- LEFT", Align::Right),
                ("+ AT BOTH", Align::Right),
            ]);
        }
        let mut t = Table::new(&columns);
        for c in &d.by_category {
            let mut row = vec![
                c.category.as_str().to_string(),
                stat(c.bytes.baseline, Unit::Bytes),
                stat(c.bytes.candidate, Unit::Bytes),
                cell(&c.bytes, Unit::Bytes),
            ];
            if let Some(live) = adds_up {
                let l = live.by_category.iter().find(|l| l.category == c.category);
                let (entered, left, both) = l.map_or((0, 0, 0), |l| {
                    (l.entered_bytes, l.left_bytes, l.matched_change_bytes())
                });
                row.extend([bytes(entered), bytes(left), signed_cell(both)]);
            }
            t.row(row);
        }
        out.push_str(&t.render(indent));
    }
    if let Some(split) = batch_split_text(d) {
        let _ = writeln!(out, "{indent}by batch     {split}");
    }
    if let Some(live) = &d.live_at_peak {
        render_live(out, live, indent);
    }
}

fn render_memory(out: &mut String, diff: &TraceDiff) {
    let Some(m) = &diff.memory else {
        let _ = writeln!(
            out,
            "memory       not compared: {}",
            escape(
                diff.memory_unavailable
                    .as_deref()
                    .unwrap_or("no memory plane")
            )
        );
        return;
    };
    if let [one] = m.devices.as_slice() {
        // one device: its peak is the logical peak
        let _ = writeln!(
            out,
            "memory peak  on {}: {}",
            escape(&one.device),
            line(&one.peak_bytes, Unit::Bytes)
        );
        render_device_body(out, one, "  ");
    } else {
        let _ = writeln!(
            out,
            "memory peak  all devices (a sum, not one device's memory): {}",
            line(&m.peak_bytes, Unit::Bytes)
        );
        for d in &m.devices {
            let _ = writeln!(
                out,
                "  {}  peak {}",
                escape(&d.device),
                line(&d.peak_bytes, Unit::Bytes)
            );
            render_device_body(out, d, "    ");
        }
    }
    if m.lower_bound {
        out.push_str("  (a capture ended early or dropped events: its figures are lower bounds)\n");
    }
    if m.storages_matched_by == AlignmentMode::Passes {
        out.push_str(
            "  (storages matched by pass, shape, dtype and category: span paths do not match)\n",
        );
    }
}

fn render_passes(out: &mut String, diff: &TraceDiff) {
    if diff.passes.is_empty() {
        out.push_str("passes       none declared\n");
        return;
    }
    out.push_str("passes (by role, whatever the spans are named)\n");
    let mut t = Table::new(&[
        ("PASS", Align::Left),
        ("TIME", Align::Right),
        ("TIME Δ", Align::Right),
        ("PEAK", Align::Right),
        ("PEAK Δ", Align::Right),
        ("ALLOCATED Δ", Align::Right),
    ]);
    let both =
        |d: &Delta, unit: Unit| format!("{} → {}", stat(d.baseline, unit), stat(d.candidate, unit));
    for p in &diff.passes {
        t.row([
            p.pass.as_str().to_string(),
            both(&p.time_ns, Unit::Time),
            cell(&p.time_ns, Unit::Time),
            both(&p.peak_bytes, Unit::Bytes),
            cell(&p.peak_bytes, Unit::Bytes),
            cell(&p.allocated_bytes, Unit::Bytes),
        ]);
    }
    out.push_str(&t.render("  "));
}

fn render_spans(out: &mut String, diff: &TraceDiff, top: usize) {
    let a = &diff.alignment;
    let shares = format!(
        "{} of the baseline's spans, {} of the candidate's",
        percent_share(a.baseline_aligned_share),
        percent_share(a.candidate_aligned_share)
    );
    if a.mode == AlignmentMode::Passes {
        let _ = writeln!(
            out,
            "spans        paths do not match ({} aligned: {shares}): compared by pass above; {} baseline and {} candidate subtrees on one side only",
            a.aligned,
            a.baseline_only.len(),
            a.candidate_only.len()
        );
        return;
    }
    let timing = diff.identity.timing_comparable;
    let _ = writeln!(
        out,
        "spans        {} aligned by path of names ({shares}); ranked by impact{}",
        a.aligned,
        if timing { "" } else { "; times not compared" }
    );
    let shown: Vec<&SpanDelta> = diff
        .spans
        .iter()
        .take(top)
        .filter(|r| r.impact > 0.0)
        .collect();
    // every figure of every aligned span unknown on a side or not compared: nothing changed
    // is no finding, nothing was compared
    let compared = diff.spans.iter().any(|r| {
        r.deltas()
            .iter()
            .any(|(_, d)| !matches!(d.verdict, Verdict::Unobserved | Verdict::NotCompared))
    });
    if !diff.spans.is_empty() && !compared {
        let _ = writeln!(
            out,
            "  no figure of an aligned span compared: each is unknown on a side or not compared"
        );
    } else if shown.is_empty() {
        let _ = writeln!(
            out,
            "  no aligned span changed{}",
            match diff.spans.iter().filter(|r| r.within_noise()).count() {
                0 => String::new(),
                n => format!(" ({n} within the run-to-run spread: noise)"),
            }
        );
    } else {
        let mut columns = Vec::new();
        if timing {
            columns.extend([("TOTAL Δ", Align::Right), ("SELF Δ", Align::Right)]);
        }
        columns.extend([
            ("DIRECT Δ", Align::Right),
            ("PEAK Δ", Align::Right),
            ("SPAN", Align::Left),
        ]);
        let mut t = Table::new(&columns);
        for r in &shown {
            let mut row = Vec::new();
            if timing {
                row.push(cell(&r.total_time_ns, Unit::Time));
                row.push(cell(&r.self_time_ns, Unit::Time));
            }
            row.push(cell(&r.direct_allocated_bytes, Unit::Bytes));
            row.push(cell(&r.subtree_peak_bytes, Unit::Bytes));
            row.push(Table::path(&r.path));
            t.row(row);
        }
        out.push_str(&t.render("  "));
    }
    let rest = &diff.spans[shown.len()..];
    if !rest.is_empty() && !shown.is_empty() {
        let s = summarize(rest, timing);
        let mut parts = vec![
            format!("{} changed", s.changed),
            format!("{} within noise", s.within_noise),
        ];
        if let Some(t) = s.self_time_delta_ns.filter(|_| s.changed > 0) {
            parts.push(format!("self time {}", delta_duration(t)));
        }
        if let Some(b) = s.direct_allocated_delta_bytes.filter(|_| s.changed > 0) {
            parts.push(format!("direct allocations {}", delta_bytes(b)));
        }
        let _ = writeln!(
            out,
            "  {} more aligned span{}: {}",
            s.rows,
            if s.rows == 1 { "" } else { "s" },
            parts.join(", ")
        );
    }
    if !shown.is_empty() {
        out.push_str(
            "  (Δ: candidate − baseline median; = unchanged; ~ within the run-to-run spread; - not observed; PEAK: subtree peak)\n",
        );
    }
    for (side, list) in [
        ("baseline", &a.baseline_only),
        ("candidate", &a.candidate_only),
    ] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  only in the {side}:");
        for u in list.iter().take(top) {
            let _ = writeln!(
                out,
                "    {}{}{}",
                Table::path(&u.path),
                if u.descendants > 0 {
                    format!(" (+{} below)", u.descendants)
                } else {
                    String::new()
                },
                match u.total_time_ns {
                    Some(t) if timing => format!(", {}", stat(Some(t), Unit::Time)),
                    _ => String::new(),
                }
            );
        }
        if list.len() > top {
            let _ = writeln!(out, "    {} more", list.len() - top);
        }
    }
}

fn list(names: &[String], n: usize) -> String {
    let shown: Vec<&str> = names.iter().take(n).map(String::as_str).collect();
    let mut s = escape(&shown.join(", ")).into_owned();
    if names.len() > n {
        let _ = write!(s, " and {} more", names.len() - n);
    }
    s
}

fn render_gradients(out: &mut String, diff: &TraceDiff, top: usize) {
    let Some(g): Option<&GradientDiff> = diff.gradients.as_ref() else {
        let _ = writeln!(
            out,
            "gradients    not compared: {}",
            escape(
                diff.gradients_unavailable
                    .as_deref()
                    .unwrap_or("no gradient facts")
            )
        );
        return;
    };
    let _ = writeln!(
        out,
        "gradients    {} compared: {} unchanged, {} verdict change{}, {} norm change{} beyond ×{}{}",
        g.compared,
        g.unchanged,
        g.verdict_changes.len(),
        if g.verdict_changes.len() == 1 { "" } else { "s" },
        g.norm_changes.len(),
        if g.norm_changes.len() == 1 { "" } else { "s" },
        g.norm_ratio_threshold,
        g.extreme_norm_ratio
            .map(|r| format!(" (norm ratio farthest from 1: {})", ratio(r)))
            .unwrap_or_default()
    );
    for c in g.verdict_changes.iter().take(top) {
        let _ = writeln!(
            out,
            "  verdict changed: {} {} → {}",
            escape(&c.parameter),
            verdicts(&c.baseline),
            verdicts(&c.candidate)
        );
    }
    if g.verdict_changes.len() > top {
        let _ = writeln!(
            out,
            "  {} more verdict changes",
            g.verdict_changes.len() - top
        );
    }
    for c in g.norm_changes.iter().take(top) {
        let _ = writeln!(
            out,
            "  norm changed: {} {:.4e} → {:.4e} ({})",
            escape(&c.parameter),
            c.baseline_norm,
            c.candidate_norm,
            ratio(c.ratio)
        );
    }
    if g.norm_changes.len() > top {
        let _ = writeln!(out, "  {} more norm changes", g.norm_changes.len() - top);
    }
    if !g.baseline_only.is_empty() {
        let _ = writeln!(out, "  only in the baseline: {}", list(&g.baseline_only, 5));
    }
    if !g.candidate_only.is_empty() {
        let _ = writeln!(
            out,
            "  only in the candidate: {}",
            list(&g.candidate_only, 5)
        );
    }
}

/// Renders the comparison as text; `top` span rows (and list entries) at most.
pub fn render(diff: &TraceDiff, top: usize) -> String {
    let mut out = String::new();
    render_side(&mut out, "baseline", &diff.identity.baseline);
    render_side(&mut out, "candidate", &diff.identity.candidate);
    for (i, l) in headline(diff).iter().enumerate() {
        let _ = writeln!(
            out,
            "{}{}",
            if i == 0 {
                "headline     "
            } else {
                "             "
            },
            escape(l)
        );
    }
    let f = findings_lines(diff);
    if let Some(why) = &diff.findings_unavailable {
        let _ = writeln!(out, "findings     not compared: {}", escape(why));
    } else if !f.is_empty() {
        out.push_str("findings\n");
        for l in &f {
            let _ = writeln!(out, "  {}", escape(l));
        }
    }
    out.push('\n');
    let spread = if diff.spread_known {
        format!(
            "{} vs {} runs: differences inside the run-to-run range are called noise",
            diff.baseline_runs, diff.candidate_runs
        )
    } else {
        "one run on a side: the run-to-run spread is unknown; pass several traces per side with --baseline … --candidate …".to_string()
    };
    if diff.identity.timing_comparable {
        let _ = writeln!(out, "timing       compared; {spread}");
        let _ = writeln!(out, "wall time    {}", line(&diff.wall_time_ns, Unit::Time));
    } else {
        out.push_str("timing       NOT compared (memory and gradients below are compared):\n");
        for r in &diff.identity.refusals {
            let _ = writeln!(out, "  - {}: {}", r.code.as_str(), escape(&r.message));
        }
        let _ = writeln!(out, "  ({spread})");
        let _ = writeln!(out, "wall time    {}", line(&diff.wall_time_ns, Unit::Time));
    }
    out.push('\n');
    render_memory(&mut out, diff);
    out.push('\n');
    render_passes(&mut out, diff);
    out.push('\n');
    crate::diff_ops::render(&mut out, diff, top);
    out.push('\n');
    render_spans(&mut out, diff, top);
    out.push('\n');
    render_gradients(&mut out, diff, top);
    out
}
