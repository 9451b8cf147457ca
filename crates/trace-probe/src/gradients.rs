//! Gradient facts from a `VarMap` and a `GradStore`: per named parameter `present`, `missing`,
//! `zero` or `non_finite` with its L2 norm, plus the gradients of tensors that are not
//! parameters (e.g. the input batch: their gradients carry a backward graph and keep its
//! storages alive while the store lives), with their bytes.
//!
//! Norms are accumulated in f64 over the finite elements (an f32 norm overflows to inf for large
//! finite gradients; f64 gradients are scaled by their largest absolute finite element);
//! non-finite elements are counted separately.
//!
//! - CPU: contiguous f32 / f64 / f16 / bf16 gradients are read in place from their storage (no
//!   copy, no device read), one pass each.
//! - Other devices (and other CPU layouts): every gradient is reduced on its device to three
//!   scalars and all of them are read back with **one** device read, not one synchronisation per
//!   parameter.

use std::collections::HashSet;

use candle_core::backprop::GradStore;
use candle_core::{CpuStorage, DType, Storage, Tensor, TensorId, Var};
use trace_wire::{GradientEvent, GradientState, TraceEvent};

use crate::error::ProbeError;
use crate::session::TraceSession;
use crate::storage::bytes::storage_bytes;
use crate::tensor_id::tensor_number;

/// Root of non-parameter gradients in `gradient` events.
pub const NON_PARAMETER_ROOT: &str = "non_parameter";

/// The reduced facts of one gradient tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GradFacts {
    pub non_finite: u64,
    pub norm: f64,
}

impl GradFacts {
    fn state_and_norm(self) -> (GradientState, Option<f64>) {
        if self.non_finite > 0 {
            (GradientState::NonFinite, None)
        } else if self.norm == 0.0 {
            (GradientState::Zero, Some(0.0))
        } else if self.norm.is_finite() {
            (GradientState::Present, Some(self.norm))
        } else {
            // Unreachable for finite inputs thanks to the scaling; never write an invalid norm.
            (GradientState::NonFinite, None)
        }
    }
}

/// Three scalars per gradient, on its device: non-finite count, max |finite|, and the sum of
/// squares of the finite elements divided by that max.
fn reductions(grad: &Tensor) -> candle_core::Result<[Tensor; 3]> {
    let g = grad.flatten_all()?.to_dtype(DType::F64)?;
    let abs = g.abs()?;
    let finite = abs.lt(f64::INFINITY)?; // NaN compares false
    let zeros = g.zeros_like()?;
    let finite_vals = finite.where_cond(&g, &zeros)?;
    let n = g.elem_count() as f64;
    let finite_count = finite.to_dtype(DType::F64)?.sum_all()?;
    let non_finite = finite_count.affine(-1.0, n)?;
    let max_abs = if g.elem_count() == 0 {
        Tensor::new(0f64, g.device())?
    } else {
        finite_vals.abs()?.max_all()?
    };
    let denom = max_abs.maximum(f64::MIN_POSITIVE)?;
    let scaled = finite_vals.broadcast_div(&denom)?;
    let sum_sq = scaled.sqr()?.sum_all()?;
    Ok([non_finite, max_abs, sum_sq])
}

/// Lanes of independent accumulators in [`sum_of_squares`]: one running sum is bound by the
/// latency of a floating-point add (≈ 0.7 ms for the MLP's 0.67 M gradient elements, 7% of its
/// step); independent lanes let the compiler vectorize the loop.
const LANES: usize = 8;

/// The f64 sum of the squares of `values` converted by `to_f32`, accumulated in [`LANES`]
/// interleaved lanes (element `i` in lane `i % LANES`, lanes added in order at the end: the
/// same figure on every machine). Non-finite when any element is.
fn sum_of_squares<T: Copy>(values: &[T], to_f32: &impl Fn(T) -> f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX (checked just above).
        return unsafe { sum_of_squares_avx(values, to_f32) };
    }
    sum_of_squares_lanes(values, to_f32)
}

