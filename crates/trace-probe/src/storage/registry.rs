//! The storage registry: what the probe knows about storages from public Candle API only.
//!
//! Sources: parameter names from a `VarMap`, graph nodes from `loss.sorted_nodes()`, gradients
//! from a `GradStore`, and user labels. It never holds a `Tensor` (that would extend the
//! tensor's life): an entry keeps the storage key, bytes taken from the storage itself (CPU:
//! `Vec` length × element size, never a view's shape), the view facts of the first tensor seen,
//! and every `TensorId` that views the storage.
//!
//! Identity is `(key, generation)`: addresses are reused immediately (100/100 in the prototype),
//! so a known key is treated as an alias only when the storage is still live: when the watch
//! table still holds the entry's tag (set on registration, cleared by the allocator hook on the
//! block's free). Without the tracking allocator the registry falls back to comparing the data
//! pointer and byte size.

use rustc_hash::FxHashMap as HashMap;

use candle_core::{Tensor, TensorId};
use trace_wire::{CategorySource, MemoryCategory};

use super::bytes::{storage_facts, StorageFacts};
use crate::device::DeviceLabel;
use trace_alloc::watch;

/// One registered storage lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StorageEntry {
    /// Registry id, also the watch-table tag (non-zero).
    pub tag: u32,
    /// Storage key (see [`super::bytes::storage_key`]).
    pub key: usize,
    /// Lifetimes seen at this key before this one (0 for the first).
    pub generation: u32,
    /// Wire identity: `<key hex>.<generation>`.
    pub storage_id: String,
    /// Device.
    pub device: DeviceLabel,
    /// Bytes of the storage (CPU: heap bytes, `capacity × element size`, the size the
    /// allocator saw); `None` when the backend's size is not readable in this build.
    pub bytes: Option<u64>,
    /// Logical bytes (`len × element size`), beside the heap bytes (CPU only).
    pub logical_bytes: Option<u64>,
    /// CPU data pointer (for joining to the allocator log).
    pub data_ptr: Option<usize>,
    /// CUDA device pointer (for the device-allocation ledger: a named storage is written by
    /// the registry, never by the ledger too).
    pub device_ptr: Option<u64>,
    /// Shape of the first tensor registered on this storage.
    pub shape: Vec<u64>,
    /// Dtype label (`f32`, …).
    pub dtype: String,
    /// Every tensor seen viewing this storage, first one first.
    pub tensor_ids: Vec<TensorId>,
    /// Label (parameter name, user label).
    pub label: Option<String>,
    /// Category.
    pub category: MemoryCategory,
    /// Where the category came from.
    pub category_source: CategorySource,
    /// The watch table holds this entry: its free will be observed while armed.
    pub watched: bool,
    /// Kept across sessions (optimizer state found at construction).
    pub persistent: bool,
}

/// Result of [`Registry::register`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// A storage not known before (or a new lifetime at a reused address): its tag.
    New(u32),
    /// Another view of a live known storage: its tag.
    Alias(u32),
}

impl Registration {
    /// The entry's tag.
    pub fn tag(self) -> u32 {
        match self {
            Registration::New(t) | Registration::Alias(t) => t,
        }
    }
}

/// What to record about a tensor being registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterAs {
    /// Label (parameter name, user label).
    pub label: Option<String>,
    /// Category.
    pub category: MemoryCategory,
    /// Where the category came from.
    pub category_source: CategorySource,
    /// Shape and dtype of a storage registered without a tensor (found by address) whose view
    /// is known otherwise (an optimizer's moment: its parameter's); a tensor's own win.
    pub view: Option<(Vec<u64>, String)>,
}

impl RegisterAs {
    /// A registry-sourced category without a label.
    pub fn category(category: MemoryCategory) -> Self {
        Self {
            label: None,
            category,
            category_source: CategorySource::Registry,
            view: None,
        }
    }

    /// Adds the shape and dtype of a storage registered without a tensor.
    pub fn view(mut self, shape: Vec<u64>, dtype: String) -> Self {
        self.view = Some((shape, dtype));
        self
    }

    /// Adds a label.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
}

/// The registry. Not thread-safe by itself; the capture keeps it behind its mutex.
#[derive(Debug, Default)]
pub struct Registry {
    entries: HashMap<u32, StorageEntry>,
    by_key: HashMap<usize, u32>,
    generations: HashMap<usize, u32>,
    next_tag: u32,
    /// The calibrated key offset, once liveness comes from the watch table.
    watch: Option<usize>,
}

impl Registry {
    /// An empty registry that does not use the watch table.
    #[cfg(test)]
    pub fn new() -> Self {
        Self::default()
    }

