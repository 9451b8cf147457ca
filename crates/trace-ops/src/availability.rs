//! When the samples give an estimate, and what it rests on — one rule for every reader of the
//! samples (`ops`, the report, the speedscope and Chrome exports, the capability matrix):
//!
//! - **Bad samples are dropped, the rest kept**: the loader drops a `sample` that names a stack
//!   no earlier `stack` defines (or one it rejected) and records its line
//!   ([`trace_schema::SampleTable::dropped_sample_lines`]); samples the sampler's account
//!   counts but the file lacks are missing. The estimate rests on the kept samples and says how
//!   many were dropped (and where) or are missing ([`Dropped`]). When those are more than
//!   [`BIASED_SHARE`] of all samples, they could move any row's share by more than that: the
//!   estimate is flagged biased and the capability matrix lowers `operations` from `sampled`
//!   to `partial`.
//! - **Cut short before the sampler's account**: no estimate (the producer writes the account
//!   after the last sample; the samples held may be a biased part of the step).
//! - **No sample inside the measured region**: no estimate (absent, not a share of 0 with an
//!   interval [0, 0]), and the reason names the region and where the samples were.
//! - **No sample at all**: no estimate, with the producer's reason.

use serde::Serialize;
use trace_format::duration;
use trace_schema::{ContractField, CoverageLevel, TraceDocument};

/// Why a trace has no operation profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unavailable {
    /// The reason (`not captured`, the producer's own reason).
    pub reason: String,
}

/// The dropped share above which the estimate is flagged biased: 5% of all samples (kept and
/// dropped). Dropped samples could all belong to one row, moving its share by up to their
/// share of the total; above 5% that is as large as the 95% interval's half-width of a share
/// near 50% with about 400 samples, the demo's order of magnitude.
pub const BIASED_SHARE: f64 = 0.05;

/// How many dropped samples' lines an estimate names.
pub const LINES_NAMED: usize = 5;

/// The samples the estimate misses, as it states them: those the loader dropped and those the
/// sampler's account counts but the trace does not hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// Sample lines the loader dropped (their stack undefined or rejected).
    pub samples: u64,
    /// The first [`LINES_NAMED`] of their lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<u64>,
    /// Samples the sampler's account counts beyond those the trace holds and dropped (all
    /// threads): written by the sampler, absent from the file.
    pub missing: u64,
    /// Dropped and missing together are more than [`BIASED_SHARE`] of all samples.
    pub biased: bool,
}

impl Dropped {
    /// The dropped and missing samples of `doc`.
    pub fn of(doc: &TraceDocument) -> Self {
        let t = &doc.samples;
        let samples = t.dropped_sample_lines.len() as u64;
        let held = t.samples.len() as u64;
        let accounted = t.sampler.as_ref().map_or(0, |s| s.samples());
        let missing = accounted.saturating_sub(held.saturating_add(samples));
        let lacking = samples.saturating_add(missing);
        let all = lacking.saturating_add(held);
        Self {
            samples,
            lines: t
                .dropped_sample_lines
                .iter()
                .take(LINES_NAMED)
                .copied()
                .collect(),
            missing,
            biased: all > 0 && lacking as f64 > BIASED_SHARE * all as f64,
        }
    }

    /// `3 of 160 samples dropped (lines 40, 41, 97: …): …` beside `kept` samples, or `None` when
    /// none was dropped or is missing.
    pub fn describe(&self, kept: u64) -> Option<String> {
        let lacking = self.samples.saturating_add(self.missing);
        if lacking == 0 {
            return None;
        }
        let all = lacking.saturating_add(kept);
        let mut parts = Vec::new();
        if self.samples > 0 {
            let mut named: Vec<String> = self.lines.iter().map(u64::to_string).collect();
            if self.samples > self.lines.len() as u64 {
                named.push("…".to_string());
            }
            let line_word = if self.samples == 1 { "line" } else { "lines" };
            parts.push(format!(
                "{} of {all} samples dropped ({line_word} {}: they name an undefined stack, `check` lists them)",
                self.samples,
                named.join(", ")
            ));
        }
        if self.missing > 0 {
            parts.push(format!(
                "{} of {all} samples the sampler's account counts are missing from the trace",
                self.missing
            ));
        }
        let effect = if self.biased {
            format!(
                "more than {:.0}% of the samples: the shares may be biased",
                BIASED_SHARE * 100.0
            )
        } else {
            "the figures rest on the kept samples".to_string()
        };
        Some(format!("{}: {effect}", parts.join("; ")))
    }
}

/// Why there is no estimate when the trace was cut short before the sampler's account.
pub(crate) fn cut_before_account(doc: &TraceDocument) -> Option<String> {
    (doc.samples.sampler.is_none() && doc.truncation.is_some()).then(|| {
        "the trace was cut short before the sampler's account: the samples it holds may be a biased part of the step, so no estimate is given"
            .to_string()
    })
}

/// Why there is no estimate when every sample lies outside the measured region.
pub(crate) fn no_sample_in_region(
    doc: &TraceDocument,
    region: Option<(u64, u64)>,
    outside: u64,
) -> Unavailable {
    let Some((start, end)) = region else {
        return unavailable(doc);
    };
    let times = doc.samples.samples.iter().map(|s| s.timestamp_ns);
    let (before, after) = times.fold((0u64, 0u64), |(b, a), t| {
        if t < start {
            (b + 1, a)
        } else {
            (b, a + 1)
        }
    });
    Unavailable {
        reason: format!(
            "no sample lies inside the measured region [0, {}] ({} ns to {} ns since the session start): \
             {outside} samples, {before} before it and {after} after it, so no estimate is given",
            duration(end - start),
            start,
            end
        ),
    }
}

/// Why `doc` has no sample at all — every one dropped, the trace cut short before any was
/// written, none recorded though declared, or not sampled — with the producer's reason when it
/// gave one. The exports say the same.
pub fn unavailable(doc: &TraceDocument) -> Unavailable {
    let contract = doc.effective_contract();
    let reason = contract
        .as_ref()
        .and_then(|c| c.reason(ContractField::Operations).map(str::to_string));
    let declared = contract
        .as_ref()
        .map(|c| c.level(ContractField::Operations));
    let dropped = doc.samples.dropped_sample_lines.len();
    let base = match declared {
        _ if dropped == 1 => format!(
            "its one sample was dropped (it names an undefined stack, at line {}; `check` lists it)",
            doc.samples.dropped_sample_lines[0]
        ),
        _ if dropped > 1 => format!(
            "all {dropped} samples were dropped (they name an undefined stack; the first at line {}; `check` lists them)",
            doc.samples.dropped_sample_lines[0]
        ),
        Some(CoverageLevel::Sampled) if doc.truncation.is_some() => {
            "declared sampled, but the trace was cut short before any sample was written (a producer writes the samples after the captured step)".to_string()
        }
        Some(CoverageLevel::Sampled) => "declared sampled but no sample was recorded".to_string(),
        _ => "not captured".to_string(),
    };
    Unavailable {
        reason: match reason {
            Some(r) => format!("{base} ({r})"),
            None => base,
        },
    }
}
