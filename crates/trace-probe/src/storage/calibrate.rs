//! Calibration: where a storage key sits inside its `Arc` block, the block's size, and where a
//! CPU storage's data pointer sits in it — measured at runtime with throw-away tensors, never
//! hard-coded (the `cuda` and `metal` features change `size_of::<Storage>()`; another Candle
//! version may change the layout entirely).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use candle_core::{DType, Device, Storage, Tensor};

use trace_alloc::layout::{self, BlockLayout};
use trace_alloc::ring::{self, DataBuffer, RawEvent};

use super::bytes::{cpu_data, storage_key};

/// Layout facts found by [`calibrate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Calibration {
    /// Size in bytes of the allocation holding a storage (`ArcInner<RwLock<Storage>>`); 56 on
    /// a CPU-only x86_64 build of Candle 0.11.1.
    pub block_size: usize,
    /// Offset in bytes of the storage key (the address Candle's `storage_and_layout` guard
    /// derefs to) from the block's start; 24 on that build.
    pub key_offset: usize,
    /// Offset in bytes of a CPU storage's data pointer word from the block's start, when every
    /// dtype checked agreed; `None` means the hook scans every word of a dying block.
    pub data_ptr_offset: Option<usize>,
    /// Size in bytes of the allocation holding a tensor (`ArcInner<Tensor_>`).
    pub tensor_block_size: usize,
    /// Offset in bytes, inside a tensor's block, of its storage `Arc` pointer (the word that
    /// confirms a storage's drop signature when the tensor block dies after it).
    pub tensor_storage_offset: usize,
}

/// Why calibration failed; capture is then off and logical memory is declared unavailable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    /// The tracking allocator is not the global allocator.
    #[error("the tracking allocator is not installed as #[global_allocator]")]
    NotInstalled,
    /// A capture was armed; calibration needs the hook to itself.
    #[error("calibration cannot run while a capture is armed")]
    Busy,
    /// Candle could not create the throw-away tensor.
    #[error("candle failed to create the calibration tensor: {0}")]
    Candle(String),
    /// The observed layout is not the expected `Arc` block around a CPU storage.
    #[error("unexpected storage layout ({0}); automatic storage capture is off")]
    UnexpectedLayout(String),
}

static RESULT: OnceLock<Result<Calibration, CalibrationError>> = OnceLock::new();

/// The calibration result, running it on first call (process-wide, cached).
///
/// # Errors
/// See [`CalibrationError`]. A failure is cached: capture stays off for the process.
pub fn calibrate() -> Result<Calibration, CalibrationError> {
    if let Some(r) = RESULT.get() {
        return r.clone();
    }
    if !trace_alloc::is_installed() {
        // Not cached: the allocator serves its first call only once something allocates.
        return Err(CalibrationError::NotInstalled);
    }
    if trace_alloc::is_armed() {
        return Err(CalibrationError::Busy);
    }
    RESULT.get_or_init(run).clone()
}

/// Words of one probe tensor: (key, data pointer, data bytes).
fn probe_tensor(dtype: DType) -> Result<(Tensor, usize, usize, u64), CalibrationError> {
    let t = Tensor::zeros(24, dtype, &Device::Cpu)
        .map_err(|e| CalibrationError::Candle(e.to_string()))?;
    super::tracker::note_probe_tensor();
    let key = storage_key(&t);
    let (guard, _) = t.storage_and_layout();
    let (ptr, bytes) = match &*guard {
        Storage::Cpu(cpu) => cpu_data(cpu),
        _ => {
            return Err(CalibrationError::UnexpectedLayout(
                "a CPU tensor has a non-CPU storage".into(),
            ))
        }
    };
    drop(guard);
    Ok((t, key, ptr, bytes))
}

/// A calibration is running: the background drainer leaves the ring alone meanwhile.
static IN_PROGRESS: AtomicBool = AtomicBool::new(false);

/// Attempts before a layout the calibration does not recognise is concluded.
const ATTEMPTS: usize = 3;

/// Whether a calibration is running now (its own events wait in the process's ring: the
/// background drainer must not take them).
pub(crate) fn in_progress() -> bool {
    IN_PROGRESS.load(Ordering::SeqCst)
}

