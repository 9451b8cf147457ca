//! `candle-graph device-check --device D --out DIR [--model M]... [--pairs N]`: verifies the
//! capture on a device (issue 17's GPU checks). For each model it trains the seeded model on
//! `D` and on CPU (same seed, so the same initial weights and data), captures step 2 of each,
//! times armed/disarmed update pairs on `D`, and prints one pass/fail line with figures per
//! check:
//!
//! | check | passes when |
//! |---|---|
//! | `parameters` | every parameter the run holds has an `alloc` on `D` with `bytes = numel × dtype size`, and no `free` (persistent) |
//! | `gradients` | every parameter's `<name>.grad` has an `alloc` on `D` of the parameter's bytes and a `free` (the gradient store is dropped inside the step) |
//! | `adamw-state` | the AdamW moments (2 per parameter, `optimizer` category, pre-existing) are on `D` with exactly the parameters' byte sizes, twice each, never freed; the update's temporaries (allocated in the `optimizer` span) exist and are all freed |
//! | `peak-vs-device` | logical ≤ used at every sampled span boundary, and (GPUs, whose allocators keep freed memory reserved) the logical peak on `D` ≤ the device's used bytes at the next span boundary; used = `total − free` from `cuMemGetInfo` on CUDA, the tracked heap or RSS on CPU; the gap is printed |
//! | `synchronized` | the trace's meta names `D` and says the measured region was device-synchronised (on GPUs; CPU has nothing to synchronise) |
//! | `gradient-verdicts` | the parameters' gradient states on `D` equal the CPU run's, and every loss of both runs is finite |
//! | `overhead` | measured: the median and range of armed ÷ disarmed update time over the pairs (a figure, no threshold) |
//! | `storages-complete` | CUDA with feature `cuda-ledger` only: logical memory `complete`, and the trace's live bytes equal the driver pool's used bytes (`USED_MEM_CURRENT`) within max(1%, 1 MiB) at every sampled span boundary; the step's allocations beside the CPU reference's (see `device_storages`) |
//!
//! The traces land in `DIR/<model>/<device>/trace.jsonl` (device label with `:` as `-`) and
//! `DIR/<model>/reference-cpu/trace.jsonl`; the results in `DIR/checks.txt` and
//! `DIR/checks.json`. Exit status 1 when a check failed (after printing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use candle_graph_examples::{
    measure_overhead, train, DeviceSpec, ModelKind, OverheadReport, ParameterShape, TrainConfig,
    TrainReport,
};
use trace_schema::{
    GradientState, MemoryAction, MemoryCategory, MemoryRecord, Pass, TraceDocument,
};

use crate::cli::{DeviceCheckArgs, ModelArg};
use trace_format::{bytes, duration};

pub use trace_views::device_check::{CheckResult, DeviceCheckReport};

/// A folder name for a device label (`cuda:0` → `cuda-0`).
fn folder(label: &str) -> String {
    label.replace(':', "-")
}

/// Runs the checks (training on the device and on CPU, timing pairs) and writes the results
/// into `args.out`. `progress` receives one line per stage.
///
/// # Errors
/// Training or profiling failures (the device cannot be opened, the backend is not compiled
/// in), unreadable traces, I/O errors writing the results.
pub fn run(args: &DeviceCheckArgs, mut progress: impl FnMut(&str)) -> Result<DeviceCheckReport> {
    let models: Vec<ModelKind> = if args.model.is_empty() {
        vec![ModelKind::Llama, ModelKind::Mlp]
    } else {
        args.model
            .iter()
            .map(|m| match m {
                ModelArg::Llama => ModelKind::Llama,
                ModelArg::Mlp => ModelKind::Mlp,
            })
            .collect()
    };
    let device = args.device.to_string();
    let mut checks = Vec::new();
    for model in models {
        let dir = args.out.join(model.as_str());
        progress(&format!("{model}: training on {device}, capturing step 2"));
        let on_device = run_training(model, args.device, dir.join(folder(&device)))?;
        progress(&format!("{model}: training on cpu (reference, same seed)"));
        let on_cpu = run_training(model, DeviceSpec::Cpu, dir.join("reference-cpu"))?;
        progress(&format!(
            "{model}: timing {} armed/disarmed update pairs on {device}",
            args.pairs
        ));
        let mut config = TrainConfig::new(model, &dir);
        config.device = args.device;
        let overhead = measure_overhead(&config, args.pairs)
            .with_context(|| format!("device-check: timing the {model} model on {device}"))?;
        let device_doc = load(&on_device.trace_path)?;
        let cpu_doc = load(&on_cpu.trace_path)?;
        checks.extend(evaluate(
            &Run {
                report: &on_device,
                doc: &device_doc,
            },
            &Run {
                report: &on_cpu,
                doc: &cpu_doc,
            },
            &overhead,
            model.as_str(),
        ));
    }
    let report = DeviceCheckReport { device, checks };
    write_results(&args.out, &report)?;
    Ok(report)
}

