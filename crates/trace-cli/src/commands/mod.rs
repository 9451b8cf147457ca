//! One module per subcommand: each builds a serializable report from the analysis and renders
//! it as text; `--json` prints the same report in the [`crate::envelope`].

pub mod backward;
pub mod bundle;
pub mod check;
pub mod demo;
pub mod device_check;
pub mod diff;
pub mod diff_html;
pub mod diff_ops;
pub mod export;
#[cfg(feature = "parquet")]
pub mod export_parquet;
pub mod import;
pub mod memory;
pub mod ops;
pub mod ops_measured;
pub mod peak;
pub mod query;
pub mod ranks;
pub mod ranks_html;
pub mod report;
pub mod summary;
