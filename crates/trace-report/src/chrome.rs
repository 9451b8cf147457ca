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

use std::collections::BTreeMap;
use std::io::Write;
use std::str::FromStr;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use trace_graph::Analysis;
use trace_memory::SpanIndex;
use trace_schema::{MemoryCategory, Pass, TraceDocument};

use crate::layout::{NotNested, SpanLayout};
use crate::FindingText;

/// The `otherData.format` of this export.
pub const FORMAT: &str = "candle-graph/chrome/1";

/// pid of the host process (spans, operations, instants).
pub const HOST_PID: u32 = 1;

/// A time window relative to the start of the measured region, ns; an absent bound is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Window {
    /// Start, ns after the time origin.
    pub start_ns: Option<u64>,
    /// End, ns after the time origin (inclusive).
    pub end_ns: Option<u64>,
}

/// A `--window` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// Not `START..END`.
    #[error("a window is START..END (either side may be empty), e.g. 10ms..25ms, not `{0}`")]
    Shape(String),
    /// A bound that is not a duration.
    #[error("`{0}` is not a duration: a number with a unit, ns, us (µs), ms or s, e.g. 1.5ms")]
    Duration(String),
    /// START after END.
    #[error("the window starts after it ends ({0})")]
    Reversed(String),
}

/// Parses `1500`, `1500ns`, `12.5us`, `12.5µs`, `3ms`, `0.2s` into ns (a bare number is ns).
fn parse_duration_ns(s: &str) -> Result<u64, WindowError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(WindowError::Duration(s.to_string())),
    };
    let bad = || WindowError::Duration(s.to_string());
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(bad());
    }
    let int: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let digits = scale.ilog10() as usize;
    if frac.len() > digits || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad()); // finer than a nanosecond
    }
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow((digits - frac.len()) as u32)
    };
    int.checked_mul(scale)
        .and_then(|v| v.checked_add(frac_ns))
        .ok_or_else(bad)
}

impl FromStr for Window {
    type Err = WindowError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, b) = s
            .split_once("..")
            .ok_or_else(|| WindowError::Shape(s.to_string()))?;
        let bound = |x: &str| -> Result<Option<u64>, WindowError> {
            if x.trim().is_empty() {
                Ok(None)
            } else {
                parse_duration_ns(x).map(Some)
            }
        };
        let w = Window {
            start_ns: bound(a)?,
            end_ns: bound(b)?,
        };
        if let (Some(x), Some(y)) = (w.start_ns, w.end_ns) {
            if x > y {
                return Err(WindowError::Reversed(s.to_string()));
            }
        }
        Ok(w)
    }
}

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ChromeOptions {
    /// Keep only the spans whose `/`-joined path equals this, with their subtrees, and the
    /// counters and instants inside their time range.
    pub span_path: Option<String>,
    /// Keep only what intersects this window (relative to the time origin).
    pub window: Option<Window>,
    /// Findings as the caller states them (with advice), exported as instant events.
    pub findings: Vec<FindingText>,
    /// Name and version of the exporting tool, for `otherData.tool`.
    pub tool: (String, String),
}

/// Why the export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChromeError {
    /// `--span` names no span.
    #[error("no span has the path `{path}`{hint}")]
    UnknownSpanPath {
        /// The path asked for.
        path: String,
        /// Candidate paths.
        hint: String,
    },
    /// Writing failed.
    #[error("cannot write the export: {0}")]
    Io(#[from] std::io::Error),
    /// Serializing failed (not expected for these types).
    #[error("cannot serialize the export: {0}")]
    Json(#[from] serde_json::Error),
}

/// Counts of what was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExportStats {
    /// Every event in `traceEvents`.
    pub events: u64,
    /// Spans as nesting `X`/`B` slices.
    pub nested_spans: u64,
    /// Spans as async `b`/`e` slices.
    pub async_spans: u64,
    /// Operations (either form).
    pub ops: u64,
    /// Counter events.
    pub counters: u64,
    /// Instant events.
    pub instants: u64,
    /// Sampled call stacks (one `X` slice each on its thread's samples track).
    pub samples: u64,
}

