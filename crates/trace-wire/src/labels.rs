//! Conventions in the `label` of a `memory` event that tie a storage to something else.
//!
//! **Optimizer state of one parameter.** A storage of category `optimizer` whose producer
//! knows which parameter it belongs to is labelled
//! `optimizer state · <parameter key> (<slot>)`: `optimizer state · fc1.weight (m)`. The
//! parameter key is the parameter's own label (its `VarMap` key), the slot names the piece of
//! state as the optimizer calls it (AdamW: `m`, the first moment, and `v`, the second). A
//! producer that cannot tell which parameter a storage belongs to labels it plain
//! `optimizer state` (no guess).
//!
//! ```
//! use trace_wire::labels::{optimizer_state_label, parse_optimizer_state_label};
//! let label = optimizer_state_label("fc1.weight", "m");
//! assert_eq!(label, "optimizer state · fc1.weight (m)");
//! let s = parse_optimizer_state_label(&label).unwrap();
//! assert_eq!((s.parameter, s.slot), ("fc1.weight", "m"));
//! assert!(parse_optimizer_state_label("optimizer state").is_none());
//! ```

/// The label of optimizer state not tied to a parameter.
pub const OPTIMIZER_STATE: &str = "optimizer state";

/// The prefix of a tied optimizer-state label.
const TIED_PREFIX: &str = "optimizer state · ";

/// The label of the optimizer state `slot` (`m`, `v`) of parameter `parameter`.
pub fn optimizer_state_label(parameter: &str, slot: &str) -> String {
    format!("{TIED_PREFIX}{parameter} ({slot})")
}

/// A tied optimizer-state label read back ([`parse_optimizer_state_label`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptimizerStateLabel<'a> {
    /// The parameter's key.
    pub parameter: &'a str,
    /// The slot (`m`, `v`).
    pub slot: &'a str,
}

/// Reads a label written by [`optimizer_state_label`]; `None` for any other label (plain
/// `optimizer state`, a parameter name, an empty key or slot).
pub fn parse_optimizer_state_label(label: &str) -> Option<OptimizerStateLabel<'_>> {
    let rest = label.strip_prefix(TIED_PREFIX)?.strip_suffix(')')?;
    let (parameter, slot) = rest.rsplit_once(" (")?;
    (!parameter.is_empty() && !slot.is_empty() && !slot.contains(['(', ')']))
        .then_some(OptimizerStateLabel { parameter, slot })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tied_labels_read_back_and_others_do_not() {
        for (p, s) in [("fc1.weight", "m"), ("a (b).c", "v"), ("unnamed/t7", "m")] {
            let l = optimizer_state_label(p, s);
            let got = parse_optimizer_state_label(&l).unwrap();
            assert_eq!((got.parameter, got.slot), (p, s));
        }
        for l in [
            "optimizer state",
            "optimizer state · ",
            "optimizer state ·  (m)",
            "optimizer state · fc1.weight ()",
            "optimizer state · fc1.weight",
            "fc1.weight (m)",
        ] {
            assert_eq!(parse_optimizer_state_label(l), None, "{l}");
        }
    }
}
