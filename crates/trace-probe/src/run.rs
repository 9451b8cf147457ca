//! The run configuration: what is captured and the provenance written into the `meta` event.

use std::collections::BTreeMap;

use candle_core::{Device, DeviceLocation};
use trace_schema::{CaptureContract, ComparisonIdentity, ExecutionPhase, MeasurementScope};

/// Configuration of one profiled run (builder). Nothing here does I/O.
///
/// ```
/// use trace_probe::ProfileRun;
/// let run = ProfileRun::training("mlp::train_step", 2)
///     .device(&candle_core::Device::Cpu)
///     .tag("batch", "64");
/// assert_eq!(run.capture_step(), 2);
/// assert_eq!(run.warmup_steps(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct ProfileRun {
    pub(crate) entrypoint: String,
    pub(crate) phase: ExecutionPhase,
    pub(crate) capture_step: u64,
    pub(crate) warmup_steps: u64,
    pub(crate) device: Device,
    pub(crate) tags: BTreeMap<String, String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) comparison_identity: Option<ComparisonIdentity>,
    pub(crate) contract: CaptureContract,
    pub(crate) user_gradient_contract: bool,
    pub(crate) deterministic: bool,
}

impl ProfileRun {
    /// A training run that captures optimizer update `capture_step` (one-based); the warm-up is
    /// `capture_step - 1` updates. Device defaults to CPU.
    pub fn training(entrypoint: impl Into<String>, capture_step: u64) -> Self {
        Self::new(entrypoint.into(), ExecutionPhase::Train, capture_step)
    }

    /// An inference run that captures call `capture_step` (one-based).
    pub fn inference(entrypoint: impl Into<String>, capture_step: u64) -> Self {
        Self::new(entrypoint.into(), ExecutionPhase::Infer, capture_step)
    }

    fn new(entrypoint: String, phase: ExecutionPhase, capture_step: u64) -> Self {
        Self {
            entrypoint,
            phase,
            capture_step,
            warmup_steps: capture_step.saturating_sub(1),
            device: Device::Cpu,
            tags: BTreeMap::new(),
            correlation_id: None,
            comparison_identity: None,
            contract: CaptureContract {
                measurement_scope: MeasurementScope::ProfiledWork,
                ..CaptureContract::default()
            },
            user_gradient_contract: false,
            deterministic: false,
        }
    }

    /// How many steps finished before the captured one (default `capture_step - 1`); must be
    /// less than `capture_step`.
    pub fn warmup(mut self, warmup_steps: u64) -> Self {
        self.warmup_steps = warmup_steps;
        self
    }

    /// The device the step runs on. On CUDA and Metal the measured region synchronizes it at
    /// both ends and the meta says so (`measured_region_device_synchronized`).
    pub fn device(mut self, device: &Device) -> Self {
        self.device = device.clone();
        self
    }

    /// Adds a free-form provenance tag (e.g. batch size, source revision).
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// Key shared with external artifacts; default `<entrypoint>/update-<n>` (training) or
    /// `<entrypoint>/inference-<n>`.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// What a comparison may pair this run with.
    pub fn comparison_identity(mut self, identity: ComparisonIdentity) -> Self {
        self.comparison_identity = Some(identity);
        self
    }

    /// The capture contract to declare. A gradient contract in it (e.g. for frozen parameters)
    /// takes precedence over the one a [`crate::ProbedOptimizer`] derives from its `VarMap`.
    /// Default: every coverage `none`, measurement scope `profiled_work`.
    pub fn capture_contract(mut self, contract: CaptureContract) -> Self {
        self.user_gradient_contract = contract.gradient_contract.is_some();
        self.contract = contract;
        self
    }

    /// Deterministic mode for golden fixtures: a logical clock advancing
    /// [`crate::clock::LOGICAL_TICK_NS`] per reading, tensor ids as sequence numbers in order of
    /// first sight, storage ids `st<n>` in order of first sight (memory events placed on the
    /// logical clock after the span change that preceded them in real time), run id
    /// `run-deterministic`, timestamp `1970-01-01T00:00:00.000Z`, no host fields and no device
    /// samples. Two single-threaded runs of a seeded program write identical bytes.
    pub fn deterministic(mut self, on: bool) -> Self {
        self.deterministic = on;
        self
    }

    /// The one-based captured step.
    pub fn capture_step(&self) -> u64 {
        self.capture_step
    }

    /// Steps finished before the captured one.
    pub fn warmup_steps(&self) -> u64 {
        self.warmup_steps
    }

    /// Whether deterministic mode is on.
    pub fn is_deterministic(&self) -> bool {
        self.deterministic
    }

    /// The device.
    pub fn device_ref(&self) -> &Device {
        &self.device
    }

    /// The declared capture contract so far.
    pub fn contract(&self) -> &CaptureContract {
        &self.contract
    }

    /// Every violation of the run rules (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.entrypoint.trim().is_empty() {
            problems.push("entrypoint is empty".to_string());
        }
        if self.capture_step == 0 {
            problems.push("capture_step is 0 (steps are one-based)".to_string());
        } else if self.warmup_steps >= self.capture_step {
            problems.push(format!(
                "warmup_steps {} must be less than capture_step {}",
                self.warmup_steps, self.capture_step
            ));
        }
        if self
            .correlation_id
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            problems.push("correlation_id is empty".to_string());
        }
        problems.extend(self.contract.validate());
        if let Some(identity) = &self.comparison_identity {
            problems.extend(identity.validate());
        }
        problems
    }

    pub(crate) fn default_correlation_id(&self) -> String {
        match self.phase {
            ExecutionPhase::Train => format!("{}/update-{}", self.entrypoint, self.capture_step),
            ExecutionPhase::Infer => format!("{}/inference-{}", self.entrypoint, self.capture_step),
        }
    }
}

/// `cpu`, `cuda:<n>` or `metal:<n>`.
pub fn device_label(device: &Device) -> String {
    match device.location() {
        DeviceLocation::Cpu => "cpu".to_string(),
        DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_checked() {
        assert!(ProfileRun::training("e", 2).problems().is_empty());
        assert_eq!(ProfileRun::training("e", 0).problems().len(), 1);
        assert_eq!(ProfileRun::training("e", 2).warmup(2).problems().len(), 1);
        assert_eq!(
            ProfileRun::inference("e", 3).default_correlation_id(),
            "e/inference-3"
        );
    }
}
