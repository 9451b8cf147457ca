//! [`StorageMap`]: values per live storage, keyed by the storage's identity in the memory
//! events and found by the event's borrowed strings, so a replay allocates a key only when a
//! storage is first inserted, never on a lookup or a free.
//!
//! Identity follows the logical replay (the `replay` module): the device, then the storage id,
//! or, for a trace without storage ids (before trace/7), the tensor id, told apart from a
//! storage id of the same text. An event with neither has no identity ([`StorageRef::of`] is
//! `None`).

use hashbrown::{Equivalent, HashMap};
use rustc_hash::FxBuildHasher;
use trace_schema::{MemoryItem, Sym};

/// A storage's identity, owned (the map's key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StorageKey {
    device: Sym,
    by_tensor: bool,
    id: Box<str>,
}

impl StorageKey {
    /// The borrowed form, for lookups.
    pub fn as_ref(&self) -> StorageRef<'_> {
        StorageRef {
            device: self.device,
            by_tensor: self.by_tensor,
            id: &self.id,
        }
    }
}

/// A storage's identity, borrowed from a memory event. Hashes as the [`StorageKey`] it names
/// (the same fields in the same order, `&str` hashing as `Box<str>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StorageRef<'a> {
    device: Sym,
    by_tensor: bool,
    id: &'a str,
}

impl<'a> StorageRef<'a> {
    /// The identity of the storage a memory event names: its device and storage id, else its
    /// tensor id; `None` when it has neither.
    pub fn of(m: &MemoryItem<'a>) -> Option<Self> {
        match (m.storage, m.tensor) {
            (Some(id), _) => Some(Self {
                device: m.device,
                by_tensor: false,
                id,
            }),
            (None, Some(id)) => Some(Self {
                device: m.device,
                by_tensor: true,
                id,
            }),
            (None, None) => None,
        }
    }

    /// The owned key (one allocation).
    pub fn to_key(self) -> StorageKey {
        StorageKey {
            device: self.device,
            by_tensor: self.by_tensor,
            id: Box::from(self.id),
        }
    }
}

impl Equivalent<StorageKey> for StorageRef<'_> {
    fn equivalent(&self, key: &StorageKey) -> bool {
        self.device == key.device && self.by_tensor == key.by_tensor && self.id == &*key.id
    }
}

/// Values of type `V` per storage identity (FxHash; lookups by [`StorageRef`] allocate
/// nothing).
#[derive(Debug, Clone)]
pub struct StorageMap<V> {
    map: HashMap<StorageKey, V, FxBuildHasher>,
}

impl<V> Default for StorageMap<V> {
    fn default() -> Self {
        Self {
            map: HashMap::with_hasher(FxBuildHasher),
        }
    }
}

impl<V> StorageMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of a storage.
    pub fn get(&self, k: StorageRef<'_>) -> Option<&V> {
        self.map.get(&k)
    }

    /// The value of a storage, mutable.
    pub fn get_mut(&mut self, k: StorageRef<'_>) -> Option<&mut V> {
        self.map.get_mut(&k)
    }

    /// Whether the storage has a value.
    pub fn contains(&self, k: StorageRef<'_>) -> bool {
        self.map.contains_key(&k)
    }

    /// Sets the storage's value, returning the one it replaces (the key is allocated only when
    /// the storage is new).
    pub fn insert(&mut self, k: StorageRef<'_>, v: V) -> Option<V> {
        match self.map.get_mut(&k) {
            Some(slot) => Some(std::mem::replace(slot, v)),
            None => {
                self.map.insert(k.to_key(), v);
                None
            }
        }
    }

    /// Removes the storage's value.
    pub fn remove(&mut self, k: StorageRef<'_>) -> Option<V> {
        self.map.remove(&k)
    }

    /// Takes every entry out, in the map's order (deterministic: FxHash has no random seed).
    pub fn drain(&mut self) -> impl Iterator<Item = (StorageKey, V)> + '_ {
        self.map.drain()
    }

    /// Every value, in the map's order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.map.values()
    }

    /// Storages with a value.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no storage has a value.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn sym(doc: &trace_schema::TraceDocument, s: &str) -> Sym {
        doc.sym(s).expect("interned")
    }

    #[test]
    fn a_borrowed_identity_finds_its_owned_key_and_hashes_alike() {
        let doc = trace_schema::load_str(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}
{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"x","bytes":4,"category":"activation"}
{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cuda:0","storage_id":"x","bytes":4,"category":"activation"}
"#,
        )
        .expect("loads");
        let (cpu, cuda) = (sym(&doc, "cpu"), sym(&doc, "cuda:0"));
        let r = |device, by_tensor, id| StorageRef {
            device,
            by_tensor,
            id,
        };
        let mut m = StorageMap::new();
        assert_eq!(m.insert(r(cpu, false, "x"), 1), None);
        assert_eq!(m.insert(r(cuda, false, "x"), 2), None, "another device");
        assert_eq!(
            m.insert(r(cpu, true, "x"), 3),
            None,
            "a tensor id is not a storage id"
        );
        assert_eq!(m.insert(r(cpu, false, "x"), 4), Some(1), "replaced");
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(r(cpu, false, "x")), Some(&4));
        assert!(!m.contains(r(cpu, false, "y")));
        assert_eq!(m.remove(r(cuda, false, "x")), Some(2));
        assert_eq!(m.get(r(cuda, false, "x")), None);
        let k = r(cpu, true, "x").to_key();
        assert_eq!(k.as_ref(), r(cpu, true, "x"));
        let h = FxBuildHasher;
        assert_eq!(h.hash_one(&k), h.hash_one(k.as_ref()));
        let mut seen = Vec::new();
        doc.for_each_memory(trace_schema::MemoryOrder::File, |e| {
            seen.push(StorageRef::of(e).map(StorageRef::to_key));
        });
        assert_eq!(
            seen,
            vec![
                Some(r(cpu, false, "x").to_key()),
                Some(r(cuda, false, "x").to_key())
            ]
        );
    }
}
