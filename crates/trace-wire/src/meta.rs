//! The run metadata carried by the `meta` event: provenance, timing mode, the capture contract
//! (what the producer declares it covered) and the comparison identity.
//!
//! Field names and validation rules follow the original candle-graph `trace/10`
//! (`TraceRunMeta`, `CaptureContract`, `GradientContract`, `ComparisonIdentity`); `trace/11`
//! adds probe and host provenance, the tensor-stats coverage level and per-capability reasons.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sha256::Sha256;

wire_enum! {
    /// Which kind of run was captured.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ExecutionPhase {
        /// A training step (forward, backward, optimizer).
        Train = "train",
        /// An inference call.
        Infer = "infer",
    }
}

wire_enum! {
    /// What the nested span timings mean.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum TimingMode {
        /// Host wall time; on an asynchronous device, nested spans measure launch time.
        #[default]
        Host = "host",
        /// Every nested span synchronized the device at both ends.
        DeviceSynchronized = "device_synchronized",
    }
}

wire_enum! {
    /// Declared or assessed coverage of one kind of evidence.
    ///
    /// `none` (the default) means nothing was promised; `partial` that some was captured;
    /// `complete` that everything of that kind was captured.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
    pub enum CoverageLevel {
        /// Nothing declared.
        #[default]
        None = "none",
        /// Some of it was captured.
        Partial = "partial",
        /// Observed by sampling (trace/12): every figure derived from it is an estimate with an
        /// interval (e.g. `operations` from wall-clock stack samples), never complete.
        Sampled = "sampled",
        /// All of it was captured.
        Complete = "complete",
    }
}

wire_enum! {
    /// How representative the measured work is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum MeasurementScope {
        /// Not declared.
        #[default]
        Unknown = "unknown",
        /// The profiled work only (instrumentation may perturb it).
        ProfiledWork = "profiled_work",
        /// Equivalent to production execution.
        ProductionEquivalent = "production_equivalent",
    }
}

wire_enum! {
    /// What a gradient family is expected to do in the captured step.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum GradientExpectation {
        /// At least `min_present` members must get a present gradient.
        Active = "active",
        /// No member may get any gradient (frozen).
        Inactive = "inactive",
        /// When the family is attached at all, at least `min_present` members are present.
        DataConditional = "data_conditional",
    }
}

/// One expected gradient of the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExpectedGradient {
    /// The parameter root (e.g. the VarMap's name, `model`).
    pub root: String,
    /// The parameter key under the root (e.g. `layer1.weight`).
    pub key: String,
    /// The family this parameter belongs to.
    pub family: String,
}

/// The contract of one gradient family.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GradientFamilyContract {
    /// Family name, as used by [`ExpectedGradient::family`].
    pub family: String,
    /// What the family is expected to do.
    pub expectation: GradientExpectation,
    /// Minimum number of members with a present gradient.
    pub min_present: u64,
}

/// An exact, digest-bound list of the gradients a step must produce.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GradientContract {
    /// `sha256:<hex>` digest of `expected` (see [`gradient_manifest_digest`]).
    pub manifest_sha256: String,
    /// Expected gradients, in manifest order (callers sort, e.g. VarMap keys).
    pub expected: Vec<ExpectedGradient>,
    /// One contract per family named in `expected`.
    pub families: Vec<GradientFamilyContract>,
}

/// Domain string of the gradient manifest digest.
pub const GRADIENT_MANIFEST_SCHEMA: &str = "candle-graph/gradient-manifest/1";

/// SHA-256 digest of a gradient manifest, written `sha256:<hex>`.
///
/// Source: the original candle-graph's `candle-graph/gradient-manifest/1`: the hash covers the
/// domain string, a NUL byte, then for each entry its root, key and family, each string preceded
/// by its length as a little-endian u64. Entry order matters.
pub fn gradient_manifest_digest(expected: &[ExpectedGradient]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(GRADIENT_MANIFEST_SCHEMA.as_bytes());
    hasher.update([0u8]);
    for entry in expected {
        for s in [&entry.root, &entry.key, &entry.family] {
            hasher.update((s.len() as u64).to_le_bytes());
            hasher.update(s.as_bytes());
        }
    }
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    for byte in digest {
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte & 0xf)]));
    }
    hex
}

impl GradientContract {
    /// Builds a contract from a manifest and its family contracts, computing the digest.
    pub fn new(expected: Vec<ExpectedGradient>, families: Vec<GradientFamilyContract>) -> Self {
        Self {
            manifest_sha256: gradient_manifest_digest(&expected),
            expected,
            families,
        }
    }

