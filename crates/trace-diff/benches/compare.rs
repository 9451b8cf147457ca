//! `compare` of two analysed training-step traces (10^5 spans, 10^6 memory events each, two
//! devices; the candidate from another seed), next to one `analyze` of such a trace for scale.
//!
//! Run: `cargo bench -p trace-diff --bench compare`

use criterion::{criterion_group, criterion_main, Criterion};
use trace_diff::{compare, DiffOptions, Run};
use trace_schema::TraceDocument;
use trace_synth::{synth_events, SynthConfig};

fn config(seed: u64) -> SynthConfig {
    SynthConfig {
        spans: 100_000,
        ops: 100_000,
        memory_events: 1_000_000,
        devices: 2,
        parameters: 256,
        device_memory_samples: 1_000,
        seed,
        ..SynthConfig::default()
    }
}

fn bench(c: &mut Criterion) {
    let a = TraceDocument::from_events(synth_events(&config(1)));
    let b = TraceDocument::from_events(synth_events(&config(2)));
    let (aa, ab) = (trace_graph::analyze(&a), trace_graph::analyze(&b));
    let ra = Run {
        doc: &a,
        analysis: &aa,
        label: "a",
    };
    let rb = Run {
        doc: &b,
        analysis: &ab,
        label: "b",
    };
    let mut group = c.benchmark_group("trace_diff");
    group.sample_size(10);
    group.bench_function("analyze_1e5_spans_1e6_memory", |x| {
        x.iter(|| trace_graph::analyze(std::hint::black_box(&a)))
    });
    group.bench_function("compare_1e5_spans_1e6_memory", |x| {
        x.iter(|| compare(&[ra], &[rb], &DiffOptions::default()).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
