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
//!
//! The checks themselves are `trace_views::device_check`'s (they read the runs' facts and
//! traces, no Candle); this module trains the runs and times the pairs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use candle_graph_examples::{
    measure_overhead, train, DeviceSpec, ModelKind, OverheadReport, TrainConfig, TrainReport,
};
use trace_views::device_check::{evaluate, Overhead, Parameter, Run};
use trace_views::load::TraceDocument;

use crate::cli::{DeviceCheckArgs, ModelArg};

pub use trace_views::device_check::DeviceCheckReport;

/// Whether this build captures every CUDA storage at the driver call (`cuda-ledger`): adds the
/// `storages-complete` check on CUDA.
const LEDGER: bool = cfg!(feature = "cuda-ledger");

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
        let (device_params, cpu_params) = (parameters(&on_device), parameters(&on_cpu));
        checks.extend(evaluate(
            &run_of(&on_device, &device_params, &device_doc),
            &run_of(&on_cpu, &cpu_params, &cpu_doc),
            &overhead_of(&overhead),
            model.as_str(),
            LEDGER,
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
    trace_views::load::load_path(path)
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

/// The parameters a training run held, as the checks compare them with its trace.
fn parameters(report: &TrainReport) -> Vec<Parameter> {
    report
        .parameters
        .iter()
        .map(|p| Parameter {
            name: p.name.clone(),
            bytes: p.bytes(),
            float: p.dtype.is_float(),
        })
        .collect()
}

/// One training run as the checks read it.
fn run_of<'a>(
    report: &'a TrainReport,
    parameters: &'a [Parameter],
    doc: &'a TraceDocument,
) -> Run<'a> {
    Run {
        device: &report.device,
        parameters,
        losses: &report.losses,
        doc,
    }
}

/// The timing pairs' figures.
fn overhead_of(o: &OverheadReport) -> Overhead {
    Overhead {
        pairs: o.pairs.len(),
        median_ratio: o.median_ratio(),
        ratio_range: o.ratio_range(),
        median_armed_ns: o.median_armed_ns(),
        median_disarmed_ns: o.median_disarmed_ns(),
    }
}

#[cfg(test)]
mod tests {
    //! Real CPU runs of the MLP (the binary's tracking allocator is installed in this test
    //! binary too), checked as they are and after tampering with one fact at a time: every check
    //! can fail.

    use super::*;
    use candle_graph_examples::ModelSizes;
    use trace_schema::{GradientState, MemoryAction, MemoryCategory, MemoryRecord};
    use trace_views::device_check::{in_optimizer_span, CheckResult};

    fn train_mlp(dir: &Path, name: &str) -> (TrainReport, TraceDocument) {
        let mut config = TrainConfig::new(ModelKind::Mlp, dir.join(name));
        config.sizes = ModelSizes::default();
        config.sizes.mlp.batch_size = 8;
        let report = train(&config).expect("cpu training");
        let doc = trace_views::load::load_path(&report.trace_path).expect("trace loads");
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
        let cpu_params = parameters(&cpu_report);
        let eval = |dev_report: &TrainReport, dev_doc: &TraceDocument, o: &OverheadReport| {
            let dev_params = parameters(dev_report);
            evaluate(
                &run_of(dev_report, &dev_params, dev_doc),
                &run_of(&cpu_report, &cpu_params, &cpu_doc),
                &overhead_of(o),
                "mlp",
                false,
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
