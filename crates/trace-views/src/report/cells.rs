//! What every section of the report shares: the row limits of its tables and its numeric
//! cells.

use trace_format::bytes;
use trace_report::page::Cell;

/// Rows of each live-at-peak table (the rest is counted in its footer).
pub const HELD_ROWS: usize = 200;

/// Groups of each grouped table.
pub const GROUP_ROWS: usize = 30;

/// Rows of the span-cost table.
pub const SPAN_ROWS: usize = 300;

/// Rows of the measured op table.
pub const MEASURED_OP_ROWS: usize = 300;

/// Rows of the op table (the rest is counted in its footer).
pub const OP_ROWS: usize = 300;

pub(super) fn num_bytes(b: u64) -> Cell {
    Cell::number(bytes(b), Some(b as f64))
}

pub(super) fn count(n: u64) -> Cell {
    Cell::number(n.to_string(), Some(n as f64))
}
