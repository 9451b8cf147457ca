//! `analyze` (health, memory profile, node metrics, timing, graph, findings) on a generated
//! training-step trace with 10^5 spans, 10^6 ops and 10^6 memory events.
//!
//! Run: `cargo bench -p trace-graph --bench analyze`

use criterion::{criterion_group, criterion_main, Criterion};
use trace_schema::TraceDocument;
use trace_synth::{synth_events, SynthConfig};

fn config() -> SynthConfig {
    SynthConfig {
        spans: 100_000,
        ops: 1_000_000,
        memory_events: 1_000_000,
        devices: 2,
        parameters: 256,
        device_memory_samples: 1_000,
        ..SynthConfig::default()
    }
}

fn bench(c: &mut Criterion) {
    let doc = TraceDocument::from_events(synth_events(&config()));
    let mut group = c.benchmark_group("trace_graph");
    group.sample_size(10);
    group.bench_function("analyze_1e5_spans_1e6_ops_1e6_memory", |b| {
        b.iter(|| trace_graph::analyze(std::hint::black_box(&doc)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
