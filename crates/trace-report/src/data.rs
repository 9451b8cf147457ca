//! The data the report's charts draw, pre-aggregated so the page stays small whatever the
//! trace's size:
//! - per device, the logical live bytes stacked by category as trace-memory's display series
//!   ([`trace_memory::LogicalMemoryProfile::display_timeline`]): `points` time buckets, each
//!   its highest value, so the exact peak is always a point; the physical samples of the device
//!   (bucketed the same way, each field's maximum, when there are more than `points`);
//! - per device, the bytes live at its peak as a tree by allocating span path (every storage
//!   counted; spans holding less than [`ChartOptions::min_share`] of it merged);
//! - the span tree (at most `max_spans` spans: the longest and their ancestors, the rest
//!   counted) with host total/self time and subtree peak memory from the execution graph;
//! - every storage lifetime when there are at most `max_lifetimes` (the page then lists what
//!   was live at any clicked time), else none (the page lists the peaks' live sets, which are in
//!   its tables).
//!
//! Times are ns relative to the time origin (the measured region's start; negative before it).
//! Trace text is escaped with [`trace_format::escape`]. Figures the CLI prints are formatted
//! here by trace-format (`text`, `at`) so the page can check its own formatter against them.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Value};
use trace_graph::Analysis;
use trace_memory::{LogicalMemoryProfile, StorageLifetime};
use trace_schema::{CategorySource, MemoryCategory, TraceDocument};

use crate::layout::SpanLayout;

/// Sizes of the embedded data.
#[derive(Debug, Clone, Copy)]
pub struct ChartOptions {
    /// Points of each memory series (time buckets).
    pub points: usize,
    /// Spans embedded for the span icicle.
    pub max_spans: usize,
    /// Lifetimes embedded for "live at a clicked time".
    pub max_lifetimes: usize,
    /// Spans holding less than this share of a peak are merged in its icicle.
    pub min_share: f64,
}

impl Default for ChartOptions {
    /// 1200 points, 4000 spans, 20 000 lifetimes, 0.2 %.
    fn default() -> Self {
        Self {
            points: 1200,
            max_spans: 4000,
            max_lifetimes: 20_000,
            min_share: 0.002,
        }
    }
}

fn rel(t: u64, origin: u64) -> i64 {
    if t >= origin {
        i64::try_from(t - origin).unwrap_or(i64::MAX)
    } else {
        i64::try_from(origin - t).map_or(i64::MIN, |d| -d)
    }
}

fn esc(s: &str) -> String {
    trace_format::escape(s).into_owned()
}

/// The chart data of `doc` as JSON (see the module docs).
pub fn chart_data(doc: &TraceDocument, analysis: &Analysis, opts: ChartOptions) -> Value {
    let origin = analysis.time_origin_ns;
    let logical = analysis.memory.logical.as_ref();
    let devices: Vec<Value> = logical
        .map(|l| {
            (0..l.timeline.devices.len())
                .map(|d| device_data(doc, analysis, l, d, opts))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "origin_ns": origin,
        "categories": MemoryCategory::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "devices": devices,
        "spans": span_data(doc, analysis, opts),
        "lifetimes": logical.map_or(Value::Null, |l| lifetime_data(doc, analysis, l, opts)),
    })
}

fn device_data(
    doc: &TraceDocument,
    analysis: &Analysis,
    l: &LogicalMemoryProfile,
    d: usize,
    opts: ChartOptions,
) -> Value {
    let origin = analysis.time_origin_ns;
    let name = &l.timeline.devices[d];
    let series = l
        .timeline
        .display_series(opts.points, l.time_origin_ns, Some(d));
    let t: Vec<i64> = series.iter().map(|p| rel(p.timestamp_ns, origin)).collect();
    let total: Vec<u64> = series.iter().map(|p| p.live_bytes).collect();
    let cats: Vec<Vec<u64>> = MemoryCategory::ALL
        .iter()
        .map(|c| {
            series
                .iter()
                .map(|p| p.by_category.get(c).copied().unwrap_or(0))
                .collect()
        })
        .collect();
    let stats = l.device(name).ok();
    let peak = stats.and_then(|s| s.peak.as_ref()).map(|p| {
        json!({
            "t": rel(p.timestamp_ns, origin),
            "bytes": p.live_bytes,
            "text": trace_format::bytes(p.live_bytes),
            "at": trace_format::at(p.timestamp_ns, origin),
            "by_category": MemoryCategory::ALL.iter().map(|c| p.by_category.get(c).copied().unwrap_or(0)).collect::<Vec<_>>(),
        })
    });
    let held = stats
        .and_then(|s| s.peak.as_ref())
        .map(|p| {
            let live = l.live_allocations_after(p.event_index, Some(name));
            held_tree(doc, analysis, name, &live, p.live_bytes, opts.min_share)
        })
        .unwrap_or(Value::Null);
    json!({
        "name": esc(name),
        "peak": peak,
        "series": { "t": t, "total": total, "cat": cats },
        "physical": physical_data(doc, analysis, name, opts.points),
        "held": held,
    })
}

