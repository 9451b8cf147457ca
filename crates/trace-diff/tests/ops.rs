//! A PyTorch original against its Candle port, op by op: the committed PyTorch MLP trace
//! (`cargo xtask pytorch-fixtures`, torch 2.15.0, CPU, one thread) against a Candle capture of
//! the same MLP with stack samples (`RAYON_NUM_THREADS=1 candle-graph demo --model mlp`, gzipped
//! into tests/data/candle-mlp.jsonl.gz).

mod common;

use std::io::Read;
use std::path::PathBuf;

use common::pytorch_vs_candle as diff;
use trace_ops::{Framework, TimeSource};
use trace_schema::{Pass, TraceDocument};

fn pytorch() -> TraceDocument {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../trace-import/tests/data/pytorch/mlp.json.gz");
    trace_import::import_bytes(&std::fs::read(path).unwrap())
        .unwrap()
        .document()
}

fn candle() -> TraceDocument {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/candle-mlp.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    trace_schema::load_str(&text).unwrap()
}

#[test]
fn the_pytorch_mlp_against_the_candle_mlp_ranks_roles_by_gap_per_pass() {
    let (b, c) = (pytorch(), candle());
    let d = diff(&b, &c);
    let ops = d.ops.as_ref().expect("both sides have op tables");
    assert_eq!(ops.baseline_framework, Framework::Pytorch);
    assert_eq!(ops.candidate_framework, Framework::Candle);
    assert_eq!(ops.baseline_source, TimeSource::Measured);
    assert_eq!(ops.candidate_source, TimeSource::Sampled);
    assert!(ops.timing_comparable, "{:?}", ops.refusals);
    let pass = |p: Pass| ops.passes.iter().find(|x| x.pass == Some(p)).unwrap();
    for p in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
        let po = pass(p);
        // ranked by the size of the gap; rows not ranked (too few samples) after them
        let ranked = po.roles.iter().take_while(|r| r.ranked()).count();
        assert!(po.roles[ranked..].iter().all(|r| !r.ranked()), "{p:?}");
        assert!(ranked > 0, "{p:?}");
        let gaps: Vec<u128> = po.roles[..ranked]
            .iter()
            .map(|r| r.gap_ns.unwrap().unsigned_abs())
            .collect();
        assert!(gaps.windows(2).all(|w| w[0] >= w[1]), "{p:?}: {gaps:?}");
        for r in &po.roles[ranked..] {
            let n = r.too_few_samples.expect("not ranked: too few samples");
            assert!(n < trace_diff::MIN_ROW_SAMPLES, "{}", r.role);
        }
        // each row's gap is candidate − baseline, its share of the user's pass gap
        let user_gap = po.user_pass_gap_ns.unwrap();
        for r in &po.roles {
            let g = r.candidate.ns.unwrap_or(0) as i128 - r.baseline.ns.unwrap_or(0) as i128;
            assert_eq!(r.gap_ns, Some(g), "{}", r.role);
            let share = r.share_of_pass_gap.unwrap();
            assert!((share - g as f64 / user_gap as f64).abs() < 1e-9);
            assert!(
                r.gap_low_ns.unwrap() <= g && g <= r.gap_high_ns.unwrap(),
                "{}",
                r.role
            );
        }
        // per side: roles + ops without a role + outside any op + probe = the pass
        for (a, side_ns) in [
            (po.baseline_account.as_ref().unwrap(), po.baseline_pass_ns),
            (po.candidate_account.as_ref().unwrap(), po.candidate_pass_ns),
        ] {
            assert_eq!(Some(a.pass_ns), side_ns);
            assert_eq!(
                a.roles_ns + a.unmatched_ns + a.outside_ops_ns + a.probe_ns,
                a.pass_ns,
                "{p:?}: {a:?}"
            );
        }
        // no row's time exceeds its pass, on either side
        for r in &po.roles {
            assert!(
                r.candidate.ns.unwrap_or(0) <= po.candidate_pass_ns.unwrap(),
                "{}",
                r.role
            );
            assert!(
                r.baseline.ns.unwrap_or(0) <= po.baseline_pass_ns.unwrap(),
                "{}",
                r.role
            );
        }
        // the rows' gaps add up to the user's pass gap
        let sum: i128 = po.roles.iter().map(|r| r.gap_ns.unwrap()).sum();
        assert!(
            (sum - user_gap).abs() <= 2 * po.roles.len() as i128,
            "{p:?}: {sum} vs {user_gap}"
        );
    }
    // the candidate's probe is one row per pass, outside the ranking
    let probe = pass(Pass::Backward).candidate_account.as_ref().unwrap();
    assert!(probe.probe_samples.unwrap() > 0 && probe.probe_ns > 0);
    assert!(pass(Pass::Backward).roles.iter().all(|r| !r
        .candidate
        .ops
        .iter()
        .any(|o| o == trace_ops::PROBE_OP)));
    let role = |p: Pass, name: &str| pass(p).roles.iter().find(|r| r.role == name).unwrap();
    let matmul = role(Pass::Forward, "matmul");
    assert_eq!(matmul.baseline.ops, ["aten::linear"]);
    assert_eq!(matmul.baseline.calls, Some(3));
    assert!(matmul.candidate.ops.contains(&"matmul".to_string()));
    let acc = role(Pass::Backward, "gradient accumulation");
    assert_eq!(
        acc.baseline.ops,
        ["autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"]
    );
    assert_eq!(acc.candidate.ops, ["grad_accumulate"]);
    assert!(acc.candidate.samples.unwrap() > 0);
    let moments = role(Pass::Optimizer, "AdamW: moments");
    assert!(moments.baseline.ops.contains(&"aten::lerp_".to_string()));
    assert!(moments.candidate.ops.contains(&"affine".to_string()));
    // the optimizer's glue without an op frame is time outside any op, ranked beside the roles
    let glue = role(Pass::Optimizer, trace_diff::OUTSIDE_OPS);
    assert_eq!(glue.kind, trace_diff::RowKind::OutsideOps);
    assert!(glue
        .candidate
        .ops
        .iter()
        .any(|o| o.starts_with("candle_nn::optim")));
    // PyTorch's `ones_like` (the loss gradient's seed, outside every pass) has a role now
    let outside = ops.passes.iter().find(|x| x.pass.is_none()).unwrap();
    let seed = outside
        .roles
        .iter()
        .find(|r| r.baseline.ops.iter().any(|o| o == "aten::ones_like"))
        .unwrap();
    assert_eq!(seed.role, "tensor creation");
    // every PyTorch top-level op is in exactly one row (a role's or its own, unmatched)
    let listed: usize = ops
        .passes
        .iter()
        .map(|p| p.roles.iter().map(|r| r.baseline.ops.len()).sum::<usize>())
        .sum();
    let unmatched: usize = ops.passes.iter().map(|p| p.baseline_unmatched.len()).sum();
    let unmatched_rows: usize = ops
        .passes
        .iter()
        .flat_map(|p| &p.roles)
        .filter(|r| r.kind == trace_diff::RowKind::Unmatched)
        .map(|r| r.baseline.ops.len())
        .sum();
    assert_eq!(unmatched, unmatched_rows);
    let top_level = trace_ops::MeasuredOps::from_document(&b)
        .unwrap()
        .rows
        .iter()
        .filter(|r| r.top_level_calls > 0)
        .count();
    assert_eq!(listed, top_level);
}

