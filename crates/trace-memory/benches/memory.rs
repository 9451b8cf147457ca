//! Scale benchmarks: full memory analysis and per-node metrics on generated traces with 10^5,
//! 10^6 and (opt-in) 10^7 memory events and 10^5 spans, next to a bare serde_json typed parse
//! of the same file.
//!
//! Sizes are chosen with `TRACE_MEMORY_BENCH_SIZES` (powers of ten, comma-separated; default
//! `5,6`; the 10^7 run is `TRACE_MEMORY_BENCH_SIZES=7`). Generation, writing and loading happen
//! outside the timed loops. Throughput is reported per memory event.
//!
//! ```text
//! cargo bench -p trace-memory --bench memory
//! TRACE_MEMORY_BENCH_SIZES=7 cargo bench -p trace-memory --bench memory
//! ```

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use trace_memory::{analyze_memory, node_memory_metrics};
use trace_schema::{load_path, TraceEvent};
use trace_synth::{write_synth_trace, SynthConfig};

/// The generated workload for `memory_events` events: 10^5 spans (fewer for small sizes),
/// one op per ten memory events, two devices, 256 parameters, 1000 device samples.
pub fn config(memory_events: u64) -> SynthConfig {
    SynthConfig {
        memory_events,
        spans: 100_000.min(memory_events),
        ops: memory_events / 10,
        devices: 2,
        parameters: 256,
        device_memory_samples: 1_000,
        ..SynthConfig::default()
    }
}

fn sizes() -> Vec<u32> {
    std::env::var("TRACE_MEMORY_BENCH_SIZES")
        .unwrap_or_else(|_| "5,6".to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// A bare typed parse: every line into a `TraceEvent`, nothing kept.
fn parse_typed(bytes: &[u8]) -> usize {
    let mut n = 0;
    for line in bytes.split(|&b| b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let event: TraceEvent = serde_json::from_slice(line).expect("generated line parses");
        black_box(&event);
        n += 1;
    }
    n
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    for exp in sizes() {
        let n = 10u64.pow(exp);
        let path = dir.path().join(format!("synth-{n}.jsonl"));
        write_synth_trace(&path, &config(n)).expect("write synthetic trace");
        let doc = load_path(&path).expect("load synthetic trace");
        assert_eq!(doc.memory.len() as u64, n);
        let bytes = std::fs::read(&path).expect("read trace");
        remove(&path);

        let mut group = c.benchmark_group(format!("memory_1e{exp}"));
        group.sample_size(10);
        group.sampling_mode(SamplingMode::Flat);
        group.throughput(Throughput::Elements(n));
        group.bench_function("parse_typed_serde_json", |b| {
            b.iter(|| parse_typed(black_box(&bytes)))
        });
        drop(bytes);
        group.bench_function("analyze_memory", |b| {
            b.iter(|| analyze_memory(black_box(&doc)))
        });
        let profile = analyze_memory(&doc);
        let logical = profile.logical.as_ref();
        group.bench_function("node_memory_metrics", |b| {
            b.iter(|| node_memory_metrics(black_box(&doc), logical))
        });
        group.finish();
    }
}

fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

criterion_group!(benches, bench);
criterion_main!(benches);
