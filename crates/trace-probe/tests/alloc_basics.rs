//! Armed allocator tests around a bare captured step (`support/window.rs`): calibration,
//! identity under address reuse, frees on other threads, views, ring overflow. Arming is
//! process-wide, so every test here takes `serial()` (one test binary = one process).

#[path = "support/serial.rs"]
mod serial;
#[path = "support/window.rs"]
mod window;

use candle_core::{DType, Device, Tensor};
use trace_alloc as alloc;
use trace_probe::Tracking;
use trace_schema::{MemoryAction, MemoryCategory, MemoryEvent};

use serial::serial;
use window::window;

#[global_allocator]
static ALLOC: Tracking = Tracking::system_counting();

fn lifetimes(events: &[MemoryEvent]) -> std::collections::HashMap<String, (u64, bool, bool)> {
    let mut m = std::collections::HashMap::new();
    for e in events {
        let id = e
            .storage_id
            .clone()
            .expect("allocator events carry a storage id");
        let entry = m.entry(id).or_insert((0u64, false, false));
        match e.action {
            MemoryAction::Alloc => {
                assert!(!entry.1, "two allocs for one storage id");
                entry.0 = e.bytes.expect("alloc has bytes");
                entry.1 = true;
            }
            MemoryAction::Free => entry.2 = true,
        }
    }
    m
}

#[test]
fn installation_and_calibration_are_measured() {
    let _g = serial();
    assert!(alloc::is_installed());
    let c = trace_probe::capture::calibrate().expect("calibration");
    let word = std::mem::size_of::<usize>();
    assert!(c.block_size >= c.key_offset + std::mem::size_of::<candle_core::Storage>());
    assert_eq!(c.block_size % word, 0);
    assert!(c.data_ptr_offset.is_some());
    assert!(
        alloc::heap_live_bytes().unwrap() > 0,
        "counting mode counts from process start"
    );
    eprintln!("calibration: {c:?}");
}

#[test]
fn disarmed_hook_logs_nothing() {
    let _g = serial();
    assert!(!alloc::is_armed());
    let before = alloc::pending_events();
    let calls = alloc::armed_alloc_calls();
    for i in 0..100 {
        drop(Tensor::zeros(16 + i, DType::F32, &Device::Cpu).unwrap());
    }
    assert_eq!(alloc::pending_events(), before);
    assert_eq!(alloc::armed_alloc_calls(), calls);
}

#[test]
fn same_size_rounds_give_distinct_lifetimes() {
    let _g = serial();
    // 100 unregistered storages of one size allocated and freed in turn: the allocator hands
    // back the same addresses, the trace still has 100 lifetimes.
    let (keys, events, summary) = window(|_| {
        let mut keys = std::collections::HashSet::new();
        for _ in 0..100 {
            let t = Tensor::zeros((32, 32), DType::F32, &Device::Cpu).unwrap();
            keys.insert(trace_probe::capture::storage_key(&t));
            drop(t);
        }
        keys
    });
    let lt = lifetimes(&events);
    let ours: Vec<_> = lt.values().filter(|v| v.0 == 32 * 32 * 4).collect();
    assert_eq!(ours.len(), 100, "{summary:?}");
    assert!(ours.iter().all(|v| v.1 && v.2));
    assert!(
        keys.len() < 100,
        "addresses were reused ({} keys)",
        keys.len()
    );

    // The same with registration: a known key is an alias only while live.
    let (_, events, _) = window(|reg| {
        for _ in 0..100 {
            let t = Tensor::zeros((16, 16), DType::F32, &Device::Cpu).unwrap();
            reg(&t, "t", MemoryCategory::Activation);
            reg(&t.t().unwrap(), "t", MemoryCategory::Activation);
            drop(t);
        }
    });
    let lt = lifetimes(&events);
    let ours: Vec<_> = lt.values().filter(|v| v.0 == 16 * 16 * 4).collect();
    assert_eq!(ours.len(), 100);
    assert!(ours.iter().all(|v| v.1 && v.2));
}

