//! The actionable reading of each finding: what a user would change in the training loop.

use trace_graph::{Finding, FindingCode, Holder};

/// What to do about storages the gradient store holds past the step (Candle keeps every
/// gradient in the store, and what those gradients still reference, until it is dropped).
const GRADIENT_STORE: &str = "drop the gradient store right after the step; to free these before it, keep only the parameters' gradients, detached: `let mut kept = GradStore::default(); for v in &vars { if let Some(g) = grads.remove(v.as_tensor()) { kept.insert(v.as_tensor(), g.detach()); } } drop(grads); opt.step(&kept)?`";

use trace_graph::DROP_LOSS_SNIPPET;

/// The advice of a `memory_peak` finding: on what dominates, fixed or batch-scaled bytes.
fn peak_advice(f: &Finding) -> String {
    let e = &f.evidence;
    match (e.fixed_bytes, e.batch_scaled_bytes, e.bytes) {
        (Some(fixed), Some(scaled), Some(peak)) if peak > 0 && fixed * 2 > peak => format!(
            "the peak is mostly fixed: parameters, gradients and optimizer state make {:.0}% of it and do not shrink with the batch (activations, {:.0}%, do): lower precision, a lighter optimizer state, or fewer parameters move it; a smaller batch only trims the activations",
            100.0 * fixed as f64 / peak as f64,
            100.0 * scaled as f64 / peak as f64
        ),
        (Some(_), Some(scaled), Some(peak)) if peak > 0 && scaled * 2 > peak => format!(
            "activations make {:.0}% of the peak and scale with the batch: a smaller batch or sequence, or freeing tensors earlier (the findings below say which), lowers it",
            100.0 * scaled as f64 / peak as f64
        ),
        _ => "to lower the peak, shrink what is live at that moment (the largest groups above; free tensors earlier where a finding below names them)".to_string(),
    }
}

/// Ops without a backward in Candle 0.11.1, and what calls them.
const NO_BACKWARD: &str = "layer_norm (candle-nn's LayerNorm forward on a contiguous input with a bias calls ops::layer_norm, a custom op built with apply_op3_no_bwd), rms_norm (RmsNorm forward; `candle_nn::ops::rms_norm_slow` or trace_probe's `forward_diff` is differentiable), rope, softmax_last_dim";

/// The advice of a `parameters_without_gradient` finding: the op and module where the
/// gradient stops when the finding names them.
fn no_gradient_advice(f: &Finding) -> String {
    let e = &f.evidence;
    match (&e.operation, &e.module) {
        (Some(op), Some(module)) if op == "layer_norm" => format!(
            "module {module} runs {op}, which has no backward in Candle: candle-nn's LayerNorm on a contiguous input with a bias calls ops::layer_norm (apply_op3_no_bwd), so it and every parameter before it get no gradient and nothing errors; to train, compute it with `candle_nn::ops::layer_norm_slow(&x, &weight, &bias, eps)` (the same norm from ops that have a backward)"
        ),
        (Some(op), Some(module)) => format!(
            "module {module} runs {op}, which has no backward in Candle (ops without one: {NO_BACKWARD}): replace it with the differentiable composition of the same ops"
        ),
        (None, Some(module)) => format!(
            "the gradient stops at module {module}: look inside it for an op without a backward ({NO_BACKWARD}) or a detach"
        ),
        _ => format!(
            "look for an op without a backward ({NO_BACKWARD}), a detach, or a parameter unused in the loss"
        ),
    }
}

/// What to do about a finding, when there is a general answer; for retained activations it
/// follows the holder the finding's evidence names.
pub fn advice(f: &Finding) -> Option<String> {
    Some(match f.code {
        FindingCode::MemoryPeak => return Some(peak_advice(f)),
        FindingCode::ParametersWithoutGradient => return Some(no_gradient_advice(f)),
        FindingCode::ActivationsRetainedIntoOptimizer => {
            let holders: Vec<Holder> = f.evidence.held_by.iter().map(|h| h.holder).collect();
            return Some(if holders.contains(&Holder::GradientStore) {
                GRADIENT_STORE.to_string()
            } else if holders == [Holder::Unknown] {
                "find the tensor the loop keeps past backward (logits, an output kept for metrics) and drop it before the step".to_string()
            } else {
                format!("run backward through the profiler, drop the loss and the logits, then step: `{DROP_LOSS_SNIPPET}`")
            });
        }
        _ => match static_advice(f) {
            Some(a) => a.to_string(),
            None => return None,
        },
    })
}

fn static_advice(f: &Finding) -> Option<&'static str> {
    Some(match f.code {
        FindingCode::CapturedWithoutWarmUp => {
            "run at least one step before the captured one: capture step 2 or later (`ProfileRun::training(entrypoint, 2)`)"
        }
        FindingCode::LargestHostSelfTime => {
            "optimise or split this span first; self time excludes its children"
        }
        FindingCode::MemoryPeak | FindingCode::ActivationsRetainedIntoOptimizer => return None,
        FindingCode::ParametersWithoutGradient => return None,
        FindingCode::OptimizerStateWithoutGradient => {
            "give those parameters a gradient (the parameters_without_gradient finding says where it stops), or build the optimizer over the parameters that train only (`AdamW::new(vars_that_train, config)`): its state for the others is allocated and never used"
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
        FindingCode::MemoryGrowth => {
            "find what each step leaves live (listed by span, op and shape): a tensor pushed to a Vec, a stored loss or output (keep `loss.to_scalar::<f32>()?` or `detach()` instead), a cache never cleared; a KV cache grows by design: bound it (a maximum length, a sliding window)"
        }
        FindingCode::CoverageGap => return None,
    })
}
