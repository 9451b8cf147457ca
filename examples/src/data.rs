//! Seeded synthetic training data: learnable, so a few steps visibly lower the loss, and
//! reproducible, so golden traces stay byte-stable.

use candle_core::{Device, Result, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One batch of inputs and targets.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Model input: token ids `(batch, seq)` u32 for the llama model, features `(batch, input)`
    /// f32 for the MLP.
    pub inputs: Tensor,
    /// Targets: next tokens `(batch, seq)` u32, or class labels `(batch)` u32.
    pub targets: Tensor,
}

/// Token sequences that are arithmetic progressions modulo `vocab_size`, with a random start and
/// a stride in `1..=3` per sequence; the target at each position is the next token.
///
/// The stream for step `step` is seeded with `seed ^ step`, so every step sees a different batch.
///
/// # Errors
/// Candle errors building the tensors.
pub fn token_batch(
    vocab_size: usize,
    batch_size: usize,
    seq_len: usize,
    seed: u64,
    step: u64,
    device: &Device,
) -> Result<Batch> {
    let mut rng = StdRng::seed_from_u64(seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut inputs = Vec::with_capacity(batch_size * seq_len);
    let mut targets = Vec::with_capacity(batch_size * seq_len);
    for _ in 0..batch_size {
        let start = rng.gen_range(0..vocab_size);
        let stride = rng.gen_range(1..=3);
        for pos in 0..seq_len {
            inputs.push(((start + pos * stride) % vocab_size) as u32);
            targets.push(((start + (pos + 1) * stride) % vocab_size) as u32);
        }
    }
    Ok(Batch {
        inputs: Tensor::from_vec(inputs, (batch_size, seq_len), device)?,
        targets: Tensor::from_vec(targets, (batch_size, seq_len), device)?,
    })
}

/// Classification data: `num_classes` fixed prototype vectors (drawn from `seed`) plus uniform
/// noise; the label is the prototype's index.
///
/// # Errors
/// Candle errors building the tensors.
pub fn prototype_batch(
    input_size: usize,
    num_classes: usize,
    batch_size: usize,
    seed: u64,
    step: u64,
    device: &Device,
) -> Result<Batch> {
    let mut proto_rng = StdRng::seed_from_u64(seed);
    let prototypes: Vec<f32> = (0..num_classes * input_size)
        .map(|_| proto_rng.gen_range(-1.0f32..1.0))
        .collect();
    let mut rng = StdRng::seed_from_u64(seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut inputs = Vec::with_capacity(batch_size * input_size);
    let mut labels = Vec::with_capacity(batch_size);
    for _ in 0..batch_size {
        let label = rng.gen_range(0..num_classes);
        labels.push(label as u32);
        let proto = &prototypes[label * input_size..(label + 1) * input_size];
        inputs.extend(proto.iter().map(|p| p + rng.gen_range(-0.5f32..0.5)));
    }
    Ok(Batch {
        inputs: Tensor::from_vec(inputs, (batch_size, input_size), device)?,
        targets: Tensor::from_vec(labels, batch_size, device)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_targets_are_next_tokens() -> Result<()> {
        let b = token_batch(64, 2, 5, 1, 1, &Device::Cpu)?;
        let x: Vec<Vec<u32>> = b.inputs.to_vec2()?;
        let y: Vec<Vec<u32>> = b.targets.to_vec2()?;
        for (xs, ys) in x.iter().zip(&y) {
            assert_eq!(&xs[1..], &ys[..4]);
        }
        let again = token_batch(64, 2, 5, 1, 1, &Device::Cpu)?;
        assert_eq!(again.inputs.to_vec2::<u32>()?, x);
        let other = token_batch(64, 2, 5, 1, 2, &Device::Cpu)?;
        assert_ne!(other.inputs.to_vec2::<u32>()?, x);
        Ok(())
    }

    #[test]
    fn prototype_labels_in_range() -> Result<()> {
        let b = prototype_batch(6, 3, 4, 1, 1, &Device::Cpu)?;
        assert_eq!(b.inputs.dims(), &[4, 6]);
        assert!(b.targets.to_vec1::<u32>()?.iter().all(|&l| l < 3));
        Ok(())
    }
}
