//! The text of a run's story: the captures table, the op shares by capture, what the run
//! directory dropped or lost, the findings.

use std::fmt::Write as _;

use trace_bundle::run::CaptureState;
use trace_format::{bytes, opt_duration};
use trace_schema::Pass;

use super::findings::pct;
use super::RunStory;
use crate::sparkline::sparkline;
use crate::table::{Align, Table};

/// Op rows shown in the shares table (the ops with the most samples over the run).
pub const STORY_OP_ROWS: usize = 10;

fn opt_bytes(b: Option<u64>) -> String {
    b.map(bytes).unwrap_or_else(|| "-".into())
}

fn pass_name(p: Option<Pass>) -> &'static str {
    p.map_or("-", <&'static str>::from)
}

/// The text of `story`.
pub fn render(story: &RunStory) -> String {
    let mut out = String::new();
    let schedule = story
        .schedule
        .map(|s| format!(" · every {} steps from step {}", s.every, s.first_step))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "run          {} · {} · {}{schedule} · {} captures kept{}",
        trace_format::name(&story.entrypoint),
        story.phase.as_deref().unwrap_or("-"),
        trace_format::name(story.device.as_deref().unwrap_or("-")),
        story.captures.len(),
        if story.not_kept.is_empty() {
            String::new()
        } else {
            format!(", {} not kept", story.not_kept.len())
        }
    );
    left_out(story, &mut out);
    captures_table(story, &mut out);
    trends(story, &mut out);
    op_table(story, &mut out);
    not_kept(story, &mut out);
    out.push_str("\nfindings\n");
    if story.findings.is_empty() {
        out.push_str(
            "  none: no growth, step-time or op-share change beyond noise, no peak that moved\n",
        );
    }
    for f in &story.findings {
        let _ = writeln!(
            out,
            "  [{}] {}: {}",
            f.severity,
            f.code,
            trace_format::sentence(&f.summary)
        );
        let steps = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            out,
            "      captures before: step {} · from the change: step {}",
            steps(&f.before_steps),
            steps(&f.after_steps)
        );
    }
    out
}

/// The lines under the header on what the story leaves out: `step-*` entries that are not the
/// run's bundles, and traces in `.captures` never bundled.
fn left_out(story: &RunStory, out: &mut String) {
    for l in &story.left_out {
        let _ = writeln!(
            out,
            "left out     {}: {}",
            trace_format::escape(&l.name),
            trace_format::escape(&l.reason)
        );
    }
    if let Some(line) = unbundled_line(story) {
        let _ = writeln!(out, "unbundled    {}", trace_format::escape(&line));
    }
}

/// What the text and the page say of the traces in `.captures` never bundled.
pub fn unbundled_line(story: &RunStory) -> Option<String> {
    let u = &story.unbundled_captures;
    if u.is_empty() {
        return None;
    }
    let files: Vec<String> = u
        .iter()
        .map(|c| match c.not_a_file {
            Some(what) => format!("{} ({what})", c.file),
            None => format!("{} ({})", c.file, opt_bytes(c.bytes)),
        })
        .collect();
    Some(format!(
        "{} in .captures {} never bundled (the process ended before bundling {}, or it is \
         still running): {}",
        if u.len() == 1 {
            "1 capture".to_string()
        } else {
            format!("{} captures", u.len())
        },
        if u.len() == 1 { "was" } else { "were" },
        if u.len() == 1 { "it" } else { "them" },
        files.join(", ")
    ))
}

fn captures_table(story: &RunStory, out: &mut String) {
    let mut t = Table::new(&[
        ("STEP", Align::Right),
        ("WALL", Align::Right),
        ("FORWARD", Align::Right),
        ("BACKWARD", Align::Right),
        ("OPTIMIZER", Align::Right),
        ("PEAK", Align::Right),
        ("PEAK IN", Align::Left),
        ("LIVE AFTER", Align::Right),
        ("HEAP AFTER", Align::Right),
        ("TOP OP (95% INTERVAL)", Align::Left),
    ]);
    for c in &story.captures {
        let pass_t = |p: Pass| opt_duration(c.pass_time_ns.get(&p).copied());
        let top = c
            .ops
            .as_ref()
            .and_then(|o| o.rows.first())
            .map(|r| {
                format!(
                    "{} {} {} ({}–{})",
                    r.op,
                    pass_name(r.pass),
                    pct(r.share),
                    pct(r.share_low),
                    pct(r.share_high)
                )
            })
            .unwrap_or_else(|| "-".into());
        t.row([
            c.step.to_string(),
            opt_duration(c.wall_time_ns),
            pass_t(Pass::Forward),
            pass_t(Pass::Backward),
            pass_t(Pass::Optimizer),
            opt_bytes(c.peak_bytes),
            pass_name(c.peak_pass).to_string(),
            opt_bytes(c.live_end_bytes),
            opt_bytes(c.heap_end_bytes),
            Table::text(&top),
        ]);
    }
    out.push_str(&t.render("  "));
}

