//! Tensor facts and ops: `session.tensor(..)` and `session.op(..)`.

use std::time::Instant;

use candle_core::Tensor;
use trace_wire::{dense_bytes, EdgeEvent, MemoryCategory, OpEvent, TensorEvent, TraceEvent};

use crate::category::inferred_category;
use crate::session::plugin::span_wire_id;
use crate::session::TraceSession;
use crate::storage::bytes::storage_bytes;

pub(crate) fn shape_u64(t: &Tensor) -> Vec<u64> {
    t.dims().iter().map(|&d| d as u64).collect()
}

pub(crate) fn view_dense_bytes(t: &Tensor) -> Option<u64> {
    dense_bytes(&shape_u64(t), t.dtype().as_str())
}

impl TraceSession {
    /// Records a tensor fact labelled `label` in the innermost open span: shape, dtype, device,
    /// whether it is a `Var`, dense bytes of the view and bytes of the backing storage (from the
    /// storage itself). The category is inferred (see [`TraceSession::tensor_as`] to declare
    /// it): a `Var` is a parameter, a tensor recorded in the forward pass an activation,
    /// anything else `other`; its storage's memory events say `category_source: inferred`.
    /// Outside the captured step: one atomic load.
    pub fn tensor(&self, label: &str, tensor: &Tensor) {
        if !self.is_capturing() {
            return;
        }
        let category = inferred_category(tensor.is_variable(), self.cur().current_pass());
        self.record_tensor(label, tensor, category, true);
    }

    /// Like [`TraceSession::tensor`] with a declared category.
    pub fn tensor_as(&self, label: &str, tensor: &Tensor, category: MemoryCategory) {
        if !self.is_capturing() {
            return;
        }
        self.record_tensor(label, tensor, category, false);
    }

    fn record_tensor(
        &self,
        label: &str,
        tensor: &Tensor,
        category: MemoryCategory,
        inferred: bool,
    ) {
        let inner = self.cur();
        let tensor_id = inner.ids.tensor_wire_id(tensor.id());
        inner.ids.remember_label(&tensor_id, label);
        let storage_id = self
            .plugins()
            .iter()
            .find_map(|p| p.storage_id(tensor, label, category, inferred));
        inner.emit(TraceEvent::Tensor(TensorEvent {
            span_id: span_wire_id(inner.current_span()),
            tensor_id,
            label: (!label.trim().is_empty()).then(|| label.to_string()),
            shape: shape_u64(tensor),
            dtype: tensor.dtype().as_str().to_string(),
            device: inner.device.to_string(),
            requires_grad: tensor.is_variable(),
            dense_bytes: view_dense_bytes(tensor),
            storage_bytes: storage_bytes(tensor),
            storage_id,
            category,
        }));
    }

    /// Runs `f` and, inside the captured step, records it as an op named `name` in the
    /// innermost open span: input and output tensor ids, output shape, dtype and device, start
    /// and duration (ns, host clock), output and input dense bytes, and one data edge per input.
    /// Outside the captured step it only runs `f` (one atomic load).
    ///
    /// # Errors
    /// Whatever `f` returns; nothing is recorded for a failed op.
    ///
    /// ```
    /// # use candle_core::{Device, Tensor};
    /// # let session = trace_probe::TraceSession::new(trace_probe::ProfileRun::training("e", 1), std::io::sink()).unwrap();
    /// let a = Tensor::ones((2, 3), candle_core::DType::F32, &Device::Cpu)?;
    /// let b = Tensor::ones((3, 4), candle_core::DType::F32, &Device::Cpu)?;
    /// let c = session.op("matmul", &[&a, &b], || a.matmul(&b))?;
    /// assert_eq!(c.dims(), &[2, 4]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn op<F>(&self, name: &str, inputs: &[&Tensor], f: F) -> candle_core::Result<Tensor>
    where
        F: FnOnce() -> candle_core::Result<Tensor>,
    {
        if !self.is_capturing() {
            return f();
        }
        let inner = self.cur();
        let logical = inner.clock.is_logical();
        let started = Instant::now();
        let start_ns = if logical {
            inner.clock.now_ns()
        } else {
            inner.clock.instant_to_session_ns(started)
        };
        let output = f()?;
        let duration_ns = if logical {
            inner.clock.now_ns().saturating_sub(start_ns)
        } else {
            u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
        };
        let input_ids: Vec<String> = inputs
            .iter()
            .map(|t| inner.ids.tensor_wire_id(t.id()))
            .collect();
        let output_id = inner.ids.tensor_wire_id(output.id());
        let input_dense_bytes = inputs
            .iter()
            .filter_map(|t| view_dense_bytes(t))
            .fold(0u64, u64::saturating_add);
        for from in &input_ids {
            inner.emit(TraceEvent::Edge(EdgeEvent::Data {
                from_tensor: from.clone(),
                to_tensor: output_id.clone(),
            }));
        }
        inner.emit(TraceEvent::Op(OpEvent {
            span_id: span_wire_id(inner.current_span()),
            op_name: name.to_string(),
            inputs: input_ids,
            output: Some(output_id),
            shape: shape_u64(&output),
            dtype: output.dtype().as_str().to_string(),
            device: inner.device.to_string(),
            duration_ns,
            timestamp_ns: start_ns,
            output_dense_bytes: view_dense_bytes(&output),
            input_dense_bytes,
        }));
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn view_bytes_are_dense_storage_bytes_are_the_storage() -> candle_core::Result<()> {
        let base = Tensor::zeros((8, 64, 1), DType::F32, &Device::Cpu)?;
        let wide = base.broadcast_as((8, 64, 128))?;
        assert_eq!(storage_bytes(&wide), Some(8 * 64 * 4));
        assert_eq!(view_dense_bytes(&wide), Some(8 * 64 * 128 * 4));
        let m = Tensor::zeros((10, 10), DType::F64, &Device::Cpu)?;
        let narrow = m.narrow(0, 2, 3)?;
        assert_eq!(storage_bytes(&narrow), Some(800));
        assert_eq!(view_dense_bytes(&narrow), Some(240));
        Ok(())
    }
}
