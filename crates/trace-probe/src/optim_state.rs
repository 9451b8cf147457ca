//! What an optimizer's `new` allocates, storage by storage, for the optimizers whose code the
//! probe knows: the storages the construction capture finds are tied to their parameter only
//! when they match this layout exactly (count, order and bytes), else they stay plain
//! `optimizer state` (no guess).
//!
//! Known: candle-nn 0.11.1's `AdamW`. Its `new` keeps the floating-point variables in the
//! order given and allocates, for each, `first_moment` then `second_moment`
//! (`Var::zeros(shape, dtype, device)`, one dense storage of the parameter's size each):
//! slots `m` and `v`. `SGD` keeps no state; any other optimizer has no known layout.

use candle_core::Var;
use trace_wire::labels::optimizer_state_label;

/// One storage an optimizer allocates in `new`, in allocation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StateSlot {
    /// `optimizer state · <parameter> (<slot>)` ([`optimizer_state_label`]).
    pub(crate) label: String,
    /// Dense bytes of the storage (the parameter's elements × the dtype's size).
    pub(crate) bytes: u64,
    /// The parameter's shape.
    pub(crate) shape: Vec<u64>,
    /// The parameter's dtype label (`f32`, …).
    pub(crate) dtype: String,
}

/// The state layout of optimizer `O` built over `params` (in that order), or `None` when the
/// probe does not know `O`'s `new` or a size is not a whole number of bytes.
pub(crate) fn state_layout<O>(params: &[(String, Var)]) -> Option<Vec<StateSlot>> {
    if std::any::type_name::<O>() != std::any::type_name::<candle_nn::AdamW>() {
        return None;
    }
    let mut slots = Vec::with_capacity(params.len() * 2);
    for (name, var) in params.iter().filter(|(_, v)| v.dtype().is_float()) {
        let size = var.dtype().size_in_bytes() as u64;
        if size == 0 {
            return None;
        }
        let bytes = (var.elem_count() as u64).checked_mul(size)?;
        let shape: Vec<u64> = var.dims().iter().map(|&d| d as u64).collect();
        for slot in ["m", "v"] {
            slots.push(StateSlot {
                label: optimizer_state_label(name, slot),
                bytes,
                shape: shape.clone(),
                dtype: var.dtype().as_str().to_string(),
            });
        }
    }
    Some(slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn adamw_keeps_m_then_v_per_float_parameter_in_order() {
        let w = Var::zeros((3, 4), DType::F32, &Device::Cpu).unwrap();
        let b = Var::zeros(3, DType::F16, &Device::Cpu).unwrap();
        let ids = Var::zeros(2, DType::U32, &Device::Cpu).unwrap();
        let params = vec![
            ("a.weight".to_string(), w),
            ("a.bias".to_string(), b),
            ("ids".to_string(), ids),
        ];
        let slots = state_layout::<candle_nn::AdamW>(&params).unwrap();
        let got: Vec<(&str, u64, &[u64], &str)> = slots
            .iter()
            .map(|s| {
                (
                    s.label.as_str(),
                    s.bytes,
                    s.shape.as_slice(),
                    s.dtype.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("optimizer state · a.weight (m)", 48, &[3u64, 4][..], "f32"),
                ("optimizer state · a.weight (v)", 48, &[3, 4][..], "f32"),
                ("optimizer state · a.bias (m)", 6, &[3][..], "f16"),
                ("optimizer state · a.bias (v)", 6, &[3][..], "f16"),
            ]
        );
        // an optimizer whose `new` the probe does not know: no layout
        assert_eq!(state_layout::<candle_nn::SGD>(&params), None);
    }
}
