//! The ids a session writes: tensor ids (`t<n>`: Candle's number, or a sequence number of first
//! sight in deterministic mode), module instance keys, gradient event ids, and the labels given
//! to tensors (non-parameter gradients are named after them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use candle_core::TensorId;

use crate::tensor_id::tensor_number;
use crate::writer::lock;

#[derive(Debug, Default)]
struct Maps {
    /// Deterministic mode: tensor id → sequence number.
    tensor_seq: HashMap<TensorId, u64>,
    /// Deterministic mode: module instance key → sequence number.
    instance_seq: HashMap<u64, u64>,
    /// Tensor wire id → caller label (from tensor facts).
    labels: HashMap<String, String>,
}

/// The id state of one session.
#[derive(Debug)]
pub(crate) struct Ids {
    deterministic: bool,
    maps: Mutex<Maps>,
    next_gradient: AtomicU64,
}

impl Ids {
    pub(crate) fn new(deterministic: bool) -> Self {
        Self {
            deterministic,
            maps: Mutex::new(Maps::default()),
            next_gradient: AtomicU64::new(1),
        }
    }

    /// The session's number of a tensor: Candle's, or the sequence number of first sight in
    /// deterministic mode.
    pub(crate) fn tensor_number(&self, id: TensorId) -> u64 {
        if !self.deterministic {
            return tensor_number(id);
        }
        let mut maps = lock(&self.maps);
        let next = maps.tensor_seq.len() as u64 + 1;
        *maps.tensor_seq.entry(id).or_insert(next)
    }

    /// The wire id of a tensor: `t<n>` with [`Self::tensor_number`].
    pub(crate) fn tensor_wire_id(&self, id: TensorId) -> String {
        format!("t{}", self.tensor_number(id))
    }

    /// A module instance key (`i<n>`, a sequence number of first sight, in deterministic mode).
    pub(crate) fn instance_wire_key(&self, key: u64) -> String {
        if !self.deterministic {
            return key.to_string();
        }
        let mut maps = lock(&self.maps);
        let next = maps.instance_seq.len() as u64 + 1;
        let seq = *maps.instance_seq.entry(key).or_insert(next);
        format!("i{seq}")
    }

    /// Remembers the label of a tensor fact.
    pub(crate) fn remember_label(&self, tensor_wire_id: &str, label: &str) {
        lock(&self.maps)
            .labels
            .insert(tensor_wire_id.to_string(), label.to_string());
    }

    /// The label a tensor fact gave this tensor.
    pub(crate) fn label_of(&self, tensor_wire_id: &str) -> Option<String> {
        lock(&self.maps).labels.get(tensor_wire_id).cloned()
    }

    /// `gradient-<n>`.
    pub(crate) fn next_gradient_event_id(&self) -> String {
        format!(
            "gradient-{}",
            self.next_gradient.fetch_add(1, Ordering::Relaxed)
        )
    }
}