#[test]
fn frees_on_other_threads_are_caught() {
    let _g = serial();
    use rayon::prelude::*;
    let (_, events, _) = window(|reg| {
        let ts: Vec<Tensor> = (0..100)
            .map(|i| Tensor::zeros(1000 + i, DType::F32, &Device::Cpu).unwrap())
            .collect();
        for t in ts.iter().step_by(2) {
            reg(t, "t", MemoryCategory::Activation);
        }
        ts.into_par_iter().for_each(drop);
        let more: Vec<Tensor> = (0..50)
            .map(|i| Tensor::zeros(3000 + i, DType::F32, &Device::Cpu).unwrap())
            .collect();
        std::thread::spawn(move || drop(more)).join().unwrap();
    });
    let lt = lifetimes(&events);
    for i in 0..100u64 {
        let bytes = (1000 + i) * 4;
        let hits: Vec<_> = lt.values().filter(|v| v.0 == bytes).collect();
        assert_eq!(hits.len(), 1, "storage of {bytes} bytes");
        assert!(hits[0].2, "its free (on a rayon worker) was caught");
    }
    for i in 0..50u64 {
        let bytes = (3000 + i) * 4;
        let hits: Vec<_> = lt.values().filter(|v| v.0 == bytes && v.2).collect();
        assert_eq!(
            hits.len(),
            1,
            "storage of {bytes} bytes freed on a std::thread"
        );
    }
}

#[test]
fn views_add_no_bytes_and_bytes_come_from_the_storage() {
    let _g = serial();
    let (_, events, _) = window(|reg| {
        let t = Tensor::zeros((8, 64, 1), DType::F32, &Device::Cpu).unwrap();
        reg(&t, "t", MemoryCategory::Activation);
        let b = t.broadcast_as((8, 64, 128)).unwrap();
        reg(&b, "t", MemoryCategory::Activation);
        reg(&t.narrow(1, 0, 3).unwrap(), "t", MemoryCategory::Activation);
        let r = t.reshape((8, 64)).unwrap();
        reg(&r, "t", MemoryCategory::Activation);
        drop((t, b, r));
    });
    let allocs: Vec<_> = events
        .iter()
        .filter(|e| e.action == MemoryAction::Alloc)
        .collect();
    assert_eq!(allocs.len(), 1, "{allocs:?}");
    assert_eq!(allocs[0].bytes, Some(8 * 64 * 4));
}

#[test]
fn a_low_ring_capacity_drops_and_counts() {
    let _g = serial();
    let before = alloc::dropped_events();
    alloc::set_ring_capacity(8);
    let (_, _, summary) = window(|_| {
        for _ in 0..50 {
            drop(Tensor::zeros(64, DType::F32, &Device::Cpu).unwrap());
        }
    });
    alloc::set_ring_capacity(alloc::RING_CAPACITY);
    assert!(summary.dropped_events > before, "{summary:?}");
    assert!(alloc::dropped_events() > before);
}

/// The counters the heap figure of a device sample leaves out: a thread's own net bytes, the
/// bytes held by threads marked as the probe's, and the symboliser's cache (measured around
/// each resolution of a real address of this binary).
#[test]
fn the_probe_s_own_heap_is_measured_apart() {
    let _g = serial();
    let before = alloc::thread_heap_net_bytes().expect("counting mode");
    let kept: Vec<u8> = vec![7; 1 << 20];
    let after = alloc::thread_heap_net_bytes().unwrap();
    assert_eq!(after - before, 1 << 20, "one MiB allocated on this thread");
    drop(kept);
    assert_eq!(alloc::thread_heap_net_bytes().unwrap(), before);

    let held_before = alloc::probe_threads_heap_bytes().unwrap();
    let held = std::thread::spawn(|| {
        alloc::mark_probe_thread();
        let v: Vec<u8> = vec![1; 3 << 20];
        let held = alloc::probe_threads_heap_bytes().unwrap();
        drop(v);
        (held, alloc::probe_threads_heap_bytes().unwrap())
    })
    .join()
    .unwrap();
    assert!(
        held.0 >= held_before + (3 << 20),
        "{held:?} from {held_before}"
    );
    assert!(
        held.1 < held_before + (3 << 20),
        "freed on the marked thread: {held:?}"
    );

    // resolving new addresses fills backtrace's cache (kept for the process's life)
    let cache_before = trace_sampler::symbol_cache_bytes().expect("counting mode");
    let stacks = trace_sampler::SessionStacks::default();
    let here = the_probe_s_own_heap_is_measured_apart as fn() as usize as u64;
    stacks.add(
        &[here, lifetimes as fn(&[MemoryEvent]) -> _ as usize as u64],
        true,
    );
    let cache_after = trace_sampler::symbol_cache_bytes().unwrap();
    assert!(
        cache_after >= cache_before,
        "{cache_before} → {cache_after}"
    );
    if trace_sampler::SUPPORTED && cache_before == 0 {
        assert!(
            cache_after > 0,
            "the first resolution parses debug information"
        );
    }
}
