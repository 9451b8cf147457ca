//! The one formatter of figures and trace text (trace-format), re-exported for programs that
//! print beside the views: bytes and durations as the views write them, and the escaping of
//! trace text for a terminal.

pub use trace_format::{bytes, duration, escape, is_unsafe, name, percent, NAME_COLUMNS, UNKNOWN};
