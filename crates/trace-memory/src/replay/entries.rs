//! The live set: one entry per live storage (its ids, description, bytes and marks), found by
//! device and storage (or tensor) id in a hash table over chunked storage.

use super::*;
use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashSet};
use std::hash::BuildHasher;
use std::sync::Arc;

/// What is rarely there: tensor ids seen on a storage besides its alloc's, and the tensors of
/// its aliases (a repeat is a duplicate allocation).
#[derive(Debug, Default)]
pub(super) struct Extra {
    pub(super) tensors: Vec<Box<str>>,
    /// Tensor ids of the aliases' allocs: a set, so a storage aliased by 10^6 views does not
    /// scan a list at every alias (quadratic in the aliases of one storage).
    pub(super) allocs_by: FxHashSet<Box<str>>,
    /// An alias alloc without a tensor id was seen.
    pub(super) alloc_by_untensored: bool,
}

/// A live storage, compact: its ids in one allocation.
#[derive(Debug)]
pub(super) struct Entry {
    /// The storage id followed by the alloc's tensor id.
    pub(super) ids: Box<str>,
    /// Length of the storage id part.
    pub(super) split: u32,
    /// Bit 0: has a storage id; bit 1: has a tensor id; bit 2: identified by its tensor id.
    pub(super) flags: u8,
    /// Bit k: counted among the activations live when finding span k began.
    pub(super) marks: u8,
    pub(super) life: u32,
    pub(super) start_seq: u32,
    pub(super) event: u32,
    /// Device × category cell.
    pub(super) cell: u32,
    pub(super) start_ns: u64,
    pub(super) bytes: u64,
    pub(super) desc: Desc,
    pub(super) extra: Option<Box<Extra>>,
}

impl Entry {
    pub(super) fn storage(&self) -> Option<&str> {
        (self.flags & HAS_STORAGE != 0).then(|| &self.ids[..self.split as usize])
    }

    pub(super) fn tensor(&self) -> Option<&str> {
        (self.flags & HAS_TENSOR != 0).then(|| &self.ids[self.split as usize..])
    }

    pub(super) fn device(&self) -> u32 {
        self.cell / CATEGORIES as u32
    }

    pub(super) fn by_tensor(&self) -> bool {
        self.flags & BY_TENSOR != 0
    }

    /// The identity: storage id, or (trace/6) tensor id.
    pub(super) fn id(&self) -> &str {
        if self.by_tensor() {
            self.tensor().unwrap_or("")
        } else {
            self.storage().unwrap_or("")
        }
    }

    pub(super) fn key<'a>(&'a self, names: &'a [Arc<str>]) -> RankKey<'a> {
        RankKey {
            bytes: self.bytes,
            start_ns: self.start_ns,
            device: &names[self.device() as usize],
            storage: self.storage(),
            event: self.event,
        }
    }

    pub(super) fn done(&self, end_ns: u64) -> Done {
        let extra = self.extra.as_ref().map_or(&[][..], |x| &x.tensors[..]);
        let mut tensors: Vec<Arc<str>> = Vec::with_capacity(1 + extra.len());
        tensors.extend(self.tensor().map(Arc::from));
        tensors.extend(extra.iter().map(|t| Arc::from(&**t)));
        if tensors.len() > 1 {
            tensors.sort_unstable();
            tensors.dedup();
        }
        Done {
            life: self.life,
            start_seq: self.start_seq,
            start_ns: self.start_ns,
            end_ns,
            bytes: self.bytes,
            device: self.device(),
            event: self.event,
            storage: self.storage().map(Arc::from),
            tensors: tensors.into(),
            desc: self.desc,
        }
    }
}

pub(super) const HAS_STORAGE: u8 = 1;

pub(super) const HAS_TENSOR: u8 = 2;

pub(super) const BY_TENSOR: u8 = 4;

pub(super) fn hash_key(device: u32, by_tensor: bool, id: &str) -> u64 {
    FxBuildHasher.hash_one((device, by_tensor, id))
}

/// Entries per slab chunk.
pub(super) const CHUNK: usize = 4096;