fn run_training(model: ModelKind, device: DeviceSpec, out: PathBuf) -> Result<TrainReport> {
    let mut config = TrainConfig::new(model, out);
    config.device = device;
    train(&config).with_context(|| format!("device-check: training the {model} model on {device}"))
}

fn load(path: &Path) -> Result<TraceDocument> {
    trace_schema::load_path(path)
        .with_context(|| format!("device-check: reading {}", path.display()))
}

fn write_results(dir: &Path, report: &DeviceCheckReport) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let text = dir.join("checks.txt");
    std::fs::write(&text, report.render())
        .with_context(|| format!("writing {}", text.display()))?;
    let json = dir.join("checks.json");
    let body = serde_json::to_string_pretty(report)?;
    std::fs::write(&json, body + "\n").with_context(|| format!("writing {}", json.display()))?;
    Ok(())
}

/// One training run: what the program held and the trace it wrote.
pub struct Run<'a> {
    /// The training report (parameters, losses, device).
    pub report: &'a TrainReport,
    /// Its trace.
    pub doc: &'a TraceDocument,
}

/// Every check of one model: the device run against the CPU reference run and the pairs.
pub fn evaluate(
    device: &Run<'_>,
    cpu: &Run<'_>,
    overhead: &OverheadReport,
    model: &str,
) -> Vec<CheckResult> {
    let label = device.report.device.as_str();
    let params = &device.report.parameters;
    let mk = |name: &'static str, (passed, figures): (bool, String)| CheckResult {
        model: model.to_string(),
        device: label.to_string(),
        name,
        passed,
        figures,
    };
    let mut checks = vec![
        mk("parameters", check_parameters(device.doc, label, params)),
        mk("gradients", check_gradients(device.doc, label, params)),
        mk("adamw-state", check_adamw_state(device.doc, label, params)),
        mk("peak-vs-device", check_peak(device.doc, label)),
        mk(
            "synchronized",
            check_synchronized(device.doc, label, overhead),
        ),
        mk("gradient-verdicts", check_verdicts(device, cpu)),
        mk("overhead", check_overhead(overhead)),
    ];
    // CUDA only: the driver's pool reports what the device holds, to compare the trace with.
    if cfg!(feature = "cuda-ledger") && label.starts_with("cuda") {
        checks.push(mk(
            "storages-complete",
            super::device_storages::check_storages_complete(device.doc, cpu.doc, label),
        ));
    }
    checks
}

/// Escapes trace text for the terminal (control and bidirectional characters).
fn safe(s: &str) -> String {
    trace_format::escape(s).into_owned()
}

/// The memory events on `device`.
fn memory_on<'a>(doc: &'a TraceDocument, device: &str) -> Vec<&'a MemoryRecord> {
    match doc.sym(device) {
        Some(sym) => doc.memory.iter().filter(|m| m.device == sym).collect(),
        None => Vec::new(),
    }
}

