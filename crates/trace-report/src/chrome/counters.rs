//! The device processes' counters (live bytes, by category, the device samples) and the
//! instant events (gradients, tensor statistics, findings).

use super::events::{device_pid, ChromeError, ChromeOptions, Ev, Out, Pairs, Range, Us, HOST_PID};
use serde::Serialize;
use std::io::Write;
use trace_graph::Analysis;
use trace_schema::{MemoryCategory, Pass, TraceDocument};

/// Counter name of the per-device total.
pub const TOTAL_COUNTER: &str = "live bytes";

/// Counter name of the per-device, per-category series.
pub const CATEGORY_COUNTER: &str = "live bytes by category";

pub(super) fn write_counters<W: Write>(
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
pub(super) struct GradientArgs<'a> {
    pub(super) root: &'a str,
    pub(super) key: &'a str,
    pub(super) state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) norm: Option<f64>,
    pub(super) parameter: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) non_finite_elements: Option<u64>,
    pub(super) placed_at: &'static str,
}

pub(super) fn write_instants<W: Write>(
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
