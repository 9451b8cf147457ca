//! `candle-graph import`'s account of a PyTorch profiler trace turned into a candle-graph trace:
//! what was read, what it became, the memory cross-check, what was left out, warnings.

use std::fmt::Write as _;

use serde::Serialize;
use trace_format::bytes;
use trace_import::{ImportReport, Imported};

/// The JSON payload of `import --json`.
#[derive(Debug, Serialize)]
pub struct ImportOutput<'a> {
    /// The file read.
    pub source: String,
    /// The trace written.
    pub output: String,
    /// Events written (meta and terminal included).
    pub events_written: u64,
    /// The account of the import.
    pub report: &'a ImportReport,
}

/// The account as text: what was read, what it became, the memory cross-check, what was left
/// out, warnings.
pub fn render(source: &str, output: Option<&str>, imported: &Imported) -> String {
    let r = &imported.report;
    let mut out = String::new();
    let gz = if r.gzip { ", gzip" } else { "" };
    let _ = writeln!(
        out,
        "imported {source} (PyTorch profiler trace{gz}): {} trace events",
        r.trace_events
    );
    let s = &r.spans;
    let _ = writeln!(
        out,
        "  spans      {} ({} ops, {} functions, {} backward spans added), {} host threads",
        s.total, s.ops, s.functions, s.derived_backward, s.threads
    );
    let passes: Vec<String> = ["forward", "backward", "optimizer"]
        .iter()
        .map(|p| format!("{p} {}", r.passes.get(*p).copied().unwrap_or(0)))
        .collect();
    let _ = writeln!(out, "  passes     {} (spans)", passes.join(", "));
    match &r.memory {
        None => {
            let _ = writeln!(out, "  memory     absent (no [memory] events)");
        }
        Some(m) => {
            let _ = writeln!(
                out,
                "  memory     {} events ({} allocs, {} frees), {} storages from before the window ({})",
                m.events,
                m.allocs,
                m.frees,
                m.pre_existing,
                bytes(m.pre_existing_bytes)
            );
            for d in &m.devices {
                let counter = d.total_allocated_max_bytes.map_or("-".to_string(), bytes);
                let gap = match (d.constant_gap_bytes(), d.gap_min_bytes, d.gap_max_bytes) {
                    (Some(g), _, _) => format!("before the window {}", signed_bytes(g)),
                    (None, Some(lo), Some(hi)) => format!(
                        "Total Allocated − replay varies {} … {}",
                        signed_bytes(lo),
                        signed_bytes(hi)
                    ),
                    _ if d.process.is_none() && !m.processes.is_empty() => {
                        "all processes together (PyTorch's counter is per process)".to_string()
                    }
                    _ => "no counter to compare".to_string(),
                };
                let device = match &d.process {
                    Some(p) => format!("{} pid {}", d.device, trace_format::escape(p)),
                    None => d.device.clone(),
                };
                let _ = writeln!(
                    out,
                    "    {device:<8} replayed peak {}, PyTorch Total Allocated max {counter}, {gap}",
                    bytes(d.replayed_peak_bytes)
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "  GPU        {} device intervals; flows {} paired, {} unpaired",
        r.device_intervals,
        r.flows.paired,
        r.flows.unpaired_starts + r.flows.unpaired_finishes
    );
    for (why, n) in &r.skipped {
        let _ = writeln!(out, "  not imported: {n} {why}");
    }
    for w in &r.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    if let Some(path) = output {
        let _ = writeln!(out, "wrote {path} ({} events)", imported.events.len());
    }
    out
}

fn signed_bytes(v: i128) -> String {
    let magnitude = u64::try_from(v.unsigned_abs()).unwrap_or(u64::MAX);
    if v < 0 {
        format!("-{}", bytes(magnitude))
    } else {
        bytes(magnitude)
    }
}
