//! `candle-graph device-check`'s records and its checks: one pass/fail line with its figures
//! per check, and the report of all of them. The checks read a run on the device and its CPU
//! reference (same seed) — what the program held and the traces — and the armed/disarmed
//! timing pairs; training the runs (Candle) is the CLI's. The table of checks is in the CLI's
//! `device-check` docs.

mod memory;
mod peak;
mod run;
mod storages;

use serde::Serialize;
use trace_schema::TraceDocument;

pub use memory::in_optimizer_span;
pub use storages::check_storages_complete;
/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// Model (`llama`, `mlp`).
    pub model: String,
    /// Device label checked.
    pub device: String,
    /// Check name (see the module table).
    pub name: &'static str,
    /// Whether it passed.
    pub passed: bool,
    /// The figures behind the verdict, one line.
    pub figures: String,
}

impl CheckResult {
    /// `PASS <model> <device> <name>: <figures>`.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {}: {}",
            if self.passed { "PASS" } else { "FAIL" },
            self.model,
            self.device,
            self.name,
            self.figures
        )
    }
}

/// Everything `device-check` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceCheckReport {
    /// Device label checked.
    pub device: String,
    /// The checks, per model in order.
    pub checks: Vec<CheckResult>,
}

impl DeviceCheckReport {
    /// Whether every check passed.
    pub fn all_passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The text report: one line per check and a last `N of M checks passed` line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            out.push_str(&c.line());
            out.push('\n');
        }
        let passed = self.checks.iter().filter(|c| c.passed).count();
        out.push_str(&format!(
            "device-check {}: {passed} of {} checks passed\n",
            self.device,
            self.checks.len()
        ));
        out
    }
}

/// A parameter the training program held, as the checks compare it with the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    /// Its name (the label of its storage in the trace).
    pub name: String,
    /// numel × dtype size.
    pub bytes: u64,
    /// Whether its dtype is a float (AdamW keeps two moments of those only).
    pub float: bool,
}

/// One training run as the checks read it: what the program held and the trace it wrote.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The device label the run trained on (`cpu`, `cuda:0`).
    pub device: &'a str,
    /// The parameters it held.
    pub parameters: &'a [Parameter],
    /// The loss of each step, in order.
    pub losses: &'a [f32],
    /// Its trace.
    pub doc: &'a TraceDocument,
}

/// The armed ÷ disarmed update timing pairs, as the CLI measured them (`None`: no pair).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Overhead {
    /// Pairs timed.
    pub pairs: usize,
    /// Median armed ÷ disarmed ratio.
    pub median_ratio: Option<f64>,
    /// Lowest and highest ratio.
    pub ratio_range: Option<(f64, f64)>,
    /// Median armed update time, ns.
    pub median_armed_ns: Option<f64>,
    /// Median disarmed update time, ns.
    pub median_disarmed_ns: Option<f64>,
}

/// Every check of one model: the device run against the CPU reference run and the pairs.
///
/// `ledger`: the build captures every CUDA storage at the driver call (the CLI's `cuda-ledger`
/// feature), which adds the `storages-complete` check on a CUDA device.
pub fn evaluate(
    device: &Run<'_>,
    cpu: &Run<'_>,
    overhead: &Overhead,
    model: &str,
    ledger: bool,
) -> Vec<CheckResult> {
    let label = device.device;
    let params = device.parameters;
    let mk = |name: &'static str, (passed, figures): (bool, String)| CheckResult {
        model: model.to_string(),
        device: label.to_string(),
        name,
        passed,
        figures,
    };
    let mut checks = vec![
        mk(
            "parameters",
            memory::check_parameters(device.doc, label, params),
        ),
        mk(
            "gradients",
            memory::check_gradients(device.doc, label, params),
        ),
        mk(
            "adamw-state",
            memory::check_adamw_state(device.doc, label, params),
        ),
        mk("peak-vs-device", peak::check_peak(device.doc, label)),
        mk(
            "synchronized",
            run::check_synchronized(device.doc, label, overhead),
        ),
        mk("gradient-verdicts", run::check_verdicts(device, cpu)),
        mk("overhead", run::check_overhead(overhead)),
    ];
    // CUDA only: the driver's pool reports what the device holds, to compare the trace with.
    if ledger && label.starts_with("cuda") {
        checks.push(mk(
            "storages-complete",
            storages::check_storages_complete(device.doc, cpu.doc, label),
        ));
    }
    checks
}
