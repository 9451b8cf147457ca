//! The actionable reading of each finding: what a user would change in the training loop.

use trace_graph::FindingCode;

/// What to do about a finding, when there is a general answer.
pub fn advice(code: FindingCode) -> Option<&'static str> {
    Some(match code {
        FindingCode::LargestHostSelfTime => {
            "optimise or split this span first; self time excludes its children"
        }
        FindingCode::MemoryPeak => {
            "to lower the peak, shrink what is live at that moment (batch size, sequence length, or free tensors earlier)"
        }
        FindingCode::ActivationsRetainedIntoOptimizer => {
            "run backward, drop the loss (and logits), then step: `let grads = loss.backward()?; drop(loss); opt.step(&grads)?`"
        }
        FindingCode::ParametersWithoutGradient => {
            "look for an op without a backward (fused rms_norm, rope, softmax_last_dim in Candle 0.11.1), a detach, or a parameter unused in the loss"
        }
        FindingCode::ZeroGradients => {
            "check for dead activations (ReLU), masked paths or a zero learning signal"
        }
        FindingCode::NonFiniteGradients => {
            "lower the learning rate, check the loss for log(0)/division by zero, or clip gradients"
        }
        FindingCode::StoragesRetainedAtEnd => {
            "tensors kept past the step (a cache, a returned loss, gradients) hold this memory into the next step"
        }
        FindingCode::CoverageGap => return None,
    })
}
