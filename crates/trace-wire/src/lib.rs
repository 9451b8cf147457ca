//! # trace-wire
//!
//! The wire format of candle-graph traces (`candle-graph/trace/13`): the event types a producer
//! writes ([`TraceEvent`] and its bodies), the run metadata of the `meta` event, the schema
//! versions and what each allows ([`SchemaVersion`]), and the [`TraceWriter`]. Nothing here
//! reads a whole trace: the loader, the compact document and the external sort live in
//! `trace-schema`, which re-exports this crate at its old paths.
//!
//! A producer (the probe) depends on this crate alone:
//!
//! ```
//! use trace_wire::{MetaEvent, RunMeta, TerminalEvent, TerminalOutcome, TraceEvent, TraceWriter, WRITE_VERSION};
//! let mut out = TraceWriter::new(Vec::new());
//! out.write_event(&TraceEvent::Meta(MetaEvent {
//!     schema: WRITE_VERSION.as_str().to_string(),
//!     run: RunMeta { run_id: "r".into(), entrypoint: "e".into(), timestamp: "t".into(), ..Default::default() },
//! })).unwrap();
//! out.write_event(&TraceEvent::Terminal(TerminalEvent {
//!     outcome: TerminalOutcome::Complete,
//!     timestamp_ns: 9,
//!     reason: None,
//!     dropped_events: None,
//!     coverage_lost: Default::default(),
//! })).unwrap();
//! let text = String::from_utf8(out.into_inner()).unwrap();
//! assert!(text.starts_with(r#"{"kind":"meta","schema":"candle-graph/trace/13""#));
//! assert_eq!(text.lines().count(), 2);
//! ```
//!
//! Every `kind` is declared once, in the `trace_events!` table of [`event`]: the enum, its serde
//! tags, [`TraceEvent::kind_name`], [`EVENT_KINDS`] and the version each kind appeared in
//! ([`EVENT_KIND_SINCE`], read by [`SchemaVersion::allows_kind`]) come from that one table.
//! The README's "Adding an event kind" is the checklist.

#![deny(missing_docs)]

#[macro_use]
mod macros;

pub mod dtype;
pub mod event;
pub mod labels;
pub mod meta;
pub mod sampling;
mod sha256;
pub mod sites;
pub mod version;
pub mod writer;

pub use dtype::{dense_bytes, dtype_bits, element_count};
/// The former name of [`Pass`], kept while the probe moves to the new name.
#[doc(hidden)]
pub use event::Pass as ExecutionStep;
pub use event::*;
pub use meta::*;
pub use version::{SchemaVersion, SUPPORTED_SCHEMAS, WRITE_VERSION};
pub use writer::TraceWriter;

/// A string that names no variant of a wire enum (the `FromStr` of every unit enum here).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {type_name} `{name}`")]
pub struct UnknownName {
    /// The enum's Rust name (e.g. `ContractField`).
    pub type_name: &'static str,
    /// The string that was given.
    pub name: String,
}
