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
        FindingCode::LargeOperationShare => match f.evidence.operation_kind {
            Some(trace_ops::OpKind::Probe) => {
                "this is the probe's own cost: sample less often (`ProfileRun::sample_hz`) or turn off what it records"
            }
            _ => {
                "start here: `candle-graph ops TRACE` lists it by pass and module, and the report's flame graph shows what runs below it"
            }
        },
        FindingCode::FileIoInOperation => {
            // advice for functions known to read files on every call (the outermost known one:
            // closest to what the user can change); otherwise the general one
            return f
                .evidence
                .frames
                .iter()
                .find_map(|frame| {
                    trace_ops::rules::FILE_IO_ADVICE
                        .iter()
                        .find(|(key, _)| frame == key)
                        .map(|(_, a)| *a)
                })
                .or(Some(
                    "an op reads a file on every call: find which of the named functions does it and keep its result",
                ));
        }
        FindingCode::GradientAccumulationShare => {
            "this is Candle's backward (backprop.rs allocates zeros for each new accumulator, then adds into it): fewer tensors reused across the graph means fewer accumulations; it is not the model's own work"
        }
        FindingCode::OptimizerTemporaries => {
            "the update allocates a new tensor per intermediate (m, v, their square root, the step): an in-place or fused optimizer step (updating `Var`s with fewer intermediates, or one kernel per parameter) removes them; the replayed peak is what it would leave"
        }
        FindingCode::EarlierStepsRetained => {
            "keep what you log as plain numbers (`loss.to_scalar::<f32>()?`, or `loss.detach()`), not the tensor: a stored loss or output holds its step's whole autograd graph; a capture of several steps (or a second capture at a later step) shows whether it grows"
        }
        FindingCode::CoverageGap => return None,
    })
}
