//! Memory events: allocs (with reused addresses and ids), frees, aliases, and draining a step.

use trace_schema::*;

use super::*;

impl SynthEvents {
    pub(super) fn alloc(&mut self, category: MemoryCategory, allocator_only: bool) -> Live {
        // With accelerators, 1 in 20 storages is a host staging buffer on `cpu`.
        let host = self.devices.len() > 1 && self.rng.chance(50);
        let device = if host {
            (self.devices.len() - 1) as u8
        } else {
            self.current_device
        };
        let d = device as usize;
        let (slot, generation) = match self.free_slots[d].pop_back() {
            // Immediate address reuse: same address, next generation (a new lifetime); now and
            // then the very same id string again.
            Some((slot, generation)) if self.rng.chance(125) => (slot, generation),
            Some((slot, generation)) => (slot, generation + 1),
            None => {
                let slot = self.next_slot[d];
                self.next_slot[d] += 1;
                (slot, 0)
            }
        };
        let (shape_i, dtype_i) = match self.last_output {
            Some((_, _, s, t)) => (s, t),
            None => (self.rng.below(SHAPES.len() as u64) as usize, 0),
        };
        let bytes = trace_schema::dense_bytes(SHAPES[shape_i], DTYPES[dtype_i]).unwrap_or(4);
        let tensor = match self.last_output.take() {
            Some((t, _, _, _)) => t,
            None => self.new_tensor(),
        };
        let live = Live {
            device,
            slot,
            generation,
            bytes,
            tensor,
            category,
            allocator_only,
        };
        self.emit_alloc(&live, shape_i, dtype_i, None, false);
        live
    }

    pub(super) fn emit_alloc(
        &mut self,
        live: &Live,
        shape_i: usize,
        dtype_i: usize,
        label: Option<String>,
        pre_existing: bool,
    ) {
        self.live_bytes[live.device as usize] += live.bytes;
        let timestamp_ns = if pre_existing {
            self.now_ns
        } else {
            self.tick(100)
        };
        let (source, category_source) = match live.category {
            MemoryCategory::Parameter | MemoryCategory::Optimizer => {
                (MemorySource::Registry, CategorySource::Registry)
            }
            _ if live.allocator_only => (MemorySource::Allocator, CategorySource::Inferred),
            MemoryCategory::Gradient => (MemorySource::Registry, CategorySource::Registry),
            _ => (MemorySource::Allocator, CategorySource::Inferred),
        };
        let named = !live.allocator_only;
        let op_name = match (named, pre_existing, self.phase) {
            (true, false, Phase::Forward) => Some(FORWARD_OPS[(live.tensor % 5) as usize]),
            (true, false, Phase::Backward) => Some(BACKWARD_OPS[(live.tensor % 4) as usize]),
            (true, false, _) => Some(OPTIMIZER_OPS[(live.tensor % 5) as usize]),
            _ => None,
        };
        let event = MemoryEvent {
            timestamp_ns,
            action: MemoryAction::Alloc,
            device: self.devices[live.device as usize].clone(),
            storage_id: Some(self.storage_id(live)),
            bytes: Some(live.bytes),
            logical_bytes: None,
            tensor_id: named.then(|| format!("t{}", live.tensor)),
            span_id: Some(self.current_span()),
            op_name: op_name.map(str::to_string),
            shape: named.then(|| SHAPES[shape_i].to_vec()),
            dtype: named.then(|| DTYPES[dtype_i].to_string()),
            category: live.category,
            category_source: Some(category_source),
            source: Some(source),
            pre_existing,
            label,
            site: None,
            thread: None,
        };
        self.queue.push_back(TraceEvent::Memory(event));
    }

    pub(super) fn free(&mut self, live: Live) {
        let d = live.device as usize;
        self.live_bytes[d] = self.live_bytes[d].saturating_sub(live.bytes);
        let free_slots = &mut self.free_slots[d];
        free_slots.push_back((live.slot, live.generation));
        if free_slots.len() > 1024 {
            free_slots.pop_front();
        }
        let timestamp_ns = self.tick(100);
        let with_bytes = !self.rng.chance(250);
        self.queue.push_back(TraceEvent::Memory(MemoryEvent {
            timestamp_ns,
            action: MemoryAction::Free,
            device: self.devices[d].clone(),
            storage_id: Some(self.storage_id(&live)),
            bytes: with_bytes.then_some(live.bytes),
            logical_bytes: None,
            tensor_id: (!live.allocator_only).then(|| format!("t{}", live.tensor)),
            span_id: Some(self.current_span()),
            op_name: None,
            shape: None,
            dtype: None,
            category: live.category,
            category_source: None,
            source: Some(if live.allocator_only {
                MemorySource::Allocator
            } else {
                MemorySource::Registry
            }),
            pre_existing: false,
            label: None,
            site: None,
            thread: None,
        }));
    }

