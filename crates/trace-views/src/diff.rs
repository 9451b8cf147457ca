//! `candle-graph diff BASELINE CANDIDATE` (or `--baseline A B C --candidate D E F`): what changed
//! between runs, from trace-diff's comparison. Identity first (and why timing is not compared,
//! when it is not), then memory, passes, spans and gradients. Trace text is escaped; figures go
//! through trace-format.

use std::fmt::Write as _;

use serde::Serialize;
use trace_diff::{
    summarize, AlignmentMode, Delta, DeviceDelta, GradientDiff, GradientVerdict, LiveSetDiff,
    PeakPlace, RunIdentity, SpanDelta, Stat, StorageGroup, TraceDiff, Verdict,
};
use trace_format::{bytes, delta_bytes, delta_duration, duration, escape, percent};

use crate::envelope::InputRecord;
use crate::table::{Align, Table};

/// Rows of a storage-group table.
pub const STORAGE_ROWS: usize = 8;

/// The `diff` report (`candle-graph/diff/1`): the inputs of each side and the comparison.
#[derive(Debug, Serialize)]
pub struct DiffReport<'a> {
    /// Baseline traces read.
    pub baseline_inputs: Vec<InputRecord>,
    /// Candidate traces read.
    pub candidate_inputs: Vec<InputRecord>,
    /// The comparison (flattened).
    #[serde(flatten)]
    pub diff: &'a TraceDiff,
}

/// What a figure measures, for formatting.
#[derive(Clone, Copy)]
pub(crate) enum Unit {
    Bytes,
    Time,
}

pub(crate) fn value(v: u64, unit: Unit) -> String {
    match unit {
        Unit::Bytes => bytes(v),
        Unit::Time => duration(v),
    }
}

pub(crate) fn change(d: i128, unit: Unit) -> String {
    match unit {
        Unit::Bytes => delta_bytes(d),
        Unit::Time => delta_duration(d),
    }
}

/// A side's figure: the median, with the range when its runs differ.
pub(crate) fn stat(s: Option<Stat>, unit: Unit) -> String {
    match s {
        None => "-".to_string(),
        Some(s) if s.runs >= 2 && s.min != s.max => format!(
            "{} ({}–{})",
            value(s.median, unit),
            value(s.min, unit),
            value(s.max, unit)
        ),
        Some(s) => value(s.median, unit),
    }
}

/// The change as a sentence fragment: `-1.42 MiB (-24.8%)`, `unchanged`, ….
pub(crate) fn verdict_text(d: &Delta, unit: Unit) -> String {
    let signed = || {
        let c = change(d.delta.unwrap_or(0), unit);
        match d.relative {
            Some(r) => format!("{c} ({})", percent(r)),
            None => c,
        }
    };
    match d.verdict {
        Verdict::Unchanged => "unchanged".to_string(),
        Verdict::Increased | Verdict::Decreased => signed(),
        Verdict::WithinNoise => format!("{}, within the run-to-run spread: noise", signed()),
        Verdict::Unobserved => match (d.baseline, d.candidate) {
            (None, Some(_)) => "not observed on the baseline".to_string(),
            (Some(_), None) => "not observed on the candidate".to_string(),
            _ => "not observed".to_string(),
        },
        Verdict::NotCompared => "not compared".to_string(),
    }
}

/// `a → b   change`.
pub(crate) fn line(d: &Delta, unit: Unit) -> String {
    format!(
        "{} → {}   {}",
        stat(d.baseline, unit),
        stat(d.candidate, unit),
        verdict_text(d, unit)
    )
}

/// A compact table cell: the signed change, `=` unchanged, `~change` within noise, `-` not
/// observed.
pub(crate) fn cell(d: &Delta, unit: Unit) -> String {
    match d.verdict {
        Verdict::Unchanged => "=".to_string(),
        Verdict::Increased | Verdict::Decreased => change(d.delta.unwrap_or(0), unit),
        Verdict::WithinNoise => format!("~{}", change(d.delta.unwrap_or(0), unit)),
        Verdict::Unobserved | Verdict::NotCompared => "-".to_string(),
    }
}

/// A run as one line: entrypoint · device · phase · step.
pub(crate) fn identity(r: &RunIdentity) -> String {
    let mut s = r.entrypoint.clone();
    if let Some(d) = &r.device {
        let _ = write!(s, " · {d}");
    }
    if let Some(p) = r.phase {
        let _ = write!(s, " · {p}");
    }
    if let Some(step) = r.capture_step {
        let _ = write!(s, " · step {step}");
        if let Some(w) = r.warmup_steps {
            let _ = write!(s, " after {w} warm-up");
        }
    }
    if let Some(source) = &r.source {
        let _ = write!(s, " · {source}");
    }
    if !r.structurally_valid {
        s.push_str(" · INVALID");
    } else if !r.capture_complete {
        s.push_str(" · incomplete");
    }
    s
}

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

