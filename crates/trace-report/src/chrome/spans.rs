//! The host process: spans and operations as slices of their lane, or async slices when
//! they do not nest.

use super::events::{ChromeError, Ev, Out, Range, Us, HOST_PID};
use crate::layout::{NotNested, SpanLayout};
use serde::Serialize;
use std::io::Write;
use trace_memory::SpanIndex;
use trace_schema::{Pass, TraceDocument};

#[derive(Serialize)]
pub(super) struct SpanArgs<'a> {
    pub(super) id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) parent_id: Option<&'a str>,
    pub(super) path: String,
    pub(super) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) pass: Option<&'static str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) measured: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) module_path: Option<&'a str>,
    /// A span left open by a cut-short trace: its end is unknown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) open: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) not_nested: Option<&'static str>,
}

#[derive(Serialize)]
pub(super) struct OpArgs<'a> {
    pub(super) span_id: &'a str,
    pub(super) shape: &'a [u64],
    pub(super) dtype: &'a str,
    pub(super) device: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) output_dense_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) not_nested: Option<&'static str>,
}

/// A slice of a lane, sortable into the order viewers need for ties: start, then longer
/// first (open = longest), then parents before children (pre-order position).
#[derive(Clone, Copy)]
pub(super) struct Slice {
    pub(super) start: u64,
    pub(super) dur: Option<u64>,
    pub(super) order: (u32, u32),
    pub(super) what: SliceKind,
}

#[derive(Clone, Copy)]
pub(super) enum SliceKind {
    Span(usize),
    Op(usize),
}

pub(super) fn write_spans<W: Write>(
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

pub(super) fn write_slice<W: Write>(
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
pub(super) fn write_one<W: Write, A: Serialize>(
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