/// The live storages: entries in fixed-size chunks (no large reallocation while the live set
/// grows), found through a table of 4-byte slots.
#[derive(Default)]
pub(super) struct LiveSet {
    pub(super) chunks: Vec<Vec<Option<Entry>>>,
    pub(super) free: Vec<u32>,
    pub(super) table: HashTable<u32>,
}

impl LiveSet {
    pub(super) fn get(&self, i: u32) -> &Entry {
        self.chunks[i as usize / CHUNK][i as usize % CHUNK]
            .as_ref()
            .expect("a slot in the table holds an entry")
    }

    pub(super) fn get_mut(&mut self, i: u32) -> &mut Entry {
        self.chunks[i as usize / CHUNK][i as usize % CHUNK]
            .as_mut()
            .expect("a slot in the table holds an entry")
    }

    pub(super) fn find(&self, hash: u64, eq: impl Fn(&Entry) -> bool) -> Option<u32> {
        self.table.find(hash, |&i| eq(self.get(i))).copied()
    }

    pub(super) fn insert(&mut self, hash: u64, e: Entry) {
        let i = match self.free.pop() {
            Some(i) => {
                self.chunks[i as usize / CHUNK][i as usize % CHUNK] = Some(e);
                i
            }
            None => {
                if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                    self.chunks.push(Vec::with_capacity(CHUNK));
                }
                let n = (self.chunks.len() - 1) * CHUNK + self.chunks.last().map_or(0, Vec::len);
                self.chunks.last_mut().expect("pushed").push(Some(e));
                n as u32
            }
        };
        let chunks = &self.chunks;
        self.table.insert_unique(hash, i, |&j| {
            let e = chunks[j as usize / CHUNK][j as usize % CHUNK]
                .as_ref()
                .expect("live");
            hash_key(e.device(), e.by_tensor(), e.id())
        });
    }

    pub(super) fn remove(&mut self, hash: u64, eq: impl Fn(&Entry) -> bool) -> Option<Entry> {
        let chunks = &self.chunks;
        let i = self
            .table
            .find_entry(hash, |&i| {
                eq(chunks[i as usize / CHUNK][i as usize % CHUNK]
                    .as_ref()
                    .expect("live"))
            })
            .ok()?
            .remove()
            .0;
        self.free.push(i);
        self.chunks[i as usize / CHUNK][i as usize % CHUNK].take()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.chunks.iter_mut().flatten().flatten()
    }

    pub(super) fn drain(&mut self) -> impl Iterator<Item = Entry> + '_ {
        self.table.clear();
        self.free.clear();
        self.chunks.drain(..).flatten().flatten()
    }
}

impl std::fmt::Debug for LiveSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSet")
            .field("live", &self.table.len())
            .finish()
    }
}

/// `entries` in lifetime order (allocation order): see [`sort_moving_once`].
pub(super) fn by_life(entries: impl Iterator<Item = Entry>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = entries.collect();
    sort_moving_once(&mut entries, |e| e.life);
    entries
}

/// Sorts `items` by `key` (equal keys keep their order) moving each item along its cycle of
/// the permutation once, with 8 bytes per item besides: for large items (an [`Entry`] is ~100
/// bytes and a trace can end with millions live) where a sort would move each one log n times.
pub(super) fn sort_moving_once<T>(items: &mut [T], key: impl Fn(&T) -> u32) {
    // (key, position), sorted: position `p` takes the item now at `keys[p] & MASK`
    let mut keys: Vec<u64> = items
        .iter()
        .enumerate()
        .map(|(i, x)| (key(x) as u64) << 32 | i as u64)
        .collect();
    keys.sort_unstable();
    const MASK: u64 = u32::MAX as u64;
    const DONE: u64 = u64::MAX;
    for start in 0..keys.len() {
        let mut pos = start;
        while keys[pos] != DONE {
            let from = (keys[pos] & MASK) as usize;
            keys[pos] = DONE;
            if from == start {
                break;
            }
            items.swap(pos, from);
            pos = from;
        }
    }
}
