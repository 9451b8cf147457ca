//! The text `candle-graph summary` prints for the record.

use super::answer_text::{overflow_line, render_answer, render_operations};
use super::record::SummaryReport;
use super::records::{findings, FindingRecord, HealthRecord};
use crate::backward::{self};
use crate::peak::{self};
use std::fmt::Write as _;
use trace_format::{bytes, duration, escape, opt_duration};
use trace_graph::{Analysis, CapabilityLevel};

/// `validity, completeness (n errors, m warnings)` ("1 error", "1 warning" in the singular).
pub fn health_line(h: &HealthRecord) -> String {
    let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "{}, {} ({}, {})",
        if h.structurally_valid {
            "valid"
        } else {
            "INVALID"
        },
        if h.capture_complete {
            "complete"
        } else {
            "incomplete"
        },
        plural(h.error_count, "error"),
        plural(h.warning_count, "warning")
    )
}

/// `: code, code (…) — check explains them` naming the issues' codes (at most
/// [`SHOWN_CODES`]), or "" without issues.
pub fn issue_codes_suffix(h: &HealthRecord) -> String {
    if h.issue_codes.is_empty() {
        return String::new();
    }
    let shown = h.issue_codes.len().min(SHOWN_CODES);
    let more = match h.issue_codes.len() - shown {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        ": {}{more} (`check` explains them)",
        h.issue_codes[..shown].join(", ")
    )
}

/// Issue codes the summary's health line names.
pub const SHOWN_CODES: usize = 4;

/// The summary's `run` line: entrypoint · run id · phase · steps after warm-up · device ·
/// candle version (names elided in the middle to [`trace_format::NAME_COLUMNS`]; not escaped).
fn run_line(run: &super::records::RunRecord) -> String {
    let mut identity = format!(
        "{} · {}",
        trace_format::elide_middle(&run.entrypoint, trace_format::NAME_COLUMNS),
        trace_format::elide_middle(&run.run_id, trace_format::NAME_COLUMNS)
    );
    if let Some(phase) = &run.phase {
        let _ = write!(identity, " · {phase}");
    }
    if let Some(step) = run.capture_step {
        match run.last_capture_step.filter(|&l| l > step) {
            Some(last) => {
                let _ = write!(identity, " · steps {step}–{last}");
            }
            None => {
                let _ = write!(identity, " · step {step}");
            }
        }
        if let Some(w) = run.warmup_steps {
            let _ = write!(identity, " after {w} warm-up");
        }
    }
    if let Some(d) = &run.device {
        let _ = write!(identity, " · {d}");
    }
    if let Some(c) = &run.candle_version {
        let _ = write!(identity, " · candle {c}");
    }
    identity
}

