//! `candle-graph device-check`'s records: one pass/fail line with its figures per check, and
//! the report of all of them (the checks themselves run Candle and live in the CLI).

use serde::Serialize;

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
