//! Peak resident memory and single-run timings of the memory analysis on a generated trace.
//!
//! ```text
//! cargo run --release -p trace-memory --example memory_rss -- 1000000
//! ```
//!
//! Generates a trace with the benchmark's workload (`benches/memory.rs`), loads it, then
//! measures (Linux): RSS after load, the peak RSS during `analyze_memory` + `node_memory_metrics`
//! (the peak is reset through `/proc/self/clear_refs` after loading, so the load's own peak is
//! not counted), and wall times of one typed serde_json parse, the load, the analysis and the
//! node metrics.

use std::time::Instant;

use trace_memory::{analyze_memory, node_memory_metrics};
use trace_schema::{load_path, TraceEvent};
use trace_synth::{write_synth_trace, SynthConfig};

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`, 100 ticks/s).
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// Runs `f`, returning its result, wall seconds and CPU seconds.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (c, t) = (cpu_s(), Instant::now());
    let out = f();
    (out, t.elapsed().as_secs_f64(), cpu_s() - c)
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("unknown".into(), |k| {
        format!("{:.0} MiB", k as f64 / 1024.0)
    })
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let config = SynthConfig {
        memory_events: n,
        spans: 100_000.min(n),
        ops: n / 10,
        devices: 2,
        parameters: 256,
        device_memory_samples: 1_000,
        ..SynthConfig::default()
    };
    let dir = std::env::temp_dir().join(format!("trace-memory-rss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("trace.jsonl");
    write_synth_trace(&path, &config).expect("write");
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);

    let bytes = std::fs::read(&path).expect("read");
    let (events, parse, parse_cpu) = timed(|| {
        let mut events = 0u64;
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let e: TraceEvent = serde_json::from_slice(line).expect("parse");
            std::hint::black_box(&e);
            events += 1;
        }
        events
    });
    drop(bytes);

    let (doc, load, load_cpu) = timed(|| load_path(&path).expect("load"));
    let _ = std::fs::remove_dir_all(&dir);

    let rss_after_load = status_kib("VmRSS:");
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let (profile, analyze, analyze_cpu) = timed(|| analyze_memory(&doc));
    let (nodes, node, node_cpu) = timed(|| node_memory_metrics(&doc, profile.logical.as_ref()));
    let peak = status_kib("VmHWM:");
    std::hint::black_box(&nodes);

    println!("memory events        {n}");
    println!(
        "events in file       {events} ({:.0} MiB)",
        size as f64 / 1048576.0
    );
    println!(
        "spans / ops          {} / {}",
        doc.spans.len(),
        doc.ops.len()
    );
    println!(
        "lifetimes            {}",
        profile.logical.as_ref().map_or(0, |l| l.lifetimes.len())
    );
    println!("                     wall s   cpu s");
    println!("typed parse          {parse:7.3} {parse_cpu:7.2}");
    println!("load (document)      {load:7.3} {load_cpu:7.2}");
    println!("analyze_memory       {analyze:7.3} {analyze_cpu:7.2}");
    println!("node_memory_metrics  {node:7.3} {node_cpu:7.2}");
    println!(
        "analyze: {:.2} M memory events/s wall, {:.2} M/s cpu; {:.2}x parse wall, {:.2}x parse cpu",
        n as f64 / analyze / 1e6,
        n as f64 / analyze_cpu.max(0.01) / 1e6,
        analyze / parse,
        analyze_cpu / parse_cpu.max(0.01)
    );
    println!(
        "analyze + nodes: {:.2}x parse wall, {:.2}x parse cpu",
        (analyze + node) / parse,
        (analyze_cpu + node_cpu) / parse_cpu.max(0.01)
    );
    println!("RSS after load       {}", mib(rss_after_load));
    if reset {
        println!("peak RSS in analysis {}", mib(peak));
        if let (Some(p), Some(b)) = (peak, rss_after_load) {
            println!("analysis peak extra  {}", mib(Some(p.saturating_sub(b))));
        }
    } else {
        println!(
            "peak RSS (process)   {} (clear_refs unavailable: includes load)",
            mib(peak)
        );
    }
}