    /// Enables liveness checks through the watch table (needs a calibrated allocator).
    pub(crate) fn enable_watch(&mut self, key_offset: usize) {
        self.watch = Some(key_offset);
    }

    /// Whether liveness comes from the watch table.
    pub fn watching(&self) -> bool {
        self.watch.is_some()
    }

    /// The next generation number at `key` (shared with unregistered storages at that key).
    pub(crate) fn next_generation(&mut self, key: usize) -> u32 {
        let g = self.generations.entry(key).or_insert(0);
        let this = *g;
        *g += 1;
        this
    }

    fn is_live(&self, entry: &StorageEntry, facts: &StorageFacts) -> bool {
        match self.watch {
            Some(off) if entry.watched => watch::get(entry.key - off) == entry.tag,
            _ => entry.data_ptr == facts.data_ptr && entry.bytes == facts.bytes,
        }
    }

    /// Registers `t`: an alias when its storage is a live known one, else a new lifetime.
    pub fn register(&mut self, t: &Tensor, what: RegisterAs) -> Registration {
        let facts = storage_facts(t);
        #[cfg(feature = "cuda-ledger")]
        if let Some(p) = facts.device_ptr {
            crate::cuda_ledger::claim(p);
        }
        if let Some(&tag) = self.by_key.get(&facts.key) {
            if let Some(entry) = self.entries.get(&tag) {
                if self.is_live(entry, &facts) {
                    let entry = self.entries.get_mut(&tag).expect("entry present");
                    // Found by address (no tensor seen yet): what registers it names it.
                    let found_by_address = entry.tensor_ids.is_empty();
                    if !entry.tensor_ids.contains(&t.id()) {
                        entry.tensor_ids.push(t.id());
                    }
                    if entry.label.is_none() {
                        entry.label = what.label;
                    }
                    if found_by_address {
                        // A storage known only by its bytes (found live at capture start) is
                        // described by what registers it later (a labelled input, a graph
                        // node): shape, dtype, and a category better than an inferred one.
                        entry.shape = t.dims().iter().map(|&d| d as u64).collect();
                        entry.dtype = t.dtype().as_str().to_string();
                        if entry.category_source == CategorySource::Inferred
                            && what.category_source != CategorySource::Inferred
                        {
                            entry.category = what.category;
                            entry.category_source = what.category_source;
                        }
                    }
                    return Registration::Alias(tag);
                }
            }
            // Dead lifetime at a reused address: forget it.
            self.forget(tag);
        }
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        let tag = self.next_tag;
        let generation = self.next_generation(facts.key);
        let watched = match self.watch {
            Some(off) => watch::insert(facts.key - off, tag),
            None => false,
        };
        let entry = StorageEntry {
            tag,
            key: facts.key,
            generation,
            storage_id: storage_id(facts.key, generation),
            device: facts.device,
            bytes: facts.bytes,
            logical_bytes: facts.logical_bytes,
            data_ptr: facts.data_ptr,
            device_ptr: facts.device_ptr,
            shape: t.dims().iter().map(|&d| d as u64).collect(),
            dtype: t.dtype().as_str().to_string(),
            tensor_ids: vec![t.id()],
            label: what.label,
            category: what.category,
            category_source: what.category_source,
            watched,
            persistent: false,
        };
        self.by_key.insert(facts.key, tag);
        self.entries.insert(tag, entry);
        Registration::New(tag)
    }

    /// Registers a storage found without a tensor (optimizer state found by address), kept
    /// across sessions (persistent).
    pub(crate) fn register_raw(
        &mut self,
        key: usize,
        bytes: u64,
        data_ptr: usize,
        what: RegisterAs,
    ) -> u32 {
        self.register_found(key, bytes, data_ptr, what, true)
    }

    /// Registers a storage found without a tensor for this session only (a storage the session
    /// tracker found live at capture start).
    pub(crate) fn register_session_raw(
        &mut self,
        key: usize,
        bytes: u64,
        data_ptr: usize,
        what: RegisterAs,
    ) -> u32 {
        self.register_found(key, bytes, data_ptr, what, false)
    }

