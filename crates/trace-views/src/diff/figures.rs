//! One figure of a comparison as the text and the page both print it: a side's median (with
//! its range), a change, a verdict, a run's identity, a peak's place.

use std::fmt::Write as _;

use trace_diff::{
    Delta, DeviceDelta, GradientVerdict, LiveSetDiff, PeakPlace, RunIdentity, Stat, StorageGroup,
    Verdict,
};
use trace_format::{bytes, delta_bytes, delta_duration, duration, escape, percent};

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
    let mut s = trace_format::elide_middle(&r.entrypoint, trace_format::NAME_COLUMNS).into_owned();
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

pub(crate) fn storages(n: u64) -> String {
    format!("{n} storage{}", if n == 1 { "" } else { "s" })
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
pub(crate) fn signed_cell(d: i128) -> String {
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

pub(crate) fn both(d: &Delta, unit: Unit) -> String {
    format!("{} → {}", stat(d.baseline, unit), stat(d.candidate, unit))
}
