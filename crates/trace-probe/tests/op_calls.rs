//! `calls` counts calls, not allocations, on real candle-nn and candle-core ops captured by the
//! probe: candle-nn's `softmax` allocates five times per call (max, sub, exp, sum, div: five
//! lines of one function); its fused `layer_norm` and candle-core's `conv2d` are counted
//! exactly too.

// Sites need the DWARF unwinder of the sampler's targets (cfg `stack_sampler`, set by build.rs).
#![cfg(stack_sampler)]

use candle_core::{DType, Device, Tensor};
use trace_ops::SiteProfile;
use trace_probe::{testing, ProfileRun, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Calls and allocations of `op` in the capture.
fn calls_and_allocs(sites: &SiteProfile, op: &str) -> (u64, u64) {
    sites
        .rows
        .iter()
        .filter(|r| r.op == op)
        .fold((0, 0), |(c, a), r| (c + r.calls, a + r.allocs))
}

#[test]
fn several_allocations_of_one_call_are_one_call() -> Res<()> {
    let dev = Device::Cpu;
    // 64 × 256 f32 = 64 KiB per tensor: every allocation above the sites' threshold
    let x = Tensor::randn(0f32, 1.0, (64, 256), &dev)?;
    let w = Tensor::ones(256, DType::F32, &dev)?;
    let b = Tensor::zeros(256, DType::F32, &dev)?;
    let img = Tensor::randn(0f32, 1.0, (8, 4, 28, 28), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (16, 4, 3, 3), &dev)?;
    let trace = testing::capture(ProfileRun::training("calls::step", 1), |profiler| {
        let _step = profiler.step(1);
        for _ in 0..2 {
            // two calls from one line: the second's first allocation was seen in the first
            let _s = candle_nn::ops::softmax(&x, 1)?;
        }
        let _s = candle_nn::ops::softmax(&x, 0)?; // a third, from another line
        for _ in 0..3 {
            let _n = candle_nn::ops::layer_norm(&x, &w, &b, 1e-5)?;
        }
        for _ in 0..2 {
            let _c = img.conv2d(&k, 1, 1, 1, 1)?;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    let doc = trace.document()?;
    let sites = SiteProfile::from_document(&doc).expect("the tracking allocator gave sites");
    let (calls, allocs) = calls_and_allocs(&sites, "softmax");
    assert_eq!(calls, 3, "softmax: {allocs} allocations");
    // 11 sited allocations here: sub, exp and div (and dim 0's max and sum, at 1 KiB)
    assert!(
        allocs > calls,
        "softmax allocates several times per call: {allocs}"
    );
    let (calls, allocs) = calls_and_allocs(&sites, "layer_norm");
    assert_eq!(calls, 3, "layer_norm: {allocs} allocations");
    let conv: (u64, u64) = ["conv2d", "conv2d_with_algo"]
        .iter()
        .map(|op| calls_and_allocs(&sites, op))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!(conv.0, 2, "conv2d: {} allocations", conv.1);
    // one sited storage per call at this size (2 storages for 2 calls); the calls are exact all the same
    assert!(conv.1 >= conv.0, "conv2d: {conv:?}");
    Ok(())
}
