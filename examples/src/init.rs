//! Seeded parameter initialisation.
//!
//! Candle 0.11.1 cannot seed its CPU random number generator (`Device::Cpu.set_seed` returns an
//! error), so models are first built through a [`VarMap`]-backed `VarBuilder` (Candle's own
//! initialisers run and are then discarded) and every variable is overwritten here from a
//! [`StdRng`] seeded by the caller. Variables are visited in sorted name order, so the values only
//! depend on the seed and the variable names and shapes.

use candle_core::{Result, Tensor};
use candle_nn::VarMap;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Overwrites every variable of `varmap` with values drawn from `StdRng::seed_from_u64(seed)`.
///
/// The scheme (PyTorch's defaults, uniform variants):
/// - rank-2 names ending in `embed_tokens.weight`: uniform in `[-1, 1)`;
/// - other rank-2 weights of shape `(out, in)`: uniform in `[-1/sqrt(in), 1/sqrt(in))`
///   (`torch.nn.Linear`'s Kaiming-uniform bound);
/// - rank-4 convolution kernels of shape `(out, in, kh, kw)`: uniform in
///   `[-1/sqrt(in·kh·kw), 1/sqrt(in·kh·kw))` (`torch.nn.Conv2d`'s bound);
/// - rank-1 names containing `norm`: ones (RMSNorm gain);
/// - other rank-1 tensors (biases): zeros.
///
/// # Errors
/// Candle errors from building or copying the tensors (e.g. a device error).
pub fn seed_varmap(varmap: &VarMap, seed: u64) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let vars = varmap.data().lock().expect("VarMap lock poisoned");
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    for name in names {
        let var = &vars[name];
        let dims = var.dims().to_vec();
        let count: usize = dims.iter().product();
        let values: Vec<f32> = match dims.as_slice() {
            [_, _] if name.ends_with("embed_tokens.weight") => {
                (0..count).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
            }
            [_, fan_in] => {
                let bound = 1.0 / (*fan_in as f32).sqrt();
                (0..count).map(|_| rng.gen_range(-bound..bound)).collect()
            }
            [_, c_in, kh, kw] => {
                let bound = 1.0 / ((c_in * kh * kw) as f32).sqrt();
                (0..count).map(|_| rng.gen_range(-bound..bound)).collect()
            }
            [_] if name.contains("norm") => vec![1.0; count],
            _ => vec![0.0; count],
        };
        let tensor =
            Tensor::from_vec(values, dims.as_slice(), var.device())?.to_dtype(var.dtype())?;
        var.set(&tensor)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::VarBuilder;

    fn build(seed: u64) -> Result<VarMap> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        candle_nn::linear(8, 4, vb.pp("fc"))?;
        candle_nn::rms_norm(4, 1e-5, vb.pp("norm"))?;
        seed_varmap(&varmap, seed)?;
        Ok(varmap)
    }

    fn values(varmap: &VarMap, name: &str) -> Result<Vec<f32>> {
        let vars = varmap.data().lock().unwrap();
        vars[name].as_tensor().flatten_all()?.to_vec1()
    }

    #[test]
    fn same_seed_same_values_other_seed_other_values() -> Result<()> {
        let a = build(7)?;
        let b = build(7)?;
        let c = build(8)?;
        assert_eq!(values(&a, "fc.weight")?, values(&b, "fc.weight")?);
        assert_ne!(values(&a, "fc.weight")?, values(&c, "fc.weight")?);
        assert!(values(&a, "fc.weight")?
            .iter()
            .all(|v| v.abs() < 1.0 / 8f32.sqrt()));
        assert_eq!(values(&a, "norm.weight")?, vec![1.0; 4]);
        assert_eq!(values(&a, "fc.bias")?, vec![0.0; 4]);
        Ok(())
    }
}
