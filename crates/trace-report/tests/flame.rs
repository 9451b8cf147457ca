//! The flame graph's page data from trace-ops's flame trees: columns aligned with the nodes,
//! names escaped, elided and interned once, merged nodes flagged, tab labels per pass (and
//! thread when several), no recursion on depth.

mod common;

use trace_ops::{flame_trees, FlameOptions, OpProfile};
use trace_report::flame::{flame_data, NAME_CHARS};

fn data(
    doc: &trace_schema::TraceDocument,
    opts: FlameOptions,
) -> (Vec<trace_ops::FlameTree>, serde_json::Value) {
    let profile = OpProfile::from_document(doc).unwrap();
    let trees = flame_trees(doc, &profile, &opts);
    let v = flame_data(&trees);
    (trees, v)
}

fn string(v: &serde_json::Value, i: &serde_json::Value) -> String {
    v["strings"][i.as_u64().unwrap() as usize]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_browser_trace_gives_a_tree_per_pass_with_aligned_columns() {
    let doc = common::browser_sampled();
    let (trees, v) = data(&doc, FlameOptions::default());
    let out = v["trees"].as_array().unwrap();
    let labels: Vec<&str> = out.iter().map(|t| t["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        ["forward", "backward", "optimizer", "outside passes"]
    );
    let total: u64 = out.iter().map(|t| t["samples"].as_u64().unwrap()).sum();
    assert_eq!(total as usize, doc.samples.samples.len());
    for (t, tree) in out.iter().zip(&trees) {
        let n = tree.nodes.len();
        for col in ["name", "op", "kind", "parent", "value", "self", "merged"] {
            assert_eq!(t[col].as_array().unwrap().len(), n, "{col}");
        }
        assert_eq!(t["parent"][0], -1);
        assert_eq!(t["value"][0], tree.samples);
        for (i, node) in tree.nodes.iter().enumerate() {
            assert_eq!(t["value"][i], node.total_samples);
            let parent = t["parent"][i].as_i64().unwrap();
            assert!(parent < i as i64, "a parent before its children");
            assert_eq!(string(&v, &t["name"][i]), trace_format::escape(&node.name));
            match &node.op {
                Some(op) => assert_eq!(string(&v, &t["op"][i]), *op),
                None => assert_eq!(t["op"][i], -1),
            }
        }
        // the page's root is the pass, its only child the step frame the tree is rooted at
        // (`llama::train_step`, on every sample; `main` above it cut); a short name with its
        // file reads `crate::module::function` (trace-ops display_path)
        assert_eq!(string(&v, &t["rooted_at"]), string(&v, &t["name"][1]));
        assert_eq!(tree.nodes[0].children.len(), 1);
        assert!(string(&v, &t["name"][1]).ends_with("train_step"));
        assert!(tree.nodes.iter().all(|n| !n.name.ends_with("::main")));
    }
    // the markup in a frame name is text with the bidi override shown visibly
    let strings = v["strings"].as_array().unwrap();
    let evil = strings
        .iter()
        .map(|s| s.as_str().unwrap())
        .find(|s| s.contains("<script>"))
        .expect("the injected frame is in the optimizer tree");
    assert!(
        evil.contains("\\u{202e}") && !evil.contains('\u{202e}'),
        "{evil}"
    );
    // each name once
    let mut seen = std::collections::HashSet::new();
    assert!(strings.iter().all(|s| seen.insert(s.as_str().unwrap())));
}

#[test]
fn merged_nodes_are_flagged_and_long_names_elided() {
    // 2000 distinct leaf functions, one sample each, under one heavy frame of 8000 samples
    let long = format!("my_model::{}", "x".repeat(1000));
    let mut frames: Vec<String> = vec!["main".into(), long.clone()];
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
    let (trees, v) = data(&doc, FlameOptions::default());
    assert_eq!(trees.len(), 1);
    let t = &v["trees"][0];
    assert!(t["merged_nodes"].as_u64().unwrap() >= 2000);
    let merged: Vec<usize> = (0..trees[0].nodes.len())
        .filter(|&i| t["merged"][i] == 1)
        .collect();
    assert_eq!(merged.len(), 1, "one merged node under main");
    assert_eq!(t["value"][merged[0]], 2000);
    assert_eq!(
        t["self"][merged[0]], 0,
        "a merged node has no self samples of its own"
    );
    assert_eq!(string(&v, &t["name"][merged[0]]), trace_ops::flame::OTHER);
    let elided = v["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .find(|s| s.starts_with("my_model::"))
        .unwrap();
    assert_eq!(elided.chars().count(), NAME_CHARS);
    assert!(elided.contains('…'));
}

#[test]
fn several_threads_label_their_trees_and_a_deep_stack_converts() {
    let depth = 20_000u32;
    let frames: Vec<String> = (0..depth).map(|i| format!("f{i}")).collect();
    let names: Vec<&str> = frames.iter().map(String::as_str).collect();
    // thread 1's stacks share only their outermost frame, so its tree is rooted there and
    // keeps the whole deep path
    let stacks = vec![
        (0..depth).collect::<Vec<u32>>(),
        vec![0, depth - 1],
        vec![depth - 1],
    ];
    let samples = [
        (10, 1, 0, Some("s3")),
        (20, 1, 0, Some("s3")),
        (25, 1, 2, Some("s3")),
        (30, 4, 1, Some("s2")),
    ];
    let doc = common::sampled_doc(
        &names,
        &stacks,
        &samples,
        &[(1, None), (4, Some("loader"))],
        1_000_000,
    );
    let opts = FlameOptions {
        min_share: 0.0,
        max_nodes: usize::MAX,
    };
    let (trees, v) = data(&doc, opts);
    let labels: Vec<&str> = v["trees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["thread 1 · backward", "thread 4 · forward"]);
    assert_eq!(trees[0].nodes.len(), depth as usize + 1);
    assert_eq!(
        v["trees"][0]["parent"].as_array().unwrap().len(),
        depth as usize + 1
    );
}
