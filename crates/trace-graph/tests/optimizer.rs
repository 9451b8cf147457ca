//! The `optimizer_temporaries` finding: figures from the lifetimes, the peak replayed without
//! the temporaries, ties to parameters by size and ops from allocation sites.

use trace_graph::{analyze, FindingCode};

fn load(path: &str) -> trace_schema::TraceDocument {
    trace_schema::load_path(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn finding(doc: &trace_schema::TraceDocument) -> trace_graph::Finding {
    analyze(doc)
        .findings
        .into_iter()
        .find(|f| f.code == FindingCode::OptimizerTemporaries)
        .expect("the finding")
}

#[test]
fn hand_made_step_temporaries_and_the_replayed_peak() {
    // three 8 KiB `sqr` results allocated and freed in the optimizer pass; the run peaks at
    // 64 KiB (440 ns) with all three live; without them the peak is forward's 48 KiB.
    let doc = load("trace-ops/tests/data/sites.jsonl");
    let f = finding(&doc);
    let e = &f.evidence;
    assert_eq!((e.count, e.of_count), (Some(3), Some(3)));
    assert_eq!((e.bytes, e.of_bytes), (Some(24_576), Some(65_536)));
    assert_eq!(e.replayed_peak_bytes, Some(49_152));
    assert_eq!(e.replayed_peak_ns, Some(220));
    assert_eq!(e.replayed_peak_pass, Some(trace_schema::Pass::Forward));
    assert_eq!(e.temporaries[0], "8.00 KiB sqr · optimizer");
    assert!(
        f.summary.contains("37.5% of the 64.00 KiB peak"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("would remove 16.00 KiB"),
        "{}",
        f.summary
    );
}

#[test]
fn the_mlp_demo_adamw_temporaries_set_the_peak() {
    // The real MLP step of the sampler's issue (no sites): 14 AdamW temporaries live at the
    // 33.31 MiB peak, 21.44 MiB of it.
    let doc = load("trace-ops/tests/data/mlp_sampled.jsonl");
    let f = finding(&doc);
    let e = &f.evidence;
    assert_eq!(e.count, Some(14));
    let (bytes, peak) = (e.bytes.unwrap(), e.of_bytes.unwrap());
    assert!(bytes as f64 / peak as f64 > 0.6, "{}", f.summary);
    assert!(f.summary.contains("21.44 MiB"), "{}", f.summary);
    assert!(f.summary.contains("33.31 MiB peak"), "{}", f.summary);
    let ratio = bytes as f64 / e.parameter_bytes.unwrap() as f64;
    assert!((8.0..9.0).contains(&ratio), "{ratio}");
    // removing them lowers the run's peak, and it moves to the backward pass
    assert!(e.replayed_peak_bytes.unwrap() < peak - bytes / 2);
    assert_eq!(e.replayed_peak_pass, Some(trace_schema::Pass::Backward));
    // every temporary's bytes tie it to a parameter only when exactly one has that size
    assert!(
        e.temporaries.iter().any(|t| t.contains("(by size)")),
        "{:?}",
        e.temporaries
    );
    // the finding's first pass rides along the memory replay; the two passes of its own that
    // other crates call find the same
    let spans = trace_memory::SpanIndex::build(&doc);
    let pass_of = |s| doc.span_index(s).and_then(|i| spans.pass[i]);
    let own = trace_graph::optimizer::OptimizerTemporaries::find(&doc, pass_of).unwrap();
    assert_eq!(Some(own.at_peak_count), e.count);
    assert_eq!(Some(own.count), e.of_count);
    assert_eq!(Some(own.at_peak_bytes), e.bytes);
    assert_eq!(Some(own.replayed_peak_bytes), e.replayed_peak_bytes);
    assert_eq!(Some(own.replayed_peak_ns), e.replayed_peak_ns);
    assert_eq!(own.replayed_peak_pass, e.replayed_peak_pass);
}

#[test]
fn with_sites_the_temporaries_are_named_by_op_and_parameter() {
    // The real MLP demo step with allocation sites: the 14 temporaries live at the peak are
    // fc1.weight's (1.53 MiB = 512 × 784 f32, the only parameter of that size).
    let doc = load("trace-ops/tests/data/mlp_sites.jsonl");
    let f = finding(&doc);
    let e = &f.evidence;
    assert_eq!(e.count, Some(14));
    assert_eq!(e.temporaries.len(), 14);
    for t in &e.temporaries {
        assert!(
            t.starts_with("1.53 MiB ")
                && t.ends_with(" · update of fc1.weight (by size) · optimizer"),
            "{t}"
        );
    }
    assert!(
        e.temporaries.iter().any(|t| t.contains(" sqrt · ")),
        "{:?}",
        e.temporaries
    );
    assert!(
        e.temporaries.iter().any(|t| t.contains(" affine · ")),
        "{:?}",
        e.temporaries
    );
}
