//! CUDA storages nobody registered (feature `cuda-ledger`): at the window's end, every device
//! allocation of the run's device that the ledger ([`crate::cuda_ledger`]) saw and the registry
//! did not name becomes a storage — live at the window's start (`pre_existing`, written at
//! capture start) or allocated in it (at its exact allocation time, on its thread, so its span,
//! pass and inferred category are found like a CPU storage's), with its free when it was freed
//! in the window. Optimizer state found at construction keeps its label and category.

#[cfg(feature = "cuda-ledger")]
use trace_wire::{CategorySource, MemoryAction};

#[cfg(feature = "cuda-ledger")]
use super::events::{anonymous_alloc, PendingEvent};
#[cfg(feature = "cuda-ledger")]
use super::window::CaptureState;
#[cfg(feature = "cuda-ledger")]
use crate::cuda_ledger::{self, Owner, Record};
#[cfg(feature = "cuda-ledger")]
use crate::device::DeviceLabel;

/// Figures of the device allocations written from the ledger in one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStorages {
    /// Storages live at capture start that nobody registered (an input batch, a cache, the
    /// BLAS workspace, optimizer state), written as `pre_existing`.
    pub pre_existing: u64,
    /// Storages allocated in the window that nobody registered (temporaries, backward
    /// intermediates, optimizer updates).
    pub allocated: u64,
    /// Bytes of both.
    pub bytes: u64,
}

/// The wire id of the ledger's allocation `seq` (distinct from the registry's `<hex>.<gen>`).
#[cfg(feature = "cuda-ledger")]
fn storage_id(seq: u64) -> String {
    format!("cuda{seq}")
}

#[cfg(feature = "cuda-ledger")]
impl CaptureState {
    /// Opens the ledger's window on a CUDA device (frees are kept from hook ns `start`). The
    /// registry names what it still holds again: a storage it forgot is the ledger's.
    pub(super) fn open_device_window(&mut self, device: DeviceLabel, start: u64) {
        if !matches!(device, DeviceLabel::Cuda(_)) {
            return;
        }
        let named: Vec<u64> = self
            .registry
            .entries()
            .iter()
            .filter_map(|e| e.device_ptr)
            .collect();
        cuda_ledger::open_window(start, &named);
    }

    /// Queues the ledger's storages of the closing window (see the module docs). Returns what
    /// was written.
    pub(super) fn queue_device_storages(
        &mut self,
        device: DeviceLabel,
        start_session_ns: u64,
    ) -> DeviceStorages {
        let DeviceLabel::Cuda(ordinal) = device else {
            return DeviceStorages::default();
        };
        let seen = cuda_ledger::close_window(ordinal as i32);
        let mut figures = DeviceStorages::default();
        let label = device.to_string();
        for r in seen.pre_existing {
            figures.pre_existing += 1;
            figures.bytes = figures.bytes.saturating_add(r.bytes);
            let mut event = ledger_alloc(&label, &r);
            event.pre_existing = true;
            let infer = r.owner == Owner::Anonymous;
            self.pending.push(PendingEvent {
                hook_ns: seen.start_ns,
                thread: 0,
                session_ns: Some(start_session_ns),
                event: event.clone(),
                infer_category: infer,
            });
            self.queue_ledger_free(event, &r, infer);
        }
        for r in seen.allocated {
            figures.allocated += 1;
            figures.bytes = figures.bytes.saturating_add(r.bytes);
            let event = ledger_alloc(&label, &r);
            self.pending.push(PendingEvent {
                hook_ns: r.alloc_ns,
                thread: r.alloc_thread,
                session_ns: None,
                event: event.clone(),
                infer_category: true,
            });
            self.queue_ledger_free(event, &r, true);
        }
        figures
    }

    fn queue_ledger_free(&mut self, mut event: trace_wire::MemoryEvent, r: &Record, infer: bool) {
        let Some((ns, thread)) = r.freed else {
            return;
        };
        event.action = MemoryAction::Free;
        event.pre_existing = false;
        self.pending.push(PendingEvent {
            hook_ns: ns,
            thread,
            session_ns: None,
            event,
            infer_category: infer,
        });
    }
}

#[cfg(feature = "cuda-ledger")]
/// The `alloc` of a ledger record: its bytes as asked of the driver; shape and dtype are the
/// tensor's, which the driver call does not carry (absent).
fn ledger_alloc(device: &str, r: &Record) -> trace_wire::MemoryEvent {
    let mut event = anonymous_alloc(device.to_string(), storage_id(r.seq), r.bytes);
    if let Owner::Construction { label, category } = &r.owner {
        event.category = *category;
        event.category_source = Some(CategorySource::Registry);
        event.label = Some(label.clone());
    }
    event
}