fn at(ns: i128) -> String {
    if ns < 0 {
        format!("-{}", duration(u64::try_from(-ns).unwrap_or(u64::MAX)))
    } else {
        duration(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

pub(crate) fn place(p: &PeakPlace) -> String {
    let mut s = match p.pass {
        Some(pass) => format!("in the {} pass", pass.as_str()),
        None => "outside the passes".to_string(),
    };
    if let Some(path) = &p.span_path {
        let _ = write!(s, " ({})", escape(path));
    }
    let _ = write!(s, " at {}", at(p.at_ns));
    if let Some(c) = p.dominant_category {
        let _ = write!(s, ", mostly {}", c.as_str());
    }
    s
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

pub(crate) fn shape_dtype(g: &StorageGroup) -> String {
    let shape = g.shape.as_ref().map(|s| {
        let dims: Vec<String> = s.iter().map(u64::to_string).collect();
        format!("[{}]", dims.join(", "))
    });
    match (shape, &g.dtype) {
        (Some(s), Some(d)) => format!("{s} {d}"),
        (Some(s), None) => s,
        (None, Some(d)) => d.to_string(),
        (None, None) => "-".to_string(),
    }
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

pub(crate) fn storages(n: u64) -> String {
    format!("{n} storage{}", if n == 1 { "" } else { "s" })
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

/// `44 storages, 31.77 MiB → 31.77 MiB` (baseline → candidate bytes of the matched storages).
pub(crate) fn matched_text(live: &LiveSetDiff) -> String {
    format!(
        "{}, {} → {}",
        storages(live.matched_count),
        bytes(live.matched_baseline_bytes),
        bytes(live.matched_bytes)
    )
}

/// `=` or the signed bytes.
fn signed_cell(d: i128) -> String {
    if d == 0 {
        "=".to_string()
    } else {
        delta_bytes(d)
    }
}

/// The fixed and batch-scaled parts of a device's peak on both sides, when both are known:
/// `fixed 10.24 MiB → 10.24 MiB (=) · batch-scaled 97.70 KiB → 0 B (-97.70 KiB)`.
pub(crate) fn batch_split_text(d: &DeviceDelta) -> Option<String> {
    let part = |name: &str, what: &str, x: &Delta| -> Option<String> {
        let (b, c) = (x.baseline?, x.candidate?);
        Some(format!(
            "{name} ({what}) {} → {} ({})",
            bytes(b.median),
            bytes(c.median),
            signed_cell(i128::from(c.median) - i128::from(b.median))
        ))
    };
    Some(format!(
        "{} · {}",
        part(
            "fixed",
            "parameters, gradients, optimizer state",
            &d.fixed_bytes
        )?,
        part("batch-scaled", "activations", &d.batch_scaled_bytes)?
    ))
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
    if shown.is_empty() {
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

pub(crate) fn percent_share(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

pub(crate) fn verdicts(v: &[GradientVerdict]) -> String {
    v.iter().map(|x| x.as_str()).collect::<Vec<_>>().join("/")
}

pub(crate) fn ratio(r: f64) -> String {
    if r.is_finite() {
        format!("×{r:.4}")
    } else {
        "×-".to_string()
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

/// The diff's answer first: when op times are compared, the largest op gap of the largest
/// pass gap with its interval; then the pass whose peak changed most, the run's peak (and
/// where it moved), then the timing only when the change is beyond the run-to-run spread —
/// one line each; then the findings that appeared, disappeared or changed, with their
/// figures.
pub fn headline(diff: &TraceDiff) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(l) = diff
        .ops
        .as_ref()
        .and_then(super::diff_ops::largest_gap_line)
    {
        lines.push(l);
    }
    let mut parts: Vec<String> = Vec::new();
    let mut passes: Vec<&trace_diff::PassDelta> = diff
        .passes
        .iter()
        .filter(|p| p.peak_bytes.delta.is_some_and(|d| d != 0))
        .collect();
    passes.sort_by_key(|p| std::cmp::Reverse(p.peak_bytes.delta.map_or(0, i128::unsigned_abs)));
    for p in passes.iter().take(2) {
        parts.push(format!(
            "the {} pass's peak {}: {}",
            p.pass.as_str(),
            both(&p.peak_bytes, Unit::Bytes),
            verdict_text(&p.peak_bytes, Unit::Bytes)
        ));
    }
    if let Some(m) = &diff.memory {
        let mut run = format!(
            "the run's peak {}: {}",
            both(&m.peak_bytes, Unit::Bytes),
            verdict_text(&m.peak_bytes, Unit::Bytes)
        );
        if let [one] = m.devices.as_slice() {
            let pass = |p: &[PeakPlace]| p.first().and_then(|x| x.pass);
            let (b, c) = (pass(&one.baseline_peaks), pass(&one.candidate_peaks));
            if b != c {
                if let Some(c) = c {
                    let _ = write!(run, ", now in the {} pass", c.as_str());
                }
            }
        }
        parts.push(run);
        // a batch-size change: how much of the peak's change scaled with the batch
        let batch = |runs: &[RunIdentity]| runs.first().and_then(|r| r.physical_batch);
        let (bb, cb) = (
            batch(&diff.identity.baseline),
            batch(&diff.identity.candidate),
        );
        if let (Some(bb), Some(cb), [one]) = (bb, cb, m.devices.as_slice()) {
            if bb != cb {
                if let Some(split) = batch_split_text(one) {
                    parts.push(format!("batch {bb} → {cb}: {split}"));
                }
            }
        }
    }
    for p in parts {
        lines.push(p);
    }
    let w = &diff.wall_time_ns;
    lines.push(match w.verdict {
        Verdict::Increased | Verdict::Decreased if diff.spread_known => {
            format!("wall time {}: {}", both(w, Unit::Time), verdict_text(w, Unit::Time))
        }
        Verdict::Increased | Verdict::Decreased => format!(
            "wall time {} (one run a side: the run-to-run spread is unknown, so the change is not headlined)",
            both(w, Unit::Time)
        ),
        Verdict::WithinNoise => format!("wall time {}: within the run-to-run spread", both(w, Unit::Time)),
        _ => format!("wall time {}", verdict_text(w, Unit::Time)),
    });
    lines
}

fn both(d: &Delta, unit: Unit) -> String {
    format!("{} → {}", stat(d.baseline, unit), stat(d.candidate, unit))
}

/// The findings compared, one line each (unchanged ones counted).
pub fn findings_lines(diff: &TraceDiff) -> Vec<String> {
    use trace_diff::FindingChange as C;
    let mut out = Vec::new();
    let figure = |s: &trace_diff::FindingSide| -> String {
        let mut f = match (s.bytes, s.duration_ns) {
            (Some(b), _) => bytes(b),
            (None, Some(d)) => duration(d),
            _ => String::new(),
        };
        if let Some(h) = s.held_by.first() {
            let h: &'static str = h.into();
            let _ = write!(
                f,
                "{}held by {}",
                if f.is_empty() { "" } else { ", " },
                h.replace('_', " ")
            );
        }
        f
    };
    let mut unchanged = 0;
    // a time finding's change is only a change beyond the run-to-run spread
    let time_note = if diff.spread_known && diff.identity.timing_comparable {
        ""
    } else {
        " (a time figure: the run-to-run spread is unknown)"
    };
    for d in &diff.findings {
        let timed = d
            .baseline
            .as_ref()
            .or(d.candidate.as_ref())
            .is_some_and(|s| s.bytes.is_none() && s.duration_ns.is_some());
        let note = if timed { time_note } else { "" };
        let code = d.code.as_str();
        let where_ = d
            .pass
            .filter(|_| d.code != trace_graph::FindingCode::MemoryPeak)
            .map(|p| format!(" ({})", p.as_str()))
            .unwrap_or_default();
        match (d.change, &d.baseline, &d.candidate) {
            (C::Changed, Some(b), Some(c)) => out.push(
                format!(
                    "changed      {code}{where_}: {} → {}{}",
                    figure(b),
                    figure(c),
                    d.bytes_delta()
                        .map(|x| format!(" ({})", delta_bytes(x)))
                        .unwrap_or_default()
                ) + note,
            ),
            (C::Disappeared, Some(b), _) => {
                out.push(format!("disappeared  {code}{where_}: {}{note}", figure(b)))
            }
            (C::Appeared, _, Some(c)) => {
                out.push(format!("appeared     {code}{where_}: {}{note}", figure(c)))
            }
            _ => unchanged += 1,
        }
    }
    if unchanged > 0 {
        out.push(format!(
            "unchanged    {unchanged} finding{}",
            if unchanged == 1 { "" } else { "s" }
        ));
    }
    out
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
    super::diff_ops::render(&mut out, diff, top);
    out.push('\n');
    render_spans(&mut out, diff, top);
    out.push('\n');
    render_gradients(&mut out, diff, top);
    out
}
