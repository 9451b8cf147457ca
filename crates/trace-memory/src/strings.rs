//! Resolving interned handles to shared strings for the output types.
//!
//! Outputs hold `Arc<str>` (serialized as plain JSON strings): each distinct device, span id,
//! dtype or op name is allocated once per analysis and shared by every lifetime naming it,
//! instead of one `String` per field per lifetime.

use std::collections::HashMap;
use std::sync::Arc;

use trace_schema::{ShapeId, Sym, TraceDocument};

/// Caches `Arc<str>` per [`Sym`] and `Arc<[u64]>` per [`ShapeId`] of one document.
pub(crate) struct Resolver<'a> {
    doc: &'a TraceDocument,
    strings: Vec<Option<Arc<str>>>,
    shapes: HashMap<ShapeId, Arc<[u64]>>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(doc: &'a TraceDocument) -> Self {
        Self {
            doc,
            strings: vec![None; doc.strings.len()],
            shapes: HashMap::new(),
        }
    }

    /// The shared string of a handle.
    pub(crate) fn s(&mut self, sym: Sym) -> Arc<str> {
        let i = sym.index();
        if i >= self.strings.len() {
            self.strings.resize(i + 1, None);
        }
        self.strings[i]
            .get_or_insert_with(|| Arc::from(self.doc.str(sym)))
            .clone()
    }

    /// The shared string of an optional handle.
    pub(crate) fn o(&mut self, sym: Option<Sym>) -> Option<Arc<str>> {
        sym.map(|s| self.s(s))
    }

    /// The shared dimensions of a shape handle.
    pub(crate) fn shape(&mut self, id: ShapeId) -> Arc<[u64]> {
        let doc = self.doc;
        self.shapes
            .entry(id)
            .or_insert_with(|| Arc::from(doc.shape(id)))
            .clone()
    }
}
