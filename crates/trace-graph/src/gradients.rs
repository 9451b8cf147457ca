//! Gradient summary: per parameter state and norm, counts per state, parameters without a
//! gradient, non-finite ones, and gradients of tensors that are not parameters with their
//! bytes. Parameters are the gradient manifest's entries (when a contract declares one) plus
//! every parameter gradient event, each `(root, key)` once. O(G + E).

use std::collections::HashMap;

use serde::Serialize;
use trace_schema::{GradientState, TraceDocument};

/// One parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParameterGradient {
    /// Parameter root (e.g. `model`).
    pub root: String,
    /// Parameter key.
    pub key: String,
    /// Family in the gradient manifest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// State; `None` when the manifest declares it but no gradient event was recorded.
    pub state: Option<GradientState>,
    /// L2 norm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
}

/// A gradient of a tensor that is not a parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NonParameterGradient {
    /// Grouping chosen by the producer.
    pub root: String,
    /// Label or `tensor/<id>`.
    pub key: String,
    /// Tensor id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_id: Option<String>,
    /// State.
    pub state: GradientState,
    /// L2 norm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
    /// Storage bytes of the gradient.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// Counts of parameters per state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GradientCounts {
    /// Finite, non-zero.
    pub present: u64,
    /// Missing from the gradient store.
    pub missing: u64,
    /// All zero.
    pub zero: u64,
    /// NaN or ±inf elements.
    pub non_finite: u64,
    /// Declared in the manifest, no event.
    pub not_reported: u64,
}

/// The gradient summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GradientSummary {
    /// Parameters: manifest order, then undeclared ones in file order.
    pub parameters: Vec<ParameterGradient>,
    /// Counts per state.
    pub counts: GradientCounts,
    /// `root/key` of parameters that received no gradient (missing or not reported).
    pub without_gradient: Vec<String>,
    /// `root/key` of parameters with an all-zero gradient.
    pub zero: Vec<String>,
    /// `root/key` of parameters with a non-finite gradient.
    pub non_finite: Vec<String>,
    /// Gradients of non-parameter tensors, in file order.
    pub non_parameter: Vec<NonParameterGradient>,
    /// Sum of the non-parameter gradients' bytes (`None` when none reported bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_parameter_bytes: Option<u64>,
    /// The non-parameter gradients' bytes add up past `u64::MAX`: `non_parameter_bytes` is
    /// `None` (health code `memory_bytes_overflow`), never a wrapped number.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub non_parameter_bytes_overflowed: bool,
}

impl GradientSummary {
    /// Number of parameters.
    pub fn parameter_count(&self) -> u64 {
        self.parameters.len() as u64
    }
}

/// Summarises the gradient facts of `doc`.
pub fn summarize_gradients(doc: &TraceDocument) -> GradientSummary {
    let mut out = GradientSummary::default();
    let mut by_key: HashMap<(String, String), usize> = HashMap::new();
    if let Some(contract) = doc
        .meta
        .capture_contract
        .as_ref()
        .and_then(|c| c.gradient_contract.as_ref())
    {
        for e in &contract.expected {
            let key = (e.root.clone(), e.key.clone());
            if by_key.contains_key(&key) {
                continue;
            }
            by_key.insert(key, out.parameters.len());
            out.parameters.push(ParameterGradient {
                root: e.root.clone(),
                key: e.key.clone(),
                family: Some(e.family.clone()),
                state: None,
                norm: None,
            });
        }
    }
    for g in &doc.gradients {
        if !g.parameter {
            if let Some(b) = g.bytes {
                match out.non_parameter_bytes.unwrap_or(0).checked_add(b) {
                    Some(sum) if !out.non_parameter_bytes_overflowed => {
                        out.non_parameter_bytes = Some(sum)
                    }
                    _ => {
                        out.non_parameter_bytes = None;
                        out.non_parameter_bytes_overflowed = true;
                    }
                }
            }
            out.non_parameter.push(NonParameterGradient {
                root: g.root.clone(),
                key: g.key.clone(),
                tensor_id: g.tensor_id.clone(),
                state: g.state,
                norm: g.norm,
                bytes: g.bytes,
            });
            continue;
        }
        let key = (g.root.clone(), g.key.clone());
        let i = *by_key.entry(key).or_insert_with(|| {
            out.parameters.push(ParameterGradient {
                root: g.root.clone(),
                key: g.key.clone(),
                family: None,
                state: None,
                norm: None,
            });
            out.parameters.len() - 1
        });
        let p = &mut out.parameters[i];
        if p.state.is_none() {
            p.state = Some(g.state);
            p.norm = g.norm;
        }
    }
    for p in &out.parameters {
        let name = format!("{}/{}", p.root, p.key);
        match p.state {
            Some(GradientState::Present) => out.counts.present += 1,
            Some(GradientState::Missing) => {
                out.counts.missing += 1;
                out.without_gradient.push(name);
            }
            None => {
                out.counts.not_reported += 1;
                out.without_gradient.push(name);
            }
            Some(GradientState::Zero) => {
                out.counts.zero += 1;
                out.zero.push(name);
            }
            Some(GradientState::NonFinite) => {
                out.counts.non_finite += 1;
                out.non_finite.push(name);
            }
        }
    }
    out
}
