//! The sampled call stacks as instant events with their frames.

use super::events::{ChromeError, Ev, Out, Pairs, Range, Us, HOST_PID};
use serde::Serialize;
use std::io::Write;
use trace_schema::{Pass, TraceDocument};

/// Frames of a sample's stack kept in its args (innermost first); the rest are counted.
pub const SAMPLE_STACK_FRAMES: usize = 24;

/// Characters kept of each frame's name in a sample's args and of a sample's slice name.
pub const SAMPLE_NAME_CHARS: usize = 120;

#[derive(Serialize)]
pub(super) struct SampleArgs<'a> {
    /// The op the sample is counted in (trace-ops), absent outside the measured region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) op: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) op_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) pass: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) module: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) span_id: Option<&'a str>,
    /// The innermost frame's `file:line`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) at: Option<&'a str>,
    /// Function names, innermost first.
    pub(super) stack: &'a [String],
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) frames_omitted: usize,
    /// The stack's id in the trace.
    pub(super) stack_id: u32,
    pub(super) thread: u64,
}

/// A stack as samples' args show it: function names (innermost first, at most
/// [`SAMPLE_STACK_FRAMES`]), the frames left out, the innermost frame's `file:line`.
pub(super) struct StackText {
    pub(super) names: Vec<String>,
    pub(super) omitted: usize,
    pub(super) at: Option<String>,
}

impl StackText {
    pub(super) fn of(doc: &TraceDocument, stack: u32) -> Self {
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

pub(super) fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A frame as a sample's args name it: its function (else its address, else `?`), elided to
/// [`SAMPLE_NAME_CHARS`].
pub(super) fn frame_text(f: &trace_schema::sampling::FrameEvent) -> String {
    let name = f
        .function
        .as_deref()
        .or(f.address.as_deref())
        .unwrap_or("?");
    trace_format::elide_middle(name, SAMPLE_NAME_CHARS).into_owned()
}

/// The name of a sample's slice outside any op row: the innermost frame's function (else its
/// address, else `?`).
pub(super) fn sample_name(doc: &TraceDocument, stack: u32) -> String {
    let f = doc.samples.stack_frames(stack).next();
    let raw = f
        .and_then(|f| f.function.as_deref().or(f.address.as_deref()))
        .unwrap_or("?");
    trace_format::elide_middle(raw, SAMPLE_NAME_CHARS).into_owned()
}

/// Thread id of the `k`-th sampled thread's track: after the host lanes.
pub(super) fn sample_tid(lanes: u32, k: usize) -> u32 {
    lanes.saturating_add(1).saturating_add(k as u32)
}

/// The samples: per sampled thread a track (`thread_name` `samples · thread N (name)`) of `X`
/// slices, one per sample, lasting the sample period (cut at the thread's next sample so
/// slices never overlap), named by its op (trace-ops's row: the op, backward op or non-op
/// function it is counted in; samples outside the measured region by their innermost frame),
/// with the op's kind, pass and module, the stack (innermost first, at most
/// [`SAMPLE_STACK_FRAMES`] frames) and the span id in `args`.
pub(super) fn write_samples<W: Write>(
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