/// [`sum_of_squares_lanes`] compiled for AVX: the same lanes and the same operations (a
/// multiply, then an add: Rust never fuses them), four f64 lanes per instruction instead of two,
/// so the same figure bit for bit. The MLP step's gradient facts: 168–181 → 131–148 µs
/// (`AB_PARTS=1 cargo bench -p trace-probe --bench ab_overhead`; `docs/cost.md` of this crate).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn sum_of_squares_avx<T: Copy>(values: &[T], to_f32: &impl Fn(T) -> f32) -> f64 {
    sum_of_squares_lanes(values, to_f32)
}

/// The portable body of [`sum_of_squares`], inlined into each instruction set's copy.
#[inline(always)]
fn sum_of_squares_lanes<T: Copy>(values: &[T], to_f32: &impl Fn(T) -> f32) -> f64 {
    let mut lanes = [0f64; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (acc, &v) in lanes.iter_mut().zip(chunk) {
            let v = f64::from(to_f32(v));
            *acc += v * v;
        }
    }
    for (acc, &v) in lanes.iter_mut().zip(rest) {
        let v = f64::from(to_f32(v));
        *acc += v * v;
    }
    lanes.iter().sum()
}

/// Facts of values whose squares cannot overflow f64 (f32 and narrower: a sum of up to 2^53
/// squares of at most 3.4e38 stays below f64's range). One vectorized pass; only when its sum
/// is not finite — some element is not — a second pass counts the non-finite elements and sums
/// the finite ones.
fn narrow_facts<T: Copy>(values: &[T], to_f32: impl Fn(T) -> f32) -> GradFacts {
    let sum_sq = sum_of_squares(values, &to_f32);
    if sum_sq.is_finite() {
        return GradFacts {
            non_finite: 0,
            norm: sum_sq.sqrt(),
        };
    }
    let mut non_finite = 0u64;
    let mut finite_sum_sq = 0f64;
    for &v in values {
        let v = to_f32(v);
        if v.is_finite() {
            finite_sum_sq += f64::from(v) * f64::from(v);
        } else {
            non_finite += 1;
        }
    }
    GradFacts {
        non_finite,
        norm: finite_sum_sq.sqrt(),
    }
}

/// Facts of f64 values, scaled by the largest absolute finite value: two passes.
fn wide_facts(values: &[f64]) -> GradFacts {
    let max_abs = values
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f64, |m, v| m.max(v.abs()));
    let non_finite = values.iter().filter(|v| !v.is_finite()).count() as u64;
    if max_abs == 0.0 {
        return GradFacts {
            non_finite,
            norm: 0.0,
        };
    }
    let scaled: f64 = values
        .iter()
        .filter(|v| v.is_finite())
        .map(|v| (v / max_abs) * (v / max_abs))
        .sum();
    GradFacts {
        non_finite,
        norm: max_abs * scaled.sqrt(),
    }
}

/// In-place facts of a contiguous CPU gradient; `None` for other devices, layouts or dtypes.
fn host_facts(grad: &Tensor) -> Option<GradFacts> {
    let (storage, layout) = grad.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        return None;
    };
    let (start, end) = layout.contiguous_offsets()?;
    Some(match cpu {
        CpuStorage::F32(v) => narrow_facts(v.get(start..end)?, |x| x),
        CpuStorage::F16(v) => narrow_facts(v.get(start..end)?, |x| x.to_f32()),
        CpuStorage::BF16(v) => narrow_facts(v.get(start..end)?, |x| x.to_f32()),
        CpuStorage::F64(v) => wide_facts(v.get(start..end)?),
        _ => return None,
    })
}

/// Facts of every gradient: in place on CPU, otherwise reduced on the device and read back with
/// one device read for all of them.
pub(crate) fn batched_facts(grads: &[&Tensor]) -> Result<Vec<GradFacts>, ProbeError> {
    let facts: Vec<Option<GradFacts>> = grads.iter().map(|g| host_facts(g)).collect();
    complete_facts(grads, facts)
}

