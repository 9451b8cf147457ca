//! Cost of the probe outside and inside the captured step, writing to `std::io::sink()`.
//!
//! - `outside/*`: the entry points on a step that is not captured — one integer comparison
//!   (`step`) or one relaxed atomic load (everything else).
//! - `inside/*`: the same entry points inside the captured step (event construction and the
//!   channel send; formatting and writing happen on the writer thread).

use std::hint::black_box;

use candle_core::{DType, Device, Tensor};
use criterion::{criterion_group, criterion_main, Criterion};
use trace_probe::{Pass, ProfileRun, SpanKind, TraceSession};

fn outside(c: &mut Criterion) {
    let session = TraceSession::new(ProfileRun::training("bench", 1_000_000), std::io::sink())
        .expect("session");
    let a = Tensor::ones((2, 2), DType::F32, &Device::Cpu).expect("tensor");
    let mut group = c.benchmark_group("outside");
    group.sample_size(10);
    group.bench_function("step", |b| {
        b.iter(|| {
            let g = session.step(black_box(3));
            black_box(&g);
        })
    });
    group.bench_function("pass", |b| {
        b.iter(|| {
            let g = session.pass(Pass::Forward);
            black_box(&g);
        })
    });
    group.bench_function("tensor", |b| b.iter(|| session.tensor("a", black_box(&a))));
    group.bench_function("op_passthrough", |b| {
        b.iter(|| session.op("id", &[&a], || Ok(black_box(&a).clone())))
    });
    group.finish();
    let _ = session.finish();
}

fn inside(c: &mut Criterion) {
    let session =
        TraceSession::new(ProfileRun::training("bench", 1), std::io::sink()).expect("session");
    let step = session.step(1);
    let a = Tensor::ones((2, 2), DType::F32, &Device::Cpu).expect("tensor");
    let mut group = c.benchmark_group("inside");
    group.sample_size(10);
    group.bench_function("span_open_close", |b| {
        b.iter(|| {
            let g = session.span("block", SpanKind::Function);
            black_box(&g);
        })
    });
    group.bench_function("tensor_fact", |b| {
        b.iter(|| session.tensor("a", black_box(&a)))
    });
    drop(step);
    group.finish();
    let _ = session.finish();
}

criterion_group!(benches, outside, inside);
criterion_main!(benches);