/// Samples of one device as columns (`null` where a sample lacks the field), at most `points`
/// of them: beyond, each time bucket keeps each field's maximum (free: its minimum).
fn physical_data(doc: &TraceDocument, analysis: &Analysis, device: &str, points: usize) -> Value {
    let Some(p) = analysis.memory.physical.as_ref() else {
        return Value::Null;
    };
    let Some(dev) = p.by_device.iter().find(|d| d.device == device) else {
        return Value::Null;
    };
    let origin = analysis.time_origin_ns;
    let s = &dev.samples;
    if s.is_empty() {
        return Value::Null;
    }
    let _ = doc;
    type Field = fn(&trace_memory::PhysicalSample) -> Option<u64>;
    let fields: [(&str, Field, bool); 4] = [
        ("used", |x| x.used_bytes, true),
        ("reserved", |x| x.reserved_bytes, true),
        ("capacity", |x| x.capacity_bytes, true),
        ("resident", |x| x.resident_bytes, true),
    ];
    let buckets = points.max(1);
    let (lo, hi) = (s[0].timestamp_ns, s[s.len() - 1].timestamp_ns);
    let width = (hi - lo) as u128 + 1;
    let bucket_of = |t: u64| {
        if s.len() <= buckets {
            0
        } else {
            ((t - lo) as u128 * buckets as u128 / width) as usize
        }
    };
    let mut out_t: Vec<i64> = Vec::new();
    let mut cols: Vec<Vec<Option<u64>>> = vec![Vec::new(); fields.len()];
    let mut i = 0;
    while i < s.len() {
        // one point per sample, or per bucket when there are too many samples
        let b = bucket_of(s[i].timestamp_ns);
        let mut j = i + 1;
        if s.len() > buckets {
            while j < s.len() && bucket_of(s[j].timestamp_ns) == b {
                j += 1;
            }
        }
        out_t.push(rel(s[i].timestamp_ns, origin));
        for (k, (_, get, _)) in fields.iter().enumerate() {
            cols[k].push(s[i..j].iter().filter_map(get).max());
        }
        i = j;
    }
    let mut obj = serde_json::Map::new();
    obj.insert("t".into(), json!(out_t));
    for (k, (name, _, _)) in fields.iter().enumerate() {
        if cols[k].iter().any(Option::is_some) {
            obj.insert((*name).into(), json!(cols[k]));
        }
    }
    obj.insert("samples".into(), json!(s.len()));
    Value::Object(obj)
}

/// A node of the held-at-peak icicle.
#[derive(Serialize)]
struct HeldNode {
    /// Name (span name, escaped).
    n: String,
    /// Bytes of the storages allocated in this span's subtree.
    b: u64,
    /// Storages.
    k: u64,
    /// Children, largest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    c: Vec<HeldNode>,
}

/// Levels of the held-at-peak tree below the device: a deeper span's storages are counted in
/// one `(N spans deeper, M levels)` node at this depth, so the page's tree stays bounded
/// whatever the trace's depth (a chain of 100,000 nested spans would otherwise nest the page's
/// JSON 100,000 deep).
pub const HELD_MAX_DEPTH: usize = 48;