/// Microseconds with the nanoseconds as a fraction, written as a JSON number.
#[derive(Debug, Clone, Copy)]
struct Us(u64);

impl Us {
    /// The exact decimal: `12.345`, `12.3`, `12`.
    fn decimal(self) -> String {
        let (us, ns) = (self.0 / 1000, self.0 % 1000);
        if ns == 0 {
            return us.to_string();
        }
        let frac = format!("{ns:03}");
        format!("{us}.{}", frac.trim_end_matches('0'))
    }
}

impl Serialize for Us {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Written as an exact decimal token (a float would lose nanoseconds past 2^42 µs).
        serde_json::value::RawValue::from_string(self.decimal())
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

/// A map of `(key, value)` pairs in the given order.
struct Pairs<'a, V: Serialize>(&'a [(&'a str, V)]);

impl<V: Serialize> Serialize for Pairs<'_, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One trace event; absent fields are omitted.
#[derive(Serialize)]
struct Ev<'a, A: Serialize> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<Us>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<Us>,
    pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<A>,
}

impl<'a, A: Serialize> Ev<'a, A> {
    fn new(name: &'a str, ph: &'static str, pid: u32) -> Self {
        Self {
            name,
            cat: None,
            ph,
            ts: None,
            dur: None,
            pid,
            tid: None,
            id: None,
            s: None,
            args: None,
        }
    }
}

/// Streams events as the elements of the `traceEvents` array.
struct Out<W: Write> {
    w: W,
    first: bool,
    stats: ExportStats,
}

impl<W: Write> Out<W> {
    fn event<A: Serialize>(&mut self, ev: &Ev<'_, A>) -> Result<(), ChromeError> {
        self.w.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        serde_json::to_writer(&mut self.w, ev)?;
        self.stats.events += 1;
        Ok(())
    }
}

/// The absolute time range kept, ns since session start, both ends inclusive.
#[derive(Debug, Clone, Copy)]
struct Range {
    lo: u64,
    hi: u64,
}

impl Range {
    fn holds(self, t: u64) -> bool {
        t >= self.lo && t <= self.hi
    }

    fn meets(self, start: u64, end: Option<u64>) -> bool {
        start <= self.hi && end.is_none_or(|e| e >= self.lo)
    }
}

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

fn device_pid(k: usize) -> u32 {
    HOST_PID + 1 + k as u32
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

#[derive(Serialize)]
struct SpanArgs<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<&'a str>,
    path: String,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pass: Option<&'static str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    measured: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    module_path: Option<&'a str>,
    /// A span left open by a cut-short trace: its end is unknown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    open: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_nested: Option<&'static str>,
}

#[derive(Serialize)]
struct OpArgs<'a> {
    span_id: &'a str,
    shape: &'a [u64],
    dtype: &'a str,
    device: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dense_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_nested: Option<&'static str>,
}

/// A slice of a lane, sortable into the order viewers need for ties: start, then longer
/// first (open = longest), then parents before children (pre-order position).
#[derive(Clone, Copy)]
struct Slice {
    start: u64,
    dur: Option<u64>,
    order: (u32, u32),
    what: SliceKind,
}

#[derive(Clone, Copy)]
enum SliceKind {
    Span(usize),
    Op(usize),
}

fn write_spans<W: Write>(
    out: &mut Out<W>,
    doc: &TraceDocument,
    spans: &SpanIndex,
    layout: &SpanLayout,
    keep_span: &[bool],
    range: Range,
    span_filtered: bool,
) -> Result<(), ChromeError> {
    let mut pos = vec![u32::MAX; doc.spans.len()];
    for (p, &s) in spans.preorder.iter().enumerate() {
        pos[s as usize] = p as u32;
    }
    let mut lanes: Vec<Vec<Slice>> = vec![Vec::new(); layout.lanes as usize];
    let mut apart: Vec<Slice> = Vec::new();
    for s in 0..doc.spans.len() {
        if !keep_span[s] {
            continue;
        }
        let sp = &doc.spans[s];
        let slice = Slice {
            start: sp.start_ns,
            dur: sp.duration_ns,
            order: (pos[s], 0),
            what: SliceKind::Span(s),
        };
        match layout.nesting[s] {
            None => lanes[layout.lane[s] as usize].push(slice),
            Some(_) => apart.push(slice),
        }
    }
    for (j, op) in doc.ops.iter().enumerate() {
        let Some(s) = doc.span_index(op.span) else {
            // An op of an unknown span: no lane to nest in; kept unless a span filter is set.
            let end = op.timestamp_ns.checked_add(op.duration_ns);
            if span_filtered || !range.meets(op.timestamp_ns, end) {
                continue;
            }
            apart.push(Slice {
                start: op.timestamp_ns,
                dur: Some(op.duration_ns),
                order: (u32::MAX, j as u32),
                what: SliceKind::Op(j),
            });
            continue;
        };
        if !keep_span[s]
            || !range.meets(op.timestamp_ns, op.timestamp_ns.checked_add(op.duration_ns))
        {
            continue;
        }
        let slice = Slice {
            start: op.timestamp_ns,
            dur: Some(op.duration_ns),
            order: (pos[s], j as u32 + 1),
            what: SliceKind::Op(j),
        };
        match layout.op_nesting[j] {
            None => lanes[layout.lane[s] as usize].push(slice),
            Some(_) => apart.push(slice),
        }
    }
    let key = |x: &Slice| {
        (
            x.start,
            std::cmp::Reverse(x.dur.unwrap_or(u64::MAX)),
            x.order,
        )
    };
    let mut next_id = 0u64;
    for (lane, slices) in lanes.iter_mut().enumerate() {
        slices.sort_by_key(key);
        for sl in slices.iter() {
            write_slice(out, doc, spans, layout, sl, lane as u32 + 1, None)?;
        }
    }
    apart.sort_by_key(key);
    for sl in &apart {
        next_id += 1;
        let lane = match sl.what {
            SliceKind::Span(s) => layout.lane[s],
            SliceKind::Op(j) => layout.op_lane[j],
        };
        write_slice(out, doc, spans, layout, sl, lane + 1, Some(next_id))?;
    }
    Ok(())
}

fn write_slice<W: Write>(
    out: &mut Out<W>,
    doc: &TraceDocument,
    spans: &SpanIndex,
    layout: &SpanLayout,
    sl: &Slice,
    tid: u32,
    async_id: Option<u64>,
) -> Result<(), ChromeError> {
    let id = async_id.map(|n| format!("0x{n:x}"));
    match sl.what {
        SliceKind::Span(s) => {
            let sp = &doc.spans[s];
            let args = SpanArgs {
                id: doc.str(sp.id),
                parent_id: sp.parent.map(|p| doc.str(p)),
                path: spans.path(doc, s),
                kind: sp.kind.into(),
                pass: spans.pass[s].map(Pass::as_str),
                measured: sp.measured,
                module_path: sp.module_path.map(|m| doc.str(m)),
                open: sp.duration_ns.is_none(),
                not_nested: layout.nesting[s].map(NotNested::as_str),
            };
            let name = doc.str(sp.name);
            write_one(out, name, "span", sl, tid, id, args)?;
            if async_id.is_some() {
                out.stats.async_spans += 1;
            } else {
                out.stats.nested_spans += 1;
            }
        }
        SliceKind::Op(j) => {
            let op = &doc.ops[j];
            let args = OpArgs {
                span_id: doc.str(op.span),
                shape: doc.shape(op.shape),
                dtype: doc.str(op.dtype),
                device: doc.str(op.device),
                output: op.output.map(|o| doc.str(o)),
                output_dense_bytes: op.output_dense_bytes,
                not_nested: match doc.span_index(op.span) {
                    Some(_) => layout.op_nesting[j].map(NotNested::as_str),
                    None => Some(NotNested::OutsideParent.as_str()),
                },
            };
            write_one(out, doc.str(op.op_name), "op", sl, tid, id, args)?;
            out.stats.ops += 1;
        }
    }
    Ok(())
}

/// A nesting slice (`X`, or `B` when open) or an async pair (`b` and, when closed, `e`).
fn write_one<W: Write, A: Serialize>(
    out: &mut Out<W>,
    name: &str,
    cat: &'static str,
    sl: &Slice,
    tid: u32,
    async_id: Option<String>,
    args: A,
) -> Result<(), ChromeError> {
    let mut ev = Ev::new(name, "X", HOST_PID);
    ev.cat = Some(cat);
    ev.ts = Some(Us(sl.start));
    ev.tid = Some(tid);
    ev.args = Some(args);
    match (&async_id, sl.dur) {
        (None, Some(d)) => ev.dur = Some(Us(d)),
        (None, None) => ev.ph = "B",
        (Some(_), _) => {
            ev.ph = "b";
            ev.id = async_id.clone();
        }
    }
    out.event(&ev)?;
    if let (Some(id), Some(d)) = (async_id, sl.dur) {
        let mut end: Ev<'_, ()> = Ev::new(name, "e", HOST_PID);
        end.cat = Some(cat);
        end.ts = Some(Us(sl.start.saturating_add(d)));
        end.tid = Some(tid);
        end.id = Some(id);
        out.event(&end)?;
    }
    Ok(())
}

/// Counter name of the per-device total.
pub const TOTAL_COUNTER: &str = "live bytes";
/// Counter name of the per-device, per-category series.
pub const CATEGORY_COUNTER: &str = "live bytes by category";

fn write_counters<W: Write>(
    out: &mut Out<W>,
    doc: &TraceDocument,
    analysis: &Analysis,
    devices: &[String],
    range: Range,
) -> Result<(), ChromeError> {
    if let Some(l) = analysis.memory.logical.as_ref() {
        let tl = &l.timeline;
        let nd = tl.devices.len();
        let nc = MemoryCategory::ALL.len();
        let cat_index = |c: MemoryCategory| MemoryCategory::ALL.iter().position(|&x| x == c);
        // Categories each device ever has, so every event of its counter lists the same series.
        let mut seen = vec![vec![false; nc]; nd];
        for ch in &tl.changes {
            if let Some(k) = cat_index(ch.category) {
                seen[ch.device as usize][k] = true;
            }
        }
        let mut cells = vec![0u64; nd * nc];
        let mut before = vec![false; nd];
        let emit = |out: &mut Out<W>, d: usize, t: u64, cells: &[u64]| {
            let row = &cells[d * nc..(d + 1) * nc];
            // A sum of distinct live storages' bytes: bounded by the checked trace total.
            let total: u64 = row.iter().sum();
            let pid = device_pid(d);
            let mut ev = Ev::new(TOTAL_COUNTER, "C", pid);
            ev.ts = Some(Us(t));
            let args = [("total", total)];
            ev.args = Some(Pairs(&args));
            out.event(&ev)?;
            let pairs: Vec<(&str, u64)> = MemoryCategory::ALL
                .iter()
                .enumerate()
                .filter(|(k, _)| seen[d][*k])
                .map(|(k, c)| (c.as_str(), row[k]))
                .collect();
            let mut ev = Ev::new(CATEGORY_COUNTER, "C", pid);
            ev.ts = Some(Us(t));
            ev.args = Some(Pairs(&pairs));
            out.event(&ev)?;
            out.stats.counters += 2;
            Ok::<(), ChromeError>(())
        };
        let mut i = 0;
        let apply = |cells: &mut [u64], i: usize| {
            let ch = &tl.changes[i];
            if let Some(k) = cat_index(ch.category) {
                cells[ch.device as usize * nc + k] = ch.live_bytes;
            }
        };
        while i < tl.changes.len() && tl.changes[i].timestamp_ns < range.lo {
            apply(&mut cells, i);
            before[tl.changes[i].device as usize] = true;
            i += 1;
        }
        // A window starts with the values after every earlier event.
        for d in (0..nd).filter(|&d| before[d]) {
            emit(out, d, range.lo, &cells)?;
        }
        while i < tl.changes.len() && tl.changes[i].timestamp_ns <= range.hi {
            apply(&mut cells, i);
            let ch = &tl.changes[i];
            emit(out, ch.device as usize, ch.timestamp_ns, &cells)?;
            i += 1;
        }
    }
    // Physical samples, each field its own counter.
    for s in &doc.device_memory {
        if !range.holds(s.timestamp_ns) {
            continue;
        }
        let name = doc.str(s.device);
        let Some(k) = devices.iter().position(|d| d == name) else {
            continue;
        };
        for (counter, v) in [
            ("device used", s.used_bytes),
            ("device reserved", s.reserved_bytes),
            ("device free", s.free_bytes),
            ("device capacity", s.capacity_bytes),
            ("process resident", s.resident_bytes),
        ] {
            if let Some(v) = v {
                let mut ev = Ev::new(counter, "C", device_pid(k));
                ev.ts = Some(Us(s.timestamp_ns));
                let args = [("bytes", v)];
                ev.args = Some(Pairs(&args));
                out.event(&ev)?;
                out.stats.counters += 1;
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct GradientArgs<'a> {
    root: &'a str,
    key: &'a str,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    norm: Option<f64>,
    parameter: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    non_finite_elements: Option<u64>,
    placed_at: &'static str,
}

fn write_instants<W: Write>(
    out: &mut Out<W>,
    doc: &TraceDocument,
    analysis: &Analysis,
    opts: &ChromeOptions,
    range: Range,
) -> Result<(), ChromeError> {
    let spans = &analysis.spans;
    // Gradient facts carry no time: at the end of the backward pass, else of the measured region.
    let backward_end = spans
        .first_declaring(doc, Pass::Backward)
        .and_then(|b| doc.spans[b].end_ns())
        .map(|t| {
            (
                t,
                "the end of the backward pass (gradient facts carry no time)",
            )
        });
    let measured_end = spans.measured_region(doc).and_then(|(_, e)| e).map(|t| {
        (
            t,
            "the end of the measured region (gradient facts carry no time)",
        )
    });
    if let Some((t, placed_at)) = backward_end.or(measured_end) {
        if range.holds(t) {
            for g in &doc.gradients {
                let mut ev = Ev::new(&g.key, "i", HOST_PID);
                ev.cat = Some("gradient");
                ev.ts = Some(Us(t));
                ev.tid = Some(1);
                ev.s = Some("t");
                ev.args = Some(GradientArgs {
                    root: &g.root,
                    key: &g.key,
                    state: g.state.into(),
                    norm: g.norm,
                    parameter: g.parameter,
                    bytes: g.bytes,
                    non_finite_elements: g.non_finite_elements,
                    placed_at,
                });
                out.event(&ev)?;
                out.stats.instants += 1;
            }
        }
    }
    for st in &doc.tensor_stats {
        let t = doc
            .sym(&st.span_id)
            .and_then(|s| doc.span(s))
            .map(|s| s.end_ns().unwrap_or(s.start_ns));
        let Some(t) = t.filter(|&t| range.holds(t)) else {
            continue;
        };
        let mut ev = Ev::new(&st.label, "i", HOST_PID);
        ev.cat = Some("tensor_stats");
        ev.ts = Some(Us(t));
        ev.tid = Some(1);
        ev.s = Some("t");
        ev.args = Some(st);
        out.event(&ev)?;
        out.stats.instants += 1;
    }
    let fallback = spans
        .measured_region(doc)
        .map(|(s, _)| s)
        .unwrap_or(analysis.time_origin_ns);
    for f in &opts.findings {
        let t = f.timestamp_ns.unwrap_or(fallback);
        if !range.holds(t) {
            continue;
        }
        let mut ev = Ev::new(&f.code, "i", HOST_PID);
        ev.cat = Some("finding");
        ev.ts = Some(Us(t));
        ev.s = Some("g");
        ev.args = Some(f);
        out.event(&ev)?;
        out.stats.instants += 1;
    }
    Ok(())
}

/// Frames of a sample's stack kept in its args (innermost first); the rest are counted.
pub const SAMPLE_STACK_FRAMES: usize = 24;
/// Characters kept of each frame's name in a sample's args and of a sample's slice name.
pub const SAMPLE_NAME_CHARS: usize = 120;

#[derive(Serialize)]
struct SampleArgs<'a> {
    /// The op the sample is counted in (trace-ops), absent outside the measured region.
    #[serde(skip_serializing_if = "Option::is_none")]
    op: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    op_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pass: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    span_id: Option<&'a str>,
    /// The innermost frame's `file:line`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    at: Option<&'a str>,
    /// Function names, innermost first.
    stack: &'a [String],
    #[serde(skip_serializing_if = "is_zero")]
    frames_omitted: usize,
    /// The stack's id in the trace.
    stack_id: u32,
    thread: u64,
}

/// A stack as samples' args show it: function names (innermost first, at most
/// [`SAMPLE_STACK_FRAMES`]), the frames left out, the innermost frame's `file:line`.
struct StackText {
    names: Vec<String>,
    omitted: usize,
    at: Option<String>,
}

impl StackText {
    fn of(doc: &TraceDocument, stack: u32) -> Self {
        let table = &doc.samples;
        let depth = table
            .stacks
            .get(stack as usize)
            .map_or(0, |s| s.frames.len());
        let names: Vec<String> = table
            .stack_frames(stack)
            .take(SAMPLE_STACK_FRAMES)
            .map(frame_text)
            .collect();
        let at = table
            .stack_frames(stack)
            .next()
            .and_then(|f| match (&f.file, f.line) {
                (Some(file), Some(line)) => Some(format!(
                    "{}:{line}",
                    trace_format::elide_middle(file, SAMPLE_NAME_CHARS)
                )),
                (Some(file), None) => {
                    Some(trace_format::elide_middle(file, SAMPLE_NAME_CHARS).into_owned())
                }
                _ => None,
            });
        Self {
            omitted: depth.saturating_sub(names.len()),
            names,
            at,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A frame as a sample's args name it: its function (else its address, else `?`), elided to
/// [`SAMPLE_NAME_CHARS`].
fn frame_text(f: &trace_schema::sampling::FrameEvent) -> String {
    let name = f
        .function
        .as_deref()
        .or(f.address.as_deref())
        .unwrap_or("?");
    trace_format::elide_middle(name, SAMPLE_NAME_CHARS).into_owned()
}

/// The name of a sample's slice outside any op row: the innermost frame's function (else its
/// address, else `?`).
fn sample_name(doc: &TraceDocument, stack: u32) -> String {
    let f = doc.samples.stack_frames(stack).next();
    let raw = f
        .and_then(|f| f.function.as_deref().or(f.address.as_deref()))
        .unwrap_or("?");
    trace_format::elide_middle(raw, SAMPLE_NAME_CHARS).into_owned()
}

/// Thread id of the `k`-th sampled thread's track: after the host lanes.
fn sample_tid(lanes: u32, k: usize) -> u32 {
    lanes.saturating_add(1).saturating_add(k as u32)
}

/// The samples: per sampled thread a track (`thread_name` `samples · thread N (name)`) of `X`
/// slices, one per sample, lasting the sample period (cut at the thread's next sample so
/// slices never overlap), named by its op (trace-ops's row: the op, backward op or non-op
/// function it is counted in; samples outside the measured region by their innermost frame),
/// with the op's kind, pass and module, the stack (innermost first, at most
/// [`SAMPLE_STACK_FRAMES`] frames) and the span id in `args`.
fn write_samples<W: Write>(
    out: &mut Out<W>,
    doc: &TraceDocument,
    operations: Option<&trace_ops::OpProfile>,
    keep_span: &[bool],
    span_filtered: bool,
    range: Range,
    lanes: u32,
) -> Result<(), ChromeError> {
    let table = &doc.samples;
    if table.samples.is_empty() {
        return Ok(());
    }
    let profile = operations;
    let mut texts: std::collections::HashMap<u32, StackText> = std::collections::HashMap::new();
    let period = table.sampler.as_ref().map_or(0, |s| s.period_ns);
    // threads: those the sampler lists, in its order, then any other key seen
    let mut threads: Vec<u64> = table
        .sampler
        .as_ref()
        .map(|s| s.threads.iter().map(|t| t.thread).collect())
        .unwrap_or_default();
    let mut seen: std::collections::HashSet<u64> = threads.iter().copied().collect();
    for s in &table.samples {
        if seen.insert(s.thread) {
            threads.push(s.thread);
        }
    }
    let mut by_thread: Vec<Vec<usize>> = vec![Vec::new(); threads.len()];
    let pos: std::collections::HashMap<u64, usize> =
        threads.iter().enumerate().map(|(k, &t)| (t, k)).collect();
    for (i, s) in table.samples.iter().enumerate() {
        let kept_span = match s.span.and_then(|sp| doc.span_index(sp)) {
            Some(si) => keep_span[si],
            None => !span_filtered,
        };
        if kept_span && range.holds(s.timestamp_ns) {
            by_thread[pos[&s.thread]].push(i);
        }
    }
    for (k, list) in by_thread.iter_mut().enumerate() {
        let thread = threads[k];
        let name = table
            .sampler
            .as_ref()
            .and_then(|s| s.threads.iter().find(|t| t.thread == thread))
            .and_then(|t| t.name.as_deref());
        let label = match name {
            Some(n) => format!(
                "samples · thread {thread} ({})",
                trace_format::elide_middle(n, 60)
            ),
            None => format!("samples · thread {thread}"),
        };
        let tid = sample_tid(lanes, k);
        let mut ev = Ev::new("thread_name", "M", HOST_PID);
        ev.tid = Some(tid);
        let args = [("name", label.as_str())];
        ev.args = Some(Pairs(&args));
        out.event(&ev)?;
        let mut ev = Ev::new("thread_sort_index", "M", HOST_PID);
        ev.tid = Some(tid);
        let args = [("sort_index", u64::from(tid))];
        ev.args = Some(Pairs(&args));
        out.event(&ev)?;
        list.sort_by_key(|&i| (table.samples[i].timestamp_ns, i));
        for (j, &i) in list.iter().enumerate() {
            let s = &table.samples[i];
            let next = list.get(j + 1).map(|&n| table.samples[n].timestamp_ns);
            let dur = next.map_or(period, |n| period.min(n - s.timestamp_ns));
            let text = texts
                .entry(s.stack)
                .or_insert_with(|| StackText::of(doc, s.stack));
            let row = profile.and_then(|p| p.row_of_sample(i));
            let name = match row.and_then(|r| r.op.as_deref()) {
                Some(op) => trace_format::elide_middle(op, SAMPLE_NAME_CHARS).into_owned(),
                None => sample_name(doc, s.stack),
            };
            let mut ev = Ev::new(&name, "X", HOST_PID);
            ev.cat = Some("sample");
            ev.ts = Some(Us(s.timestamp_ns));
            ev.dur = Some(Us(dur));
            ev.tid = Some(tid);
            ev.args = Some(SampleArgs {
                op: row.and_then(|r| r.op.as_deref()),
                op_kind: row.and_then(|r| r.kind).map(trace_ops::OpKind::as_str),
                pass: row.and_then(|r| r.pass).map(Pass::as_str),
                module: row.and_then(|r| r.module.as_deref()),
                span_id: s.span.map(|sp| doc.str(sp)),
                at: text.at.as_deref(),
                stack: &text.names,
                frames_omitted: text.omitted,
                stack_id: table.stacks.get(s.stack as usize).map_or(0, |st| st.id),
                thread,
            });
            out.event(&ev)?;
            out.stats.samples += 1;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct OtherData<'a> {
    format: &'static str,
    tool: BTreeMap<&'static str, &'a str>,
    trace_schema: &'static str,
    run_id: &'a str,
    entrypoint: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warmup_steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    candle_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    probe_version: Option<&'a str>,
    timestamp: &'a str,
    time_origin_ns: u64,
    time_unit: &'static str,
    truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated_at_line: Option<u64>,
    filtered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<Filter<'a>>,
    host_threads: &'static str,
    not_nested_spans: u64,
}

#[derive(Serialize)]
struct Filter<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    span: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<Window>,
    /// The kept range, ns since session start (inclusive; `null` end: open).
    range_ns: (u64, Option<u64>),
}

fn other_data<'a>(
    doc: &'a TraceDocument,
    analysis: &Analysis,
    opts: &'a ChromeOptions,
    filtered: bool,
    range: Range,
    layout: &SpanLayout,
) -> OtherData<'a> {
    let m = &doc.meta;
    OtherData {
        format: FORMAT,
        tool: BTreeMap::from([
            ("name", opts.tool.0.as_str()),
            ("version", opts.tool.1.as_str()),
        ]),
        trace_schema: doc.version.as_str(),
        run_id: &m.run_id,
        entrypoint: &m.entrypoint,
        phase: m.phase.map(|p| p.as_str()),
        capture_step: m.capture_step,
        warmup_steps: m.warmup_steps,
        device: m.device.as_deref(),
        candle_version: m.candle_version.as_deref(),
        probe_version: m.probe_version.as_deref(),
        timestamp: &m.timestamp,
        time_origin_ns: analysis.time_origin_ns,
        time_unit: "ts and dur are microseconds since the session start, nanoseconds as the fraction; time_origin_ns is the start of the measured region",
        truncated: doc.is_truncated(),
        truncated_at_line: doc.truncation.as_ref().and_then(|t| t.partial_line),
        filtered,
        filter: filtered.then_some(Filter {
            span: opts.span_path.as_deref(),
            window: opts.window,
            range_ns: (range.lo, (range.hi != u64::MAX).then_some(range.hi)),
        }),
        host_threads: "not recorded by the trace: spans are laid out on host lanes, one root span tree per lane, overlapping root trees on separate lanes",
        not_nested_spans: layout.nesting.iter().filter(|n| n.is_some()).count() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_with_units_and_open_ends() {
        let w: Window = "10ms..25.5ms".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (Some(10_000_000), Some(25_500_000)));
        let w: Window = "..1.5us".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (None, Some(1_500)));
        let w: Window = "2s..".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (Some(2_000_000_000), None));
        let w: Window = "7..9ns".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (Some(7), Some(9)));
        assert_eq!("0.5µs..".parse::<Window>().unwrap().start_ns, Some(500));
        assert!(matches!(
            "10ms".parse::<Window>(),
            Err(WindowError::Shape(_))
        ));
        assert!(matches!(
            "1h..2h".parse::<Window>(),
            Err(WindowError::Duration(_))
        ));
        assert!(matches!(
            "1.0001us..".parse::<Window>(),
            Err(WindowError::Duration(_))
        ));
        assert!(matches!(
            "3ms..2ms".parse::<Window>(),
            Err(WindowError::Reversed(_))
        ));
        assert!(matches!(
            "99999999999999s..".parse::<Window>(),
            Err(WindowError::Duration(_))
        ));
    }

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