    fn register_found(
        &mut self,
        key: usize,
        bytes: u64,
        data_ptr: usize,
        what: RegisterAs,
        persistent: bool,
    ) -> u32 {
        if let Some(&old) = self.by_key.get(&key) {
            self.forget(old);
        }
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        let tag = self.next_tag;
        let generation = self.next_generation(key);
        let watched = match self.watch {
            Some(off) => watch::insert(key - off, tag),
            None => false,
        };
        self.by_key.insert(key, tag);
        let (shape, dtype) = what.view.unwrap_or_default();
        self.entries.insert(
            tag,
            StorageEntry {
                tag,
                key,
                generation,
                storage_id: storage_id(key, generation),
                device: DeviceLabel::Cpu,
                bytes: Some(bytes),
                logical_bytes: None,
                data_ptr: Some(data_ptr),
                device_ptr: None,
                shape,
                dtype,
                tensor_ids: Vec::new(),
                label: what.label,
                category: what.category,
                category_source: what.category_source,
                watched,
                persistent,
            },
        );
        tag
    }

    /// The entry with `tag`.
    pub fn get(&self, tag: u32) -> Option<&StorageEntry> {
        self.entries.get(&tag)
    }

    /// The live entry at storage key `key`, if any.
    pub fn by_key(&self, key: usize) -> Option<&StorageEntry> {
        self.by_key.get(&key).and_then(|t| self.entries.get(t))
    }

    /// Removes an entry (its storage died, or the caller no longer wants it).
    pub fn forget(&mut self, tag: u32) -> Option<StorageEntry> {
        let entry = self.entries.remove(&tag)?;
        if self.by_key.get(&entry.key) == Some(&tag) {
            self.by_key.remove(&entry.key);
        }
        if let (Some(off), true) = (self.watch, entry.watched) {
            watch::clear_if(entry.key - off, tag);
        }
        Some(entry)
    }

    /// Removes every non-persistent entry (end of a session).
    pub fn clear_session_entries(&mut self) {
        let tags: Vec<u32> = self
            .entries
            .values()
            .filter(|e| !e.persistent)
            .map(|e| e.tag)
            .collect();
        for tag in tags {
            self.forget(tag);
        }
    }

    /// Every entry, in tag order.
    pub fn entries(&self) -> Vec<&StorageEntry> {
        let mut v: Vec<&StorageEntry> = self.entries.values().collect();
        v.sort_by_key(|e| e.tag);
        v
    }

    /// Number of entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Rebuilds the watch table from the live entries: clears every slot, then re-inserts each
    /// entry still watched (its tag still set) and tries again those that found the table full.
    /// Entries whose storage died while disarmed keep no slot. Call only while disarmed (the
    /// armed hook reads the table) and with the capture lock held. Does nothing while fewer
    /// than a quarter of the slots hold an address (no insert can fail then).
    pub(crate) fn compact_watch(&mut self) {
        let Some(off) = self.watch else {
            return;
        };
        // Rewriting the table clears all its slots (2 MiB): only worth it once a quarter of
        // them hold addresses; below that every insert still finds room.
        if watch::occupied() < watch::WATCH_SLOTS / 4 {
            return;
        }
        let live: Vec<(u32, usize, bool)> = self
            .entries
            .values()
            .map(|e| (e.tag, e.key, !e.watched || watch::get(e.key - off) == e.tag))
            .collect();
        watch::reset();
        for (tag, key, live) in live {
            let entry = self.entries.get_mut(&tag).expect("entry present");
            entry.watched = live && watch::insert(key - off, tag);
        }
    }

    /// Whether a block at `block` (address) belongs to a registered entry.
    pub(crate) fn has_block(&self, block: usize) -> bool {
        match self.watch {
            Some(off) => self.by_key.contains_key(&(block + off)),
            None => false,
        }
    }
}

/// `<key hex>.<generation>`.
pub fn storage_id(key: usize, generation: u32) -> String {
    format!("{key:x}.{generation}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn views_alias_and_bytes_come_from_the_storage() {
        let mut r = Registry::new();
        let t = Tensor::zeros((8, 64, 1), DType::F32, &Device::Cpu).unwrap();
        let b = t.broadcast_as((8, 64, 128)).unwrap();
        let tag = r
            .register(&t, RegisterAs::category(MemoryCategory::Activation))
            .tag();
        assert_eq!(
            r.register(&b, RegisterAs::category(MemoryCategory::Activation)),
            Registration::Alias(tag)
        );
        let e = r.get(tag).unwrap();
        assert_eq!(
            e.bytes,
            Some(8 * 64 * 4),
            "storage bytes, not the 262144-byte view"
        );
        assert_eq!(e.tensor_ids.len(), 2);
        let n = t.narrow(1, 0, 3).unwrap();
        assert_eq!(
            r.register(&n, RegisterAs::category(MemoryCategory::Activation)),
            Registration::Alias(tag)
        );
        let copy = t.copy().unwrap();
        assert!(matches!(
            r.register(&copy, RegisterAs::category(MemoryCategory::Activation)),
            Registration::New(_)
        ));
        assert_eq!(r.len(), 2);
    }
}
