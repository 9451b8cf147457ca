//! # trace-schema
//!
//! The reading side of the candle-graph JSONL trace format (written at `candle-graph/trace/13`):
//! the wire types of the `trace-wire` crate, re-exported at their old paths ([`event`], [`meta`],
//! [`version`], [`writer`], …), the rules of every version read (trace/6 to trace/13), a
//! streaming [`TraceReader`], the parallel loader, a compact in-memory [`TraceDocument`] and the
//! spill buffer ([`spill_buffer`]) its large parts go to.
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
pub mod error;
mod fast;
mod gate;
pub mod intern;
pub mod load;
mod parse;
pub mod reader;
pub mod shared;
pub mod spill_buffer;
mod surrogate;
pub mod varint;

/// The wire format (event types, versions, writer) lives in `trace-wire`; these are its modules
/// at their old paths.
pub use trace_wire::{dtype, event, labels, meta, sampling, sites, version, writer};

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
