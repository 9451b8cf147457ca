//! Bottom-up cost of installing the tracking allocator: `alloc` + `dealloc` pairs called
//! directly on the wrapper (disarmed) against `System`, for a small size, the storage-block
//! size and a page-sized buffer. Multiply the per-pair difference by the allocations per step
//! the probe reports (`CaptureSummary::armed_alloc_calls`) to get the per-step cost.
//!
//! `cargo bench -p trace-alloc --bench alloc_micro`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use trace_alloc::Tracking;

#[global_allocator]
static GLOBAL: Tracking = Tracking::system();

/// A second wrapper called directly (the global one also serves criterion itself).
static DIRECT: Tracking = Tracking::system();

fn pairs(c: &mut Criterion) {
    let mut group = c.benchmark_group("alloc_dealloc_pair");
    group.sample_size(10);
    for size in [64usize, 56, 4096] {
        let layout = Layout::from_size_align(size, 8).expect("layout");
        group.bench_function(format!("system/{size}"), |b| {
            // SAFETY: a non-zero-size layout; the block is freed with the same layout.
            b.iter(|| unsafe {
                let p = System.alloc(black_box(layout));
                black_box(p);
                System.dealloc(p, layout);
            })
        });
        group.bench_function(format!("tracking_disarmed/{size}"), |b| {
            // SAFETY: as above, through the disarmed tracking allocator.
            b.iter(|| unsafe {
                let p = DIRECT.alloc(black_box(layout));
                black_box(p);
                DIRECT.dealloc(p, layout);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pairs);
criterion_main!(benches);
