//! Properties: a trace compared with itself — loaded twice, analysed twice, its span and
//! storage ids renamed — reports zero deltas, nothing one-sided and no refusal.

use proptest::prelude::*;
use trace_diff::{compare, Delta, DiffOptions, RefusalCode, Run, TraceDiff, Verdict};
use trace_schema::{EdgeEvent, TraceDocument, TraceEvent};
use trace_synth::{synth_events, SynthConfig};

fn config(seed: u64, memory_events: u64, spans: u64, devices: u32) -> SynthConfig {
    SynthConfig {
        memory_events,
        spans,
        ops: spans * 2,
        devices,
        seed,
        parameters: 6,
        device_memory_samples: 4,
        ..SynthConfig::default()
    }
}

/// The same events with every span id and storage id renamed (ids differ run to run).
fn renamed(events: Vec<TraceEvent>) -> Vec<TraceEvent> {
    let span = |id: &mut String| *id = format!("other-{id}");
    let storage = |id: &mut Option<String>| {
        if let Some(s) = id {
            *s = format!("0x{s}");
        }
    };
    events
        .into_iter()
        .map(|mut e| {
            match &mut e {
                TraceEvent::SpanStart(s) => {
                    span(&mut s.id);
                    if let Some(p) = &mut s.parent_id {
                        span(p);
                    }
                }
                TraceEvent::SpanEnd(s) => span(&mut s.id),
                TraceEvent::Op(o) => span(&mut o.span_id),
                TraceEvent::Tensor(t) => {
                    span(&mut t.span_id);
                    storage(&mut t.storage_id);
                }
                TraceEvent::TensorStats(t) => span(&mut t.span_id),
                TraceEvent::DeviceInterval(d) => span(&mut d.span_id),
                TraceEvent::Memory(m) => {
                    if let Some(s) = &mut m.span_id {
                        span(s);
                    }
                    storage(&mut m.storage_id);
                }
                TraceEvent::Edge(EdgeEvent::Call {
                    from_span, to_span, ..
                }) => {
                    span(from_span);
                    span(to_span);
                }
                _ => {}
            }
            e
        })
        .collect()
}

fn zero(d: &Delta, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        matches!(
            d.verdict,
            Verdict::Unchanged | Verdict::Unobserved | Verdict::NotCompared
        ),
        "{what}: {d:?}"
    );
    if d.verdict == Verdict::NotCompared {
        prop_assert_eq!(d.delta, None, "{}", what);
        prop_assert_eq!(d.baseline.map(|s| s.median), d.candidate.map(|s| s.median));
    } else if d.baseline.is_some() && d.candidate.is_some() {
        prop_assert_eq!(d.delta, Some(0), "{}", what);
    }
    prop_assert_eq!(d.baseline.is_some(), d.candidate.is_some(), "{}", what);
    Ok(())
}

fn check_zero(d: &TraceDiff, on_accelerator: bool) -> Result<(), TestCaseError> {
    // host-timed spans on an accelerator are launch times: the only refusal allowed
    prop_assert_eq!(d.identity.timing_comparable, !on_accelerator);
    prop_assert!(d
        .identity
        .refusals
        .iter()
        .all(|r| r.code == RefusalCode::UnsynchronizedDeviceTiming));
    zero(&d.wall_time_ns, "wall time")?;
    prop_assert!(d.alignment.baseline_only.is_empty());
    prop_assert!(d.alignment.candidate_only.is_empty());
    for row in &d.spans {
        for (metric, delta) in row.deltas() {
            zero(delta, &format!("{} {}", row.path, metric.as_str()))?;
        }
        prop_assert_eq!(row.impact, 0.0);
    }
    for p in &d.passes {
        zero(&p.time_ns, "pass time")?;
        zero(&p.allocated_bytes, "pass allocated")?;
        zero(&p.peak_bytes, "pass peak")?;
    }
    let m = d.memory.as_ref().expect("synth traces have memory");
    zero(&m.peak_bytes, "peak")?;
    for dev in &m.devices {
        zero(&dev.peak_bytes, &dev.device)?;
        for c in &dev.by_category {
            zero(&c.bytes, c.category.as_str())?;
        }
        prop_assert_eq!(&dev.baseline_peaks[0].pass, &dev.candidate_peaks[0].pass);
        let live = dev.live_at_peak.as_ref().expect("a peak on both sides");
        prop_assert_eq!(live.baseline_only_count, 0, "{:?}", live.baseline_only);
        prop_assert_eq!(live.candidate_only_count, 0, "{:?}", live.candidate_only);
    }
    let g = d.gradients.as_ref().expect("synth traces have gradients");
    prop_assert!(g.verdict_changes.is_empty() && g.norm_changes.is_empty());
    prop_assert_eq!(g.compared, g.unchanged);
    prop_assert!(g.baseline_only.is_empty() && g.candidate_only.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_trace_against_itself_has_zero_deltas(
        seed in any::<u64>(),
        memory_events in 20u64..400,
        spans in 4u64..60,
        devices in 1u32..3,
    ) {
        let c = config(seed, memory_events, spans, devices);
        let a = TraceDocument::from_events(synth_events(&c));
        let b = TraceDocument::from_events(renamed(synth_events(&c).collect()));
        let (aa, ab) = (trace_graph::analyze(&a), trace_graph::analyze(&b));
        let ra = Run { doc: &a, analysis: &aa, label: "a" };
        let rb = Run { doc: &b, analysis: &ab, label: "b" };
        check_zero(&compare(&[ra], &[rb], &DiffOptions::default()).unwrap(), devices > 1)?;
        // several runs per side: medians of equal runs, still zero and no noise
        let d = compare(&[ra, rb], &[rb, ra, rb], &DiffOptions::default()).unwrap();
        prop_assert!(d.spread_known);
        check_zero(&d, devices > 1)?;
    }
}