/// Renders the report as text.
pub fn render(r: &SummaryReport, path: &str) -> String {
    let mut out = String::new();
    let run = &r.run;
    let _ = writeln!(out, "trace        {}", escape(path));
    let identity = run_line(run);
    let _ = writeln!(out, "run          {}", escape(&identity));
    render_answer(&mut out, r);
    let _ = writeln!(
        out,
        "health       {}{}",
        health_line(&r.health),
        issue_codes_suffix(&r.health)
    );
    let _ = writeln!(out, "coverage     {}", escape(&r.coverage.text()));
    out.push('\n');
    match (&r.peaks, &r.memory_overflow) {
        (_, Some(o)) => {
            let _ = writeln!(out, "memory peak  {}", overflow_line(o));
        }
        (Some(p), None) if p.memory_peak.is_some() => peak::render(&mut out, p, r.time_origin_ns),
        _ => out.push_str("memory peak  no memory events in this trace\n"),
    }
    out.push('\n');
    if !r.timing_refused.is_empty() {
        let _ = writeln!(
            out,
            "slowest spans  unavailable: {}",
            escape(&r.timing_refused.join("; "))
        );
    } else if !r.slowest_spans.is_empty() {
        out.push_str(if r.timing_from_incomplete_capture {
            "slowest spans (host self time in the measured region; closed spans of an incomplete capture)\n"
        } else {
            "slowest spans (host self time in the measured region)\n"
        });
        let mut t = crate::table::Table::new(&[
            ("SELF", crate::table::Align::Right),
            ("TOTAL", crate::table::Align::Right),
            ("SPAN", crate::table::Align::Left),
        ]);
        for s in &r.slowest_spans {
            t.row([
                duration(s.host_self_time_ns),
                duration(s.host_total_time_ns),
                crate::table::Table::path(&s.path),
            ]);
        }
        out.push_str(&t.render("  "));
    }
    out.push('\n');
    if render_steps(&mut out, &r.steps) {
        out.push('\n');
    }
    if let Some(i) = &r.inference {
        out.push_str(&crate::inference::render_record(i));
        out.push('\n');
    }
    render_operations(&mut out, &r.slowest_operations);
    if let Some(b) = &r.backward_modules {
        out.push('\n');
        backward::render(&mut out, b);
    }
    out.push('\n');
    let g = &r.gradients;
    if g.parameters == 0 && g.coverage == CapabilityLevel::Unavailable {
        out.push_str("gradients    not captured\n");
    } else {
        let _ = writeln!(
            out,
            "gradients    {} of {} parameters present · {} missing · {} zero · {} non-finite{}",
            g.present,
            g.parameters,
            g.missing,
            g.zero,
            g.non_finite,
            if g.not_reported > 0 {
                format!(" · {} not reported", g.not_reported)
            } else {
                String::new()
            }
        );
        for (what, keys) in [
            (
                if g.not_reported > 0 {
                    "without gradient or not reported"
                } else {
                    "without gradient"
                },
                &g.without_gradient,
            ),
            ("zero", &g.zero_keys),
            ("non-finite", &g.non_finite_keys),
        ] {
            if !keys.is_empty() {
                let shown: Vec<&str> = keys.iter().take(5).map(String::as_str).collect();
                let more = keys.len().saturating_sub(shown.len());
                let _ = writeln!(
                    out,
                    "  {what}: {}{}",
                    escape(&shown.join(", ")),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
        }
        if g.non_parameter_count > 0 {
            let _ = writeln!(
                out,
                "  {} non-parameter gradient{} ({}): tensors that are not parameters kept a gradient",
                g.non_parameter_count,
                if g.non_parameter_count == 1 { "" } else { "s" },
                if g.non_parameter_bytes_overflowed {
                    trace_format::OVERFLOWED.to_string()
                } else {
                    trace_format::opt_bytes(g.non_parameter_bytes)
                }
            );
        }
    }
    out.push('\n');
    render_findings(&mut out, &r.findings);
    out
}

/// The per-step table of a capture of several steps (nothing for a single step); true when it
/// wrote one.
pub fn render_steps(out: &mut String, steps: &trace_graph::Steps) -> bool {
    if steps.rows.len() < 2 {
        return false;
    }
    // the trace's byte counts add up past u64::MAX: no step's byte figure is real
    let overflowed = steps
        .rows
        .iter()
        .any(|r| r.memory.as_ref().is_some_and(|m| m.bytes_unknown()));
    let first = steps.rows.first().map_or(0, |r| r.step_index);
    let last = steps.rows.last().map_or(0, |r| r.step_index);
    let growth = match &steps.growth {
        Some(g) => format!(
            " · live memory grows {}+{} per step",
            if g.constant {
                "exactly "
            } else {
                "on average "
            },
            bytes(g.bytes_per_step)
        ),
        None if overflowed => " · memory unknown: byte counts overflow 2^64".to_string(),
        None if steps.rows.iter().all(|r| r.memory.is_some()) => {
            " · no growth across steps".to_string()
        }
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "steps        {} captured ({first}–{last}){growth}",
        steps.rows.len()
    );
    use crate::table::{Align, Table};
    use trace_schema::Pass;
    let mut t = Table::new(&[
        ("STEP", Align::Left),
        ("TIME", Align::Right),
        ("FORWARD", Align::Right),
        ("BACKWARD", Align::Right),
        ("OPTIMIZER", Align::Right),
        ("PEAK", Align::Right),
        ("LIVE AT END", Align::Right),
        ("LEFT LIVE", Align::Right),
    ]);
    let pass = |r: &trace_graph::StepRow, p: Pass| opt_duration(r.pass_time_ns.get(&p).copied());
    for r in &steps.rows {
        let m = r.memory.as_ref();
        t.row([
            Table::text(&r.name),
            opt_duration(r.duration_ns),
            pass(r, Pass::Forward),
            pass(r, Pass::Backward),
            pass(r, Pass::Optimizer),
            step_bytes(m, |m| m.peak_bytes, bytes),
            step_bytes(m, |m| m.live_at_end_bytes, bytes),
            step_bytes(
                m,
                |m| m.retained_bytes.zip(m.retained_count),
                |(b, n)| format!("{} in {n}", bytes(b)),
            ),
        ]);
    }
    out.push_str(&t.render("  "));
    out.push_str("  (LEFT LIVE: storages the step allocated and still live at its end)\n");
    if overflowed {
        out.push_str(
            "  (overflow: the trace's allocation sizes add up past 2^64 bytes, so no step's \
             memory figure is real (health: memory_bytes_overflow))\n",
        );
    }
    true
}

/// A step's byte figure for the table: `-` without memory or when unmeasured (a step that never
/// closed), `overflow` when the trace's byte counts overflow (never a saturated number).
fn step_bytes<T>(
    m: Option<&trace_memory::StepMemory>,
    figure: impl Fn(&trace_memory::StepMemory) -> Option<T>,
    show: impl Fn(T) -> String,
) -> String {
    match m {
        Some(m) if m.bytes_unknown() => "overflow".to_string(),
        Some(m) => figure(m).map_or("-".to_string(), show),
        None => "-".to_string(),
    }
}

/// Renders findings with their advice.
pub fn render_findings(out: &mut String, findings: &[FindingRecord]) {
    if findings.is_empty() {
        out.push_str("findings     none\n");
        return;
    }
    out.push_str("findings\n");
    for f in findings {
        let _ = writeln!(
            out,
            "  [{}] {}: {}",
            f.severity.as_str(),
            f.code,
            trace_format::sentence(&f.summary)
        );
        if let Some(a) = &f.advice {
            let _ = writeln!(out, "      → {a}");
        }
    }
}

/// Findings as `summary` states them (with advice), with the time of their evidence.
pub fn finding_texts(analysis: &Analysis) -> Vec<trace_report::FindingText> {
    findings(analysis)
        .into_iter()
        .zip(&analysis.findings)
        .map(|(r, f)| trace_report::FindingText {
            severity: r.severity.as_str().to_string(),
            code: r.code,
            summary: r.summary,
            advice: r.advice.clone(),
            timestamp_ns: f.evidence.timestamp_ns,
        })
        .collect()
}