/// Fills the facts `host_facts` could not give (other devices, layouts, dtypes) by reductions
/// on the device, read back with one device read for all of them.
fn complete_facts(
    grads: &[&Tensor],
    mut facts: Vec<Option<GradFacts>>,
) -> Result<Vec<GradFacts>, ProbeError> {
    let pending: Vec<usize> = (0..grads.len()).filter(|&i| facts[i].is_none()).collect();
    if !pending.is_empty() {
        let mut scalars = Vec::with_capacity(pending.len() * 3);
        for &i in &pending {
            scalars.extend(reductions(grads[i]).map_err(ProbeError::candle("reducing gradients"))?);
        }
        let values: Vec<f64> = Tensor::stack(&scalars, 0)
            .and_then(|t| t.to_vec1::<f64>())
            .map_err(ProbeError::candle("reading gradient norms"))?;
        for (&i, c) in pending.iter().zip(values.chunks_exact(3)) {
            facts[i] = Some(GradFacts {
                non_finite: c[0].round().max(0.0) as u64,
                norm: c[1] * c[2].sqrt(),
            });
        }
    }
    Ok(facts
        .into_iter()
        .map(|f| {
            f.unwrap_or(GradFacts {
                non_finite: 0,
                norm: f64::NAN,
            })
        })
        .collect())
}

/// The gradients whose facts are written, in event order: the named parameters' present ones,
/// then the store's others (no parameter's) in Candle's creation order.
struct FactInputs<'a> {
    present: Vec<&'a Tensor>,
    others: Vec<(TensorId, &'a Tensor)>,
}

fn fact_inputs<'a>(params: &[(String, Var)], grads: &'a GradStore) -> FactInputs<'a> {
    let param_ids: HashSet<TensorId> = params.iter().map(|(_, v)| v.id()).collect();
    let mut others: Vec<(TensorId, &Tensor)> = grads
        .get_ids()
        .filter(|id| !param_ids.contains(id))
        .filter_map(|id| grads.get_id(*id).map(|g| (*id, g)))
        .collect();
    // `GradStore` iterates a HashMap: sort by Candle's id (creation order) for determinism.
    others.sort_by_key(|(id, _)| tensor_number(*id));
    let present: Vec<&Tensor> = params
        .iter()
        .filter_map(|(_, v)| grads.get(v.as_tensor()))
        .chain(others.iter().map(|(_, g)| *g))
        .collect();
    FactInputs { present, others }
}

/// Gradient facts computed on the helper thread ([`crate::beside`]) while the optimizer steps;
/// [`TraceSession::gradient_facts_joined`] joins them and writes the events.
#[must_use = "join the facts before the gradients may be freed"]
pub(crate) struct FactsBeside {
    pending: crate::beside::Pending<Vec<Option<GradFacts>>>,
}

impl TraceSession {
    /// Records gradient facts for the named parameters `params` (sorted by the caller; keys
    /// under `root`) from `grads`, then one fact per gradient in the store that belongs to no
    /// parameter (root [`NON_PARAMETER_ROOT`], key = the tensor's label from
    /// [`TraceSession::tensor`] or `tensor/<id>`, with its bytes). Inside the captured step
    /// only (one atomic load otherwise).
    ///
    /// # Errors
    /// [`ProbeError::Candle`] when reducing or reading the gradients fails; nothing is
    /// recorded then.
    pub fn gradient_facts(
        &self,
        root: &str,
        params: &[(String, Var)],
        grads: &GradStore,
    ) -> Result<(), ProbeError> {
        if !self.is_capturing() {
            return Ok(());
        }
        let inputs = fact_inputs(params, grads);
        let facts = batched_facts(&inputs.present)?;
        self.emit_gradient_facts(root, params, grads, inputs.others, facts);
        Ok(())
    }

