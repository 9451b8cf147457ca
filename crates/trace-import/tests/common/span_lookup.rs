//! Spans of an imported document by name (included by the test binaries that use it, beside `common`).

use trace_schema::{SpanRecord, TraceDocument};

/// The span named `name` (the first one).
pub fn span<'a>(doc: &'a TraceDocument, name: &str) -> &'a SpanRecord {
    doc.spans
        .iter()
        .find(|s| doc.str(s.name) == name)
        .unwrap_or_else(|| panic!("no span {name}"))
}

/// Name of a span's parent.
pub fn parent_name<'a>(doc: &'a TraceDocument, name: &str) -> &'a str {
    let s = span(doc, name);
    doc.str(doc.span(s.parent.expect("has a parent")).unwrap().name)
}
