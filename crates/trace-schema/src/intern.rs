//! String and shape interning: a loaded trace keeps each distinct span id, device, dtype, name
//! and shape once, and records refer to them by 4-byte handles.
//!
//! Strings live end to end in one arena (`String`) with one end offset each; the lookup table
//! holds only the 4-byte handles (a `hashbrown::HashTable` hashed with foldhash), so a distinct
//! string costs its bytes plus about 16 bytes, instead of two boxed copies and a map entry.

use std::hash::BuildHasher;
use std::num::NonZeroU32;

use hashbrown::{DefaultHashBuilder, HashTable};

/// A handle to an interned string of one [`Interner`]. `Option<Sym>` is 4 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(NonZeroU32);

impl Sym {
    /// Index of the string in its interner (0-based).
    pub fn index(self) -> usize {
        self.0.get() as usize - 1
    }

    pub(crate) fn from_index(index: usize) -> Self {
        let raw = u32::try_from(index + 1).expect("more than 2^32 - 1 distinct strings");
        Sym(NonZeroU32::new(raw).expect("non-zero"))
    }
}

/// Deduplicating string storage.
#[derive(Clone, Default)]
pub struct Interner {
    /// All strings, end to end.
    arena: String,
    /// End offset in `arena` of each string, by index.
    ends: Ends,
    table: HashTable<Sym>,
    hasher: DefaultHashBuilder,
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interner")
            .field("len", &self.len())
            .field("arena_bytes", &self.arena.len())
            .finish()
    }
}

/// End offsets: 4 bytes each while the arena is under 4 GiB, 8 bytes after that.
#[derive(Clone)]
enum Ends {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl Default for Ends {
    fn default() -> Self {
        Ends::Narrow(Vec::new())
    }
}

impl Ends {
    fn get(&self, index: usize) -> usize {
        match self {
            Ends::Narrow(v) => v[index] as usize,
            Ends::Wide(v) => v[index] as usize,
        }
    }

    fn len(&self) -> usize {
        match self {
            Ends::Narrow(v) => v.len(),
            Ends::Wide(v) => v.len(),
        }
    }

    fn push(&mut self, end: usize) {
        match self {
            Ends::Narrow(v) => match u32::try_from(end) {
                Ok(end) => v.push(end),
                Err(_) => {
                    let mut wide: Vec<u64> = v.iter().map(|&e| e as u64).collect();
                    wide.push(end as u64);
                    *self = Ends::Wide(wide);
                }
            },
            Ends::Wide(v) => v.push(end as u64),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Ends::Narrow(v) => v.capacity() * 4,
            Ends::Wide(v) => v.capacity() * 8,
        }
    }