#[test]
fn op_times_are_refused_when_the_warm_up_differs_and_roles_still_listed() {
    let (b, mut c) = (pytorch(), candle());
    c.meta.warmup_steps = Some(5);
    let d = diff(&b, &c);
    let ops = d.ops.as_ref().unwrap();
    assert!(!ops.timing_comparable);
    assert!(
        ops.refusals.iter().any(|r| r.starts_with("warmup_differs")),
        "{:?}",
        ops.refusals
    );
    let forward = ops
        .passes
        .iter()
        .find(|x| x.pass == Some(Pass::Forward))
        .unwrap();
    assert!(forward
        .roles
        .iter()
        .all(|r| r.gap_ns.is_none() && r.share_of_pass_gap.is_none()));
    assert!(forward.roles.iter().any(|r| r.role == "matmul"));
}

#[test]
fn an_unknown_warm_up_is_a_note_not_a_refusal() {
    let (mut b, c) = (pytorch(), candle());
    b.meta.warmup_steps = None;
    let d = diff(&b, &c);
    let ops = d.ops.as_ref().unwrap();
    assert!(ops.timing_comparable, "{:?}", ops.refusals);
    assert!(
        ops.notes
            .iter()
            .any(|n| n.starts_with("warm-up steps not stated by the baseline")),
        "{:?}",
        ops.notes
    );
}

