//! The profile and flame trees of the hand-made sampled trace (`tests/data/synthetic.jsonl`,
//! counts per op stated in its generator `make_synthetic.py`), and their bounds at scale.

use trace_ops::{flame_trees, FlameOptions, GroupBy, OpKind, OpProfile};
use trace_schema::Pass;

fn synthetic() -> trace_schema::TraceDocument {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/synthetic.jsonl");
    trace_schema::load_path(path).unwrap()
}

#[test]
fn rows_totals_and_per_sample_attribution() {
    let doc = synthetic();
    let p = OpProfile::from_document(&doc).unwrap();
    assert_eq!(
        (p.totals.samples, p.totals.counted, p.totals.outside_region),
        (202, 200, 2)
    );
    assert_eq!(
        (p.totals.hz, p.totals.lost, p.totals.region),
        (Some(2000), Some(3), Some((0, 100_000_000)))
    );
    assert!(!p.totals.few_samples);
    let by_op = p.rows_by(GroupBy::Op);
    let find = |op: &str| {
        by_op
            .iter()
            .find(|r| r.op.as_deref() == Some(op))
            .unwrap_or_else(|| panic!("{op}"))
    };
    for (op, kind, n) in [
        ("broadcast_matmul", OpKind::Op, 50),
        ("matmul.backward", OpKind::BackwardOp, 40),
        ("grad_accumulate", OpKind::BackwardOp, 30),
        ("sub", OpKind::Op, 25),
        ("softmax_last_dim", OpKind::Op, 20),
        ("custom_op1.backward", OpKind::BackwardOp, 15),
        ("cross_entropy", OpKind::Op, 5),
        // the probe's functions: one `(probe)` row
        (trace_ops::PROBE_OP, OpKind::Probe, 5),
        ("candle_nn::optim::AdamW::step", OpKind::NonOp, 5),
    ] {
        let r = find(op);
        assert_eq!((r.kind, r.samples), (Some(kind), n), "{op}");
        assert!(r.share_low < r.share && r.share < r.share_high);
    }
    assert_eq!(find("matmul.backward").inner_op.as_deref(), Some("matmul"));
    let total: u64 = p.rows.iter().map(|r| r.samples).sum();
    assert_eq!(total, 200);
    // every counted sample points at its row; the two after the region at none
    let (mut counted, mut outside) = (0, 0);
    for i in 0..doc.samples.samples.len() {
        match p.row_of_sample(i) {
            Some(r) => {
                counted += 1;
                assert!(r.samples > 0);
            }
            None => outside += 1,
        }
    }
    assert_eq!((counted, outside), (200, 2));
    assert_eq!(
        p.row_of_sample(0).unwrap().op.as_deref(),
        Some("broadcast_matmul")
    );
    assert_eq!(p.pass_of_sample(0), Some(Pass::Forward));
    // file I/O below matmul, with the path from the op to the read
    assert_eq!(p.file_io.len(), 1);
    let io = &p.file_io[0];
    assert_eq!(
        (
            io.op.as_str(),
            io.samples,
            io.op_samples,
            io.io_function.as_str()
        ),
        ("broadcast_matmul", 10, 50, "__libc_read")
    );
    assert!(io
        .via
        .iter()
        .any(|f| f == "candle_core::utils::get_num_threads"));
    assert_eq!(p.estimate_ns(1, 50), Some(25_000_000));
}

