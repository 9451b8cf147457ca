//! The report across ranks on small hand-written traces whose figures are known: the
//! straggler, its pass and span, the memory imbalance, and a missing, an unreadable and a
//! cut-short rank.

use std::path::PathBuf;

use trace_graph::Analysis;
use trace_ranks::{build, RankInput};
use trace_schema::{Pass, TraceDocument};

/// A one-step trace of `rank` of 4: forward `fwd` ns, backward `bwd` ns (with a child
/// `backward/attn` of `attn` ns), optimizer 10 ns, and one activation of `act` bytes.
fn trace(rank: u32, fwd: u64, bwd: u64, attn: u64, act: u64, complete: bool) -> String {
    let total = 5 + fwd + bwd + 10 + 5;
    let b0 = 5 + fwd;
    let o0 = b0 + bwd;
    let mut lines = vec![
        format!(r#"{{"kind":"meta","schema":"candle-graph/trace/13","run_id":"run-{rank}","entrypoint":"e::train_step","phase":"train","timestamp":"2026-12-01T00:00:00.000Z","capture_step":2,"warmup_steps":1,"device":"cpu","rank":{rank},"local_rank":{rank},"world_size":4}}"#),
        r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#.to_string(),
        r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":5,"span_kind":"function","step":"forward"}"#.to_string(),
        format!(r#"{{"kind":"memory","timestamp_ns":6,"action":"alloc","device":"cpu","storage_id":"a1","bytes":{act},"span_id":"s2","category":"activation","category_source":"inferred","source":"allocator"}}"#),
        format!(r#"{{"kind":"span_end","id":"s2","duration_ns":{fwd}}}"#),
        format!(r#"{{"kind":"span_start","id":"s3","parent_id":"s1","name":"backward","start_ns":{b0},"span_kind":"function","step":"backward"}}"#),
        format!(r#"{{"kind":"span_start","id":"s4","parent_id":"s3","name":"attn","start_ns":{b0},"span_kind":"function","step":"backward"}}"#),
        format!(r#"{{"kind":"span_end","id":"s4","duration_ns":{attn}}}"#),
        format!(r#"{{"kind":"span_end","id":"s3","duration_ns":{bwd}}}"#),
        format!(r#"{{"kind":"memory","timestamp_ns":{o0},"action":"free","device":"cpu","storage_id":"a1","bytes":{act}}}"#),
        format!(r#"{{"kind":"span_start","id":"s5","parent_id":"s1","name":"optimizer","start_ns":{o0},"span_kind":"function","step":"optimizer"}}"#),
        r#"{"kind":"span_end","id":"s5","duration_ns":10}"#.to_string(),
        format!(r#"{{"kind":"span_end","id":"s1","duration_ns":{total}}}"#),
        format!(r#"{{"kind":"terminal","outcome":"complete","timestamp_ns":{total}}}"#),
    ];
    if !complete {
        lines.truncate(9);
    }
    lines.join("\n") + "\n"
}

fn load(text: &str) -> (&'static TraceDocument, &'static Analysis) {
    let doc = trace_schema::load_str(text).expect("a valid trace");
    let analysis = trace_graph::analyze(&doc);
    (Box::leak(Box::new(doc)), Box::leak(Box::new(analysis)))
}

fn input(rank: u32, text: &str) -> RankInput<'static> {
    RankInput {
        file: PathBuf::from(format!("trace.rank{rank}.jsonl")),
        rank_in_name: Some(rank),
        loaded: Ok(load(text)),
    }
}

#[test]
fn the_slowest_rank_is_named_with_its_pass_and_span() {
    let inputs = vec![
        input(0, &trace(0, 100, 200, 50, 1000, true)),
        input(1, &trace(1, 110, 190, 60, 1000, true)),
        input(3, &trace(3, 120, 600, 450, 3000, true)),
        RankInput {
            file: PathBuf::from("trace.rank2.jsonl"),
            rank_in_name: Some(2),
            loaded: Err("cannot load trace.rank2.jsonl: not JSON".into()),
        },
    ];
    let r = build(inputs, None);
    assert_eq!(r.world_size, 4);
    assert!(r.world_size_declared);
    assert_eq!(
        r.ranks.iter().map(|x| x.rank).collect::<Vec<_>>(),
        [0, 1, 3]
    );
    assert_eq!(
        r.missing,
        Vec::<u32>::new(),
        "rank 2 has a file, unreadable"
    );
    assert_eq!(r.failed.len(), 1);
    assert_eq!(r.failed[0].rank, Some(2));
    assert!(r.disagreements.is_empty(), "{:?}", r.disagreements);
    let s = r.straggler.expect("three complete ranks");
    assert_eq!(s.rank, 3);
    // step = 5 + fwd + bwd + 10 + 5: rank 3 740 ns, others 320 and 320 → median 320
    assert_eq!(s.step.rank_ns, 740);
    assert_eq!(s.step.others_median_ns, 320);
    assert_eq!(s.step.excess_ns, 420);
    assert_eq!(s.fastest_rank, 0);
    let (pass, e) = s.pass.expect("a pass with an excess");
    assert_eq!(pass, Pass::Backward);
    assert_eq!(
        (e.rank_ns, e.others_median_ns, e.excess_ns),
        (600, 195, 405)
    );
    let (span, e) = s.span.expect("a span with an excess");
    assert_eq!(span, "step/backward/attn");
    // attn self: 450 against median(50, 60) = 55
    assert_eq!((e.rank_ns, e.others_median_ns, e.excess_ns), (450, 55, 395));
    let m = r.memory.expect("three peaks");
    assert_eq!(
        (m.max_rank, m.max_bytes, m.min_rank, m.min_bytes),
        (3, 3000, 0, 1000)
    );
    assert_eq!(m.spread_bytes, 2000);
    assert_eq!(m.ratio, Some(3.0));
}

#[test]
fn a_missing_and_a_cut_short_rank_are_said_not_fatal() {
    let inputs = vec![
        input(0, &trace(0, 100, 200, 50, 1000, true)),
        input(1, &trace(1, 100, 900, 50, 1000, false)),
        input(2, &trace(2, 100, 250, 50, 1000, true)),
    ];
    let r = build(inputs, None);
    assert_eq!(r.missing, [3]);
    assert_eq!(r.cut_short, [1]);
    // the cut-short rank is not the straggler, though its backward ran longer
    let s = r.straggler.expect("two complete ranks");
    assert_eq!(s.rank, 2);
    assert_eq!(s.ranks_compared, 2);
}

#[test]
fn a_rank_twice_and_a_name_against_its_meta_disagree() {
    let mut misnamed = input(1, &trace(0, 100, 200, 50, 1000, true));
    misnamed.file = PathBuf::from("trace.rank1.jsonl");
    let r = build(
        vec![input(0, &trace(0, 100, 200, 50, 1000, true)), misnamed],
        None,
    );
    assert_eq!(r.disagreements.len(), 2, "{:?}", r.disagreements);
    assert!(r.disagreements[0].contains("named rank 1 but its meta says rank 0"));
    assert!(r.disagreements[1].contains("rank 0 has two traces"));
}

/// Issue 46, class 4: `trace.rank18446744073709551616.jsonl` (a number that does not fit a
/// rank) whose meta says rank 2 is listed and read as rank 2 — not skipped, then reported
/// "missing rank 2", with the straggler computed without it. Without a rank in its meta it is
/// named unreadable, with why.
#[test]
fn a_rank_file_number_that_does_not_fit_is_read_from_its_meta() {
    let dir = std::env::temp_dir().join(format!("h46-ranks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let huge = "trace.rank18446744073709551616.jsonl";
    // rank 2 is the slowest: 100 + 900 ns of passes against 300-330 ns on the others
    for (name, rank, bwd) in [
        ("trace.rank0.jsonl", 0, 200),
        ("trace.rank1.jsonl", 1, 210),
        (huge, 2, 900),
        ("trace.rank3.jsonl", 3, 220),
    ] {
        std::fs::write(dir.join(name), trace(rank, 100, bwd, 50, 1000, true)).unwrap();
    }
    let files = trace_ranks::rank_files(&dir).unwrap();
    assert_eq!(files.len(), 4, "{files:?}");
    assert_eq!(
        files[0].0, None,
        "the huge number gives no rank from the name"
    );
    let read = |files: Vec<(Option<u32>, PathBuf)>| {
        let inputs = files
            .into_iter()
            .map(|(rank, file)| {
                let text = std::fs::read_to_string(&file).unwrap();
                RankInput {
                    file,
                    rank_in_name: rank,
                    loaded: Ok(load(&text)),
                }
            })
            .collect();
        build(inputs, None)
    };
    let report = read(files);
    assert_eq!(report.missing, Vec::<u32>::new());
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let ranks: Vec<u32> = report.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 1, 2, 3]);
    let s = report.straggler.as_ref().expect("four complete ranks");
    assert_eq!((s.rank, s.ranks_compared), (2, 4));
    // step 5 + 100 + 900 + 10 + 5 = 1,020 ns against the others' median of 330 ns (rank 1)
    assert_eq!(
        (s.step.rank_ns, s.step.others_median_ns, s.step.excess_ns),
        (1020, 330, 690)
    );
    // the same file without a rank in its meta: named unreadable, with why
    let text = trace(2, 100, 900, 50, 1000, true).replace(r#""rank":2,"#, "");
    std::fs::write(dir.join(huge), text).unwrap();
    let report = read(trace_ranks::rank_files(&dir).unwrap());
    assert_eq!(report.failed.len(), 1);
    assert_eq!(
        report.failed[0].reason,
        "its name's rank 18446744073709551616 does not fit (ranks are below 2^32) and its meta gives no rank"
    );
    assert_eq!(report.missing, vec![2]);
    std::fs::remove_dir_all(&dir).unwrap();
}
