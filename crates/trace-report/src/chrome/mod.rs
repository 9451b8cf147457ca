//! The Chrome Trace Event Format export (Perfetto UI, chrome://tracing).
//!
//! Format: the object form of Google's "Trace Event Format" document — `{"traceEvents": [...],
//! "displayTimeUnit": "ms", "otherData": {...}}`. Phases used (names from that document):
//! `M` metadata (`process_name`, `process_sort_index`, `thread_name`), `X` complete events,
//! `B` begin without end (a span left open by a cut-short trace: the viewer runs it to the
//! end), `b`/`e` nestable async events with an `id`, `C` counters and `i` instant events.
//!
//! What goes where:
//! - pid 1 is the host: one thread per host lane ([`crate::layout`]: the trace records no host
//!   thread ids, so root span trees that overlap in time get separate lanes); spans that nest
//!   are `X` (or `B` when open) slices of their lane, operations are `X` slices inside their
//!   spans; spans and operations that do not nest are `b`/`e` async slices with a unique id and
//!   the reason in `args.not_nested`.
//! - pid 2… is one process per device: counters `live bytes` (`total`) and `live bytes by
//!   category` (one series per category seen on the device) after every memory event that
//!   changed them — the values of trace-memory's change-list timeline at each point, so a
//!   spike inside one clock tick is kept — and the device samples as their own counters
//!   (`device used`, `device reserved`, `device free`, `device capacity`, `process resident`),
//!   only the fields a sample has.
//! - gradients, tensor statistics and findings are instant events whose `args` hold the facts;
//!   gradient facts carry no time and are placed at the end of the backward pass (said in
//!   their args).
//!
//! Times (`ts`, `dur`) are microseconds since the session start with the nanoseconds as a
//! fraction (`12.345`); `otherData.time_origin_ns` is the start of the measured region.
//! Strings are written as they are in the trace, escaped per JSON by serde_json (control
//! characters included). Output is streamed: memory use does not grow with the event count.

mod counters;
mod events;
mod other_data;
mod samples;
mod spans;

use self::{
    counters::{write_counters, write_instants},
    other_data::other_data,
    samples::write_samples,
    spans::write_spans,
};
use crate::layout::SpanLayout;
pub use crate::window::{Window, WindowError};
pub use counters::{CATEGORY_COUNTER, TOTAL_COUNTER};
use events::{device_pid, Ev, Out, Pairs, Range};
pub use events::{ChromeError, ChromeOptions, ExportStats, FORMAT, HOST_PID};
pub use samples::{SAMPLE_NAME_CHARS, SAMPLE_STACK_FRAMES};
use std::io::Write;
use trace_graph::Analysis;
use trace_memory::SpanIndex;
use trace_schema::TraceDocument;

