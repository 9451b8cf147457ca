//! The meta's rank fields (trace/13: `rank`, `local_rank`, `world_size`), over generated
//! values: each present field reads back as written and each absent one as `None` (never 0);
//! the document flags exactly the impossible combinations (a rank or local rank not below the
//! world size, a world size of 0) as `invalid_meta` issues on line 1, never as load errors; a
//! value that is not a `u32` is a load error naming line 1 and the field.

use proptest::option;
use proptest::prelude::*;
use trace_schema::{load_str, SemanticCode, TraceDocument};

const SPAN: &str = r#"{"kind":"span_start","id":"s1","name":"root","start_ns":0,"span_kind":"function","measured":true}"#;
const END: &str = r#"{"kind":"span_end","id":"s1","duration_ns":10}"#;
const TERMINAL: &str = r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10}"#;

/// A trace/13 meta line with the rank fields that are `Some` (the others left out).
fn meta_line(rank: Option<u32>, local_rank: Option<u32>, world_size: Option<u32>) -> String {
    let mut line = String::from(
        r#"{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t""#,
    );
    for (name, value) in [
        ("rank", rank),
        ("local_rank", local_rank),
        ("world_size", world_size),
    ] {
        if let Some(v) = value {
            line.push_str(&format!(r#","{name}":{v}"#));
        }
    }
    line.push('}');
    line
}

fn load(meta: &str) -> TraceDocument {
    load_str(&format!("{meta}\n{SPAN}\n{END}\n{TERMINAL}\n"))
        .expect("rank fields never fail a load")
}

/// The problems the meta's rank fields must raise, in `RunMeta::validate`'s order.
fn expected_problems(rank: Option<u32>, local: Option<u32>, world: Option<u32>) -> usize {
    let rank_or_world = match (rank, world) {
        (Some(r), Some(w)) if r >= w => 1,
        (_, Some(0)) => 1,
        _ => 0,
    };
    let local_problem = matches!((local, world), (Some(l), Some(w)) if l >= w);
    rank_or_world + usize::from(local_problem)
}

/// Small values around the world size (where the rules bite) and the extremes of `u32`.
fn rank_value() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..10, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn rank_fields_read_back_and_only_impossible_ones_are_flagged(
        rank in option::of(rank_value()),
        local_rank in option::of(rank_value()),
        world_size in option::of(rank_value()),
    ) {
        let doc = load(&meta_line(rank, local_rank, world_size));
        let m = &doc.meta;
        prop_assert_eq!(m.rank, rank);
        prop_assert_eq!(m.local_rank, local_rank);
        prop_assert_eq!(m.world_size, world_size);
        let flagged: Vec<(SemanticCode, u64, &str)> = doc
            .semantic_issues
            .iter()
            .filter(|i| i.code == SemanticCode::InvalidMeta)
            .map(|i| (i.code, i.line, i.message.as_str()))
            .collect();
        prop_assert_eq!(
            flagged.len(),
            expected_problems(rank, local_rank, world_size),
            "{:?}",
            flagged
        );
        for (_, line, message) in &flagged {
            prop_assert_eq!(*line, 1);
            prop_assert!(
                message.contains("rank") || message.contains("world_size"),
                "{}",
                message
            );
        }
        // the validation itself agrees with the document's issues
        prop_assert_eq!(m.validate().len(), flagged.len());
    }

    #[test]
    fn a_rank_field_that_is_not_u32_fails_naming_line_and_field(
        field in prop_oneof![Just("rank"), Just("local_rank"), Just("world_size")],
        bad in prop_oneof![
            Just("-1".to_string()),
            Just("4294967296".to_string()),
            Just("1.5".to_string()),
            Just("\"3\"".to_string()),
        ],
    ) {
        let meta = format!(
            r#"{{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","{field}":{bad}}}"#
        );
        let err = load_str(&format!("{meta}\n{TERMINAL}\n"))
            .expect_err("a rank field out of u32 is bad input")
            .to_string();
        prop_assert!(err.contains("line 1"), "{}", err);
        prop_assert!(err.contains(field), "{}", err);
    }
}

#[test]
fn absent_rank_fields_are_none_not_zero() {
    let doc = load(&meta_line(None, None, None));
    assert_eq!(
        (doc.meta.rank, doc.meta.local_rank, doc.meta.world_size),
        (None, None, None)
    );
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
}

#[test]
fn a_full_job_of_four_ranks_is_valid() {
    for rank in 0..4 {
        let doc = load(&meta_line(Some(rank), Some(rank % 2), Some(4)));
        assert_eq!(doc.meta.rank, Some(rank));
        assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    }
    let doc = load(&meta_line(Some(4), Some(0), Some(4)));
    let messages: Vec<&str> = doc
        .semantic_issues
        .iter()
        .map(|i| i.message.as_str())
        .collect();
    assert_eq!(messages, ["meta rank 4 must be less than world_size 4"]);
}
