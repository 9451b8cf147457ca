//! The page's first section: what changed, ranked, then the runs, timing, peaks and gradients.

use trace_diff::TraceDiff;
use trace_format::{bytes, escape};
use trace_report::page::{Block, Fact, Section, Text};

use super::delta_data;
use crate::diff::figures::{identity, line, storages, Unit};

/// A side's runs: the label of one run, or the count with each run's identity.
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

/// The headline section (`#headline`): the ranked changes, the findings compared, the runs,
/// timing, wall time, the peaks and the gradients.
pub(super) fn section(diff: &TraceDiff) -> Section {
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
    facts.push(timing_fact(diff));
    facts.push(Fact {
        label: "wall time".into(),
        value: Text::from(line(&diff.wall_time_ns, Unit::Time)),
        data: delta_data("ns", &diff.wall_time_ns),
        items: vec![],
    });
    memory_facts(diff, &mut facts);
    facts.push(gradients_fact(diff));
    Section {
        id: "headline".into(),
        title: "What changed".into(),
        blocks: vec![Block::Facts(facts)],
    }
}

/// Whether timing is compared (and, when not, why), with the run-to-run spread.
fn timing_fact(diff: &TraceDiff) -> Fact {
    let spread = if diff.spread_known {
        format!(
            "{} vs {} runs: differences inside the run-to-run range are called noise",
            diff.baseline_runs, diff.candidate_runs
        )
    } else {
        "one run on a side: the run-to-run spread is unknown (pass several traces per side)"
            .to_string()
    };
    if diff.identity.timing_comparable {
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
    }
}

/// The peak of each device (and of all devices, when several), or why memory is not compared.
fn memory_facts(diff: &TraceDiff, facts: &mut Vec<Fact>) {
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
}

/// The gradient comparison in one line, or why it is not compared.
fn gradients_fact(diff: &TraceDiff) -> Fact {
    Fact {
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
    }
}
