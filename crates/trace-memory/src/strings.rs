//! Resolving interned handles to shared strings for the output types.
//!
//! Outputs hold `Arc<str>` (serialized as plain JSON strings): each distinct device, span id,
//! dtype or op name is allocated once per analysis and shared by every lifetime naming it,
//! instead of one `String` per field per lifetime. Storage and tensor ids, which are unique per
//! lifetime, are allocated directly ([`Resolver::fresh`]) and never enter the cache.

use std::collections::HashMap;
use std::sync::Arc;

use trace_schema::{ShapeId, Sym, TraceDocument};

use crate::fasthash::FxHashMap;

/// Caches `Arc<str>` per [`Sym`] and `Arc<[u64]>` per [`ShapeId`] of one document.
pub(crate) struct Resolver<'a> {
    doc: &'a TraceDocument,
    strings: FxHashMap<Sym, Arc<str>>,
    shapes: HashMap<ShapeId, Arc<[u64]>>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(doc: &'a TraceDocument) -> Self {
        Self {
            doc,
            strings: FxHashMap::default(),
            shapes: HashMap::new(),
        }
    }

    /// The shared string of a handle (cached: for strings many records name).
    pub(crate) fn s(&mut self, sym: Sym) -> Arc<str> {
        let doc = self.doc;
        self.strings
            .entry(sym)
            .or_insert_with(|| Arc::from(doc.str(sym)))
            .clone()
    }

    /// A new string for a handle named by about one record (storage and tensor ids).
    pub(crate) fn fresh(&self, sym: Sym) -> Arc<str> {
        Arc::from(self.doc.str(sym))
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
