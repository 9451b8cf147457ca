//! The streaming path gives the in-memory answer: a document whose memory events are spilled
//! to a log gives the same profile as one holding them, and a summary-detail profile (the live
//! set, the span tree and the answer) gives every figure of the full-detail one.

use proptest::prelude::*;
use trace_memory::{analyze_memory_detail, Detail, LogicalMemoryProfile, MemoryProfile, SpanIndex};
use trace_schema::{
    load_reader_with, LoadOptions, MemoryAction, MemoryCategory, Pass, TraceDocument, TraceEvent,
    TraceWriter,
};
use trace_testkit::*;

#[derive(Debug, Clone)]
enum Gen {
    Mem {
        t: u64,
        dev: u8,
        storage: Option<u8>,
        tensor: Option<u8>,
        alloc: bool,
        bytes: Option<u64>,
        cat: u8,
        pre: bool,
        span: Option<u8>,
    },
    Span {
        start: u64,
        len: Option<u64>,
        pass: Option<u8>,
    },
    Sample {
        t: u64,
        dev: u8,
        used: u64,
        reserved: Option<u64>,
    },
}

fn gen() -> impl Strategy<Value = Gen> {
    prop_oneof![
        8 => (
            0u64..30,
            0u8..3,
            prop::option::weighted(0.85, 0u8..6),
            prop::option::of(0u8..4),
            prop::bool::weighted(0.55),
            prop::option::weighted(0.9, prop_oneof![40 => 1u64..1000, 1 => (u64::MAX / 3)..u64::MAX]),
            0u8..5,
            prop::bool::weighted(0.1),
            prop::option::of(0u8..5),
        )
            .prop_map(|(t, dev, storage, tensor, alloc, bytes, cat, pre, span)| Gen::Mem {
                t,
                dev,
                storage,
                tensor,
                alloc,
                bytes,
                cat,
                pre,
                span,
            }),
        2 => (0u64..30, prop::option::weighted(0.8, 0u64..12), prop::option::of(0u8..3))
            .prop_map(|(start, len, pass)| Gen::Span { start, len, pass }),
        1 => (0u64..32, 0u8..3, 0u64..5000, prop::option::of(0u64..6000))
            .prop_map(|(t, dev, used, reserved)| Gen::Sample { t, dev, used, reserved }),
    ]
}

const PASSES: [Pass; 3] = [Pass::Forward, Pass::Backward, Pass::Optimizer];

fn events(gens: &[Gen]) -> Vec<TraceEvent> {
    let mut m = meta().logical_memory(None).ev();
    if let TraceEvent::Meta(meta) = &mut m {
        meta.run.phase = Some(trace_schema::ExecutionPhase::Train);
    }
    let mut out = vec![m];
    let mut spans = 0;
    for g in gens {
        match *g {
            Gen::Mem {
                t,
                dev,
                storage,
                tensor,
                alloc,
                bytes,
                cat,
                pre,
                span,
            } => {
                let action = if alloc {
                    MemoryAction::Alloc
                } else {
                    MemoryAction::Free
                };
                // an alloc without bytes does not load (trace/11 requires them)
                let bytes = if alloc { bytes.or(Some(1)) } else { bytes };
                let mut m = mem(t, action, &format!("dev{dev}"), "x", bytes)
                    .cat(MemoryCategory::ALL[cat as usize]);
                m.storage_id = storage.map(|s| format!("st{s}"));
                m.tensor_id = tensor.map(|s| format!("t{s}"));
                m.span_id = span.map(|s| format!("s{s}"));
                m.pre_existing = pre && alloc;
                out.push(m.ev());
            }
            Gen::Span { start, len, pass } => {
                let id = format!("s{spans}");
                spans += 1;
                let parent = (spans > 1).then_some("s0");
                out.push(span_start(
                    &id,
                    parent,
                    start,
                    pass.map(|p| PASSES[p as usize]),
                ));
                if let Some(len) = len {
                    out.push(span_end(&id, len));
                }
            }
            Gen::Sample {
                t,
                dev,
                used,
                reserved,
            } => out.push(device_memory(
                t,
                &format!("dev{dev}"),
                Some(used),
                None,
                reserved,
                None,
            )),
        }
    }
    out.push(terminal(1_000));
    out
}

fn spilled(events: &[TraceEvent]) -> TraceDocument {
    let mut w = TraceWriter::new(Vec::new());
    for e in events {
        w.write_event(e).unwrap();
    }
    w.flush().unwrap();
    let bytes = w.into_inner();
    let options = LoadOptions {
        spill_memory: true,
        chunk_bytes: 97,
        ..LoadOptions::default()
    };
    let doc = load_reader_with(bytes.as_slice(), &options).unwrap();
    assert!(doc.memory.is_empty() && doc.memory_spilled());
    doc
}

fn profile(doc: &TraceDocument, detail: Detail) -> MemoryProfile {
    analyze_memory_detail(doc, &SpanIndex::build(doc), detail)
}