/// Calibrates at the full ring capacity: the test knob `trace_alloc::set_ring_capacity` may have
/// lowered it, and a calibration whose events were dropped would fail for good (it is cached).
/// The ring is the process's: a drainer that joined it while the calibration's events waited
/// there would take them (a race, not a layout), so the drainer stands aside while
/// [`in_progress`], and an unrecognised layout is tried [`ATTEMPTS`] times before it is
/// concluded (once seen under CI's load: "the storage drop signature … was not observed").
fn run() -> Result<Calibration, CalibrationError> {
    let capacity = trace_alloc::ring_capacity();
    trace_alloc::set_ring_capacity(trace_alloc::RING_CAPACITY);
    IN_PROGRESS.store(true, Ordering::SeqCst);
    let mut result = run_at_full_capacity();
    for _ in 1..ATTEMPTS {
        if !matches!(result, Err(CalibrationError::UnexpectedLayout(_))) {
            break;
        }
        result = run_at_full_capacity();
    }
    IN_PROGRESS.store(false, Ordering::SeqCst);
    trace_alloc::set_ring_capacity(capacity);
    result
}

fn run_at_full_capacity() -> Result<Calibration, CalibrationError> {
    let word = std::mem::size_of::<usize>();
    let mut events = Vec::with_capacity(4096);
    ring::drain_into(&mut events); // discard anything stale
    events.clear();

    // 1. Block size and key offset: the logged allocation containing the key.
    trace_alloc::arm();
    let probes = [probe_tensor(DType::F32), probe_tensor(DType::U8)];
    trace_alloc::disarm();
    let mut tensors = Vec::new();
    for p in probes {
        tensors.push(p?);
    }
    events.reserve(1 << 14);
    ring::drain_into(&mut events);
    let mut found = Vec::new();
    let mut tensor_found = Vec::new();
    let containing = |addr: usize, what: &str| {
        events
            .iter()
            .rev()
            .find_map(|e| match *e {
                RawEvent::Alloc { addr: a, size, .. } if a <= addr && addr < a + size => {
                    Some((a, size))
                }
                _ => None,
            })
            .ok_or_else(|| {
                CalibrationError::UnexpectedLayout(format!(
                    "no logged allocation contains the {what}"
                ))
            })
    };
    for (t, key, data, _) in &tensors {
        let (base, size) = containing(*key, "storage key")?;
        // The tensor's block and the word in it that points at the storage block.
        let tensor_addr = std::ptr::from_ref(&**t) as *const u8 as usize;
        let (tbase, tsize) = containing(tensor_addr, "tensor")?;
        // SAFETY: the tensor block is live (held in `tensors`) and `tsize` bytes long; its
        // words are read, never written.
        let toffsets: Vec<usize> = (0..tsize / word)
            .filter(|&i| unsafe { (tbase as *const usize).add(i).read_volatile() } == base)
            .map(|i| i * word)
            .collect();
        if toffsets.len() != 1 || tsize % word != 0 {
            return Err(CalibrationError::UnexpectedLayout(format!(
                "the storage pointer appears {} times in the {tsize}-byte tensor block",
                toffsets.len()
            )));
        }
        tensor_found.push((tsize, toffsets[0]));
        if size % word != 0 || key - base + std::mem::size_of::<Storage>() > size {
            return Err(CalibrationError::UnexpectedLayout(format!(
                "storage key at offset {} of a {size}-byte block",
                key - base
            )));
        }
        // 2. Data pointer offset: the word of the live block equal to the data pointer.
        // SAFETY: the block is live (its tensor is held in `tensors`) and `size` bytes long;
        // its words are read, never written.
        let words: Vec<usize> = (0..size / word)
            .map(|i| unsafe { (base as *const usize).add(i).read_volatile() })
            .collect();
        let offsets: Vec<usize> = words
            .iter()
            .enumerate()
            .filter(|(_, w)| **w == *data)
            .map(|(i, _)| i * word)
            .collect();
        if offsets.len() != 1 {
            return Err(CalibrationError::UnexpectedLayout(format!(
                "the data pointer appears {} times in the storage block",
                offsets.len()
            )));
        }
        found.push((size, key - base, offsets[0]));
    }
    let (block_size, key_offset, off0) = found[0];
    if found.iter().any(|f| f.0 != block_size || f.1 != key_offset) {
        return Err(CalibrationError::UnexpectedLayout(format!(
            "storage blocks differ between dtypes: {found:?}"
        )));
    }
    let data_ptr_offset = found.iter().all(|f| f.2 == off0).then_some(off0);
    let (tensor_block_size, tensor_storage_offset) = tensor_found[0];
    if tensor_found.iter().any(|f| *f != tensor_found[0]) || tensor_block_size == block_size {
        return Err(CalibrationError::UnexpectedLayout(format!(
            "tensor blocks differ between dtypes or equal the storage block: {tensor_found:?}"
        )));
    }

    // 3. Validation: the drop signature must recognise the throw-away storages.
    layout::set_blocks(BlockLayout {
        block_size,
        data_ptr_offset,
        tensor_block_size,
        tensor_storage_offset,
    });
    let expected: Vec<(usize, usize, u64)> = tensors
        .iter()
        .map(|(_, key, data, bytes)| (key - key_offset, *data, *bytes))
        .collect();
    events.clear();
    trace_alloc::arm();
    drop(tensors);
    trace_alloc::disarm();
    ring::drain_into(&mut events);
    for (block, data, bytes) in expected {
        let hit = events.iter().any(|e| {
            matches!(*e, RawEvent::BlockFree {
                block: b,
                data: Some(DataBuffer { ptr, size }),
                ..
            } if b == block && ptr == data && size as u64 >= bytes)
        });
        let confirmed = events.iter().any(
            |e| matches!(*e, RawEvent::TensorFree { storage_block, .. } if storage_block == block),
        );
        if !hit || !confirmed {
            layout::clear_blocks();
            return Err(CalibrationError::UnexpectedLayout(
                "the storage drop signature (data free, block free, then the tensor block \
                 holding it) was not observed"
                    .into(),
            ));
        }
    }
    calibrate_dtypes(key_offset);
    Ok(Calibration {
        block_size,
        key_offset,
        data_ptr_offset,
        tensor_block_size,
        tensor_storage_offset,
    })
}

