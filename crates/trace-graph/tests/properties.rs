//! proptest invariants: self times never exceed totals (never negative), well-nested subtrees
//! sum to their root's total, edge endpoints exist, and results do not depend on how events of
//! different spans and kinds are interleaved.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;
use trace_graph::{analyze, Analysis, NodeKind};
use trace_schema::*;
use trace_testkit::*;

/// A seeded generator (rand's `SmallRng`), so one proptest seed drives a whole trace.
struct Rng(rand::rngs::SmallRng);
impl Rng {
    fn new(seed: u64) -> Self {
        Self(rand::SeedableRng::seed_from_u64(seed))
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            rand::Rng::gen_range(&mut self.0, 0..n)
        }
    }
    fn coin(&mut self) -> bool {
        rand::Rng::gen_bool(&mut self.0, 0.5)
    }
}

struct Gen {
    rng: Rng,
    next_span: u64,
    next_tensor: u64,
    next_storage: u64,
    events: Vec<TraceEvent>,
    /// Children may end after their parent and ops may leave their span.
    sloppy: bool,
}

impl Gen {
    fn span(&mut self, parent: Option<&str>, a: u64, b: u64, depth: u32) {
        self.next_span += 1;
        let id = format!("s{}", self.next_span);
        let ev = match parent {
            None => SpanStart::new(&id, a).name("root").measured(true).ev(),
            Some(parent) => {
                let steps = [Pass::Forward, Pass::Backward, Pass::Optimizer];
                let s = steps[self.rng.below(3) as usize];
                SpanStart::new(&id, a)
                    .parent(parent)
                    .name(&format!("n{}", self.rng.below(5)))
                    .pass(s)
                    .ev()
            }
        };
        self.events.push(ev);
        // Children may start with their parent: trace-memory picks the "first" backward or
        // optimizer span by (start, depth, canonical order), never by file order.
        let mut t = a;
        while t < b {
            t += self.rng.below((b - t) / 4 + 1);
            if t >= b {
                break;
            }
            let mut len = 1 + self.rng.below(b - t);
            if self.sloppy && self.rng.below(4) == 0 {
                len += self.rng.below(50);
            }
            if depth < 3 && self.rng.coin() {
                self.span(Some(&id), t, t + len, depth + 1);
            } else {
                self.op(&id, t, len);
            }
            t += len;
        }
        let mut dur = b - a;
        if self.sloppy && self.rng.below(6) == 0 {
            dur = 0; // "not recorded": inferred from children and ops
        }
        self.events.push(span_end(&id, dur));
    }

    fn op(&mut self, span: &str, t: u64, len: u64) {
        let inputs: Vec<String> = (0..self.rng.below(3))
            .filter(|_| self.next_tensor > 0)
            .map(|_| format!("t{}", self.rng.below(self.next_tensor)))
            .collect();
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let out = format!("t{}", self.next_tensor);
        self.next_tensor += 1;
        self.events.push(
            op(span, "op", t, len)
                .inputs(&inputs)
                .output(&out)
                .shape(&[4, 8])
                .ev(),
        );
        if self.rng.coin() {
            let st = format!("st{}", self.next_storage);
            self.next_storage += 1;
            let cat = MemoryCategory::ALL[self.rng.below(5) as usize];
            self.events.push(
                alloc(t, &st, 64 * (1 + self.rng.below(8)))
                    .no_tensor()
                    .span(span)
                    .cat(cat)
                    .ev(),
            );
            if self.rng.coin() {
                self.events.push(
                    free(t + len, &st)
                        .no_tensor()
                        .cat(MemoryCategory::Other)
                        .span(span)
                        .ev(),
                );
            }
        }
    }
}

fn trace(seed: u64, sloppy: bool) -> Vec<TraceEvent> {
    let mut g = Gen {
        rng: Rng::new(seed),
        next_span: 0,
        next_tensor: 0,
        next_storage: 0,
        events: vec![step_meta(ExecutionPhase::Train, None)],
        sloppy,
    };
    let total = 100 + g.rng.below(900);
    g.span(None, 0, total, 0);
    for k in 0..g.rng.below(4) {
        let states = [
            GradientState::Present,
            GradientState::Missing,
            GradientState::Zero,
        ];
        let s = states[g.rng.below(3) as usize];
        let norm = match s {
            GradientState::Present => Some(1.5),
            GradientState::Zero => Some(0.0),
            _ => None,
        };
        g.events.push(gradient(k, &format!("p{k}"), s, norm));
    }
    g.events.push(terminal(total + 10_000));
    g.events
}