#[test]
fn flame_trees_per_pass_with_op_labels() {
    let doc = synthetic();
    let p = OpProfile::from_document(&doc).unwrap();
    let trees = flame_trees(&doc, &p, &FlameOptions::default());
    let passes: Vec<(Option<Pass>, u64)> = trees.iter().map(|t| (t.pass, t.samples)).collect();
    assert_eq!(
        passes,
        [
            (Some(Pass::Forward), 80),
            (Some(Pass::Backward), 90),
            (Some(Pass::Optimizer), 30)
        ]
    );
    for t in &trees {
        assert_eq!(t.nodes[0].total_samples, t.samples);
        // totals are self plus children, everywhere
        for n in &t.nodes {
            let kids: u64 = n
                .children
                .iter()
                .map(|&c| t.nodes[c as usize].total_samples)
                .sum();
            assert_eq!(n.self_samples + kids, n.total_samples, "{}", n.name);
            for &c in &n.children {
                assert_eq!(
                    t.nodes[c as usize].parent,
                    Some(t.nodes.iter().position(|x| std::ptr::eq(x, n)).unwrap() as u32)
                );
            }
        }
    }
    // the backward frame splits by backward op
    let bwd = &trees[1];
    let mut labels: Vec<(&str, u64)> = bwd
        .nodes
        .iter()
        .filter(|n| n.kind == Some(OpKind::BackwardOp))
        .map(|n| (n.op.as_deref().unwrap(), n.total_samples))
        .collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            ("custom_op1.backward", 15),
            ("grad_accumulate", 30),
            ("matmul.backward", 40)
        ]
    );
    // the probe sample's frame is labelled too (5 samples under the tracking allocator)
    assert!(bwd
        .nodes
        .iter()
        .any(|n| n.kind == Some(OpKind::Probe) && n.total_samples == 5));
    // rooted at the step: every sample passes through llama::train_step above its op frame
    // (the harness `main` / `llama::main` / `ProfileRun::capture` above it is cut), so it is
    // the root's only child in every pass
    for t in &trees {
        assert_eq!(t.rooted_at.as_deref(), Some("llama::train_step"));
        assert_eq!(t.nodes[0].children.len(), 1, "{:?}", t.pass);
        assert_eq!(t.nodes[1].name, "llama::train_step");
        assert_eq!(t.nodes[1].total_samples, t.samples);
        assert!(t.nodes.iter().all(|n| n.name != "main"));
    }
}

/// Stacks unwound to different depths (`_start` → `main` → step, or stopped at `main`) merge
/// under the step frame instead of forming one root each; a stack without the step frame (1
/// of 21 samples: under 95%) goes under one `(outside the step)` node beside it, from the
/// innermost of the step's callers on it (`main`; the start-up frames above it cut).
#[test]
fn flame_trees_merge_stacks_that_differ_above_the_step() {
    let mut text = String::from(concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        "\n",
        r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
        r#"{"kind":"span_end","id":"s1","duration_ns":100000}"#,
        "\n",
        r#"{"kind":"frame","id":0,"function":"candle_core::tensor::Tensor::matmul","file":"/r/candle-core-0.11.1/src/tensor.rs","line":1250}"#,
        "\n",
        r#"{"kind":"frame","id":1,"function":"my_model::step"}"#,
        "\n",
        r#"{"kind":"frame","id":2,"function":"main"}"#,
        "\n",
        r#"{"kind":"frame","id":3,"function":"__libc_start_call_main"}"#,
        "\n",
        r#"{"kind":"frame","id":4,"function":"_start"}"#,
        "\n",
        r#"{"kind":"frame","id":5,"function":"my_model::load"}"#,
        "\n",
        r#"{"kind":"stack","id":0,"frames":[0,1,2,3,4]}"#,
        "\n",
        r#"{"kind":"stack","id":1,"frames":[0,1,2]}"#,
        "\n",
        r#"{"kind":"stack","id":2,"frames":[0,1,1,1,2,3]}"#,
        "\n",
        r#"{"kind":"stack","id":3,"frames":[0,5,2,3,4]}"#,
        "\n",
    ));
    // 10 + 8 + 2 samples through the step (the last recursive), 1 without it
    let plan = [(0, 10), (1, 8), (2, 2), (3, 1)];
    let mut t = 1_000;
    for (stack, n) in plan {
        for _ in 0..n {
            text.push_str(&format!(
                r#"{{"kind":"sample","timestamp_ns":{t},"thread":1,"stack_id":{stack},"span_id":"s1"}}"#
            ));
            text.push('\n');
            t += 1_000;
        }
    }
    text.push_str(r#"{"kind":"terminal","outcome":"complete","timestamp_ns":100000}"#);
    text.push('\n');
    let doc = trace_schema::load_str(&text).unwrap();
    let p = OpProfile::from_document(&doc).unwrap();
    let trees = flame_trees(&doc, &p, &FlameOptions::default());
    assert_eq!(trees.len(), 1);
    let tree = &trees[0];
    assert_eq!(tree.rooted_at.as_deref(), Some("my_model::step"));
    let child = |n: usize, name: &str| {
        tree.nodes[n]
            .children
            .iter()
            .map(|&c| c as usize)
            .find(|&c| tree.nodes[c].name == name)
            .unwrap_or_else(|| panic!("{name} under {}", tree.nodes[n].name))
    };
    let step = child(0, "my_model::step");
    assert_eq!(tree.nodes[step].total_samples, 20);
    // the recursive stack starts at the outermost of its three step frames
    let inner = child(step, "my_model::step");
    assert_eq!(tree.nodes[inner].total_samples, 2);
    // the stack without the step: under the outside node, from the innermost of the step's
    // callers on it (`main`: `_start` and `__libc_start_call_main` above it are cut)
    let outside = child(0, trace_ops::OUTSIDE_STEP);
    assert_eq!(tree.nodes[outside].total_samples, 1);
    let main = child(outside, "main");
    let load = child(main, "my_model::load");
    assert_eq!(tree.nodes[load].total_samples, 1);
    assert_eq!(tree.nodes[0].children.len(), 2);
    assert!(tree
        .nodes
        .iter()
        .all(|n| !["_start", "__libc_start_call_main"].contains(&n.name.as_str())));
}

