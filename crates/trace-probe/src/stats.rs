//! Tensor statistics: elements, non-finite count, and rms, abs max, mean, min, max over the
//! finite elements.

use candle_core::{DType, Tensor};
use trace_wire::{TensorStatsEvent, TraceEvent};

use crate::error::ProbeError;
use crate::facts::shape_u64;
use crate::session::plugin::span_wire_id;
use crate::session::TraceSession;

/// A numerical summary of a tensor. The finite-element statistics are `None` when the tensor
/// has no finite element (empty, or all NaN/±inf).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TensorStats {
    /// Element count (of the view).
    pub elements: u64,
    /// Count of NaN and ±inf elements.
    pub non_finite: u64,
    /// Root mean square of the finite elements.
    pub rms: Option<f64>,
    /// Largest absolute finite value.
    pub abs_max: Option<f64>,
    /// Mean of the finite elements.
    pub mean: Option<f64>,
    /// Smallest finite element.
    pub min: Option<f64>,
    /// Largest finite element.
    pub max: Option<f64>,
}

impl TensorStats {
    /// Computes the statistics with one device read (the tensor is converted to f64 on its
    /// device and copied to the host once). Accumulation is in f64; rms is scaled by abs max, so
    /// it stays finite for any finite input.
    ///
    /// # Errors
    /// [`ProbeError::UnsupportedDtype`] for integer dtypes and for the sub-byte / scale-only
    /// float formats (`f6e2m3`, `f6e3m2`, `f4`, `f8e8m0`) that Candle cannot convert;
    /// [`ProbeError::Candle`] when the device read fails.
    pub fn compute(tensor: &Tensor) -> Result<Self, ProbeError> {
        let dtype = tensor.dtype();
        match dtype {
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 | DType::F8E4M3 => {}
            DType::U8 | DType::U32 | DType::I16 | DType::I32 | DType::I64 => {
                return Err(ProbeError::UnsupportedDtype {
                    dtype: dtype.as_str(),
                    reason: "integer dtype",
                })
            }
            DType::F6E2M3 | DType::F6E3M2 | DType::F4 | DType::F8E8M0 => {
                return Err(ProbeError::UnsupportedDtype {
                    dtype: dtype.as_str(),
                    reason: "sub-byte or scale-only format without element conversion",
                })
            }
            other => {
                return Err(ProbeError::UnsupportedDtype {
                    dtype: other.as_str(),
                    reason: "dtype unknown to this probe version",
                })
            }
        }
        let values: Vec<f64> = tensor
            .flatten_all()
            .and_then(|t| t.to_dtype(DType::F64))
            .and_then(|t| t.to_vec1::<f64>())
            .map_err(ProbeError::candle("reading a tensor for statistics"))?;
        Ok(Self::from_values(&values))
    }

    /// The statistics of host values.
    pub fn from_values(values: &[f64]) -> Self {
        let mut non_finite = 0u64;
        let mut finite = 0u64;
        let mut sum = 0.0f64;
        let mut abs_max = 0.0f64;
        let mut min = f64::INFINITY;
        let mut max = f64::NEG_INFINITY;
        for &v in values {
            if !v.is_finite() {
                non_finite += 1;
                continue;
            }
            finite += 1;
            sum += v;
            abs_max = abs_max.max(v.abs());
            min = min.min(v);
            max = max.max(v);
        }
        let elements = values.len() as u64;
        if finite == 0 {
            return Self {
                elements,
                non_finite,
                rms: None,
                abs_max: None,
                mean: None,
                min: None,
                max: None,
            };
        }
        let n = finite as f64;
        let rms = if abs_max == 0.0 {
            0.0
        } else {
            let scaled: f64 = values
                .iter()
                .filter(|v| v.is_finite())
                .map(|v| (v / abs_max) * (v / abs_max))
                .sum();
            abs_max * (scaled / n).sqrt()
        };
        // The sum of finite values can overflow for huge inputs: fall back to a scaled mean.
        let mean = if sum.is_finite() {
            sum / n
        } else {
            values.iter().filter(|v| v.is_finite()).map(|v| v / n).sum()
        };
        Self {
            elements,
            non_finite,
            rms: Some(rms),
            abs_max: Some(abs_max),
            mean: Some(mean.clamp(min, max)),
            min: Some(min),
            max: Some(max),
        }
    }
}