/// Every figure a summary profile answers, as text.
fn summary_figures(p: &MemoryProfile) -> String {
    let mut out = format!(
        "{}\n{}\n{:?}\n",
        serde_json::to_string(&p.physical).unwrap(),
        serde_json::to_string(&p.logical_overflow).unwrap(),
        p.duplicate_allocations
    );
    let Some(l) = &p.logical else {
        return out;
    };
    let l: &LogicalMemoryProfile = l;
    out += &format!(
        "{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n",
        l.aliases_detectable,
        serde_json::to_string(&l.totals).unwrap(),
        serde_json::to_string(&l.peak).unwrap(),
        serde_json::to_string(&l.by_device).unwrap(),
        l.time_origin_ns,
        serde_json::to_string(&l.pass_peaks).unwrap(),
        serde_json::to_string(&l.findings).unwrap(),
        serde_json::to_string(&l.live_at_end).unwrap(),
        serde_json::to_string(&l.unmatched_frees).unwrap(),
        serde_json::to_string(&l.size_mismatches).unwrap(),
        serde_json::to_string(&l.timeline.devices).unwrap(),
    );
    let end: Vec<_> = l.live_at_end_lifetimes().collect();
    out += &format!("{}\n", serde_json::to_string(&end).unwrap());
    for d in &l.by_device {
        if let Some(peak) = &d.peak {
            let live = l.live_allocations_after(peak.event_index, Some(&d.device));
            out += &format!("{}\n", serde_json::to_string(&live).unwrap());
        }
    }
    let mut changes = Vec::new();
    l.timeline.for_each(|t, c| changes.push((*t, *c)));
    out += &format!("{changes:?}\n{:?}\n", l.timeline.last_change_ns());
    for t in [0, 3, 10, 29, 40] {
        out += &format!(
            "{} {}\n",
            l.timeline.live_bytes_at(t),
            l.timeline.live_bytes_entering(t)
        );
    }
    let devices: Vec<Option<&str>> = std::iter::once(None)
        .chain(l.by_device.iter().map(|d| Some(d.device.as_str())))
        .collect();
    for points in [1, 2, 3, 7, 60] {
        for d in &devices {
            let series = l.display_timeline(points, *d).unwrap();
            out += &format!("{}\n", serde_json::to_string(&series).unwrap());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn spilled_and_summary_profiles_give_the_full_answer(gens in prop::collection::vec(gen(), 0..48)) {
        let evs = events(&gens);
        let doc = TraceDocument::from_events(evs.clone());
        let spill = spilled(&evs);
        let full = profile(&doc, Detail::Full);
        // The spilled document, full detail: the very same profile (symbols differ between the
        // documents: compare what is serialized, and the queries).
        let json = |p: &MemoryProfile| serde_json::to_string(p).unwrap();
        let full_spilled = profile(&spill, Detail::Full);
        prop_assert_eq!(json(&full_spilled), json(&full));
        prop_assert_eq!(summary_figures(&full_spilled), summary_figures(&full));
        // Summary detail, from either document: every figure of the full profile.
        let want = summary_figures(&full);
        let summary = profile(&doc, Detail::Summary);
        prop_assert_eq!(summary_figures(&summary), want.clone());
        let summary_spilled = profile(&spill, Detail::Summary);
        prop_assert_eq!(summary_figures(&summary_spilled), want);
        prop_assert_eq!(json(&summary_spilled), json(&summary));
        // Short lists (a top of `k`) are the first `k` of the full ranked lists.
        if let Some(f) = &full.logical {
            for k in [0usize, 1, 2, 5] {
                let spans = SpanIndex::build(&spill);
                let short = trace_memory::analyze_memory_top(&spill, &spans, Detail::Summary, k, &mut |_| {});
                let s = short.logical.as_ref().unwrap();
                let first = |v: &[trace_memory::StorageLifetime]| v[..k.min(v.len())].to_vec();
                if let (Some(fp), Some(sp)) = (&f.peak, &s.peak) {
                    prop_assert_eq!(&sp.live_allocations, &first(&fp.live_allocations));
                    prop_assert_eq!(sp.live_allocation_count, fp.live_allocation_count);
                    prop_assert_eq!(sp.live_allocation_count as usize, fp.live_allocations.len());
                    for n in 0..=k {
                        let (a, b) = (fp.top(n), sp.top(n));
                        prop_assert_eq!((a.1, a.2), (b.1, b.2));
                        prop_assert_eq!(&a.0[..a.0.len().min(k)], b.0);
                    }
                }
                for d in &f.by_device {
                    let Some(p) = &d.peak else { continue };
                    let want: Vec<_> = f.live_allocations_after(p.event_index, Some(&d.device)).into_iter().cloned().collect();
                    prop_assert_eq!(want.len() as u64, p.live_allocation_count);
                    let got: Vec<_> = s.live_allocations_after(p.event_index, Some(&d.device)).into_iter().cloned().collect();
                    prop_assert_eq!(got, first(&want));
                }
            }
        }
        if let Some(l) = &summary.logical {
            prop_assert_eq!(l.detail, Detail::Summary);
            prop_assert!(l.timeline.totals.is_empty());
            let full_l = full.logical.as_ref().unwrap();
            prop_assert!(l.lifetimes.len() <= full_l.lifetimes.len());
            prop_assert!(l.lifetimes.iter().all(|x| full_l.lifetimes.contains(x)));
        }
    }
}