    /// One `active` family per root with `min_present` = its member count, over `(root, key)`
    /// pairs in the order given (sort them first). The family is named after the root.
    pub fn all_active(entries: impl IntoIterator<Item = (String, String)>) -> Self {
        let expected: Vec<ExpectedGradient> = entries
            .into_iter()
            .map(|(root, key)| ExpectedGradient {
                family: root.clone(),
                root,
                key,
            })
            .collect();
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for e in &expected {
            *counts.entry(e.family.as_str()).or_default() += 1;
        }
        let families = counts
            .into_iter()
            .map(|(family, n)| GradientFamilyContract {
                family: family.to_string(),
                expectation: GradientExpectation::Active,
                min_present: n,
            })
            .collect();
        Self::new(expected, families)
    }

    /// Checks the original's validation rules; returns every violation found (empty when valid).
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.expected.is_empty() {
            problems.push("gradient manifest is empty".to_string());
        }
        if self.families.is_empty() {
            problems.push("gradient contract declares no family".to_string());
        }
        let digest = gradient_manifest_digest(&self.expected);
        if digest != self.manifest_sha256 {
            problems.push(format!(
                "gradient manifest digest {} does not match its entries ({digest})",
                self.manifest_sha256
            ));
        }
        let mut seen = std::collections::HashSet::new();
        let mut members: BTreeMap<&str, u64> = BTreeMap::new();
        for e in &self.expected {
            if e.root.trim().is_empty() || e.key.trim().is_empty() || e.family.trim().is_empty() {
                problems.push("gradient manifest entry with empty root, key or family".to_string());
            }
            if !seen.insert((e.root.as_str(), e.key.as_str())) {
                problems.push(format!("gradient manifest repeats {}/{}", e.root, e.key));
            }
            *members.entry(e.family.as_str()).or_default() += 1;
        }
        let mut declared = std::collections::HashSet::new();
        for f in &self.families {
            if !declared.insert(f.family.as_str()) {
                problems.push(format!("gradient family {} declared twice", f.family));
            }
            let n = members.get(f.family.as_str()).copied().unwrap_or(0);
            if n == 0 {
                problems.push(format!("gradient family {} has no member", f.family));
            }
            match f.expectation {
                GradientExpectation::Inactive if f.min_present != 0 => problems.push(format!(
                    "inactive gradient family {} must have min_present 0",
                    f.family
                )),
                GradientExpectation::Active | GradientExpectation::DataConditional
                    if n > 0 && !(1..=n).contains(&f.min_present) =>
                {
                    problems.push(format!(
                        "gradient family {} has min_present {} outside 1..={n}",
                        f.family, f.min_present
                    ))
                }
                _ => {}
            }
        }
        for family in members.keys() {
            if !declared.contains(family) {
                problems.push(format!("gradient family {family} has no family contract"));
            }
        }
        problems
    }
}

wire_enum! {
    /// A kind of evidence the capture contract declares coverage for: the name of a
    /// [`CaptureContract`] coverage field, also the key of [`CaptureContract::reasons`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum ContractField {
        /// `operations`: `op` events.
        Operations = "operations",
        /// `tensors`: `tensor` events.
        Tensors = "tensors",
        /// `gradients`: `gradient` events.
        Gradients = "gradients",
        /// `logical_memory`: `memory` events.
        LogicalMemory = "logical_memory",
        /// `physical_memory`: `device_memory` samples.
        PhysicalMemory = "physical_memory",
        /// `device_timing`: `device_interval` events.
        DeviceTiming = "device_timing",
        /// `tensor_stats`: `tensor_stats` events.
        TensorStats = "tensor_stats",
    }
}

/// A key of [`CaptureContract::reasons`]: a [`ContractField`], or (from another producer) a
/// name this version does not know, kept as written. Compares, orders and hashes as its wire
/// string, so `reasons.get("logical_memory")` and `reasons.get(&ContractField::LogicalMemory.into())`
/// find the same entry.
#[derive(Debug, Clone)]
pub enum ReasonKey {
    /// A known coverage field.
    Field(ContractField),
    /// A key this version does not know (never one of the known names).
    Unknown(Box<str>),
}

impl ReasonKey {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            ReasonKey::Field(f) => f.as_str(),
            ReasonKey::Unknown(s) => s,
        }
    }

    /// The known field, if any.
    pub fn field(&self) -> Option<ContractField> {
        match self {
            ReasonKey::Field(f) => Some(*f),
            ReasonKey::Unknown(_) => None,
        }
    }
}

