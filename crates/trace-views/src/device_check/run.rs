//! The run checks: the device synchronised around the measured region, the gradient verdicts
//! equal to the CPU run's, and the measured overhead.

use std::collections::BTreeMap;

use trace_format::duration;
use trace_schema::{GradientState, TraceDocument};

use super::memory::safe;
use super::{Overhead, Run};

pub(super) fn check_synchronized(
    doc: &TraceDocument,
    device: &str,
    overhead: &Overhead,
) -> (bool, String) {
    let meta_device = doc.meta.device.as_deref();
    let synced = doc.meta.measured_region_device_synchronized;
    let gpu = device != "cpu";
    let root = doc.spans.iter().find(|s| s.measured);
    let region = root
        .map(|s| {
            format!(
                "measured region `{}` {}",
                safe(doc.str(s.name)),
                s.duration_ns
                    .map(duration)
                    .unwrap_or_else(|| "never closed".into())
            )
        })
        .unwrap_or_else(|| "no measured region".into());
    let passed = meta_device == Some(device) && synced == gpu && root.is_some();
    let figures = format!(
        "meta.device {}, measured_region_device_synchronized = {synced} ({}); {region}; armed update with explicit synchronisation, median {}",
        meta_device.map(safe).unwrap_or_else(|| "absent".into()),
        if gpu {
            "expected true on a GPU"
        } else {
            "CPU: nothing to synchronise, false expected"
        },
        overhead
            .median_armed_ns
            .map(|ns| duration(ns as u64))
            .unwrap_or_else(|| "-".into())
    );
    (passed, figures)
}

/// Parameter gradient verdicts `(root, key) → state` and non-parameter state counts.
fn verdicts(doc: &TraceDocument) -> (BTreeMap<(String, String), GradientState>, usize) {
    let mut params = BTreeMap::new();
    let mut others = 0;
    for g in &doc.gradients {
        if g.parameter {
            params.insert((g.root.clone(), g.key.clone()), g.state);
        } else {
            others += 1;
        }
    }
    (params, others)
}

fn norms(doc: &TraceDocument) -> BTreeMap<(String, String), f64> {
    doc.gradients
        .iter()
        .filter(|g| g.parameter)
        .filter_map(|g| g.norm.map(|n| ((g.root.clone(), g.key.clone()), n)))
        .collect()
}

pub(super) fn check_verdicts(device: &Run<'_>, cpu: &Run<'_>) -> (bool, String) {
    let (on_device, device_others) = verdicts(device.doc);
    let (on_cpu, cpu_others) = verdicts(cpu.doc);
    let differing: Vec<&(String, String)> = on_device
        .keys()
        .chain(on_cpu.keys())
        .filter(|k| on_device.get(*k) != on_cpu.get(*k))
        .collect();
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for state in on_device.values() {
        *counts.entry(state_name(*state)).or_default() += 1;
    }
    let cpu_norms = norms(cpu.doc);
    let max_rel = norms(device.doc)
        .iter()
        .filter_map(|(k, n)| {
            let c = cpu_norms.get(k)?;
            (*c > 0.0).then(|| (n - c).abs() / c)
        })
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let finite = |r: &Run<'_>| r.losses.iter().all(|l| l.is_finite());
    let losses = |r: &Run<'_>| {
        r.losses
            .iter()
            .map(|l| format!("{l:.4}"))
            .collect::<Vec<_>>()
            .join(" → ")
    };
    let passed = !on_device.is_empty()
        && differing.is_empty()
        && finite(device)
        && finite(cpu)
        && !device.losses.is_empty();
    let mut figures = format!(
        "{}/{} parameter verdicts equal to the CPU run's ({}); non-parameter gradients {} vs {} on cpu; max relative norm difference {}; loss {} [{}] vs cpu [{}], {}",
        on_device.len().max(on_cpu.len()) - differing.len(),
        on_device.len().max(on_cpu.len()),
        counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        device_others,
        cpu_others,
        max_rel
            .map(|r| format!("{r:.2e}"))
            .unwrap_or_else(|| "-".into()),
        device.device,
        losses(device),
        losses(cpu),
        if finite(device) && finite(cpu) {
            "all finite"
        } else {
            "NOT all finite"
        }
    );
    if let Some((root, key)) = differing.first() {
        figures.push_str(&format!(
            "; first difference: {}/{}: {:?} vs {:?} on cpu",
            safe(root),
            safe(key),
            on_device.get(&(root.clone(), key.clone())),
            on_cpu.get(&(root.clone(), key.clone()))
        ));
    }
    (passed, figures)
}

fn state_name(s: GradientState) -> &'static str {
    match s {
        GradientState::Present => "present",
        GradientState::Zero => "zero",
        GradientState::Missing => "missing",
        GradientState::NonFinite => "non_finite",
    }
}

pub(super) fn check_overhead(o: &Overhead) -> (bool, String) {
    match (
        o.median_ratio,
        o.ratio_range,
        o.median_armed_ns,
        o.median_disarmed_ns,
    ) {
        (Some(median), Some((lo, hi)), Some(armed), Some(disarmed)) if median.is_finite() => (
            true,
            format!(
                "measured (a figure, no threshold): armed ÷ disarmed update time, median {median:.3} (range {lo:.3}–{hi:.3}) over {} pairs; medians armed {}, disarmed {}",
                o.pairs,
                duration(armed as u64),
                duration(disarmed as u64)
            ),
        ),
        _ => (false, "no timed pairs".to_string()),
    }
}