/// The bytes live at a device's peak as a tree by allocating span path: every storage is
/// counted in its span and every ancestor; spans under `min_share` of the total are merged into
/// one "(n smaller spans)" node per parent; below [`HELD_MAX_DEPTH`] levels, merged into one
/// node. Built from the span tree in O(S + live) (sums in reverse pre-order, no walk up a
/// chain per storage); siblings largest first, ties in the order their first storage is live.
fn held_tree(
    doc: &TraceDocument,
    analysis: &Analysis,
    device: &str,
    live: &[&StorageLifetime],
    total: u64,
    min_share: f64,
) -> Value {
    let spans = &analysis.spans;
    let n = spans.len();
    // Per span, then the two sentinels: bytes, storages, first live index (own, then subtree).
    let (no_span, before) = (n, n + 1);
    let mut bytes = vec![0u64; n + 2];
    let mut count = vec![0u64; n + 2];
    let mut first = vec![usize::MAX; n + 2];
    // Deepest level below each span with a live storage (0: the span itself).
    let mut below = vec![0usize; n + 2];
    for (rank, l) in live.iter().enumerate() {
        let at = match l
            .span_id
            .as_deref()
            .and_then(|id| doc.sym(id))
            .and_then(|s| doc.span_index(s))
        {
            Some(s) => s,
            None if l.pre_existing => before,
            None => no_span,
        };
        bytes[at] += l.bytes;
        count[at] += 1;
        first[at] = first[at].min(rank);
    }
    for &s in spans.preorder.iter().rev() {
        let s = s as usize;
        if let Some(p) = spans.parent[s] {
            let p = p as usize;
            if spans.in_cycle[p] || count[s] == 0 {
                continue;
            }
            bytes[p] += bytes[s];
            count[p] += count[s];
            first[p] = first[p].min(first[s]);
            below[p] = below[p].max(below[s] + 1);
        }
    }
    // Top level: root spans, spans on a parent cycle (each on its own: it has no path), the
    // sentinels.
    let mut top: Vec<usize> = spans.roots.iter().map(|&r| r as usize).collect();
    top.extend((0..n).filter(|&s| spans.in_cycle[s]));
    top.push(no_span);
    top.push(before);
    let children = |i: usize| -> Vec<usize> {
        if i >= n || spans.in_cycle[i] {
            return Vec::new();
        }
        spans.children[i].iter().map(|&c| c as usize).collect()
    };
    let name = |i: usize| -> String {
        match i {
            i if i == no_span => "(no span)".to_string(),
            i if i == before => "(before capture)".to_string(),
            s => esc(doc.str(doc.spans[s].name)),
        }
    };
    let min_bytes = ((total as f64 * min_share) as u64).max(1);
    // Bounded recursion: at most HELD_MAX_DEPTH + 1 frames, whatever the trace's depth.
    #[allow(clippy::too_many_arguments)]
    fn build(
        kids: Vec<usize>,
        depth: usize,
        bytes: &[u64],
        count: &[u64],
        first: &[usize],
        below: &[usize],
        min_bytes: u64,
        children: &dyn Fn(usize) -> Vec<usize>,
        name: &dyn Fn(usize) -> String,
    ) -> Vec<HeldNode> {
        let mut order: Vec<usize> = kids.into_iter().filter(|&x| count[x] > 0).collect();
        order.sort_by(|&a, &b| bytes[b].cmp(&bytes[a]).then(first[a].cmp(&first[b])));
        if depth >= HELD_MAX_DEPTH {
            if order.is_empty() {
                return Vec::new();
            }
            let levels = order.iter().map(|&x| below[x] + 1).max().unwrap_or(1);
            return vec![HeldNode {
                n: format!("({} spans deeper, {levels} more levels)", order.len()),
                b: order.iter().map(|&x| bytes[x]).sum(),
                k: order.iter().map(|&x| count[x]).sum(),
                c: Vec::new(),
            }];
        }
        let mut c = Vec::new();
        let (mut small_b, mut small_k, mut small_n) = (0u64, 0u64, 0usize);
        for x in order {
            if bytes[x] >= min_bytes {
                c.push(HeldNode {
                    n: name(x),
                    b: bytes[x],
                    k: count[x],
                    c: build(
                        children(x),
                        depth + 1,
                        bytes,
                        count,
                        first,
                        below,
                        min_bytes,
                        children,
                        name,
                    ),
                });
            } else {
                small_b += bytes[x];
                small_k += count[x];
                small_n += 1;
            }
        }
        if small_n > 0 {
            c.push(HeldNode {
                n: format!("({small_n} smaller)"),
                b: small_b,
                k: small_k,
                c: Vec::new(),
            });
        }
        c
    }
    let c = build(
        top, 1, &bytes, &count, &first, &below, min_bytes, &children, &name,
    );
    let root = HeldNode {
        n: esc(device),
        b: live.iter().map(|l| l.bytes).sum(),
        k: live.len() as u64,
        c,
    };
    json!(root)
}