impl From<ContractField> for ReasonKey {
    fn from(f: ContractField) -> Self {
        ReasonKey::Field(f)
    }
}

impl From<&str> for ReasonKey {
    fn from(s: &str) -> Self {
        match s.parse::<ContractField>() {
            Ok(f) => ReasonKey::Field(f),
            Err(_) => ReasonKey::Unknown(s.into()),
        }
    }
}

impl From<String> for ReasonKey {
    fn from(s: String) -> Self {
        ReasonKey::from(s.as_str())
    }
}

impl std::borrow::Borrow<str> for ReasonKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for ReasonKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ReasonKey {}

impl PartialOrd for ReasonKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ReasonKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for ReasonKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl Serialize for ReasonKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ReasonKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(ReasonKey::from(&*s))
    }
}

/// The producer's statement of what the capture covers. Analyzers honour it: a capability
/// declared `complete` with nothing observed is invalid; one not declared is at most partial.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CaptureContract {
    /// How representative the measured work is.
    #[serde(default)]
    pub measurement_scope: MeasurementScope,
    /// Coverage of `op` events.
    #[serde(default)]
    pub operations: CoverageLevel,
    /// Coverage of `tensor` events.
    #[serde(default)]
    pub tensors: CoverageLevel,
    /// Coverage of `gradient` events; `complete` exactly when `gradient_contract` is present.
    #[serde(default)]
    pub gradients: CoverageLevel,
    /// Coverage of logical `memory` events (storage allocs and frees).
    #[serde(default)]
    pub logical_memory: CoverageLevel,
    /// Coverage of physical `device_memory` samples.
    #[serde(default)]
    pub physical_memory: CoverageLevel,
    /// Coverage of `device_interval` events.
    #[serde(default)]
    pub device_timing: CoverageLevel,
    /// Coverage of `tensor_stats` events (trace/11).
    #[serde(default)]
    pub tensor_stats: CoverageLevel,
    /// The exact gradient manifest, required when `gradients` is `complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_contract: Option<GradientContract>,
    /// Span names that must each appear exactly once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_semantic_labels: Vec<String>,
    /// Why a capability is not complete, keyed by the contract field name (e.g.
    /// `logical_memory` → "tracking allocator not installed: frees are unknown") (trace/11).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<ReasonKey, String>,
}

impl CaptureContract {
    /// The declared coverage of one kind of evidence.
    pub fn level(&self, field: ContractField) -> CoverageLevel {
        match field {
            ContractField::Operations => self.operations,
            ContractField::Tensors => self.tensors,
            ContractField::Gradients => self.gradients,
            ContractField::LogicalMemory => self.logical_memory,
            ContractField::PhysicalMemory => self.physical_memory,
            ContractField::DeviceTiming => self.device_timing,
            ContractField::TensorStats => self.tensor_stats,
        }
    }

    /// The producer's reason why `field` is not complete, when it gave one.
    pub fn reason(&self, field: ContractField) -> Option<&str> {
        self.reasons.get(field.as_str()).map(String::as_str)
    }

    /// Lowers `field` from `complete` to `partial` (other levels stay); lowering `gradients`
    /// also drops the gradient manifest, which only a complete declaration carries.
    pub fn lower_to_partial(&mut self, field: ContractField) {
        let level = match field {
            ContractField::Operations => &mut self.operations,
            ContractField::Tensors => &mut self.tensors,
            ContractField::Gradients => &mut self.gradients,
            ContractField::LogicalMemory => &mut self.logical_memory,
            ContractField::PhysicalMemory => &mut self.physical_memory,
            ContractField::DeviceTiming => &mut self.device_timing,
            ContractField::TensorStats => &mut self.tensor_stats,
        };
        if *level == CoverageLevel::Complete {
            *level = CoverageLevel::Partial;
            if field == ContractField::Gradients {
                self.gradient_contract = None;
            }
        }
    }
}

impl CaptureContract {
    /// Checks that `gradients == complete` holds exactly when a gradient contract is present, and
    /// validates that contract. Returns every violation (empty when valid).
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        match (&self.gradient_contract, self.gradients) {
            (None, CoverageLevel::Complete) => problems
                .push("complete gradient coverage declared without a gradient contract".into()),
            (Some(_), level) if level != CoverageLevel::Complete => problems.push(
                "a gradient contract is present but gradient coverage is not complete".into(),
            ),
            _ => {}
        }
        if let Some(contract) = &self.gradient_contract {
            problems.extend(contract.validate());
        }
        problems
    }
}

