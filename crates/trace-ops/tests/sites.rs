//! The allocation sites read as operations ([`trace_ops::SiteProfile`]): each storage's op,
//! module and pass, exact allocating-call counts and the alloc-clocked time, on a hand-made
//! trace/13 step whose counts and intervals are worked out in the comments.

use trace_ops::{OpKind, SiteProfile};
use trace_schema::Pass;

fn load(name: &str) -> trace_schema::TraceDocument {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    trace_schema::load_path(path).unwrap()
}

#[test]
fn storages_get_their_op_module_and_pass_and_calls_are_exact() {
    let doc = load("sites.jsonl");
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let p = SiteProfile::from_document(&doc).expect("the trace has sites");
    let find = |op: &str, pass: Pass| {
        p.rows
            .iter()
            .find(|r| r.op == op && r.pass == Some(pass))
            .unwrap_or_else(|| panic!("{op} {pass:?}: {:#?}", p.rows))
    };
    // Forward: two matmul calls from the same line, each allocating an inner copy (site 0) and
    // its output (site 1): four allocations, two calls. Time: 110→130, 130→200 (the second
    // call starts when site 0 repeats), 200→220, 220→300 (clipped at fc1's end) = 190 ns.
    let matmul = find("matmul", Pass::Forward);
    assert_eq!((matmul.calls, matmul.allocs, matmul.bytes), (2, 4, 49_152));
    assert_eq!(matmul.kind, OpKind::Op);
    assert_eq!(matmul.module.as_deref(), Some("model/fc1"));
    assert_eq!(matmul.alloc_clocked_ns, Some(190));
    // Backward: the matmul arm of `Tensor::backward` (line 463): 310→400 (the pass's end).
    let back = find("matmul.backward", Pass::Backward);
    assert_eq!((back.calls, back.kind), (1, OpKind::BackwardOp));
    assert_eq!(back.alloc_clocked_ns, Some(90));
    // Optimizer: AdamW calls `sqr` from one line three times: three calls, not one.
    // 410→420, 420→440, 440→480 (the pass's end) = 70 ns.
    let sqr = find("sqr", Pass::Optimizer);
    assert_eq!((sqr.calls, sqr.allocs, sqr.bytes), (3, 3, 24_576));
    assert_eq!(sqr.alloc_clocked_ns, Some(70));
    assert_eq!(p.totals.calls, 6);
    assert_eq!(p.totals.alloc_clocked_ns, 350);
    assert_eq!(p.totals.threshold_bytes, Some(4096));
    // Per storage: the label views show.
    let mut labels = Vec::new();
    doc.for_each_memory(trace_schema::MemoryOrder::File, |m| {
        if let Some(l) = p.of_memory(m.index) {
            labels.push((m.storage.unwrap().to_string(), l.display()));
        }
    });
    assert_eq!(
        labels[0],
        ("c1".into(), "matmul · model/fc1 · forward".into())
    );
    assert_eq!(
        labels[4],
        ("g1".into(), "matmul.backward · backward".into())
    );
    assert_eq!(labels[5], ("q1".into(), "sqr · optimizer".into()));
    assert_eq!(labels.len(), 8);
    // Grouped per op and pass.
    let by_op = p.calls_by_op_pass();
    assert_eq!(by_op.len(), 3);
    assert_eq!(by_op[0].op, "matmul");
}

#[test]
fn a_trace_without_sites_has_no_site_profile() {
    let doc = load("mlp_sampled.jsonl");
    assert!(SiteProfile::from_document(&doc).is_none());
}

#[test]
fn the_op_profile_gains_calls_and_alloc_clocked_time() {
    // The sampled MLP step with sites attached by hand: every sampled row keeps its samples.
    let doc = load("sites.jsonl");
    let sites = SiteProfile::from_document(&doc).unwrap();
    // no samples: rows come from the sites only
    assert!(trace_ops::OpProfile::from_document(&doc).is_err());
    let real = load("mlp_sampled.jsonl");
    let mut profile = trace_ops::OpProfile::from_document(&real).unwrap();
    let before: u64 = profile.rows.iter().map(|r| r.samples).sum();
    profile.attach_sites(&sites);
    let after: u64 = profile.rows.iter().map(|r| r.samples).sum();
    assert_eq!(before, after);
    let sqr = profile
        .rows
        .iter()
        .find(|r| {
            r.op.as_deref() == Some("sqr") && r.pass == Some(Pass::Optimizer) && r.calls.is_some()
        })
        .expect("the site row is attached");
    assert_eq!((sqr.calls, sqr.alloc_clocked_ns), (Some(3), Some(70)));
    let by_op = profile.rows_by(trace_ops::GroupBy::Op);
    let total_calls: u64 = by_op.iter().filter_map(|r| r.calls).sum();
    assert_eq!(total_calls, 6);
}

#[test]
fn an_allocation_without_its_thread_is_named_but_neither_counted_nor_clocked() {
    let path = format!("{}/tests/data/sites.jsonl", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    // the backward allocation (g1) loses its thread
    let text: String = text
        .lines()
        .map(|l| {
            if l.contains(r#""storage_id":"g1""#) && l.contains(r#""action":"alloc""#) {
                l.replace(r#","thread":1"#, "")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let doc = trace_schema::load_str(&text).unwrap();
    assert_eq!(doc.semantic_issues.len(), 1, "{:?}", doc.semantic_issues);
    assert_eq!(
        doc.semantic_issues[0].code,
        trace_schema::SemanticCode::InvalidSites
    );
    let p = SiteProfile::from_document(&doc).expect("sites");
    let back = p
        .rows
        .iter()
        .find(|r| r.op == "matmul.backward")
        .expect("still named");
    assert_eq!(back.thread, None);
    assert_eq!((back.allocs, back.bytes, back.calls), (1, 8192, 0));
    assert_eq!(back.alloc_clocked_ns, None);
    // the other threads' figures are those of the whole trace
    let matmul = p.rows.iter().find(|r| r.op == "matmul").unwrap();
    assert_eq!((matmul.calls, matmul.alloc_clocked_ns), (2, Some(190)));
    assert_eq!(p.totals.calls, 5);
    assert_eq!(p.totals.alloc_clocked_ns, 260);
}
