//! The hook installed as this binary's global allocator, driven through the crate's public door
//! only (no Candle): what it logs armed and disarmed, a watched block's free, the drop
//! signature, a full ring, and an allocation site's stack.
//!
//! The hook is process-wide: the tests take one lock and look only for their own addresses.

use std::sync::Mutex;

use trace_alloc::layout::{self, BlockLayout};
use trace_alloc::ring::{self, DataBuffer, RawEvent};
use trace_alloc::{sites, watch, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` armed and returns what the ring got meanwhile.
fn armed(f: impl FnOnce()) -> Vec<RawEvent> {
    let mut stale = Vec::new();
    ring::drain_into(&mut stale);
    let mut events = Vec::with_capacity(1 << 16);
    trace_alloc::arm();
    f();
    trace_alloc::disarm();
    ring::drain_into(&mut events);
    events
}

/// A block of a size nothing else in this binary allocates, with a data pointer at offset 8.
#[repr(C)]
struct FakeStorage {
    tag: usize,
    data: *mut u8,
    pad: [usize; 27],
}

const FAKE_BLOCK_BYTES: usize = std::mem::size_of::<FakeStorage>();

#[test]
fn an_armed_allocation_is_logged_and_a_disarmed_one_is_not() {
    let _g = lock();
    assert!(trace_alloc::is_installed());
    let mut kept = 0usize;
    let events = armed(|| {
        let v = std::hint::black_box(vec![1u8; 5000]);
        kept = v.as_ptr() as usize;
    });
    assert!(
        events.iter().any(|e| matches!(*e,
            RawEvent::Alloc { addr, size: 5000, .. } if addr == kept)),
        "the 5,000-byte buffer is logged"
    );
    assert!(trace_alloc::armed_alloc_calls() >= 1);
    // Disarmed: this allocation is not logged. The hook is process-wide and the test harness's
    // other threads allocate too: one that read the armed flag just before `disarm` may still
    // push its event now, so the ring is searched for this allocation, not asserted empty.
    let v = std::hint::black_box(vec![1u8; 5003]);
    let addr = v.as_ptr() as usize;
    drop(v);
    let mut events = Vec::new();
    ring::drain_into(&mut events);
    assert!(
        !events.iter().any(|e| matches!(*e,
            RawEvent::Alloc { addr: a, size: 5003, .. } if a == addr)),
        "disarmed: the 5,003-byte buffer is not logged: {events:?}"
    );
}

#[test]
fn a_watched_blocks_free_carries_its_tag_and_the_drop_signature() {
    let _g = lock();
    layout::set_blocks(BlockLayout {
        block_size: FAKE_BLOCK_BYTES,
        data_ptr_offset: Some(std::mem::size_of::<usize>()),
        tensor_block_size: 0,
        tensor_storage_offset: 0,
    });
    assert_eq!(layout::block_size(), FAKE_BLOCK_BYTES);
    let data = vec![0u8; 96].into_boxed_slice();
    let data_ptr = Box::into_raw(data) as *mut u8;
    let block = Box::new(FakeStorage {
        tag: 1,
        data: data_ptr,
        pad: [0; 27],
    });
    let block_addr = std::ptr::from_ref(&*block) as usize;
    assert!(watch::insert(block_addr, 7));
    assert_eq!(watch::get(block_addr), 7);
    let events = armed(|| {
        // The storage's drop order: its data buffer first, then the block pointing at it.
        // SAFETY: `data_ptr` came from `Box::into_raw` of a 96-byte boxed slice, freed once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(data_ptr, 96)) });
        drop(block);
    });
    layout::clear_blocks();
    let free = events.iter().find_map(|e| match *e {
        RawEvent::BlockFree {
            block, tag, data, ..
        } if block == block_addr => Some((tag, data)),
        _ => None,
    });
    assert_eq!(
        free,
        Some((
            7,
            Some(DataBuffer {
                ptr: data_ptr as usize,
                size: 96
            })
        ))
    );
    assert_eq!(watch::get(block_addr), 0, "the free took the tag");
}

#[test]
fn a_full_ring_counts_what_it_drops() {
    let _g = lock();
    let before = trace_alloc::dropped_events();
    trace_alloc::set_ring_capacity(8);
    let events = armed(|| {
        for i in 0..64usize {
            drop(std::hint::black_box(vec![0u8; 64 + i]));
        }
    });
    trace_alloc::set_ring_capacity(trace_alloc::RING_CAPACITY);
    assert!(events.len() <= 8, "{} events", events.len());
    assert!(trace_alloc::dropped_events() >= before + 56);
}

#[inline(never)]
fn allocate_here() -> Vec<u8> {
    std::hint::black_box(vec![0u8; 8192])
}

#[test]
fn a_large_allocation_gets_a_stack_through_this_function() {
    let _g = lock();
    if !sites::SUPPORTED {
        return; // no DWARF walk on this target: sites are off (checked below)
    }
    let calibration = sites::calibrate(allocate_here);
    assert!(calibration.libgcc_frames > 0, "{calibration:?}");
    sites::reset(4096, sites::Unwinder::Libgcc);
    let mut at = 0usize;
    let events = armed(|| {
        let v = allocate_here();
        at = v.as_ptr() as usize;
    });
    sites::stop();
    let tag = events
        .iter()
        .find_map(|e| match *e {
            RawEvent::Alloc { addr, site, .. } if addr == at => Some(site),
            _ => None,
        })
        .expect("the allocation is logged");
    assert!(tag.is_some() && !tag.frames().is_empty());
    assert!(sites::counts().captured >= 1);
    let here = allocate_here as fn() -> Vec<u8> as usize;
    assert!(
        tag.frames()
            .iter()
            .any(|&ret| ret > here && ret < here + 4096),
        "a return address inside allocate_here: {:x?} vs {here:#x}",
        tag.frames()
    );
}

#[test]
fn sites_stay_off_where_there_is_no_dwarf_walk() {
    let _g = lock();
    sites::reset(1, sites::Unwinder::Libgcc);
    let mut at = 0usize;
    let events = armed(|| {
        let v = allocate_here();
        at = v.as_ptr() as usize;
    });
    sites::stop();
    let captured = events
        .iter()
        .any(|e| matches!(*e, RawEvent::Alloc { addr, site, .. } if addr == at && site.is_some()));
    assert_eq!(captured, sites::SUPPORTED);
}