fn label<'a>(doc: &'a TraceDocument, m: &MemoryRecord) -> Option<&'a str> {
    m.label.map(|l| doc.str(l))
}

/// Whether the storage of `alloc` has a `free` among `events`.
fn is_freed(events: &[&MemoryRecord], alloc: &MemoryRecord) -> bool {
    alloc.storage.is_some_and(|id| {
        events
            .iter()
            .any(|m| m.action == MemoryAction::Free && m.storage == Some(id))
    })
}

/// Per expected storage (`name`, bytes): found, size equal, freed.
struct Labelled {
    expected: usize,
    found: usize,
    bytes_equal: usize,
    freed: usize,
    total_bytes: u64,
    first_problem: Option<String>,
}

fn labelled(
    doc: &TraceDocument,
    device: &str,
    expected: impl Iterator<Item = (String, u64)>,
) -> Labelled {
    let events = memory_on(doc, device);
    let mut allocs: BTreeMap<&str, &MemoryRecord> = BTreeMap::new();
    for m in events.iter().filter(|m| m.action == MemoryAction::Alloc) {
        if let Some(l) = label(doc, m) {
            allocs.entry(l).or_insert(m);
        }
    }
    let mut r = Labelled {
        expected: 0,
        found: 0,
        bytes_equal: 0,
        freed: 0,
        total_bytes: 0,
        first_problem: None,
    };
    for (name, want) in expected {
        r.expected += 1;
        r.total_bytes = r.total_bytes.saturating_add(want);
        let Some(alloc) = allocs.get(name.as_str()) else {
            r.first_problem
                .get_or_insert_with(|| format!("no alloc labelled {name} on {device}"));
            continue;
        };
        r.found += 1;
        if alloc.bytes == Some(want) {
            r.bytes_equal += 1;
        } else {
            r.first_problem.get_or_insert_with(|| {
                format!(
                    "{name}: {} in the trace, {want} B expected",
                    alloc
                        .bytes
                        .map(|b| format!("{b} B"))
                        .unwrap_or_else(|| "no bytes".into())
                )
            });
        }
        if is_freed(&events, alloc) {
            r.freed += 1;
        }
    }
    r
}

fn check_parameters(
    doc: &TraceDocument,
    device: &str,
    params: &[ParameterShape],
) -> (bool, String) {
    let r = labelled(
        doc,
        device,
        params.iter().map(|p| (p.name.clone(), p.bytes())),
    );
    let passed =
        r.expected > 0 && r.found == r.expected && r.bytes_equal == r.expected && r.freed == 0;
    let mut figures = format!(
        "{}/{} parameters allocated on {device}, bytes = numel × dtype size for {}/{} ({} in all), {} freed (persistent: 0 expected)",
        r.found, r.expected, r.bytes_equal, r.expected, bytes(r.total_bytes), r.freed
    );
    if let Some(p) = r.first_problem {
        figures.push_str(&format!("; first problem: {p}"));
    }
    (passed, figures)
}

fn check_gradients(doc: &TraceDocument, device: &str, params: &[ParameterShape]) -> (bool, String) {
    let r = labelled(
        doc,
        device,
        params
            .iter()
            .map(|p| (format!("{}.grad", p.name), p.bytes())),
    );
    let passed = r.expected > 0
        && r.found == r.expected
        && r.bytes_equal == r.expected
        && r.freed == r.expected;
    let mut figures = format!(
        "{}/{} parameter gradients allocated on {device}, bytes = the parameter's for {}/{} ({} in all), {}/{} freed inside the step",
        r.found, r.expected, r.bytes_equal, r.expected, bytes(r.total_bytes), r.freed, r.expected
    );
    if let Some(p) = r.first_problem {
        figures.push_str(&format!("; first problem: {p}"));
    }
    (passed, figures)
}