    fn shrink_to_fit(&mut self) {
        match self {
            Ends::Narrow(v) => v.shrink_to_fit(),
            Ends::Wide(v) => v.shrink_to_fit(),
        }
    }
}

fn span_of(ends: &Ends, index: usize) -> (usize, usize) {
    let start = if index == 0 { 0 } else { ends.get(index - 1) };
    (start, ends.get(index))
}

/// Strings longer than this many bytes (a 100 MB span name) are kept bounded: see [`bounded`].
pub const MAX_STRING_BYTES: usize = 1024;

/// Bytes of the start of a long string that [`bounded`] keeps.
const HEAD_BYTES: usize = 256;

/// Bytes of the end of a long string that [`bounded`] keeps (paths and names say most at
/// their end).
const TAIL_BYTES: usize = 512;

/// `s` itself when it has at most [`MAX_STRING_BYTES`] bytes; else its first 256 and last 512
/// bytes (cut at character boundaries) around `…`, then its full length and a 64-bit FNV-1a
/// hash of its bytes: `NNNN…NNNN [104857600 bytes, fnv 9f3c…]`. The loader interns every
/// string through this, so a document, and every command's output (terminal, JSON, HTML),
/// holds a bounded copy of each trace string, whatever the trace holds, with the full length
/// stated; the hash keeps two long ids that differ only in the middle apart.
pub fn bounded(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= MAX_STRING_BYTES {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut head = HEAD_BYTES;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - TAIL_BYTES;
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in s.as_bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    std::borrow::Cow::Owned(format!(
        "{}…{} [{} bytes, fnv {hash:016x}]",
        &s[..head],
        &s[tail..],
        s.len()
    ))
}

impl Interner {
    /// Interns `s` ([`bounded`] when longer than [`MAX_STRING_BYTES`]), returning its handle.
    ///
    /// # Panics
    /// With more than 2^32 − 1 distinct strings.
    pub fn intern(&mut self, s: &str) -> Sym {
        if s.len() > MAX_STRING_BYTES {
            return self.intern_exact(&bounded(s));
        }
        self.intern_exact(s)
    }

    fn intern_exact(&mut self, s: &str) -> Sym {
        let hash = self.hasher.hash_one(s);
        let (arena, ends) = (&self.arena, &self.ends);
        let eq = |sym: &Sym| {
            let (start, end) = span_of(ends, sym.index());
            &arena[start..end] == s
        };
        if let Some(&sym) = self.table.find(hash, eq) {
            return sym;
        }
        let sym = Sym::from_index(self.ends.len());
        self.arena.push_str(s);
        self.ends.push(self.arena.len());
        let (arena, ends, hasher) = (&self.arena, &self.ends, &self.hasher);
        self.table.insert_unique(hash, sym, |sym| {
            let (start, end) = span_of(ends, sym.index());
            hasher.hash_one(&arena[start..end])
        });
        sym
    }

    /// The handle of `s` if it was interned (as [`bounded`]).
    pub fn get(&self, s: &str) -> Option<Sym> {
        let s = bounded(s);
        let s = s.as_ref();
        let hash = self.hasher.hash_one(s);
        self.table
            .find(hash, |sym| self.resolve(*sym) == s)
            .copied()
    }

    /// The string of a handle.
    ///
    /// # Panics
    /// When `sym` comes from another interner and is out of range.
    pub fn resolve(&self, sym: Sym) -> &str {
        let (start, end) = span_of(&self.ends, sym.index());
        &self.arena[start..end]
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when nothing was interned.
    pub fn is_empty(&self) -> bool {
        self.ends.len() == 0
    }

    /// Approximate heap bytes held (arena, offsets and table).
    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity()
            + self.ends.heap_bytes()
            + self.table.capacity() * (std::mem::size_of::<Sym>() + 1)
    }

    /// Releases spare capacity (called when a document is finished).
    pub fn shrink_to_fit(&mut self) {
        self.arena.shrink_to_fit();
        self.ends.shrink_to_fit();
        let (arena, ends, hasher) = (&self.arena, &self.ends, &self.hasher);
        self.table.shrink_to_fit(|sym| {
            let (start, end) = span_of(ends, sym.index());
            hasher.hash_one(&arena[start..end])
        });
    }
}

/// A handle to an interned shape. `Option<ShapeId>` is 4 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(NonZeroU32);

impl ShapeId {
    /// Index of the shape in its table (0-based).
    pub fn index(self) -> usize {
        self.0.get() as usize - 1
    }

    pub(crate) fn from_index(index: usize) -> Self {
        let raw = u32::try_from(index + 1).expect("more than 2^32 - 1 shapes");
        ShapeId(NonZeroU32::new(raw).expect("non-zero"))
    }
}

/// Deduplicating shape storage.
#[derive(Debug, Default, Clone)]
pub struct ShapeTable {
    map: std::collections::HashMap<Box<[u64]>, ShapeId>,
    shapes: Vec<Box<[u64]>>,
}

impl ShapeTable {
    /// Interns `shape`.
    ///
    /// # Panics
    /// With more than 2^32 − 1 distinct shapes.
    pub fn intern(&mut self, shape: &[u64]) -> ShapeId {
        if let Some(&id) = self.map.get(shape) {
            return id;
        }
        let raw = u32::try_from(self.shapes.len() + 1).expect("more than 2^32 - 1 shapes");
        let id = ShapeId(NonZeroU32::new(raw).expect("non-zero"));
        self.shapes.push(shape.into());
        self.map.insert(shape.into(), id);
        id
    }

    /// The dimensions of a handle.
    pub fn resolve(&self, id: ShapeId) -> &[u64] {
        &self.shapes[id.0.get() as usize - 1]
    }

    /// Number of distinct shapes.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// True when no shape was interned.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_deduplicates_and_resolves() {
        let mut i = Interner::default();
        let a = i.intern("s1");
        let b = i.intern("cpu");
        let empty = i.intern("");
        assert_eq!(i.intern("s1"), a);
        assert_ne!(a, b);
        assert_eq!(i.resolve(a), "s1");
        assert_eq!(i.resolve(b), "cpu");
        assert_eq!(i.resolve(empty), "");
        assert_eq!(i.get("cpu"), Some(b));
        assert_eq!(i.get("gpu"), None);
        assert_eq!(i.len(), 3);
        assert_eq!(std::mem::size_of::<Option<Sym>>(), 4);
        assert_eq!(std::mem::size_of::<Option<ShapeId>>(), 4);
    }

    #[test]
    fn many_strings_survive_growth_and_shrinking() {
        let mut i = Interner::default();
        let syms: Vec<Sym> = (0..10_000).map(|n| i.intern(&format!("t{n}"))).collect();
        i.shrink_to_fit();
        for (n, sym) in syms.iter().enumerate() {
            assert_eq!(i.resolve(*sym), format!("t{n}"));
            assert_eq!(i.get(&format!("t{n}")), Some(*sym));
        }
        assert_eq!(i.intern("t42"), syms[42]);
    }

    #[test]
    fn offsets_widen_past_4_gib() {
        let mut ends = Ends::default();
        ends.push(10);
        ends.push(u32::MAX as usize + 5);
        assert!(matches!(ends, Ends::Wide(_)));
        assert_eq!(span_of(&ends, 0), (0, 10));
        assert_eq!(span_of(&ends, 1), (10, u32::MAX as usize + 5));
    }

    #[test]
    fn shapes_deduplicate() {
        let mut t = ShapeTable::default();
        let a = t.intern(&[2, 3]);
        let scalar = t.intern(&[]);
        assert_eq!(t.intern(&[2, 3]), a);
        assert_eq!(t.resolve(a), &[2, 3]);
        assert_eq!(t.resolve(scalar), &[] as &[u64]);
        assert_eq!(t.len(), 2);
    }
}