/// Span indices whose path is `path`: the names-only path (every span of that path, e.g. both
/// layers' `model/block/attn`) or the path with layer indices the views show
/// ([`SpanIndex::indexed_path`], one layer: `model/block#2/attn`).
fn spans_with_path(doc: &TraceDocument, spans: &SpanIndex, path: &str) -> Vec<usize> {
    let last = path.rsplit('/').next().unwrap_or(path);
    let last_name = match last.rsplit_once('#') {
        Some((name, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => last,
    };
    (0..doc.spans.len())
        .filter(|&i| {
            let name = doc.str(doc.spans[i].name);
            name == last || name == last_name
        })
        .filter(|&i| spans.path(doc, i) == path || spans.indexed_path(doc, i) == path)
        .collect()
}

/// Up to 8 paths to suggest for an unknown one: those sharing its last name, else the roots'
/// children.
fn path_hint(doc: &TraceDocument, spans: &SpanIndex, path: &str) -> String {
    let last = path.rsplit('/').next().unwrap_or(path);
    let mut same: Vec<String> = (0..doc.spans.len())
        .filter(|&i| doc.str(doc.spans[i].name) == last)
        .map(|i| spans.path(doc, i))
        .collect();
    if same.is_empty() {
        same = spans
            .preorder
            .iter()
            .map(|&s| s as usize)
            .filter(|&s| spans.depth[s] <= 1)
            .map(|s| spans.path(doc, s))
            .collect();
    }
    same.sort();
    same.dedup();
    if same.is_empty() {
        return " (the trace has no spans)".to_string();
    }
    let more = same.len().saturating_sub(8);
    same.truncate(8);
    format!(
        " (paths{}: {}{})",
        if more > 0 { " include" } else { "" },
        same.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// Writes `doc` and its analysis as a Chrome trace to `w` (not flushed: the caller owns `w`).
///
/// # Errors
/// [`ChromeError::UnknownSpanPath`] when `opts.span_path` names no span; I/O errors.
pub fn write_chrome<W: Write>(
    doc: &TraceDocument,
    analysis: &Analysis,
    opts: &ChromeOptions,
    w: W,
) -> Result<ExportStats, ChromeError> {
    let spans = &analysis.spans;
    let origin = analysis.time_origin_ns;
    // Which spans are kept, and the absolute time range.
    let mut range = Range {
        lo: 0,
        hi: u64::MAX,
    };
    let mut keep_span: Vec<bool> = vec![true; doc.spans.len()];
    if let Some(path) = &opts.span_path {
        let matched = spans_with_path(doc, spans, path);
        if matched.is_empty() {
            return Err(ChromeError::UnknownSpanPath {
                path: path.clone(),
                hint: path_hint(doc, spans, path),
            });
        }
        keep_span.fill(false);
        let mut stack: Vec<usize> = matched.clone();
        while let Some(s) = stack.pop() {
            if !std::mem::replace(&mut keep_span[s], true) {
                stack.extend(spans.children[s].iter().map(|&c| c as usize));
            }
        }
        range.lo = matched
            .iter()
            .map(|&s| doc.spans[s].start_ns)
            .min()
            .unwrap_or(0);
        range.hi = matched
            .iter()
            .map(|&s| doc.spans[s].end_ns())
            .try_fold(0u64, |m, e| e.map(|e| m.max(e)))
            .unwrap_or(u64::MAX);
    }
    if let Some(win) = opts.window {
        if let Some(s) = win.start_ns {
            range.lo = range.lo.max(origin.saturating_add(s));
        }
        if let Some(e) = win.end_ns {
            range.hi = range.hi.min(origin.saturating_add(e));
        }
    }
    let filtered = opts.span_path.is_some() || opts.window.is_some();
    for (i, keep) in keep_span.iter_mut().enumerate() {
        *keep = *keep && range.meets(doc.spans[i].start_ns, doc.spans[i].end_ns());
    }

    let layout = SpanLayout::build(doc, spans);
    let mut out = Out {
        w,
        first: true,
        stats: ExportStats::default(),
    };
    out.w
        .write_all(b"{\"displayTimeUnit\":\"ms\",\"otherData\":")?;
    serde_json::to_writer(
        &mut out.w,
        &other_data(doc, analysis, opts, filtered, range, &layout),
    )?;
    out.w.write_all(b",\"traceEvents\":[")?;

    // Metadata: the host and its lanes, one process per device.
    let devices = device_names(doc, analysis);
    write_process(&mut out, HOST_PID, "host", 0)?;
    for lane in 0..layout.lanes {
        let name = format!("host lane {}", lane + 1);
        let mut ev = Ev::new("thread_name", "M", HOST_PID);
        ev.tid = Some(lane + 1);
        let args = [("name", name.as_str())];
        ev.args = Some(Pairs(&args));
        out.event(&ev)?;
    }
    for (k, d) in devices.iter().enumerate() {
        write_process(
            &mut out,
            device_pid(k),
            &format!("device {d}"),
            k as u64 + 1,
        )?;
    }

    let span_filtered = opts.span_path.is_some();
    write_spans(
        &mut out,
        doc,
        spans,
        &layout,
        &keep_span,
        range,
        span_filtered,
    )?;
    write_counters(&mut out, doc, analysis, &devices, range)?;
    write_instants(&mut out, doc, analysis, opts, range)?;
    write_samples(
        &mut out,
        doc,
        analysis.operations.as_ref().ok(),
        &keep_span,
        span_filtered,
        range,
        layout.lanes,
    )?;

    out.w.write_all(b"\n]}\n")?;
    Ok(out.stats)
}

/// Devices with memory events (timeline order), then devices with samples only (label order).
fn device_names(doc: &TraceDocument, analysis: &Analysis) -> Vec<String> {
    let mut names: Vec<String> = analysis
        .memory
        .logical
        .as_ref()
        .map(|l| l.timeline.devices.clone())
        .unwrap_or_default();
    let mut extra: Vec<String> = doc
        .device_memory
        .iter()
        .map(|s| doc.str(s.device).to_string())
        .filter(|d| !names.contains(d))
        .collect();
    extra.sort();
    extra.dedup();
    names.extend(extra);
    names
}

fn write_process<W: Write>(
    out: &mut Out<W>,
    pid: u32,
    name: &str,
    sort: u64,
) -> Result<(), ChromeError> {
    let mut ev = Ev::new("process_name", "M", pid);
    let args = [("name", name)];
    ev.args = Some(Pairs(&args));
    out.event(&ev)?;
    let mut ev = Ev::new("process_sort_index", "M", pid);
    let args = [("sort_index", sort)];
    ev.args = Some(Pairs(&args));
    out.event(&ev)
}

#[cfg(test)]
mod tests {
    use super::events::{Ev, Us};

    #[test]
    fn microseconds_are_exact_decimals() {
        for (ns, text) in [
            (0u64, "0"),
            (1, "0.001"),
            (999, "0.999"),
            (1_000, "1"),
            (12_300, "12.3"),
            (12_345, "12.345"),
            (u64::MAX, "18446744073709551.615"),
        ] {
            assert_eq!(serde_json::to_string(&Us(ns)).unwrap(), text);
        }
        // inside an event, and parsed back by a JSON parser
        let ev: Ev<'_, ()> = Ev {
            ts: Some(Us(1_234_567)),
            ..Ev::new("x", "i", 1)
        };
        let v: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&ev).unwrap()).unwrap();
        assert_eq!(v["ts"].as_f64(), Some(1234.567));
    }
}
