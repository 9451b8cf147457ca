//! The actionable reading of each finding: what a user would change in the training loop.

use trace_graph::{Finding, FindingCode, Holder};

/// What to do about storages the gradient store holds past the step (Candle keeps every
/// gradient in the store, and what those gradients still reference, until it is dropped).
const GRADIENT_STORE: &str = "drop the gradient store right after the step; to free these before it, keep only the parameters' gradients, detached: `let mut kept = GradStore::default(); for v in &vars { if let Some(g) = grads.remove(v.as_tensor()) { kept.insert(v.as_tensor(), g.detach()); } } drop(grads); opt.step(&kept)?`";

/// What to do about a finding, when there is a general answer; for retained activations it
/// follows the holder the finding's evidence names.
pub fn advice(f: &Finding) -> Option<&'static str> {
    Some(match f.code {
        FindingCode::CapturedWithoutWarmUp => {
            "run at least one step before the captured one: capture step 2 or later (`ProfileRun::training(entrypoint, 2)`)"
        }
        FindingCode::LargestHostSelfTime => {
            "optimise or split this span first; self time excludes its children"
        }
        FindingCode::MemoryPeak => {
            "to lower the peak, shrink what is live at that moment (batch size, sequence length, or free tensors earlier)"
        }
        FindingCode::ActivationsRetainedIntoOptimizer => {
            let holders: Vec<Holder> = f.evidence.held_by.iter().map(|h| h.holder).collect();
            if holders.contains(&Holder::GradientStore) {
                GRADIENT_STORE
            } else if holders == [Holder::Unknown] {
                "find the tensor the loop keeps past backward (logits, an output kept for metrics) and drop it before the step"
            } else {
                "run backward, drop the loss (and logits), then step: `let grads = loss.backward()?; drop(loss); opt.step(&grads)?`"
            }
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
