//! String and shape interning: a loaded trace keeps each distinct span id, device, dtype, name
//! and shape once, and records refer to them by 4-byte handles.

use std::collections::HashMap;
use std::num::NonZeroU32;

/// A handle to an interned string of one [`Interner`]. `Option<Sym>` is 4 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(NonZeroU32);

impl Sym {
    /// Index of the string in its interner (0-based).
    pub fn index(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// Deduplicating string storage.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    map: HashMap<Box<str>, Sym>,
    strings: Vec<Box<str>>,
}

impl Interner {
    /// Interns `s`, returning its handle.
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.map.get(s) {
            return sym;
        }
        let raw = u32::try_from(self.strings.len() + 1).expect("more than 2^32 distinct strings");
        let sym = Sym(NonZeroU32::new(raw).expect("non-zero"));
        self.strings.push(s.into());
        self.map.insert(s.into(), sym);
        sym
    }

    /// The handle of `s` if it was interned.
    pub fn get(&self, s: &str) -> Option<Sym> {
        self.map.get(s).copied()
    }

    /// The string of a handle.
    ///
    /// # Panics
    /// When `sym` comes from another interner and is out of range.
    pub fn resolve(&self, sym: Sym) -> &str {
        &self.strings[sym.index()]
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// True when nothing was interned.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.strings.iter().map(|s| 2 * s.len() + 40).sum::<usize>()
    }
}

/// A handle to an interned shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(u32);

/// Deduplicating shape storage.
#[derive(Debug, Default, Clone)]
pub struct ShapeTable {
    map: HashMap<Box<[u64]>, ShapeId>,
    shapes: Vec<Box<[u64]>>,
}

impl ShapeTable {
    /// Interns `shape`.
    pub fn intern(&mut self, shape: &[u64]) -> ShapeId {
        if let Some(&id) = self.map.get(shape) {
            return id;
        }
        let id = ShapeId(u32::try_from(self.shapes.len()).expect("more than 2^32 shapes"));
        self.shapes.push(shape.into());
        self.map.insert(shape.into(), id);
        id
    }

    /// The dimensions of a handle.
    pub fn resolve(&self, id: ShapeId) -> &[u64] {
        &self.shapes[id.0 as usize]
    }
}
