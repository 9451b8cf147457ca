//! Tensor facts and ops: `session.tensor(..)` and `session.op(..)`.

use std::time::Instant;

use candle_core::{CpuStorage, Storage, Tensor, TensorId};
use trace_schema::{
    dense_bytes, EdgeEvent, ExecutionStep, MemoryCategory, OpEvent, TensorEvent, TraceEvent,
};

use crate::capture::span_wire_id;
use crate::session::TraceSession;

/// `t<n>` from Candle's `TensorId(n)` (the id has no public accessor; its `Debug` form is used).
pub(crate) fn tensor_id_string(id: TensorId) -> String {
    let debug = format!("{id:?}");
    let digits: String = debug.chars().filter(char::is_ascii_digit).collect();
    format!("t{digits}")
}

/// Bytes of the storage behind `tensor`, read from the storage itself (not from the view's
/// shape, which misstates broadcast and narrowed views). Exact on CPU (the backing `Vec`'s
/// length × element size; raw bytes for the sub-byte dtypes); `None` on CUDA and Metal, where
/// this build does not read device buffer sizes.
///
/// Takes the storage's read lock: do not call it while the same thread holds the write lock.
pub fn storage_bytes(tensor: &Tensor) -> Option<u64> {
    let (storage, _layout) = tensor.storage_and_layout();
    match &*storage {
        Storage::Cpu(cpu) => Some(cpu_storage_bytes(cpu)),
        _ => None,
    }
}

fn cpu_storage_bytes(cpu: &CpuStorage) -> u64 {
    fn bytes<T>(v: &[T]) -> u64 {
        std::mem::size_of_val(v) as u64
    }
    match cpu {
        CpuStorage::U8(v) => bytes(v),
        CpuStorage::U32(v) => bytes(v),
        CpuStorage::I16(v) => bytes(v),
        CpuStorage::I32(v) => bytes(v),
        CpuStorage::I64(v) => bytes(v),
        CpuStorage::BF16(v) => bytes(v),
        CpuStorage::F16(v) => bytes(v),
        CpuStorage::F32(v) => bytes(v),
        CpuStorage::F64(v) => bytes(v),
        CpuStorage::F8E4M3(v) => bytes(v),
        CpuStorage::F6E2M3(v)
        | CpuStorage::F6E3M2(v)
        | CpuStorage::F4(v)
        | CpuStorage::F8E8M0(v) => bytes(v),
    }
}

pub(crate) fn shape_u64(t: &Tensor) -> Vec<u64> {
    t.dims().iter().map(|&d| d as u64).collect()
}

pub(crate) fn view_dense_bytes(t: &Tensor) -> Option<u64> {
    dense_bytes(&shape_u64(t), t.dtype().as_str())
}

/// The category a tensor fact gets by default: a `Var` is a parameter; otherwise the step of
/// the innermost open span decides (forward → activation, backward → gradient, optimizer →
/// optimizer, none → other).
pub(crate) fn inferred_category(t: &Tensor, step: Option<ExecutionStep>) -> MemoryCategory {
    if t.is_variable() {
        return MemoryCategory::Parameter;
    }
    match step {
        Some(ExecutionStep::Forward) => MemoryCategory::Activation,
        Some(ExecutionStep::Backward) => MemoryCategory::Gradient,
        Some(ExecutionStep::Optimizer) => MemoryCategory::Optimizer,
        None => MemoryCategory::Other,
    }
}

impl TraceSession {
    /// Records a tensor fact labelled `label` in the innermost open span: shape, dtype, device,
    /// whether it is a `Var`, dense bytes of the view and bytes of the backing storage (from the
    /// storage itself). The category is inferred (see [`TraceSession::tensor_as`] to declare
    /// it): a `Var` is a parameter, otherwise forward → activation, backward → gradient,
    /// optimizer → optimizer, elsewhere other. Outside the captured step: one atomic load.
    pub fn tensor(&self, label: &str, tensor: &Tensor) {
        if !self.is_capturing() {
            return;
        }
        let category = inferred_category(tensor, self.inner.current_step());
        self.record_tensor(label, tensor, category);
    }

    /// Like [`TraceSession::tensor`] with a declared category.
    pub fn tensor_as(&self, label: &str, tensor: &Tensor, category: MemoryCategory) {
        if !self.is_capturing() {
            return;
        }
        self.record_tensor(label, tensor, category);
    }

    fn record_tensor(&self, label: &str, tensor: &Tensor, category: MemoryCategory) {
        let inner = &self.inner;
        let tensor_id = inner.tensor_wire_id(tensor.id());
        inner.remember_label(&tensor_id, label);
        let storage_id = self
            .hooks()
            .iter()
            .find_map(|h| h.storage_id(tensor, label, category));
        inner.emit(TraceEvent::Tensor(TensorEvent {
            span_id: span_wire_id(inner.current_span()),
            tensor_id,
            label: (!label.trim().is_empty()).then(|| label.to_string()),
            shape: shape_u64(tensor),
            dtype: tensor.dtype().as_str().to_string(),
            device: inner.device_label.clone(),
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
        let inner = &self.inner;
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
            .map(|t| inner.tensor_wire_id(t.id()))
            .collect();
        let output_id = inner.tensor_wire_id(output.id());
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
            device: inner.device_label.clone(),
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
    fn storage_bytes_come_from_the_storage_not_the_view() -> candle_core::Result<()> {
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

    #[test]
    fn tensor_ids_use_the_candle_number() -> candle_core::Result<()> {
        let t = Tensor::zeros(3, DType::U8, &Device::Cpu)?;
        let id = tensor_id_string(t.id());
        assert!(id.starts_with('t') && id.len() > 1 && id[1..].parse::<u64>().is_ok());
        Ok(())
    }
}