#[test]
fn bounded_flame_trees_and_linear_build_at_scale() {
    // 10^5 samples over 5,000 distinct deep stacks (depth 50): every stack distinct below
    // a shared trunk, so the unbounded tree would have about 5,000 × 30 nodes
    let mut text = String::from(concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        "\n",
        r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
        r#"{"kind":"span_end","id":"s1","duration_ns":100000000000}"#,
        "\n",
    ));
    let (stacks, depth, trunk) = (5_000u32, 50u32, 20u32);
    let mut id = 0u32;
    for t in 0..trunk {
        text.push_str(&format!(
            "{{\"kind\":\"frame\",\"id\":{id},\"function\":\"app::trunk{t}\"}}\n"
        ));
        id += 1;
    }
    let mut stack_lines = String::new();
    for s in 0..stacks {
        let mut frames: Vec<u32> = Vec::new();
        for d in 0..(depth - trunk) {
            text.push_str(&format!(
                "{{\"kind\":\"frame\",\"id\":{id},\"function\":\"app::s{s}::f{d}\"}}\n"
            ));
            frames.push(id);
            id += 1;
        }
        frames.reverse(); // innermost first
        frames.extend((0..trunk).rev());
        let list: Vec<String> = frames.iter().map(u32::to_string).collect();
        stack_lines.push_str(&format!(
            "{{\"kind\":\"stack\",\"id\":{s},\"frames\":[{}]}}\n",
            list.join(",")
        ));
    }
    text.push_str(&stack_lines);
    for i in 0..100_000u64 {
        text.push_str(&format!(
            "{{\"kind\":\"sample\",\"timestamp_ns\":{},\"thread\":1,\"stack_id\":{}}}\n",
            i * 1000 + 1,
            i % stacks as u64
        ));
    }
    text.push_str(r#"{"kind":"sampler","hz":1000,"period_ns":1000000,"clock":"wall","unwinder":"libgcc","symbols":"names_only","threads":[{"thread":1,"start_ns":0,"end_ns":100000000000,"ticks":100000,"samples":100000,"lost_overrun":0,"lost_buffer":0}]}"#);
    text.push('\n');
    let doc = trace_schema::load_str(&text).unwrap();
    let p = OpProfile::from_document(&doc).unwrap();
    assert_eq!(p.totals.counted, 100_000);
    let options = FlameOptions {
        min_share: 0.0,
        max_nodes: 500,
    };
    let trees = flame_trees(&doc, &p, &options);
    let t = &trees[0];
    assert_eq!(t.samples, 100_000);
    assert!(
        t.nodes.len() <= 2 * options.max_nodes + 1,
        "{} nodes",
        t.nodes.len()
    );
    assert!(t.merged_nodes > 0);
    assert!(t.nodes.iter().any(|n| n.name == trace_ops::flame::OTHER));
    // rooted at the trunk's innermost frame, the one every stack shares (frames above it cut)
    assert_eq!(t.rooted_at.as_deref(), Some("app::trunk19"));
    assert_eq!(t.nodes[1].name, "app::trunk19");
    assert_eq!(t.nodes[1].total_samples, 100_000);
    let default = flame_trees(&doc, &p, &FlameOptions::default());
    assert!(default[0].nodes.len() <= 2 * FlameOptions::default().max_nodes + 1);
}