/// Randomly merges chains of events whose relative order must be kept: one per span
/// (start, end), per span's ops, per span's tensors, per memory timestamp, and gradients.
fn interleave(events: &[TraceEvent], seed: u64) -> Vec<TraceEvent> {
    let (head, body) = events.split_first().unwrap();
    let (last, body) = body.split_last().unwrap();
    let mut chains: BTreeMap<String, Vec<TraceEvent>> = BTreeMap::new();
    for e in body {
        let key = match e {
            TraceEvent::SpanStart(s) => format!("span:{}", s.id),
            TraceEvent::SpanEnd(s) => format!("span:{}", s.id),
            TraceEvent::Op(o) => format!("ops:{}", o.span_id),
            TraceEvent::Tensor(t) => format!("tensors:{}", t.span_id),
            TraceEvent::Memory(m) => format!("mem:{}", m.timestamp_ns),
            other => other.kind_name().to_string(),
        };
        chains.entry(key).or_default().push(e.clone());
    }
    let mut chains: Vec<std::collections::VecDeque<TraceEvent>> =
        chains.into_values().map(Into::into).collect();
    let mut rng = Rng::new(seed);
    let mut out = vec![head.clone()];
    while !chains.is_empty() {
        let i = rng.below(chains.len() as u64) as usize;
        out.push(chains[i].pop_front().unwrap());
        if chains[i].is_empty() {
            chains.swap_remove(i);
        }
    }
    out.push(last.clone());
    out
}

fn check_edges(a: &Analysis) {
    if let Some(g) = &a.graph {
        let ids: HashSet<&str> = g.nodes.iter().map(|n| &*n.id).collect();
        assert_eq!(ids.len(), g.nodes.len(), "node ids are unique");
        for e in &g.edges {
            assert!(ids.contains(&*e.from), "edge source {} exists", e.from);
            assert!(ids.contains(&*e.to), "edge target {} exists", e.to);
        }
    }
}

fn check_self_le_total(a: &Analysis) {
    if let Some(g) = &a.graph {
        for n in &g.nodes {
            if let (Some(s), Some(t)) = (n.host_self_time_ns, n.host_total_time_ns) {
                assert!(s <= t, "node {} self {s} > total {t}", n.id);
            }
        }
    }
}

/// The comparable part of an analysis: everything but line numbers.
fn comparable(a: &Analysis) -> serde_json::Value {
    let mut codes: Vec<String> = a
        .health
        .issues
        .iter()
        .map(|i| format!("{:?}/{:?}", i.severity, i.code))
        .collect();
    codes.sort();
    serde_json::json!({
        "valid": a.health.structurally_valid,
        "codes": codes,
        "capabilities": a.capabilities,
        "gradients": a.gradients,
        "graph": a.graph,
        "refusal": a.graph_refusal,
        "findings": a.findings,
    })
}

/// The path and values of the first difference between two JSON values.
fn first_diff(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let w = y.get(k).unwrap_or(&Value::Null);
                if let Some(d) = first_diff(v, w, &format!("{path}.{k}")) {
                    return Some(d);
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| format!("{path}.{k}: only on the right"))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| first_diff(v, w, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} != {b}")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn well_nested_subtrees_sum_to_their_root_total(seed in any::<u64>()) {
        let a = analyze(&TraceDocument::from_events(trace(seed, false)));
        prop_assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
        let g = a.graph.as_ref().expect("graph of a valid trace");
        check_edges(&a);
        check_self_le_total(&a);
        // Sum self times bottom-up over the parent relation (spans and ops).
        let mut subtree_self: HashMap<&str, u64> = HashMap::new();
        let parent: HashMap<&str, Option<&str>> =
            g.nodes.iter().map(|n| (&*n.id, n.parent_id.as_deref())).collect();
        for n in g.nodes.iter().filter(|n| n.kind != NodeKind::Tensor) {
            let mut cur = Some(&*n.id);
            while let Some(c) = cur {
                *subtree_self.entry(c).or_default() += n.host_self_time_ns.unwrap();
                cur = parent[c];
            }
        }
        for n in g.nodes.iter().filter(|n| n.kind != NodeKind::Tensor) {
            prop_assert_eq!(subtree_self[&*n.id], n.host_total_time_ns.unwrap(), "node {}", n.id);
        }
    }

    #[test]
    fn self_time_never_exceeds_total_and_edges_resolve(seed in any::<u64>()) {
        let a = analyze(&TraceDocument::from_events(trace(seed, true)));
        prop_assert!(a.graph.is_some(), "{:#?}", a.graph_refusal);
        check_edges(&a);
        check_self_le_total(&a);
    }

    #[test]
    fn results_do_not_depend_on_interleaving(seed in any::<u64>(), shuffle in any::<u64>(), sloppy in any::<bool>()) {
        let events = trace(seed, sloppy);
        let a = analyze(&TraceDocument::from_events(events.clone()));
        let b = analyze(&TraceDocument::from_events(interleave(&events, shuffle)));
        let (x, y) = (comparable(&a), comparable(&b));
        prop_assert!(x == y, "{:?}", first_diff(&x, &y, ""));
    }
}