/// The CPU dtypes whose storage variant calibration tells apart (in this order: a block free's
/// dtype code is 1 + the index).
pub(crate) const DTYPES: [DType; 9] = [
    DType::U8,
    DType::U32,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::BF16,
    DType::F16,
    DType::F32,
    DType::F64,
];

/// The dtype of a block free's dtype code (see [`DTYPES`]); `None` for 0 or unknown codes.
pub(crate) fn dtype_of_code(code: u8) -> Option<DType> {
    DTYPES.get(usize::from(code).checked_sub(1)?).copied()
}

/// Finds the word of a storage block whose low byte names the CPU storage's variant: two live
/// tensors of every dtype in [`DTYPES`]; the word must hold the same low byte for the two of a
/// dtype and distinct ones across dtypes. Found → the hook reads it at a storage's drop
/// signature, so unregistered storages carry their dtype; not found → they carry none.
fn calibrate_dtypes(key_offset: usize) {
    let word = std::mem::size_of::<usize>();
    let size = layout::block_size();
    let mut tensors = Vec::new();
    for dtype in DTYPES {
        for _ in 0..2 {
            match Tensor::zeros(3, dtype, &Device::Cpu) {
                Ok(t) => {
                    super::tracker::note_probe_tensor();
                    tensors.push(t);
                }
                Err(_) => return,
            }
        }
    }
    // Low bytes of every word of every block: bytes[t][w].
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| {
            let base = storage_key(t) - key_offset;
            // SAFETY: the block is live (its tensor is held in `tensors`) and `size` bytes
            // long; its words are read, never written.
            (0..size / word)
                .map(|i| unsafe { (base as *const usize).add(i).read_volatile() } as u8)
                .collect()
        })
        .collect();
    let found = (0..size / word).find(|&w| {
        let per_dtype: Vec<u8> = bytes.chunks(2).map(|pair| pair[0][w]).collect();
        let stable = bytes.chunks(2).all(|pair| pair[0][w] == pair[1][w]);
        let mut sorted = per_dtype.clone();
        sorted.sort_unstable();
        sorted.dedup();
        stable && sorted.len() == per_dtype.len()
    });
    let Some(w) = found else {
        return;
    };
    let per_dtype: Vec<u8> = bytes.chunks(2).map(|pair| pair[0][w]).collect();
    layout::set_dtype_bytes(w * word, &per_dtype);
}

/// The calibrated offset of a storage key inside its block (0 before calibration).
pub(crate) fn key_offset() -> usize {
    calibrate().map(|c| c.key_offset).unwrap_or(0)
}