/// What a comparison is allowed to pair this run with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparisonIdentity {
    /// The build under test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation_id: Option<String>,
    /// Workload identity.
    pub workload_id: String,
    /// Model identity.
    pub model_id: String,
    /// Model configuration identity.
    pub config_id: String,
    /// Data identity.
    pub data_id: String,
    /// How seeds were chosen.
    pub seed_policy: String,
    /// Examples per physical batch (> 0).
    pub physical_batch: u64,
    /// Gradient accumulation steps (> 0).
    pub accumulation_steps: u64,
    /// Numeric precision, e.g. `f32`, `bf16-mixed`.
    pub precision: String,
    /// Device state, e.g. `warm`.
    pub device_state: String,
    /// Pairing key for paired comparisons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_id: Option<String>,
}

impl ComparisonIdentity {
    /// All strings non-empty, optional ids non-empty when given, both counts > 0.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, value) in [
            ("workload_id", &self.workload_id),
            ("model_id", &self.model_id),
            ("config_id", &self.config_id),
            ("data_id", &self.data_id),
            ("seed_policy", &self.seed_policy),
            ("precision", &self.precision),
            ("device_state", &self.device_state),
        ] {
            if value.trim().is_empty() {
                problems.push(format!("comparison identity {name} is empty"));
            }
        }
        for (name, value) in [
            ("implementation_id", &self.implementation_id),
            ("pair_id", &self.pair_id),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                problems.push(format!("comparison identity {name} is empty"));
            }
        }
        if self.physical_batch == 0 {
            problems.push("comparison identity physical_batch is 0".into());
        }
        if self.accumulation_steps == 0 {
            problems.push("comparison identity accumulation_steps is 0".into());
        }
        problems
    }
}

/// Basic facts about the host (trace/11). Never a hostname.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostInfo {
    /// `std::env::consts::OS`, e.g. `linux`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// `std::env::consts::ARCH`, e.g. `x86_64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Logical CPUs available to the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<u64>,
    /// Total physical memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// Run metadata: the `meta` event's fields besides `schema`.
///
/// Fields that older versions lack are `Option`s; the loader checks that each version's required
/// fields are present (every version: `run_id`, `entrypoint`, `phase`, `timestamp`; trace/8 to
/// trace/10 also `correlation_id`, `capture_step`, `warmup_steps`, `device`). trace/11 writes
/// those four only when known, so they are optional there.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunMeta {
    /// Stable id of this probe run.
    pub run_id: String,
    /// Caller-chosen key shared with external artifacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The code path analysed, e.g. `Model::forward`.
    pub entrypoint: String,
    /// Training or inference.
    pub phase: Option<ExecutionPhase>,
    /// Capture time as ISO-8601 UTC with milliseconds.
    pub timestamp: String,
    /// The one-based optimizer update or inference call captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_step: Option<u64>,
    /// Calls finished before the captured one (< `capture_step`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_steps: Option<u64>,
    /// The last step captured when one capture records several consecutive steps
    /// (`capture_step..=last_capture_step`, each a span with its `step_index`); absent on a
    /// single-step capture (trace/13, optional: readers that predate it ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_capture_step: Option<u64>,
    /// `cpu`, `cuda:0`, `metal:0`, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The single measured region synchronized the device at each end (trace/6 name:
    /// `root_device_synchronized`).
    #[serde(default, alias = "root_device_synchronized")]
    pub measured_region_device_synchronized: bool,
    /// What nested span timings mean; absent in traces that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_mode: Option<TimingMode>,
    /// What the producer declares it captured; absent before trace/7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_contract: Option<CaptureContract>,
    /// What a comparison may pair this run with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison_identity: Option<ComparisonIdentity>,
    /// Free-form provenance.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Candle version (from the resolved dependency at build time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candle_version: Option<String>,
    /// Version of the probe that wrote the trace (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_version: Option<String>,
    /// Whether the probe's tracking global allocator was installed (trace/11); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking_allocator_installed: Option<bool>,
    /// Host basics (trace/11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostInfo>,
    /// Global rank of this process in a multi-process job (torchrun's `RANK`), when known
    /// (trace/13, optional: readers that predate it ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Rank of this process on its node (`LOCAL_RANK`), when known (trace/13, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// Number of processes of the job (`WORLD_SIZE`), when known (trace/13, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
}

