//! # trace-schema
//!
//! The event types of the candle-graph JSONL trace format (`candle-graph/trace/11`), versioned
//! serde for the versions that came before it (trace/6 to trace/10), a streaming
//! [`TraceReader`], a compact in-memory [`TraceDocument`] and a [`TraceWriter`].
//!
//! ```
//! use trace_schema::{load_str, MemoryCategory};
//! let text = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}
//! {"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"st1","bytes":64,"category":"activation"}
//! {"kind":"terminal","outcome":"complete","timestamp_ns":9}
//! "#;
//! let doc = load_str(text).unwrap();
//! assert_eq!(doc.memory.len(), 1);
//! assert_eq!(doc.memory[0].category, MemoryCategory::Activation);
//! assert!(!doc.is_truncated());
//! ```
//!
//! Load errors are exactly: malformed JSON, unknown `kind`, missing or mistyped required field,
//! missing or second `meta`, events after `terminal`, unsupported `schema` ([`LoadError`]); each
//! names its line and, where there is one, the field. Everything else is kept in the document as
//! a [`SemanticIssue`] for the health check. A final line cut short by a crash is dropped and the
//! document says it was truncated ([`Truncation`]).
//!
//! With the cargo feature `synth`, `trace_synth` generates large, realistic,
//! deterministic trace/11 streams for tests and benchmarks.

#![deny(missing_docs)]

mod chunk;
pub mod device;
pub mod document;
pub mod dtype;
pub mod error;
pub mod event;
mod fast;
pub mod intern;
pub mod load;
pub mod meta;
mod parse;
pub mod reader;
pub mod sampling;
pub mod shared;
pub mod sites;
mod surrogate;
#[doc(hidden)]
pub mod varint;
pub mod version;
pub mod writer;

/// Implements `as_str()` (the snake_case wire name, from the `strum::IntoStaticStr` derive)
/// for unit enums, so no caller round-trips an enum through serde_json to get its name.
#[macro_export]
#[doc(hidden)]
macro_rules! wire_names {
    ($($t:ty),+ $(,)?) => {$(
        impl $t {
            /// The snake_case wire name (the same string serde writes).
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    )+};
}

pub use device::Device;
pub use document::{
    DeviceMemoryRecord, EdgeRecord, MemoryItem, MemoryLog, MemoryOrder, MemoryRecord, OpRecord,
    SampleRecord, SampleTable, SemanticCode, SemanticIssue, SpanRecord, StackRecord, TensorRecord,
    TraceBuilder, TraceDocument, Truncation,
};
pub use dtype::{dense_bytes, dtype_bits, element_count};
pub use error::LoadError;
/// The former name of [`Pass`], kept while the probe moves to the new name.
#[doc(hidden)]
pub use event::Pass as ExecutionStep;
pub use event::*;
pub use intern::{Interner, ShapeId, ShapeTable, Sym};
pub use load::{load_path_with, load_reader_with, LoadOptions};
pub use meta::*;
pub use reader::{load_path, load_reader, load_str, LineEvent, TraceReader};
pub use shared::SharedStrings;
pub use version::{SchemaVersion, SUPPORTED_SCHEMAS, WRITE_VERSION};
pub use writer::TraceWriter;
