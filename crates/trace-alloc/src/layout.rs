//! The storage layout the hook reads at a free: the sizes of the two blocks it watches and where
//! the words it checks sit in them. The probe measures them (it calibrates with throw-away
//! Candle tensors) and sets them here; until then both sizes are 0 and no free is logged.
//!
//! The hook only compares sizes and reads words at these offsets: it knows nothing of Candle.

use std::sync::atomic::Ordering;

use crate::state::{
    BLOCK_SIZE, DATA_PTR_OFFSET, DTYPE_BYTES, DTYPE_OFFSET, DTYPE_SLOTS, TENSOR_BLOCK_SIZE,
    TENSOR_STORAGE_OFFSET,
};

/// Sizes and offsets of the watched blocks, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLayout {
    /// Size of a storage's block (`ArcInner<RwLock<Storage>>` in Candle): a free of this size is
    /// checked against the watch table and the drop signature.
    pub block_size: usize,
    /// Offset of a CPU storage's data pointer word in its block; `None`: the hook scans every
    /// word of a dying block.
    pub data_ptr_offset: Option<usize>,
    /// Size of a tensor's block (`ArcInner<Tensor_>`): a free of this size logs the word at
    /// [`Self::tensor_storage_offset`].
    pub tensor_block_size: usize,
    /// Offset, inside a tensor's block, of the word holding its storage block's address.
    pub tensor_storage_offset: usize,
}

/// Sets the watched blocks (outside the hook, disarmed).
pub fn set_blocks(layout: BlockLayout) {
    BLOCK_SIZE.store(layout.block_size, Ordering::Relaxed);
    DATA_PTR_OFFSET.store(
        layout.data_ptr_offset.unwrap_or(usize::MAX),
        Ordering::Relaxed,
    );
    TENSOR_STORAGE_OFFSET.store(layout.tensor_storage_offset, Ordering::Relaxed);
    TENSOR_BLOCK_SIZE.store(layout.tensor_block_size, Ordering::Relaxed);
}

/// Stops watching blocks: both sizes back to 0 (a calibration that failed its validation).
pub fn clear_blocks() {
    BLOCK_SIZE.store(0, Ordering::Relaxed);
    TENSOR_BLOCK_SIZE.store(0, Ordering::Relaxed);
}

/// The storage block size set, in bytes (0 before [`set_blocks`]).
pub fn block_size() -> usize {
    BLOCK_SIZE.load(Ordering::Relaxed)
}

/// Most dtype codes [`set_dtype_bytes`] keeps.
pub const DTYPE_CODES: usize = DTYPE_SLOTS;

/// Sets the word of a storage block whose low byte names its dtype: at a drop signature the hook
/// reads the byte at `offset` and logs code `i + 1` when it equals `bytes[i]` (0: none matched).
/// Keeps at most [`DTYPE_CODES`] bytes. Outside the hook, disarmed.
pub fn set_dtype_bytes(offset: usize, bytes: &[u8]) {
    for (slot, b) in DTYPE_BYTES.iter().zip(bytes) {
        slot.store(u16::from(*b), Ordering::Relaxed);
    }
    DTYPE_OFFSET.store(offset, Ordering::Relaxed);
}

/// The dtype code of a dying storage block of `size` bytes at `block`: 1 + the index of the
/// byte [`set_dtype_bytes`] set that its dtype word holds, 0 when unknown (or not set).
///
/// # Safety
/// `block` must point to `size` readable bytes (e.g. a block being freed, not yet returned to
/// the inner allocator, or a live block).
#[inline]
pub unsafe fn dtype_code(block: *const u8, size: usize) -> u8 {
    let off = DTYPE_OFFSET.load(Ordering::Relaxed);
    if off == usize::MAX || off + std::mem::size_of::<usize>() > size {
        return 0;
    }
    // SAFETY: `off + size_of::<usize>() <= size` (checked above), inside the readable block.
    let byte = u16::from(unsafe { (block.add(off) as *const usize).read_volatile() } as u8);
    for (i, b) in DTYPE_BYTES.iter().enumerate() {
        let b = b.load(Ordering::Relaxed);
        if b == u16::MAX {
            break;
        }
        if b == byte {
            return i as u8 + 1;
        }
    }
    0
}