/// The span tree: at most `max_spans` spans (the longest and their ancestors), pre-order.
fn span_data(doc: &TraceDocument, analysis: &Analysis, opts: ChartOptions) -> Value {
    let spans = &analysis.spans;
    let origin = analysis.time_origin_ns;
    let n = doc.spans.len();
    let layout = SpanLayout::build(doc, spans);
    let mut keep = vec![n <= opts.max_spans; n];
    if n > opts.max_spans {
        let mut by_len: Vec<usize> = (0..n).collect();
        by_len.sort_by_key(|&i| std::cmp::Reverse(doc.spans[i].duration_ns.unwrap_or(u64::MAX)));
        let mut kept = 0;
        for &i in &by_len {
            if kept >= opts.max_spans {
                break;
            }
            let mut s = Some(i);
            while let Some(x) = s {
                if keep[x] {
                    break;
                }
                keep[x] = true;
                kept += 1;
                s = spans.parent[x].map(|p| p as usize);
            }
        }
    }
    // Graph figures by span id: (host total, host self, subtree peak live bytes).
    type Figures = (Option<u64>, Option<u64>, Option<u64>);
    let mut figures: HashMap<&str, Figures> = HashMap::new();
    if let Some(g) = &analysis.graph {
        for node in &g.nodes {
            figures.insert(
                &node.id,
                (
                    node.host_total_time_ns,
                    node.host_self_time_ns,
                    node.memory.subtree_peak_live_bytes,
                ),
            );
        }
    }
    let order: Vec<usize> = spans
        .preorder
        .iter()
        .map(|&s| s as usize)
        .chain((0..n).filter(|&i| spans.in_cycle[i]))
        .filter(|&i| keep[i])
        .collect();
    let mut pos = vec![-1i64; n];
    for (k, &i) in order.iter().enumerate() {
        pos[i] = k as i64;
    }
    let mut name = Vec::with_capacity(order.len());
    let (mut parent, mut start, mut end, mut total, mut selft, mut peak) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut lane, mut depth, mut apart, mut pass) = (vec![], vec![], vec![], vec![]);
    for &i in &order {
        let sp = &doc.spans[i];
        // a name repeated among its siblings carries its call order, as the CLI's paths do
        // (`decode#15`: see `SpanIndex::indexed_path`)
        name.push(match spans.occurrence(i) {
            Some(k) if k > 1 => esc(&format!("{}#{k}", doc.str(sp.name))),
            _ => esc(doc.str(sp.name)),
        });
        parent.push(spans.parent[i].map_or(-1, |p| pos[p as usize]));
        start.push(rel(sp.start_ns, origin));
        end.push(sp.end_ns().map(|e| rel(e, origin)));
        let f = figures
            .get(doc.str(sp.id))
            .copied()
            .unwrap_or((sp.duration_ns, None, None));
        total.push(f.0);
        selft.push(f.1);
        peak.push(f.2);
        lane.push(layout.lane[i]);
        depth.push(spans.depth[i]);
        apart.push(layout.nesting[i].map(|r| r.as_str()));
        pass.push(spans.pass[i].map(|p| p.as_str()));
    }
    json!({
        "name": name, "parent": parent, "start": start, "end": end, "total": total,
        "self": selft, "peak": peak, "lane": lane, "depth": depth, "apart": apart, "pass": pass,
        "lanes": layout.lanes,
        "omitted": n - order.len(),
    })
}

