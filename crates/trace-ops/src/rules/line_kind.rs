//! What a line of candle-core's `Tensor::backward` does: the vocabulary of the generated
//! table ([`super::generated::BACKWARD_LINES`]).

/// What a line of candle-core's `Tensor::backward` (src/backprop.rs) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackwardLine {
    /// `let sorted_nodes = self.sorted_nodes();`: `backward.sort_nodes`.
    SortNodes,
    /// The loop around the arms (`grads.remove`, `detach`, the seed gradient): `backward`.
    Driver,
    /// Inside a `match op` arm: `<arm>.backward`.
    Arm,
    /// `grads.or_insert(arg)`: a new accumulator's zeros, `grad_accumulate`.
    AccumulateZeros,
    /// `*sum_grad = sum_grad.add(..)` / `.sub(..)`: the add into the accumulator,
    /// `grad_accumulate` when the sample is in that `add`/`sub` (the same line may compute the
    /// arm's own gradient first: then it is the arm's).
    AccumulateAdd,
}
