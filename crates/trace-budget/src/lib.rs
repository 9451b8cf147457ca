//! # trace-budget
//!
//! Budgets on candle-graph traces, for `cargo test` and for CI: a step's peak, a category or a
//! pass at the peak, the optimizer's temporaries, growth across steps (leaks), an op's exact
//! calls and its share of a pass (checked on the 95% interval). The same budgets are read from
//! a versioned TOML file for `candle-graph check TRACE --budget budget.toml`, and
//! `candle-graph diff --fail-on 'peak>+5%'` gates a comparison with the diff's noise rules.
//!
//! ```no_run
//! use trace_budget::{Budgets, Figures};
//! let doc = trace_schema::load_path("out/demo/trace.jsonl")?;
//! let figures = Figures::of(&doc);
//! Budgets::new()
//!     .peak_at_most(6 << 20)
//!     .op_calls("matmul.backward", 19)
//!     .check(&figures)?; // Err: the report, each failure with its message
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! No Candle dependency: the budgets read a [`trace_schema::TraceDocument`] (the probe's
//! `trace_probe::testing` captures one in memory inside a test) through the analyses the CLI
//! prints. A figure the trace did not observe makes its budget [`Outcome::Unknown`] with the
//! reason (memory budgets without the tracking allocator say so), never a pass.

#![deny(missing_docs)]

pub mod budget;
mod check;
pub mod figures;
pub mod file;
pub mod gate;
mod gate_check;
mod memory;
mod ops;
pub mod outcome;
pub mod report;
pub mod units;

pub use budget::{Budget, Budgets, Cmp};
pub use figures::{Figures, OpTable};
pub use file::{BudgetFile, FileError, BUDGET_FILE_VERSION};
pub use gate::{Gate, GateError, Metric};
pub use gate_check::check_all;
pub use outcome::{Checked, Outcome, Subject};
pub use report::Report;
