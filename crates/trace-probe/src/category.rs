//! The one rule that infers a memory category when nobody declared one.

use trace_wire::{ExecutionStep as Pass, MemoryCategory};

/// The category of a tensor or storage nobody declared, from what it is and the pass (forward,
/// backward, optimizer) it was created or recorded in: a `Var` is a parameter; anything created
/// in the forward pass is an activation; everything else is `other` — a backward temporary is not
/// necessarily a gradient and an optimizer temporary is not optimizer state (gradients and
/// optimizer state get their categories from the registry, which knows them). Categories follow
/// PyTorch's memory profiler (`torch.profiler._memory_profiler.Category`) where they overlap.
///
/// Every inferred category is written with `category_source: inferred` on memory events.
pub(crate) fn inferred_category(is_variable: bool, pass: Option<Pass>) -> MemoryCategory {
    if is_variable {
        return MemoryCategory::Parameter;
    }
    match pass {
        Some(Pass::Forward) => MemoryCategory::Activation,
        Some(Pass::Backward) | Some(Pass::Optimizer) | None => MemoryCategory::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule() {
        assert_eq!(
            inferred_category(true, Some(Pass::Backward)),
            MemoryCategory::Parameter
        );
        assert_eq!(
            inferred_category(false, Some(Pass::Forward)),
            MemoryCategory::Activation
        );
        for pass in [Some(Pass::Backward), Some(Pass::Optimizer), None] {
            assert_eq!(inferred_category(false, pass), MemoryCategory::Other);
        }
    }
}
