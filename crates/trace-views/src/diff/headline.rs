//! What changed, first: the headline lines and the findings compared, shared by the text and
//! the page.

use std::fmt::Write as _;

use trace_diff::{PeakPlace, RunIdentity, TraceDiff, Verdict};
use trace_format::{bytes, delta_bytes, duration};

use super::figures::{batch_split_text, both, verdict_text, Unit};

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
        .and_then(crate::diff_ops::largest_gap_line)
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