fn trends(story: &RunStory, out: &mut String) {
    let line = |v: Vec<Option<u64>>| -> Option<String> {
        let v: Vec<u64> = v.into_iter().collect::<Option<Vec<_>>>()?;
        (v.len() >= 2).then(|| sparkline(&v))
    };
    let c = &story.captures;
    let rows = [
        (
            "step time",
            line(c.iter().map(|c| c.wall_time_ns).collect()),
        ),
        ("peak", line(c.iter().map(|c| c.peak_bytes).collect())),
        (
            "heap after",
            line(c.iter().map(|c| c.heap_end_bytes).collect()),
        ),
    ];
    let shown: Vec<_> = rows
        .iter()
        .filter_map(|(n, l)| l.as_ref().map(|l| (n, l)))
        .collect();
    if shown.is_empty() {
        return;
    }
    out.push_str("\nby capture (0 to the maximum)\n");
    for (name, l) in shown {
        let _ = writeln!(out, "  {name:<11} {l}");
    }
}

fn op_table(story: &RunStory, out: &mut String) {
    let mut totals: std::collections::BTreeMap<(String, Option<Pass>), u64> = Default::default();
    for c in &story.captures {
        for r in c.ops.iter().flat_map(|o| &o.rows) {
            let e = totals.entry((r.op.clone(), r.pass)).or_default();
            *e = e.saturating_add(r.samples);
        }
    }
    if totals.is_empty() {
        return;
    }
    let mut ops: Vec<_> = totals.into_iter().collect();
    ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out.push_str(
        "\nop shares by capture (share of the sampled step; the 95% intervals are in --json)\n",
    );
    let mut headers: Vec<(String, Align)> =
        vec![("OP".into(), Align::Left), ("PASS".into(), Align::Left)];
    headers.extend(
        story
            .captures
            .iter()
            .map(|c| (format!("{}", c.step), Align::Right)),
    );
    let cols: Vec<(&str, Align)> = headers.iter().map(|(h, a)| (h.as_str(), *a)).collect();
    let mut t = Table::new(&cols);
    for ((op, pass), _) in ops.iter().take(STORY_OP_ROWS) {
        let mut row = vec![Table::text(op), pass_name(*pass).to_string()];
        for c in &story.captures {
            row.push(match &c.ops {
                None => "-".into(),
                Some(o) => o
                    .rows
                    .iter()
                    .find(|r| &r.op == op && r.pass == *pass)
                    .map_or_else(|| "0.0%".into(), |r| pct(r.share)),
            });
        }
        t.row(row);
    }
    out.push_str(&t.render("  "));
    if ops.len() > STORY_OP_ROWS {
        let _ = writeln!(out, "  {} more ops in --json", ops.len() - STORY_OP_ROWS);
    }
}

fn not_kept(story: &RunStory, out: &mut String) {
    if story.not_kept.is_empty() {
        return;
    }
    out.push_str("\nnot kept (run.json)\n");
    for r in &story.not_kept {
        let state = match r.state {
            CaptureState::Dropped => "dropped",
            CaptureState::Failed => "failed ",
            CaptureState::Kept => "missing",
        };
        let figures = match (r.logical_peak_bytes, r.heap_end_bytes) {
            (None, None) => String::new(),
            (p, h) => format!(" (peak {}, heap after {})", opt_bytes(p), opt_bytes(h)),
        };
        let _ = writeln!(
            out,
            "  step {:>8}  {state}  {}{figures}",
            r.step,
            trace_format::escape(
                r.reason
                    .as_deref()
                    .unwrap_or("its bundle is not in the directory")
            )
        );
    }
}
