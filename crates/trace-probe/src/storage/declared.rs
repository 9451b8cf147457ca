//! The weights a run declared, registered as `parameter` storages at capture start.

/// Weights a run declared ([`crate::ProfileRun::varmap`], [`crate::ProfileRun::parameters`]),
/// registered as named `parameter` storages at capture start whether or not an optimizer
/// exists.
#[derive(Clone, Default)]
pub(crate) struct DeclaredParameters {
    /// The model's `VarMap` (its variables, labelled with their keys).
    pub(crate) varmap: Option<candle_nn::VarMap>,
    /// Plain tensors with their names.
    pub(crate) named: Vec<(String, candle_core::Tensor)>,
}

impl DeclaredParameters {
    /// Every declared weight as (name, tensor): the map's variables sorted by key, then the
    /// named tensors in the order given.
    pub(crate) fn list(&self) -> Vec<(String, candle_core::Tensor)> {
        let mut out: Vec<(String, candle_core::Tensor)> = match &self.varmap {
            Some(v) => {
                let data = v.data().lock().unwrap_or_else(|e| e.into_inner());
                data.iter()
                    .map(|(k, var)| (k.clone(), var.as_tensor().clone()))
                    .collect()
            }
            None => Vec::new(),
        };
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.extend(self.named.iter().cloned());
        out
    }
}