#[test]
fn an_op_without_a_role_is_a_ranked_row_of_its_own() {
    let (mut b, c) = (pytorch(), candle());
    // rename PyTorch's forward linear: no role knows the name any more
    let (old, new) = (
        b.sym("aten::linear").unwrap(),
        b.strings.intern("aten::my_linear"),
    );
    for s in b.spans.iter_mut().filter(|s| s.name == old) {
        s.name = new;
    }
    let d = diff(&b, &c);
    let ops = d.ops.as_ref().unwrap();
    let forward = ops
        .passes
        .iter()
        .find(|x| x.pass == Some(Pass::Forward))
        .unwrap();
    let row = forward
        .roles
        .iter()
        .find(|r| r.role == "aten::my_linear")
        .expect("its own row");
    assert_eq!(row.kind, trace_diff::RowKind::Unmatched);
    assert!(row.candidate.ops.is_empty());
    assert_eq!(
        row.gap_ns,
        Some(-(row.baseline.ns.unwrap() as i128)),
        "its time against nothing"
    );
    assert!(row.ranked());
    assert!(forward
        .baseline_unmatched
        .iter()
        .any(|o| o.op == "aten::my_linear"));
}

#[test]
fn a_trace_without_ops_on_one_side_says_why() {
    let b = pytorch();
    let text = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        "\n",
        r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
        r#"{"kind":"span_end","id":"s1","duration_ns":10}"#,
        "\n",
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10}"#,
        "\n"
    );
    let c = trace_schema::load_str(text).unwrap();
    let d = diff(&b, &c);
    assert!(d.ops.is_none());
    assert!(d
        .ops_unavailable
        .unwrap()
        .starts_with("the candidate has no op table"));
}

#[test]
fn two_candle_runs_carry_no_framework_notes_and_near_equal_memory_is_one_host() {
    let (b, c) = (pytorch(), candle());
    // across frameworks a role says how they differ
    let cross = diff(&b, &c);
    let notes = |d: &trace_diff::TraceDiff| -> usize {
        d.ops.as_ref().map_or(0, |o| {
            o.passes
                .iter()
                .flat_map(|p| &p.roles)
                .filter(|r| r.note.is_some())
                .count()
        })
    };
    assert!(
        notes(&cross) > 0,
        "the PyTorch-vs-Candle diff explains its roles"
    );
    // two Candle runs: no note about PyTorch
    let mut c2 = candle();
    let host = c2.meta.host.get_or_insert_with(Default::default);
    let mem = *host.memory_bytes.get_or_insert(25_276_502_016);
    // 0.002% apart: the same machine read a few pages apart
    host.memory_bytes = Some(mem - mem / 50_000);
    let mut c1 = candle();
    c1.meta
        .host
        .get_or_insert_with(Default::default)
        .memory_bytes = Some(mem);
    let same = diff(&c1, &c2);
    assert_eq!(notes(&same), 0);
    let ops = same.ops.as_ref().unwrap();
    assert!(
        !ops.refusals.iter().any(|r| r.starts_with("host_differs")),
        "{:?}",
        ops.refusals
    );
    // 20% apart is another host, said in binary units
    c2.meta.host.as_mut().unwrap().memory_bytes = Some(mem / 5 * 4);
    let other = diff(&c1, &c2);
    let refusal = other
        .ops
        .as_ref()
        .unwrap()
        .refusals
        .iter()
        .find(|r| r.starts_with("host_differs: memory"))
        .expect("a host refusal")
        .clone();
    assert_eq!(
        refusal,
        format!(
            "host_differs: memory baseline {}, candidate {}",
            trace_format::bytes(mem),
            trace_format::bytes(mem / 5 * 4)
        )
    );
}