    /// Starts the facts of [`TraceSession::gradient_facts`] on the helper thread, reading
    /// clones of the gradients (an `Arc` each) while the caller runs the optimizer step. `None`
    /// where they are computed on the training thread instead: not capturing, deterministic mode
    /// (its events keep their place before the optimizer pass), a gradient not on the CPU (its
    /// reductions run on its device), or no helper thread.
    pub(crate) fn gradient_facts_beside(
        &self,
        params: &[(String, Var)],
        grads: &GradStore,
    ) -> Option<FactsBeside> {
        if !self.is_capturing() || self.run().deterministic {
            return None;
        }
        let inputs = fact_inputs(params, grads);
        if !inputs.present.iter().all(|g| g.device().is_cpu()) {
            return None;
        }
        let owned: Vec<Tensor> = {
            let _quiet = trace_alloc::IgnoreAllocs::new();
            inputs.present.iter().map(|g| (*g).clone()).collect()
        };
        let pending = crate::beside::run(move || {
            let facts: Vec<Option<GradFacts>> = owned.iter().map(host_facts).collect();
            // The clones are dropped here, before the result is sent: the caller still holds
            // the gradients, so no storage is freed on the helper thread.
            drop(owned);
            facts
        })?;
        Some(FactsBeside { pending })
    }

    /// Joins facts started by [`TraceSession::gradient_facts_beside`] and writes the events
    /// (the same as [`TraceSession::gradient_facts`] would have written). `grads` must be the
    /// store they were started on, still held by the caller. A fact the helper could not give
    /// (a layout read by reductions) is computed here.
    ///
    /// # Errors
    /// As [`TraceSession::gradient_facts`].
    pub(crate) fn gradient_facts_joined(
        &self,
        root: &str,
        params: &[(String, Var)],
        grads: &GradStore,
        beside: FactsBeside,
    ) -> Result<(), ProbeError> {
        let inputs = fact_inputs(params, grads);
        let facts = match beside.pending.join() {
            Some(facts) if facts.len() == inputs.present.len() => {
                complete_facts(&inputs.present, facts)?
            }
            // The job panicked or the store changed: compute them here.
            _ => batched_facts(&inputs.present)?,
        };
        self.emit_gradient_facts(root, params, grads, inputs.others, facts);
        Ok(())
    }

