//! `candle-graph diff BASELINE CANDIDATE` (or `--baseline A B C --candidate D E F`): what changed
//! between runs, from trace-diff's comparison. Identity first (and why timing is not compared,
//! when it is not), then memory, passes, spans and gradients. Trace text is escaped; figures go
//! through trace-format.
//!
//! The record is here; `figures` formats one figure or one side as both the text and the
//! page show it, [`mod@headline`] says what changed first, [`text`] writes the terminal text (the
//! page is [`mod@crate::diff_html`]).

pub(crate) mod figures;
pub mod headline;
pub mod text;

use serde::Serialize;

use crate::envelope::InputRecord;

pub use headline::{findings_lines, headline};
pub use text::render;
/// The comparison these views render (trace-diff), and the op role map it aligns ops with
/// (trace-ops), re-exported for programs that depend on trace-views alone.
pub use trace_diff::{compare, Delta, DiffOptions, Run, RunIdentity, Stat, TraceDiff};
pub use trace_ops::RoleMap;

/// Rows of a storage-group table.
pub const STORAGE_ROWS: usize = 8;

/// The `diff` report (`candle-graph/diff/1`): the inputs of each side and the comparison.
#[derive(Debug, Serialize)]
pub struct DiffReport<'a> {
    /// Baseline traces read.
    pub baseline_inputs: Vec<InputRecord>,
    /// Candidate traces read.
    pub candidate_inputs: Vec<InputRecord>,
    /// The comparison (flattened).
    #[serde(flatten)]
    pub diff: &'a TraceDiff,
}