    /// A second alloc of a live storage from another tensor id (a view).
    pub(super) fn alias(&mut self) -> bool {
        let Some(&target) = self.activations.last() else {
            return false;
        };
        if target.allocator_only {
            return false;
        }
        let view = self.new_tensor();
        let timestamp_ns = self.tick(100);
        self.queue.push_back(TraceEvent::Memory(MemoryEvent {
            timestamp_ns,
            action: MemoryAction::Alloc,
            device: self.devices[target.device as usize].clone(),
            storage_id: Some(self.storage_id(&target)),
            bytes: Some(target.bytes),
            logical_bytes: None,
            tensor_id: Some(format!("t{view}")),
            span_id: Some(self.current_span()),
            op_name: Some("reshape".to_string()),
            shape: None,
            dtype: None,
            category: target.category,
            category_source: Some(CategorySource::Inferred),
            source: Some(MemorySource::Registry),
            pre_existing: false,
            label: None,
            site: None,
            thread: None,
        }));
        true
    }

    /// Emits exactly one memory event fitting the current phase.
    pub(super) fn memory_event(&mut self) {
        let left = self.pass_memory_left;
        self.pass_memory_left = left.saturating_sub(1);
        if self.multi_step() && self.phase == Phase::Optimizer && self.drain_step(left) {
            return;
        }
        let allocator_only = self.rng.chance(100);
        let roll = self.rng.below(100);
        match self.phase {
            Phase::Forward => {
                if roll < 3 && self.alias() {
                    return;
                }
                if roll < 40 && self.activations.len() < self.config.max_live_activations {
                    let live = self.alloc(MemoryCategory::Activation, allocator_only);
                    self.activations.push(live);
                    return;
                }
            }
            Phase::Backward => {
                if roll < 50 {
                    if let Some(live) = self.activations.pop() {
                        self.free(live);
                        return;
                    }
                }
                if roll < 75 {
                    let live = self.alloc(MemoryCategory::Gradient, false);
                    self.gradients.push_back(live);
                    return;
                }
            }
            _ => {
                if roll < 20 && self.optimizer_states < 2 * self.config.parameters {
                    self.optimizer_states += 1;
                    // Optimizer state lives past the end of the step: never freed.
                    self.alloc(MemoryCategory::Optimizer, false);
                    return;
                }
                if roll < 50 {
                    if let Some(live) = self.gradients.pop_front() {
                        self.free(live);
                        return;
                    }
                }
            }
        }
        // Temporaries: alloc, or free one allocated shortly before.
        if self.temporaries.len() > 4 || (!self.temporaries.is_empty() && self.rng.chance(500)) {
            let live = self.temporaries.pop_front().expect("non-empty");
            self.free(live);
        } else {
            let category = match self.phase {
                Phase::Forward => MemoryCategory::Activation,
                Phase::Backward => MemoryCategory::Gradient,
                _ => MemoryCategory::Optimizer,
            };
            let live = self.alloc(category, allocator_only);
            self.temporaries.push_back(live);
        }
    }

    /// In a multi-step capture, once the optimizer pass has no more memory events `left`
    /// (this one included) than one more than the storages its step has live (activations,
    /// gradients, temporaries), frees one of them: each step ends with only the parameters, the
    /// optimizer state and at most one storage of its own live (a temporary its last event
    /// allocated when the others were freed one event early), or more only where its budget was
    /// short from the start.
    pub(super) fn drain_step(&mut self, left: u64) -> bool {
        let live = self.temporaries.len() + self.gradients.len() + self.activations.len();
        if live == 0 || left > live as u64 + 1 {
            return false;
        }
        let next = self
            .temporaries
            .pop_front()
            .or_else(|| self.gradients.pop_front())
            .or_else(|| self.activations.pop());
        if let Some(storage) = next {
            self.free(storage);
        }
        true
    }
}