    /// Writes one `gradient` event per named parameter, then one per other gradient, from
    /// `facts` (in [`fact_inputs`]' order).
    fn emit_gradient_facts(
        &self,
        root: &str,
        params: &[(String, Var)],
        grads: &GradStore,
        others: Vec<(TensorId, &Tensor)>,
        facts: Vec<GradFacts>,
    ) {
        let inner = self.cur();
        let mut facts = facts.into_iter();
        for (key, var) in params {
            let event = match grads.get(var.as_tensor()) {
                None => GradientEvent {
                    event_id: inner.ids.next_gradient_event_id(),
                    root: root.to_string(),
                    key: key.clone(),
                    state: GradientState::Missing,
                    norm: None,
                    parameter: true,
                    tensor_id: Some(inner.ids.tensor_wire_id(var.id())),
                    bytes: None,
                    non_finite_elements: None,
                },
                Some(_) => {
                    let f = facts.next().unwrap_or(GradFacts {
                        non_finite: 0,
                        norm: f64::NAN,
                    });
                    let (state, norm) = f.state_and_norm();
                    GradientEvent {
                        event_id: inner.ids.next_gradient_event_id(),
                        root: root.to_string(),
                        key: key.clone(),
                        state,
                        norm,
                        parameter: true,
                        tensor_id: Some(inner.ids.tensor_wire_id(var.id())),
                        bytes: None,
                        non_finite_elements: Some(f.non_finite),
                    }
                }
            };
            inner.emit(TraceEvent::Gradient(event));
        }
        for (id, grad) in others {
            let f = facts.next().unwrap_or(GradFacts {
                non_finite: 0,
                norm: f64::NAN,
            });
            let (state, norm) = f.state_and_norm();
            let tensor_id = inner.ids.tensor_wire_id(id);
            let key = inner
                .ids
                .label_of(&tensor_id)
                .unwrap_or_else(|| format!("tensor/{tensor_id}"));
            inner.emit(TraceEvent::Gradient(GradientEvent {
                event_id: inner.ids.next_gradient_event_id(),
                root: NON_PARAMETER_ROOT.to_string(),
                key,
                state,
                norm,
                parameter: false,
                tensor_id: Some(tensor_id),
                bytes: storage_bytes(grad),
                non_finite_elements: Some(f.non_finite),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn every_instruction_set_gives_the_same_sum_bit_for_bit() {
        // Values of many magnitudes and a length that leaves a remainder after the lanes.
        let values: Vec<f32> = (0..10_007)
            .map(|i| ((i as f32) * 0.37).sin() * 10f32.powi(i % 7 - 3))
            .collect();
        let portable = sum_of_squares_lanes(&values, &|x| x);
        assert_eq!(
            sum_of_squares(&values, &|x| x).to_bits(),
            portable.to_bits()
        );
        // A converted element type (as f16 and bf16 are), through the same closure both ways.
        let widened = |x: u16| f32::from(x) * 1e-3;
        let ints: Vec<u16> = (0..10_007u32).map(|i| (i * 7919 % 65_521) as u16).collect();
        assert_eq!(
            sum_of_squares(&ints, &widened).to_bits(),
            sum_of_squares_lanes(&ints, &widened).to_bits()
        );
        // Not a sum in one order: the lanes (elements i, i + 8, …) are added at the end.
        let sequential: f64 = values.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        assert!(
            (portable - sequential).abs() <= 1e-9 * sequential,
            "{portable} {sequential}"
        );
    }

    #[test]
    fn norms_are_f64_scaled_and_non_finite_is_counted() -> Result<(), Box<dyn std::error::Error>> {
        let dev = Device::Cpu;
        let big = Tensor::new(&[3e38f32, 3e38, -3e38], &dev)?; // f32 sum of squares overflows
        let nan = Tensor::new(&[1f32, f32::NAN, f32::NEG_INFINITY], &dev)?;
        let zero = Tensor::zeros(4, DType::F32, &dev)?;
        let small = Tensor::new(&[3f32, 4.0], &dev)?;
        let facts = batched_facts(&[&big, &nan, &zero, &small])?;
        // The device path (used off CPU and for strided layouts) agrees with the host path.
        for (g, host) in [&big, &nan, &zero, &small].into_iter().zip(&facts) {
            let [nf, max_abs, sum_sq] = reductions(g)?;
            let nf = nf.to_scalar::<f64>()? as u64;
            let norm = max_abs.to_scalar::<f64>()? * sum_sq.to_scalar::<f64>()?.sqrt();
            assert_eq!(nf, host.non_finite);
            assert!(
                (norm - host.norm).abs() <= 1e-9 * host.norm.max(1.0),
                "{norm} {}",
                host.norm
            );
        }
        let strided = Tensor::new(&[[3f32, 1.0], [4.0, 1.0]], &dev)?
            .t()?
            .narrow(0, 0, 1)?;
        assert!((batched_facts(&[&strided])?[0].norm - 5.0).abs() < 1e-12);
        let wide = Tensor::new(&[1e300f64, 1e300, f64::NAN], &dev)?;
        let w = batched_facts(&[&wide])?[0];
        assert_eq!(w.non_finite, 1);
        assert!((w.norm - 1e300 * 2f64.sqrt()).abs() / w.norm < 1e-12);
        let expected_big = 3e38f32 as f64 * 3f64.sqrt();
        assert!((facts[0].norm - expected_big).abs() / expected_big < 1e-12);
        assert_eq!(facts[0].state_and_norm().0, GradientState::Present);
        assert_eq!(facts[1].non_finite, 2);
        assert_eq!(facts[1].state_and_norm(), (GradientState::NonFinite, None));
        assert_eq!(facts[2].state_and_norm(), (GradientState::Zero, Some(0.0)));
        assert!((facts[3].norm - 5.0).abs() < 1e-12);
        Ok(())
    }
}