/// Whether the span `m` is attributed to has the optimizer pass (own or inherited from the
/// nearest ancestor with one).
fn in_optimizer_span(doc: &TraceDocument, m: &MemoryRecord) -> bool {
    let mut span = m.span.and_then(|s| doc.span(s));
    // Bounded walk up the parents (a hostile trace may have a parent cycle).
    for _ in 0..doc.spans.len() {
        let Some(s) = span else { return false };
        if let Some(pass) = s.pass {
            return pass == Pass::Optimizer;
        }
        span = s.parent.and_then(|p| doc.span(p));
    }
    false
}

fn check_adamw_state(
    doc: &TraceDocument,
    device: &str,
    params: &[ParameterShape],
) -> (bool, String) {
    let events = memory_on(doc, device);
    let allocs: Vec<&MemoryRecord> = events
        .iter()
        .copied()
        .filter(|m| m.action == MemoryAction::Alloc)
        .collect();
    // AdamW keeps two moments per float parameter, each of the parameter's shape and dtype.
    let mut expected: Vec<u64> = params
        .iter()
        .filter(|p| p.dtype.is_float())
        .flat_map(|p| [p.bytes(), p.bytes()])
        .collect();
    expected.sort_unstable();
    let moments: Vec<&MemoryRecord> = allocs
        .iter()
        .copied()
        .filter(|m| m.category == MemoryCategory::Optimizer && m.pre_existing)
        .collect();
    let mut found: Vec<u64> = moments.iter().map(|m| m.bytes.unwrap_or(0)).collect();
    found.sort_unstable();
    let moments_freed = moments.iter().filter(|m| is_freed(&events, m)).count();
    let temporaries: Vec<&MemoryRecord> = allocs
        .iter()
        .copied()
        .filter(|m| !m.pre_existing && in_optimizer_span(doc, m))
        .collect();
    let temporaries_freed = temporaries.iter().filter(|m| is_freed(&events, m)).count();
    let param_sizes: std::collections::BTreeSet<u64> = params.iter().map(|p| p.bytes()).collect();
    let parameter_sized = temporaries
        .iter()
        .filter(|m| m.bytes.is_some_and(|b| param_sizes.contains(&b)))
        .count();
    let passed = !expected.is_empty()
        && found == expected
        && moments_freed == 0
        && !temporaries.is_empty()
        && temporaries_freed == temporaries.len();
    let mut figures = format!(
        "moments: {} on {device} ({}), {} expected (2 × {} parameters, {}){}, {} freed; update temporaries: {} allocated in the optimizer span ({} of a parameter's size), {}/{} freed",
        found.len(),
        bytes(found.iter().fold(0u64, |a, b| a.saturating_add(*b))),
        expected.len(),
        expected.len() / 2,
        bytes(expected.iter().fold(0u64, |a, b| a.saturating_add(*b))),
        if found == expected {
            ", sizes equal"
        } else {
            ", sizes differ"
        },
        moments_freed,
        temporaries.len(),
        parameter_sized,
        temporaries_freed,
        temporaries.len(),
    );
    if !passed {
        if let Some(reason) = doc
            .meta
            .capture_contract
            .as_ref()
            .and_then(|c| c.reasons.get("logical_memory"))
        {
            figures.push_str(&format!(
                "; the trace's logical-memory reason: {}",
                safe(reason)
            ));
        }
    }
    (passed, figures)
}

/// The device's used bytes in one sample and where the figure comes from: `used_bytes` when
/// the producer wrote it, else `capacity − free` (CUDA's `cuMemGetInfo`), else RSS (CPU).
fn used_of(s: &trace_memory::PhysicalSample) -> Option<(u64, &'static str)> {
    // On CUDA `used_bytes` is the memory pool's live allocations (`storages-complete`
    // compares it with the trace); the device's own figure is `total − free`.
    if let (Some(c), Some(f)) = (s.capacity_bytes, s.free_bytes) {
        return c.checked_sub(f).map(|u| (u, "total − free (cuMemGetInfo)"));
    }
    if let Some(u) = s.used_bytes {
        return Some((u, "used bytes"));
    }
    if let (Some(c), Some(f)) = (s.capacity_bytes, s.free_bytes) {
        return c.checked_sub(f).map(|u| (u, "total − free (cuMemGetInfo)"));
    }
    s.resident_bytes.map(|r| (r, "RSS"))
}

