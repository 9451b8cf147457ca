//! Budgets on the [`crate::Figures`] of a trace and their outcomes: each budget names one figure and
//! its limit; checking it gives [`crate::Outcome::Pass`], [`crate::Outcome::Fail`] with a message worth
//! reading (the figure against its limit, then what held the peak, what grew per step, or the
//! op's interval), or [`crate::Outcome::Unknown`] with what the trace lacks (no tracking allocator,
//! too few captured steps, no samples): never a guess.
//!
//! Time budgets are only ever shares (an op's share of a pass's samples), never absolute times,
//! and they are checked on the 95% interval: a share budget fails only when the interval's low
//! end is above the limit, so a noisy machine does not fail it by chance.

use serde::Serialize;
use trace_format::{bytes, escape};
use trace_schema::{MemoryCategory, Pass};

use crate::units::{in_pass, pct};

/// One budget (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "budget", rename_all = "snake_case")]
pub enum Budget {
    /// The run's logical peak (all devices) is at most `max_bytes`.
    Peak {
        /// The limit, bytes.
        max_bytes: u64,
    },
    /// The peak inside `pass` is at most `max_bytes`.
    PassPeak {
        /// The pass.
        pass: Pass,
        /// The limit, bytes.
        max_bytes: u64,
    },
    /// The bytes of `category` live at the run's peak are at most `max_bytes`.
    Category {
        /// The category.
        category: MemoryCategory,
        /// The limit, bytes.
        max_bytes: u64,
    },
    /// The optimizer pass's temporaries (storages allocated and freed inside it) add up to at
    /// most `max_bytes`.
    OptimizerTemporaries {
        /// The limit, bytes.
        max_bytes: u64,
    },
    /// No leak: live memory does not grow at every one of `steps` captured steps after
    /// `warmup` warm-up steps by more than `max_bytes_per_step`.
    NoGrowth {
        /// Captured steps the budget needs.
        steps: u64,
        /// Warm-up steps before them.
        warmup: u64,
        /// Growth per step allowed, bytes (0: none).
        max_bytes_per_step: u64,
    },
    /// The exact number of allocating calls of `op` (in `pass` when given) compares to `calls`
    /// as `cmp` says (needs allocation sites).
    OpCalls {
        /// The op (`matmul.backward`).
        op: String,
        /// Only the rows of this pass.
        pass: Option<Pass>,
        /// The comparison.
        cmp: Cmp,
        /// The count.
        calls: u64,
    },
    /// `op`'s share of the samples of `pass` (of the measured region when `None`) is at most
    /// `max_share`, checked at the 95% interval's low end.
    OpShare {
        /// The op.
        op: String,
        /// The pass whose samples the share is of.
        pass: Option<Pass>,
        /// The limit, in [0, 1].
        max_share: f64,
    },
}

/// How a count compares to its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    /// Exactly.
    Eq,
    /// At most.
    AtMost,
}

impl Cmp {
    pub(crate) fn holds(self, value: u64, limit: u64) -> bool {
        match self {
            Cmp::Eq => value == limit,
            Cmp::AtMost => value <= limit,
        }
    }

    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::AtMost => "≤",
        }
    }
}

impl Budget {
    /// The budget as one line: `peak ≤ 6.00 MiB`, `calls of matmul.backward == 38`.
    pub fn describe(&self) -> String {
        match self {
            Budget::Peak { max_bytes } => format!("peak ≤ {}", bytes(*max_bytes)),
            Budget::PassPeak { pass, max_bytes } => {
                format!("{} pass peak ≤ {}", pass.as_str(), bytes(*max_bytes))
            }
            Budget::Category {
                category,
                max_bytes,
            } => format!("{} at the peak ≤ {}", category.as_str(), bytes(*max_bytes)),
            Budget::OptimizerTemporaries { max_bytes } => {
                format!("optimizer temporaries ≤ {}", bytes(*max_bytes))
            }
            Budget::NoGrowth {
                steps,
                warmup,
                max_bytes_per_step,
            } => {
                let allowed = if *max_bytes_per_step == 0 {
                    String::new()
                } else {
                    format!(" above {} a step", bytes(*max_bytes_per_step))
                };
                format!("no growth{allowed} across {steps} steps after {warmup} warm-up")
            }
            Budget::OpCalls {
                op,
                pass,
                cmp,
                calls,
            } => format!(
                "calls of {}{} {} {calls}",
                escape(op),
                in_pass(*pass),
                cmp.symbol()
            ),
            Budget::OpShare {
                op,
                pass,
                max_share,
            } => format!(
                "{} share of {} ≤ {} (95% interval's low end)",
                pass.map_or("region", Pass::as_str),
                escape(op),
                pct(*max_share)
            ),
        }
    }

    /// Whether the budget reads memory (needs the tracking allocator).
    pub fn needs_memory(&self) -> bool {
        !matches!(self, Budget::OpCalls { .. } | Budget::OpShare { .. })
    }
}

/// Budgets to check together (a builder for tests; a budget file reads into one).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Budgets {
    /// The budgets, in the order given.
    pub budgets: Vec<Budget>,
}

impl Budgets {
    /// No budgets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds any budget.
    pub fn with(mut self, budget: Budget) -> Self {
        self.budgets.push(budget);
        self
    }

    /// `peak ≤ max_bytes`.
    pub fn peak_at_most(self, max_bytes: u64) -> Self {
        self.with(Budget::Peak { max_bytes })
    }

    /// `category at the peak ≤ max_bytes`.
    pub fn category_at_most(self, category: MemoryCategory, max_bytes: u64) -> Self {
        self.with(Budget::Category {
            category,
            max_bytes,
        })
    }

    /// `optimizer temporaries ≤ max_bytes`.
    pub fn optimizer_temporaries_at_most(self, max_bytes: u64) -> Self {
        self.with(Budget::OptimizerTemporaries { max_bytes })
    }

    /// No growth across `steps` captured steps after `warmup` warm-up steps (a leak).
    pub fn no_growth(self, steps: u64, warmup: u64) -> Self {
        self.with(Budget::NoGrowth {
            steps,
            warmup,
            max_bytes_per_step: 0,
        })
    }

    /// `calls of op == calls` (every pass).
    pub fn op_calls(self, op: &str, calls: u64) -> Self {
        self.with(Budget::OpCalls {
            op: op.to_string(),
            pass: None,
            cmp: Cmp::Eq,
            calls,
        })
    }

    /// `pass share of op ≤ max_share`, at the 95% interval's low end.
    pub fn op_share_at_most(self, op: &str, pass: Pass, max_share: f64) -> Self {
        self.with(Budget::OpShare {
            op: op.to_string(),
            pass: Some(pass),
            max_share,
        })
    }
}