/// The comparable part of an analysis in summary detail: everything but the graph's nodes and
/// edges and memory rankings, which summary detail does not keep.
fn summary_part(a: &Analysis) -> serde_json::Value {
    let graph = a.graph.as_ref().map(|g| {
        let top =
            |v: &[trace_graph::SpanCost]| v[..v.len().min(trace_memory::SUMMARY_TOP)].to_vec();
        serde_json::json!({
            "entrypoint": g.entrypoint,
            "measured_span": g.measured_span,
            "outer_wall_time_ns": g.outer_wall_time_ns,
            "incomplete_capture": g.incomplete_capture,
            "slowest": top(&g.rankings.measured.slowest_by_self_time),
            "concurrent_slowest": top(&g.rankings.concurrent.slowest_by_self_time),
        })
    });
    let logical = a.memory.logical.as_ref().map(|l| {
        let device_live: Vec<_> = l
            .by_device
            .iter()
            .filter_map(|d| {
                let p = d.peak.as_ref()?;
                Some(l.live_allocations_after(p.event_index, Some(&d.device)))
            })
            .collect();
        let end: Vec<_> = l.live_at_end_lifetimes().collect();
        serde_json::json!({
            "aliases_detectable": l.aliases_detectable,
            "totals": l.totals,
            "peak": l.peak,
            "by_device": l.by_device,
            "time_origin_ns": l.time_origin_ns,
            "pass_peaks": l.pass_peaks,
            "findings": l.findings,
            "live_at_end": l.live_at_end,
            "live_at_end_lifetimes": end,
            "device_live": device_live,
            "unmatched_frees": l.unmatched_frees,
            "size_mismatches": l.size_mismatches,
            "timeline": l.display_timeline(60, None).unwrap(),
            "last_change_ns": l.timeline.last_change_ns(),
        })
    });
    serde_json::json!({
        "health": a.health,
        "capabilities": a.capabilities,
        "gradients": a.gradients,
        "refusal": a.graph_refusal,
        "findings": a.findings,
        "time_origin_ns": a.time_origin_ns,
        "graph": graph,
        "logical": logical,
        "physical": a.memory.physical,
        "overflow": a.memory.logical_overflow,
        "duplicates": a.memory.duplicate_allocations,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// What `summary`, `memory` and `check` read is the same from the streaming path (memory
    /// events spilled at load, summary detail) as from the in-memory full analysis.
    #[test]
    fn summary_detail_of_a_spilled_document_equals_the_full_analysis(
        seed in any::<u64>(),
        shuffle in any::<u64>(),
        sloppy in any::<bool>(),
    ) {
        let events = interleave(&trace(seed, sloppy), shuffle);
        let mut w = TraceWriter::new(Vec::new());
        for e in &events {
            w.write_event(e).unwrap();
        }
        w.flush().unwrap();
        let bytes = w.into_inner();
        let options = LoadOptions { spill_memory: true, chunk_bytes: 1000, ..LoadOptions::default() };
        let spilled = load_reader_with(bytes.as_slice(), &options).unwrap();
        let full = analyze(&load_reader(bytes.as_slice()).unwrap());
        let summary = trace_graph::analyze_with(&spilled, trace_graph::Detail::Summary);
        let (x, y) = (summary_part(&full), summary_part(&summary));
        prop_assert!(x == y, "{:?}", first_diff(&x, &y, ""));
    }
}