fn check_peak(doc: &TraceDocument, device: &str) -> (bool, String) {
    let profile = trace_memory::analyze_memory(doc);
    let Some(peak) = profile
        .logical
        .as_ref()
        .and_then(|l| l.device(device).ok())
        .and_then(|d| d.peak.clone())
    else {
        return (false, format!("no logical memory on {device} in the trace"));
    };
    let Some(physical) = profile
        .physical
        .as_ref()
        .and_then(|p| p.by_device.iter().find(|d| d.device == device))
    else {
        return (
            false,
            format!(
                "logical peak {} but no device memory samples on {device}",
                bytes(peak.live_bytes)
            ),
        );
    };
    let samples = &physical.samples;
    let mut compared = 0usize;
    let mut violations = 0usize;
    let mut largest_gap: Option<i128> = None;
    for s in samples {
        if let (Some(logical), Some((used, _))) = (s.logical_live_bytes, used_of(s)) {
            compared += 1;
            if logical > used {
                violations += 1;
            }
            let gap = i128::from(used) - i128::from(logical);
            largest_gap = Some(largest_gap.map_or(gap, |g| g.max(gap)));
        }
    }
    let next = samples
        .iter()
        .find(|s| s.timestamp_ns >= peak.timestamp_ns && used_of(s).is_some());
    let Some((next_sample, (used, source))) = next.and_then(|s| used_of(s).map(|u| (s, u))) else {
        return (
            false,
            format!(
                "logical peak {} at {}: no device sample with used bytes at or after it",
                bytes(peak.live_bytes),
                duration(peak.timestamp_ns)
            ),
        );
    };
    let gap = i128::from(used) - i128::from(peak.live_bytes);
    // A GPU allocator keeps freed memory reserved (cudarc's stream-ordered pool; Metal's buffer
    // pool), so the used figure at the boundary after the peak still covers the peak. On CPU
    // freed heap memory goes back to the allocator or the OS at once: there only the
    // per-boundary comparison is a rule, the peak's is reported.
    let pooled = device != "cpu";
    let passed = (gap >= 0 || !pooled) && violations == 0 && compared > 0;
    let gap_text = if gap >= 0 {
        bytes(gap as u64)
    } else {
        format!("-{}", bytes(gap.unsigned_abs() as u64))
    };
    let figures = format!(
        "logical peak {} at {} {} used {} ({source}) at the next span boundary ({} later): gap {gap_text}{}; logical ≤ used at {}/{} sampled boundaries{}",
        bytes(peak.live_bytes),
        duration(peak.timestamp_ns),
        if gap >= 0 { "≤" } else { ">" },
        bytes(used),
        duration(next_sample.timestamp_ns - peak.timestamp_ns),
        if pooled {
            ""
        } else {
            " (CPU: memory freed before the boundary is no longer counted, so this is not a rule here)"
        },
        compared - violations,
        compared,
        largest_gap
            .filter(|g| *g >= 0)
            .map(|g| format!(", largest gap {}", bytes(g as u64)))
            .unwrap_or_default()
    );
    (passed, figures)
}

