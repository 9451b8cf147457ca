//! The flame graph data: one tree per pass, totals that add up, bounded size, no recursion on
//! stack depth, names escaped.

mod common;

use trace_report::flame::{flame_data, flame_trees, FlameOptions, FlameTree};
use trace_schema::Pass;

fn trees(doc: &trace_schema::TraceDocument, opts: FlameOptions) -> Vec<FlameTree> {
    let analysis = trace_graph::analyze(doc);
    flame_trees(doc, &analysis, opts)
}

/// Every node's children hold at most its samples; the parent of each node comes before it.
fn check_shape(t: &FlameTree) {
    let mut child_sum = vec![0u64; t.nodes.len()];
    assert!(t.nodes[0].parent.is_none());
    for (i, n) in t.nodes.iter().enumerate().skip(1) {
        let p = n.parent.expect("only the root has no parent") as usize;
        assert!(p < i, "pre-order: parent first");
        child_sum[p] += n.samples;
    }
    for (i, n) in t.nodes.iter().enumerate() {
        assert!(child_sum[i] + n.self_samples <= n.samples, "node {i}");
        if !n.merged {
            assert_eq!(child_sum[i] + n.self_samples, n.samples, "node {i} adds up");
        }
    }
}

#[test]
fn the_browser_trace_splits_by_pass_and_adds_up() {
    let doc = common::browser_sampled();
    let ts = trees(&doc, FlameOptions::default());
    let passes: Vec<Option<Pass>> = ts.iter().map(|t| t.pass).collect();
    assert_eq!(
        passes,
        [
            Some(Pass::Forward),
            Some(Pass::Backward),
            Some(Pass::Optimizer),
            None
        ]
    );
    let total: u64 = ts.iter().map(|t| t.nodes[0].samples).sum();
    assert_eq!(total as usize, doc.samples.samples.len());
    // samples 1..=100 ms are forward, 101..=250 backward, the rest optimizer but the last
    assert_eq!(ts[0].nodes[0].samples, 100);
    assert_eq!(ts[1].nodes[0].samples, 150);
    assert_eq!(ts[2].nodes[0].samples, 48);
    assert_eq!(ts[3].nodes[0].samples, 1);
    for t in &ts {
        check_shape(t);
        // the outermost frame is the root's only child here
        assert_eq!(t.nodes[1].name, "main");
        assert_eq!(t.nodes[1].samples, t.nodes[0].samples);
        assert_eq!(t.merged_nodes, 0);
    }
    // the markup in a frame name is kept as text (escaped only for controls), the bidi
    // override shown visibly
    let evil = ts[2]
        .nodes
        .iter()
        .find(|n| n.name.contains("<script>"))
        .expect("the optimizer pass holds the injected frame");
    assert!(evil.name.ends_with("\\u{202e}"), "{}", evil.name);
    assert!(!evil.name.contains('\u{202e}'));
}

#[test]
fn small_frames_merge_and_the_tree_stays_bounded() {
    // 2000 distinct leaf functions, one sample each, under one heavy frame of 8000 samples
    let mut frames: Vec<String> = vec!["main".into(), "heavy".into()];
    frames.extend((0..2000).map(|i| format!("leaf{i}")));
    let names: Vec<&str> = frames.iter().map(String::as_str).collect();
    let mut stacks: Vec<Vec<u32>> = vec![vec![1, 0]];
    stacks.extend((0..2000).map(|i| vec![i + 2, 0]));
    let mut samples: Vec<(u64, u64, u32, Option<&str>)> = Vec::new();
    for i in 0..8000u64 {
        samples.push((i * 100_000, 1, 0, Some("s2")));
    }
    for i in 0..2000u32 {
        samples.push((900_000_000 + u64::from(i) * 100_000, 1, i + 1, Some("s2")));
    }
    let doc = common::sampled_doc(&names, &stacks, &samples, &[(1, None)], 100_000);
    let ts = trees(&doc, FlameOptions::default());
    assert_eq!(ts.len(), 1);
    let t = &ts[0];
    check_shape(t);
    // 1 sample of 10 000 is under 0.1 %: all 2000 leaves merge into one node under main
    assert_eq!(t.merged_nodes, 2000);
    let merged: Vec<_> = t.nodes.iter().filter(|n| n.merged).collect();
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].samples, 2000);
    assert_eq!(merged[0].name, "… 2000 smaller");
    assert_eq!(t.nodes.len(), 4); // all, main, heavy, the merged node
                                  // a node cap keeps the largest
    let capped = trees(
        &doc,
        FlameOptions {
            min_share: 0.0,
            max_nodes: 100,
        },
    );
    let t = &capped[0];
    check_shape(t);
    assert!(t.nodes.len() <= 101, "{}", t.nodes.len());
    assert_eq!(t.nodes[2].name, "heavy");
    assert_eq!(t.merged_nodes, 2000 - 97);
}

#[test]
fn a_very_deep_stack_builds_without_recursion() {
    let depth = 50_000u32;
    let frames: Vec<String> = (0..depth).map(|i| format!("f{i}")).collect();
    let names: Vec<&str> = frames.iter().map(String::as_str).collect();
    let stacks = vec![(0..depth).collect::<Vec<u32>>()];
    let samples = vec![(10, 1, 0, Some("s3")), (20, 1, 0, Some("s3"))];
    let doc = common::sampled_doc(&names, &stacks, &samples, &[(1, None)], 1_000_000);
    let all = FlameOptions {
        max_nodes: usize::MAX,
        ..FlameOptions::default()
    };
    let ts = trees(&doc, all);
    let t = &ts[0];
    assert_eq!(t.pass, Some(Pass::Backward));
    assert_eq!(t.nodes.len(), depth as usize + 1);
    check_shape(t);
    // innermost first on the wire: the outermost frame is the last one, under the root
    assert_eq!(t.nodes[1].name, format!("f{}", depth - 1));
    assert_eq!(t.nodes[depth as usize].name, "f0");
    assert_eq!(t.nodes[depth as usize].self_samples, 2);
    let v = flame_data(&ts);
    assert_eq!(
        v["trees"][0]["parent"].as_array().unwrap().len(),
        depth as usize + 1
    );
    // by default the chain is cut at 4000 nodes; the rest is one merged node
    let ts = trees(&doc, FlameOptions::default());
    let t = &ts[0];
    check_shape(t);
    assert_eq!(t.nodes.len(), 4001);
    assert!(t.nodes[4000].merged);
    assert_eq!(t.nodes[4000].samples, 2);
    assert_eq!(t.merged_nodes, u64::from(depth) - 3999);
}

#[test]
fn the_page_data_interns_names_and_keeps_columns_aligned() {
    let doc = common::browser_sampled();
    let ts = trees(&doc, FlameOptions::default());
    let v = flame_data(&ts);
    let strings = v["strings"].as_array().unwrap();
    for (t, tree) in v["trees"].as_array().unwrap().iter().zip(&ts) {
        let n = tree.nodes.len();
        for col in ["name", "parent", "value", "self", "merged"] {
            assert_eq!(t[col].as_array().unwrap().len(), n, "{col}");
        }
        for (i, name) in t["name"].as_array().unwrap().iter().enumerate() {
            let s = strings[name.as_u64().unwrap() as usize].as_str().unwrap();
            assert_eq!(s, tree.nodes[i].name);
        }
        assert_eq!(t["samples"], tree.nodes[0].samples);
    }
    // each name once
    let mut seen = std::collections::HashSet::new();
    assert!(strings.iter().all(|s| seen.insert(s.as_str().unwrap())));
}
