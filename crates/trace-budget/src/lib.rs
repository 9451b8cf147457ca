//! # trace-budget
//!
//! Budgets on candle-graph traces (see the module docs as they are added).

#![deny(missing_docs)]
