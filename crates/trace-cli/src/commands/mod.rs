//! The subcommands that need this binary: training (`demo`, `device-check`, which run Candle),
//! reading and writing files (`import`, `export`). Every view — the records, their
//! text and the pages — is `trace_views`'s, re-exported here under the commands' names; `--json`
//! prints the same records in the [`trace_views::envelope`].

pub mod budget;
pub mod demo;
pub mod device_check;
pub mod device_storages;
pub mod export;
#[cfg(feature = "parquet")]
pub mod export_parquet;
pub mod import;
pub use trace_views::{
    bundle, check, diff, memory, ops, ops_measured, query, ranks, ranks_html, summary,
};