/// Every storage lifetime as columns, when there are at most `max_lifetimes`.
fn lifetime_data(
    doc: &TraceDocument,
    analysis: &Analysis,
    l: &LogicalMemoryProfile,
    opts: ChartOptions,
) -> Value {
    if l.lifetimes.len() > opts.max_lifetimes {
        return json!({ "count": l.lifetimes.len(), "embedded": false });
    }
    let origin = analysis.time_origin_ns;
    let spans = &analysis.spans;
    let mut strings: Vec<String> = Vec::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut intern = |s: String| -> usize {
        if let Some(&i) = ids.get(&s) {
            return i;
        }
        strings.push(s.clone());
        ids.insert(s, strings.len() - 1);
        strings.len() - 1
    };
    let mut paths: HashMap<&str, usize> = HashMap::new();
    let cat_index = |c: MemoryCategory| MemoryCategory::ALL.iter().position(|&x| x == c);
    let (mut start, mut end, mut bytes, mut cat, mut dev) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut span, mut pass, mut shape, mut label, mut inferred, mut pre) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for lt in &l.lifetimes {
        start.push(rel(lt.start_ns, origin));
        end.push(lt.end_ns.map(|e| rel(e, origin)));
        bytes.push(lt.bytes);
        cat.push(cat_index(lt.category));
        dev.push(l.timeline.devices.iter().position(|d| **d == *lt.device));
        let sp = match lt.span_id.as_deref() {
            Some(id) => match paths.get(id) {
                Some(&i) => i,
                None => {
                    let p = spans
                        .indexed_path_of_id(doc, id)
                        .unwrap_or_else(|| id.to_string());
                    let i = intern(esc(&p));
                    paths.insert(id, i);
                    i
                }
            },
            None if lt.pre_existing => intern("(before capture)".to_string()),
            None => intern("-".to_string()),
        };
        span.push(sp);
        pass.push(
            lt.span_id
                .as_deref()
                .and_then(|id| spans.pass_of_id(doc, id))
                .map(|p| p.as_str()),
        );
        let sd = match (lt.shape.as_deref(), lt.dtype.as_deref()) {
            (Some(s), d) => {
                let dims: Vec<String> = s.iter().map(u64::to_string).collect();
                format!(
                    "[{}]{}",
                    dims.join(", "),
                    d.map(|d| format!(" {}", esc(d))).unwrap_or_default()
                )
            }
            (None, Some(d)) => esc(d),
            (None, None) => "-".to_string(),
        };
        shape.push(intern(sd));
        label.push(intern(match (&lt.label, &lt.op_name) {
            (Some(x), _) => esc(x),
            (None, Some(op)) => format!("op {}", esc(op)),
            (None, None) => "-".to_string(),
        }));
        inferred.push(lt.category_source == Some(CategorySource::Inferred));
        pre.push(lt.pre_existing);
    }
    json!({
        "count": l.lifetimes.len(), "embedded": true,
        "start": start, "end": end, "bytes": bytes, "cat": cat, "dev": dev, "span": span,
        "pass": pass, "shape": shape, "label": label, "inferred": inferred, "pre": pre,
        "strings": strings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times_are_signed() {
        assert_eq!(rel(10, 4), 6);
        assert_eq!(rel(4, 10), -6);
        assert_eq!(rel(u64::MAX, 0), i64::MAX);
        assert_eq!(rel(0, u64::MAX), i64::MIN);
    }

    #[test]
    fn a_synthetic_trace_keeps_its_peak_and_every_held_byte() {
        let config = trace_synth::SynthConfig {
            memory_events: 30_000,
            spans: 600,
            devices: 2,
            ..trace_synth::SynthConfig::default()
        };
        let doc = TraceDocument::from_events(trace_synth::synth_events(&config));
        let analysis = trace_graph::analyze(&doc);
        let opts = ChartOptions {
            points: 100,
            max_spans: 50,
            max_lifetimes: 10,
            ..ChartOptions::default()
        };
        let v = chart_data(&doc, &analysis, opts);
        let l = analysis.memory.logical.as_ref().unwrap();
        for dev in v["devices"].as_array().unwrap() {
            let name = dev["name"].as_str().unwrap();
            let peak = l.device(name).unwrap().peak.as_ref().unwrap().live_bytes;
            let total: Vec<u64> = dev["series"]["total"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert!(total.len() <= 100);
            assert_eq!(total.iter().copied().max(), Some(peak), "{name}");
            assert_eq!(dev["peak"]["bytes"], peak);
            // each point's categories add up to its total
            for (i, t) in total.iter().enumerate() {
                let sum: u64 = dev["series"]["cat"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c[i].as_u64().unwrap())
                    .sum();
                assert_eq!(sum, *t);
            }
            // the held tree counts every byte of the peak, children never exceed parents
            fn check(n: &Value) -> u64 {
                let b = n["b"].as_u64().unwrap();
                let kids: u64 = n["c"].as_array().map_or(0, |c| c.iter().map(check).sum());
                assert!(kids <= b, "{n}");
                b
            }
            assert_eq!(check(&dev["held"]), peak);
        }
        assert!(v["spans"]["name"].as_array().unwrap().len() <= 50 + 4);
        assert_eq!(
            v["spans"]["omitted"].as_u64().unwrap() as usize
                + v["spans"]["name"].as_array().unwrap().len(),
            doc.spans.len()
        );
        assert_eq!(v["lifetimes"]["embedded"], false);
    }
}