#[test]
fn without_samples_the_reason_is_the_producers() {
    let doc = trace_schema::load_str(concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_contract":{"operations":"none","reasons":{"operations":"sampling is Linux-only"}}}"#, "\n",
    ))
    .unwrap();
    let u = OpProfile::from_document(&doc).unwrap_err();
    assert_eq!(u.reason, "not captured (sampling is Linux-only)");
}

fn real(name: &str) -> trace_schema::TraceDocument {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    trace_schema::load_path(&path).unwrap()
}

/// The rules on real frame lists: the sampler's llama and MLP steps (release build, line
/// tables, inlined frames named by their short names).
#[test]
fn real_llama_and_mlp_steps() {
    for (name, must) in [
        (
            "llama_sampled.jsonl",
            &[
                "matmul",
                "matmul.backward",
                "grad_accumulate",
                "softmax",
                "div.backward",
                "silu.backward",
                "index_select",
            ][..],
        ),
        (
            "mlp_sampled.jsonl",
            &[
                "matmul",
                "matmul.backward",
                "grad_accumulate",
                "affine",
                "sqrt",
                "sqr",
            ][..],
        ),
    ] {
        let doc = real(name);
        let p = OpProfile::from_document(&doc).unwrap();
        let rows = p.rows_by(GroupBy::Op);
        for op in must {
            let r = rows
                .iter()
                .find(|r| r.op.as_deref() == Some(*op))
                .unwrap_or_else(|| panic!("{name}: no {op}"));
            assert!(
                r.share_low < r.share && r.share < r.share_high,
                "{name} {op}"
            );
            assert!(
                r.self_ns_low < r.self_ns && r.self_ns < r.self_ns_high,
                "{name} {op}"
            );
        }
        let total: f64 = rows.iter().map(|r| r.share).sum();
        assert!((total - 1.0).abs() < 1e-9, "{name}: shares sum to {total}");
        assert_eq!(
            rows.iter().map(|r| r.samples).sum::<u64>(),
            p.totals.counted
        );
        // the backward's arms: every backward op comes from a readable line
        assert_eq!(p.totals.backward_line_unknown, 0, "{name}");
        let backward_kind = rows
            .iter()
            .filter(|r| r.kind == Some(OpKind::BackwardOp))
            .count();
        assert!(backward_kind >= 2, "{name}");
        // matmul in the forward pass, its backward in the backward pass
        assert!(p
            .rows
            .iter()
            .any(|r| r.op.as_deref() == Some("matmul") && r.pass == Some(Pass::Forward)));
        assert!(p
            .rows
            .iter()
            .all(|r| r.op.as_deref() != Some("matmul.backward") || r.pass == Some(Pass::Backward)));
        // candle 0.11.1 re-reads /proc/cpuinfo below matmul (RAYON_NUM_THREADS unset): found
        assert!(
            p.file_io.iter().any(|f| f.op.starts_with("matmul")
                && f.via
                    .iter()
                    .any(|v| v == "candle_core::utils::get_num_threads")
                && f.via.iter().any(|v| v == "num_cpus::get_physical")),
            "{name}: {:?}",
            p.file_io
        );
        // flame trees: one per pass, bounded, totals consistent
        let trees = flame_trees(&doc, &p, &FlameOptions::default());
        assert_eq!(
            trees.iter().map(|t| t.samples).sum::<u64>(),
            p.totals.counted
        );
        assert!(trees.iter().any(|t| t.pass == Some(Pass::Backward)
            && t.nodes
                .iter()
                .any(|n| n.op.as_deref() == Some("matmul.backward"))));
    }
    // the llama model's module spans reach its forward matmuls
    let p = OpProfile::from_document(&real("llama_sampled.jsonl")).unwrap();
    assert!(p.rows.iter().any(|r| r.op.as_deref() == Some("matmul")
        && r.module.as_deref().is_some_and(|m| m.contains("proj"))
        && r.module_source == Some(trace_ops::ModuleSource::Span)));
}