impl TraceSession {
    /// Inside the captured step, computes [`TensorStats`] of `tensor` (one device read) and
    /// records them labelled `label` in the innermost open span; returns them. Outside the
    /// captured step it does nothing and returns `Ok(None)` (one atomic load).
    ///
    /// # Errors
    /// See [`TensorStats::compute`]; an error records nothing.
    pub fn tensor_stats(
        &self,
        label: &str,
        tensor: &Tensor,
    ) -> Result<Option<TensorStats>, ProbeError> {
        if !self.is_capturing() {
            return Ok(None);
        }
        let stats = TensorStats::compute(tensor)?;
        let inner = self.cur();
        inner.emit(TraceEvent::TensorStats(TensorStatsEvent {
            span_id: span_wire_id(inner.current_span()),
            label: if label.trim().is_empty() {
                "unlabelled".to_string()
            } else {
                label.to_string()
            },
            shape: shape_u64(tensor),
            dtype: tensor.dtype().as_str().to_string(),
            elements: stats.elements,
            non_finite: stats.non_finite,
            rms: stats.rms,
            abs_max: stats.abs_max,
            mean: stats.mean,
            min: stats.min,
            max: stats.max,
        }));
        Ok(Some(stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn finite_statistics_skip_non_finite_elements() -> Result<(), ProbeError> {
        let t = Tensor::new(&[3.0f32, -4.0, f32::NAN, f32::INFINITY], &Device::Cpu)
            .map_err(ProbeError::candle("test"))?;
        let s = TensorStats::compute(&t)?;
        assert_eq!((s.elements, s.non_finite), (4, 2));
        assert_eq!(s.abs_max, Some(4.0));
        assert_eq!(s.mean, Some(-0.5));
        assert_eq!((s.min, s.max), (Some(-4.0), Some(3.0)));
        assert!((s.rms.unwrap() - (12.5f64).sqrt()).abs() < 1e-12);
        Ok(())
    }

    #[test]
    fn all_non_finite_gives_absent_statistics() {
        let s = TensorStats::from_values(&[f64::NAN, f64::NEG_INFINITY]);
        assert_eq!(s.non_finite, 2);
        assert_eq!((s.rms, s.mean, s.min), (None, None, None));
        let empty = TensorStats::from_values(&[]);
        assert_eq!((empty.elements, empty.rms), (0, None));
    }

    #[test]
    fn huge_finite_values_keep_finite_rms() {
        let s = TensorStats::from_values(&[1e300, -1e300, 1e300]);
        assert!(s.rms.unwrap().is_finite());
        assert!((s.rms.unwrap() - 1e300).abs() / 1e300 < 1e-12);
        assert!(s.mean.unwrap().is_finite());
    }

    #[test]
    fn integer_and_sub_byte_dtypes_are_errors_not_panics() -> candle_core::Result<()> {
        let ints = Tensor::new(&[1u32, 2, 3], &Device::Cpu)?;
        assert!(matches!(
            TensorStats::compute(&ints),
            Err(ProbeError::UnsupportedDtype { dtype: "u32", .. })
        ));
        // Candle cannot create sub-byte tensors through ops on CPU: build them from raw bytes.
        use candle_core::{op::BackpropOp, CpuStorage, Storage};
        let raw = |storage: CpuStorage| {
            Tensor::from_storage(Storage::Cpu(storage), 4, BackpropOp::none(), false)
        };
        for (t, bytes) in [
            (raw(CpuStorage::F4(vec![0u8; 2])), 2),
            (raw(CpuStorage::F6E2M3(vec![0u8; 3])), 3),
            (raw(CpuStorage::F6E3M2(vec![0u8; 3])), 3),
            (raw(CpuStorage::F8E8M0(vec![0u8; 4])), 4),
        ] {
            assert!(matches!(
                TensorStats::compute(&t),
                Err(ProbeError::UnsupportedDtype { .. })
            ));
            assert_eq!(
                crate::storage::bytes::storage_bytes(&t),
                Some(bytes),
                "{:?}",
                t.dtype()
            );
        }
        Ok(())
    }
}
