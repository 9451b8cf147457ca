//! [`SharedStrings`]: each interned string of a document converted once to an `Arc<str>`, for
//! analysis outputs that hold many copies of the same device, span id, dtype or name.

use std::sync::Arc;

use crate::document::TraceDocument;
use crate::intern::{ShapeId, Sym};

/// Caches an `Arc<str>` per [`Sym`] and an `Arc<[u64]>` per [`ShapeId`] of one document.
///
/// Strings many records name (devices, span ids, dtypes, op names) go through [`Self::get`]:
/// one allocation per distinct string, shared by every output naming it. Strings about one
/// record names (storage and tensor ids, unique per lifetime) go through [`Self::fresh`] and
/// never enter the cache, so a 10^7-event trace does not keep a map entry per id.
///
/// The caches are tables indexed by the handle ([`Sym::index`], [`ShapeId::index`]), not hash
/// maps: handles are dense and numbered in parse order, so a lookup is one indexed load that
/// mostly stays in cache. A hash map over 10^6 span-id handles missed the cache on every lookup
/// and took 62% of a 10^7-event export (docs/parquet.md, *At scale*).
#[derive(Debug)]
pub struct SharedStrings<'a> {
    doc: &'a TraceDocument,
    strings: Vec<Option<Arc<str>>>,
    shapes: Vec<Option<Arc<[u64]>>>,
}

/// The cached value at `index`, made by `make` on first use (the table grows to fit).
fn cached<T: ?Sized>(
    table: &mut Vec<Option<Arc<T>>>,
    index: usize,
    make: impl FnOnce() -> Arc<T>,
) -> Arc<T> {
    if index >= table.len() {
        table.resize(index + 1, None);
    }
    table[index].get_or_insert_with(make).clone()
}

impl<'a> SharedStrings<'a> {
    /// An empty cache over `doc`.
    pub fn new(doc: &'a TraceDocument) -> Self {
        Self {
            doc,
            strings: Vec::new(),
            shapes: Vec::new(),
        }
    }

    /// The document the handles belong to.
    pub fn doc(&self) -> &'a TraceDocument {
        self.doc
    }

    /// The shared string of a handle (cached).
    pub fn get(&mut self, sym: Sym) -> Arc<str> {
        let doc = self.doc;
        cached(&mut self.strings, sym.index(), || Arc::from(doc.str(sym)))
    }

    /// The shared string of an optional handle.
    pub fn opt(&mut self, sym: Option<Sym>) -> Option<Arc<str>> {
        sym.map(|s| self.get(s))
    }

    /// A new, uncached string for a handle about one record (storage and tensor ids).
    pub fn fresh(&self, sym: Sym) -> Arc<str> {
        Arc::from(self.doc.str(sym))
    }

    /// The shared dimensions of a shape handle (cached).
    pub fn shape(&mut self, id: ShapeId) -> Arc<[u64]> {
        let doc = self.doc;
        cached(&mut self.shapes, id.index(), || Arc::from(doc.shape(id)))
    }
}