impl RunMeta {
    /// The original's `TraceRunMeta::validate` rules plus contract and identity validation:
    /// returns every violation (empty when valid).
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, value) in [
            ("run_id", Some(&self.run_id)),
            ("correlation_id", self.correlation_id.as_ref()),
            ("entrypoint", Some(&self.entrypoint)),
            ("timestamp", Some(&self.timestamp)),
            ("device", self.device.as_ref()),
        ] {
            if value.is_some_and(|v| v.trim().is_empty()) {
                problems.push(format!("meta {name} is empty"));
            }
        }
        if self.capture_step == Some(0) {
            problems.push("meta capture_step is 0 (steps are one-based)".into());
        }
        if let (Some(step), Some(warmup)) = (self.capture_step, self.warmup_steps) {
            if warmup >= step {
                problems.push(format!(
                    "meta warmup_steps {warmup} must be less than capture_step {step}"
                ));
            }
        }
        if let (Some(first), Some(last)) = (self.capture_step, self.last_capture_step) {
            if last < first {
                problems.push(format!(
                    "meta last_capture_step {last} must not be less than capture_step {first}"
                ));
            }
        }
        match (self.rank, self.world_size) {
            (Some(rank), Some(world)) if rank >= world => problems.push(format!(
                "meta rank {rank} must be less than world_size {world}"
            )),
            (_, Some(0)) => problems.push("meta world_size is 0".into()),
            _ => {}
        }
        if let (Some(local), Some(world)) = (self.local_rank, self.world_size) {
            if local >= world {
                problems.push(format!(
                    "meta local_rank {local} must be less than world_size {world}"
                ));
            }
        }
        if let Some(contract) = &self.capture_contract {
            problems.extend(contract.validate());
        }
        if let Some(identity) = &self.comparison_identity {
            problems.extend(identity.validate());
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_depends_on_order_and_is_stable() {
        let a = GradientContract::all_active([
            ("model".to_string(), "a.weight".to_string()),
            ("model".to_string(), "b.weight".to_string()),
        ]);
        let b = GradientContract::all_active([
            ("model".to_string(), "b.weight".to_string()),
            ("model".to_string(), "a.weight".to_string()),
        ]);
        assert_ne!(a.manifest_sha256, b.manifest_sha256);
        assert!(a.manifest_sha256.starts_with("sha256:"));
        assert_eq!(a.manifest_sha256.len(), 7 + 64);
        assert!(a.validate().is_empty(), "{:?}", a.validate());
        assert_eq!(a.families[0].min_present, 2);
    }

    #[test]
    fn tampered_contract_is_reported() {
        let mut c = GradientContract::all_active([("m".to_string(), "w".to_string())]);
        c.expected[0].key = "v".into();
        assert!(c.validate().iter().any(|p| p.contains("digest")));
    }

    #[test]
    fn complete_gradients_need_a_contract() {
        let contract = CaptureContract {
            gradients: CoverageLevel::Complete,
            ..Default::default()
        };
        assert_eq!(contract.validate().len(), 1);
    }

    #[test]
    fn reason_keys_are_typed_and_found_by_their_wire_name() {
        let contract: CaptureContract = serde_json::from_str(
            r#"{"reasons":{"physical_memory":"no samples","future_field":"kept"}}"#,
        )
        .unwrap();
        assert_eq!(
            contract.reason(ContractField::PhysicalMemory),
            Some("no samples")
        );
        assert_eq!(
            contract.reasons.get("future_field").map(String::as_str),
            Some("kept")
        );
        let keys: Vec<Option<ContractField>> = contract.reasons.keys().map(|k| k.field()).collect();
        assert_eq!(keys, vec![None, Some(ContractField::PhysicalMemory)]);
        assert_eq!(
            ReasonKey::from("tensor_stats"),
            ContractField::TensorStats.into()
        );
        let back = serde_json::to_string(&contract.reasons).unwrap();
        assert_eq!(
            back,
            r#"{"future_field":"kept","physical_memory":"no samples"}"#
        );
        assert_eq!(
            contract.level(ContractField::PhysicalMemory),
            CoverageLevel::None
        );
    }

    #[test]
    fn meta_rules() {
        let meta = RunMeta {
            run_id: "r".into(),
            entrypoint: "e".into(),
            timestamp: "t".into(),
            capture_step: Some(2),
            warmup_steps: Some(2),
            ..Default::default()
        };
        assert_eq!(meta.validate().len(), 1);
    }
}