fn check_synchronized(
    doc: &TraceDocument,
    device: &str,
    overhead: &OverheadReport,
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
            .median_armed_ns()
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

fn check_verdicts(device: &Run<'_>, cpu: &Run<'_>) -> (bool, String) {
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
    let finite = |r: &TrainReport| r.losses.iter().all(|l| l.is_finite());
    let losses = |r: &TrainReport| {
        r.losses
            .iter()
            .map(|l| format!("{l:.4}"))
            .collect::<Vec<_>>()
            .join(" → ")
    };
    let passed = !on_device.is_empty()
        && differing.is_empty()
        && finite(device.report)
        && finite(cpu.report)
        && !device.report.losses.is_empty();
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
        device.report.device,
        losses(device.report),
        losses(cpu.report),
        if finite(device.report) && finite(cpu.report) {
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

fn check_overhead(o: &OverheadReport) -> (bool, String) {
    match (
        o.median_ratio(),
        o.ratio_range(),
        o.median_armed_ns(),
        o.median_disarmed_ns(),
    ) {
        (Some(median), Some((lo, hi)), Some(armed), Some(disarmed)) if median.is_finite() => (
            true,
            format!(
                "measured (a figure, no threshold): armed ÷ disarmed update time, median {median:.3} (range {lo:.3}–{hi:.3}) over {} pairs; medians armed {}, disarmed {}",
                o.pairs.len(),
                duration(armed as u64),
                duration(disarmed as u64)
            ),
        ),
        _ => (false, "no timed pairs".to_string()),
    }
}

#[cfg(test)]
mod tests {
    //! Real CPU runs of the MLP (the binary's tracking allocator is installed in this test
    //! binary too), checked as they are and after tampering with one fact at a time: every check
    //! can fail.

    use super::*;
    use candle_graph_examples::ModelSizes;

    fn train_mlp(dir: &Path, name: &str) -> (TrainReport, TraceDocument) {
        let mut config = TrainConfig::new(ModelKind::Mlp, dir.join(name));
        config.sizes = ModelSizes::default();
        config.sizes.mlp.batch_size = 8;
        let report = train(&config).expect("cpu training");
        let doc = trace_schema::load_path(&report.trace_path).expect("trace loads");
        (report, doc)
    }

    fn names(results: &[CheckResult]) -> Vec<&'static str> {
        results
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name)
            .collect()
    }

    fn overhead() -> OverheadReport {
        OverheadReport {
            device: "cpu".into(),
            pairs: vec![(100, 110), (100, 105)],
        }
    }

    // One test: the capture window is process-wide, so the runs must not overlap.
    #[test]
    fn every_check_passes_on_real_runs_and_fails_on_a_tampered_fact() {
        let _serial = crate::candle_serial();
        let dir = tempfile::tempdir().unwrap();
        let (dev_report, dev_doc) = train_mlp(dir.path(), "device");
        let (cpu_report, cpu_doc) = train_mlp(dir.path(), "cpu");
        let eval = |dev_report: &TrainReport, dev_doc: &TraceDocument, o: &OverheadReport| {
            evaluate(
                &Run {
                    report: dev_report,
                    doc: dev_doc,
                },
                &Run {
                    report: &cpu_report,
                    doc: &cpu_doc,
                },
                o,
                "mlp",
            )
        };
        let all = eval(&dev_report, &dev_doc, &overhead());
        assert_eq!(all.len(), 7);
        for c in &all {
            assert!(c.passed, "{}", c.line());
        }
        let params = all.iter().find(|c| c.name == "parameters").unwrap();
        // fc1 784×512 + 512, fc2 512×512 + 512, fc3 512×10 + 10, f32.
        assert!(
            params
                .figures
                .starts_with("6/6 parameters allocated on cpu"),
            "{}",
            params.figures
        );
        assert!(
            params.figures.contains("(2.55 MiB in all)"),
            "{}",
            params.figures
        );
        let adamw = all.iter().find(|c| c.name == "adamw-state").unwrap();
        assert!(
            adamw
                .figures
                .starts_with("moments: 12 on cpu (5.11 MiB), 12 expected"),
            "{}",
            adamw.figures
        );
        let overhead_line = all.iter().find(|c| c.name == "overhead").unwrap();
        assert!(
            overhead_line
                .figures
                .contains("median 1.075 (range 1.050–1.100) over 2 pairs"),
            "{}",
            overhead_line.figures
        );

        let sym = |doc: &TraceDocument, s: &str| doc.sym(s).unwrap();
        let is_label = |doc: &TraceDocument, m: &MemoryRecord, l: &str| m.label == doc.sym(l);

        // A gradient that is never freed.
        let mut doc = dev_doc.clone();
        let grad = doc
            .memory
            .iter()
            .find(|m| is_label(&doc, m, "fc2.weight.grad"))
            .and_then(|m| m.storage)
            .unwrap();
        doc.memory
            .retain(|m| !(m.action == MemoryAction::Free && m.storage == Some(grad)));
        assert!(names(&eval(&dev_report, &doc, &overhead())).contains(&"gradients"));

        // A parameter recorded with the wrong size.
        let mut doc = dev_doc.clone();
        let fc1 = sym(&doc, "fc1.bias");
        for m in doc.memory.iter_mut().filter(|m| m.label == Some(fc1)) {
            m.bytes = Some(4);
        }
        assert!(names(&eval(&dev_report, &doc, &overhead())).contains(&"parameters"));

        // One AdamW moment missing, or a temporary never freed.
        let mut doc = dev_doc.clone();
        let moment = doc
            .memory
            .iter()
            .position(|m| m.category == MemoryCategory::Optimizer && m.pre_existing)
            .unwrap();
        doc.memory.remove(moment);
        assert!(names(&eval(&dev_report, &doc, &overhead())).contains(&"adamw-state"));
        let mut doc = dev_doc.clone();
        let temp = doc
            .memory
            .iter()
            .find(|m| {
                m.action == MemoryAction::Alloc && !m.pre_existing && in_optimizer_span(&doc, m)
            })
            .and_then(|m| m.storage)
            .unwrap();
        doc.memory
            .retain(|m| !(m.action == MemoryAction::Free && m.storage == Some(temp)));
        assert!(names(&eval(&dev_report, &doc, &overhead())).contains(&"adamw-state"));

        // No device samples, or a sample below the logical bytes.
        let mut doc = dev_doc.clone();
        doc.device_memory.clear();
        assert_eq!(
            names(&eval(&dev_report, &doc, &overhead())),
            ["peak-vs-device"]
        );
        let mut doc = dev_doc.clone();
        for s in &mut doc.device_memory {
            s.resident_bytes = Some(1024);
            s.used_bytes = None;
        }
        assert_eq!(
            names(&eval(&dev_report, &doc, &overhead())),
            ["peak-vs-device"]
        );

        // A CPU trace claiming synchronisation, or naming another device.
        let mut doc = dev_doc.clone();
        doc.meta.measured_region_device_synchronized = true;
        assert_eq!(
            names(&eval(&dev_report, &doc, &overhead())),
            ["synchronized"]
        );
        let mut doc = dev_doc.clone();
        doc.meta.device = Some("cuda:0".into());
        assert_eq!(
            names(&eval(&dev_report, &doc, &overhead())),
            ["synchronized"]
        );

        // A different gradient verdict, or a non-finite loss.
        let mut doc = dev_doc.clone();
        let g = doc.gradients.iter_mut().find(|g| g.parameter).unwrap();
        g.state = GradientState::Missing;
        g.norm = None;
        assert_eq!(
            names(&eval(&dev_report, &doc, &overhead())),
            ["gradient-verdicts"]
        );
        let mut nan_report = dev_report.clone();
        nan_report.losses[1] = f32::NAN;
        assert_eq!(
            names(&eval(&nan_report, &dev_doc, &overhead())),
            ["gradient-verdicts"]
        );

        // No timed pairs.
        let none = OverheadReport {
            device: "cpu".into(),
            pairs: vec![],
        };
        assert_eq!(names(&eval(&dev_report, &dev_doc, &none)), ["overhead"]);

        let report = DeviceCheckReport {
            device: "cpu".into(),
            checks: all,
        };
        assert!(report.all_passed());
        assert!(report
            .render()
            .ends_with("device-check cpu: 7 of 7 checks passed\n"));
    }

    #[test]
    fn folders_have_no_colon() {
        assert_eq!(folder("cuda:0"), "cuda-0");
        assert_eq!(folder("cpu"), "cpu");
    }
}
