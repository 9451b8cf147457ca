//! The work that needs this binary: training (`demo`, `device-check`, which run Candle),
//! reading and writing files (`import`, `export`) and the budgets and gates (trace-budget, a
//! layer above the views). Every view — the records, their text and the pages — is
//! `trace_views`'s; `--json` prints the same records in the [`trace_views::envelope`].

pub mod budget;
pub mod demo;
pub mod device_check;
pub mod export;
#[cfg(feature = "parquet")]
pub mod export_parquet;
pub mod import;
