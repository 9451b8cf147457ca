//! Issue 46 (hostile input, fourth round), the sampled estimate's classes, each with its right
//! answer worked out by hand: an unsymbolised innermost frame is never its caller's time
//! (class 1), a blank name falls back to the address (class 2), no sample inside the measured
//! region gives no estimate and says why (class 6), and one rule for bad samples — the valid
//! ones kept, the dropped ones counted and named, the estimate flagged biased past 5% (class 7).

use trace_ops::classify::UNSYMBOLISED;
use trace_ops::{GroupBy, OpProfile};

const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"mlp::train_step","phase":"train","timestamp":"2026-01-01T00:00:00.000Z","capture_contract":{"operations":"sampled"}}"#;

const TRAIN_STEP: &str = r#"{"kind":"frame","id":9,"function":"mlp::train_step","file":"examples/src/mlp.rs","line":40}"#;

/// A trace whose measured span `s1` runs 0–10 ms, with `frames` and `stacks` (their JSON
/// lines), one sample per `(timestamp_ns, stack_id)` on thread 1, and a sampler account of
/// `samples` written.
fn trace(frames: &[&str], stacks: &[&str], samples: &[(u64, u32)], written: usize) -> String {
    let mut lines = vec![
        META.to_string(),
        r#"{"kind":"span_start","id":"s1","name":"mlp::train_step","start_ns":0,"span_kind":"function","measured":true}"#.into(),
        r#"{"kind":"span_end","id":"s1","duration_ns":10000000}"#.into(),
    ];
    lines.extend(frames.iter().map(|f| f.to_string()));
    lines.extend(stacks.iter().map(|s| s.to_string()));
    for (t, stack) in samples {
        lines.push(format!(
            r#"{{"kind":"sample","timestamp_ns":{t},"thread":1,"stack_id":{stack},"span_id":"s1"}}"#
        ));
    }
    lines.push(format!(
        r#"{{"kind":"sampler","hz":1000,"period_ns":1000000,"clock":"wall","unwinder":"libgcc","symbols":"line_tables","threads":[{{"thread":1,"start_ns":0,"end_ns":20000000,"ticks":{written},"samples":{written},"lost_overrun":0,"lost_buffer":0}}]}}"#
    ));
    lines.push(r#"{"kind":"terminal","outcome":"complete","timestamp_ns":20000000}"#.into());
    lines.join("\n") + "\n"
}

/// `n` samples of `stack`, 100 µs apart from `t0` (all inside the 10 ms region).
fn on(stack: u32, n: u64, t0: u64) -> Vec<(u64, u32)> {
    (0..n).map(|i| (t0 + i * 100_000, stack)).collect()
}

fn samples_of(p: &OpProfile, op: &str) -> u64 {
    p.rows_by(GroupBy::Op)
        .iter()
        .filter(|r| r.op.as_deref() == Some(op))
        .map(|r| r.samples)
        .sum()
}

#[test]
fn an_unsymbolised_innermost_frame_is_not_the_callers_time() {
    let frames = [
        // only an address (a stripped library)
        r#"{"kind":"frame","id":0,"address":"0x7f3a00001000","module":"libfoo.so"}"#,
        // a C symbol: a system frame, inside the unnamed one
        r#"{"kind":"frame","id":1,"function":"__libc_read"}"#,
        TRAIN_STEP,
    ];
    let stacks = [
        r#"{"kind":"stack","id":0,"frames":[0,9]}"#,
        r#"{"kind":"stack","id":1,"frames":[1,0,9]}"#,
        r#"{"kind":"stack","id":2,"frames":[9]}"#,
    ];
    // 3 samples in the unnamed frame, 1 in libc below it, 4 in train_step itself
    let mut samples = on(0, 3, 1_000_000);
    samples.extend(on(1, 1, 2_000_000));
    samples.extend(on(2, 4, 3_000_000));
    let doc = trace_schema::load_str(&trace(&frames, &stacks, &samples, 8)).unwrap();
    let p = OpProfile::from_document(&doc).unwrap();
    // today's main charged all 8 to mlp::train_step
    assert_eq!(samples_of(&p, "mlp::train_step"), 4);
    assert_eq!(samples_of(&p, UNSYMBOLISED), 4);
    let rows = p.rows_by(GroupBy::Op);
    let unsym = rows
        .iter()
        .find(|r| r.op.as_deref() == Some(UNSYMBOLISED))
        .unwrap();
    // 4 of 8 samples of a 10 ms region: share 0.5, 5 ms; Wilson 95% for 4/8:
    // centre (0.5 + 1.96²/16) / (1 + 1.96²/8) = 0.5, half-width
    // 1.96·√(0.5·0.5/8 + 1.96²/256) / 1.4802 = 0.2848 → [0.2152, 0.7848]
    assert_eq!(unsym.share, 0.5);
    assert_eq!(unsym.self_ns, Some(5_000_000));
    assert!(
        (unsym.share_low - 0.2152).abs() < 1e-3,
        "{}",
        unsym.share_low
    );
    assert!(
        (unsym.share_high - 0.7848).abs() < 1e-3,
        "{}",
        unsym.share_high
    );
}

#[test]
fn blank_names_fall_back_to_the_address() {
    let frames = [
        r#"{"kind":"frame","id":0,"function":"","file":"examples/src/mlp.rs","line":7,"address":"0x55d0c0de"}"#,
        r#"{"kind":"frame","id":1,"function":" \t ","address":"0x55d0beef"}"#,
        TRAIN_STEP,
    ];
    let stacks = [
        r#"{"kind":"stack","id":0,"frames":[0,9]}"#,
        r#"{"kind":"stack","id":1,"frames":[1,9]}"#,
        r#"{"kind":"stack","id":2,"frames":[9]}"#,
    ];
    let mut samples = on(0, 3, 1_000_000);
    samples.extend(on(1, 2, 2_000_000));
    samples.extend(on(2, 5, 3_000_000));
    let doc = trace_schema::load_str(&trace(&frames, &stacks, &samples, 10)).unwrap();
    // the blank names read as absent: the frames keep their addresses
    let f = &doc.samples.frames;
    assert_eq!(
        (f[0].function.as_deref(), f[0].address.as_deref()),
        (None, Some("0x55d0c0de"))
    );
    assert_eq!(
        (f[1].function.as_deref(), f[1].address.as_deref()),
        (None, Some("0x55d0beef"))
    );
    let p = OpProfile::from_document(&doc).unwrap();
    // today's main: a row `examples::mlp::` (an empty function) of 3 samples
    assert!(
        p.rows
            .iter()
            .all(|r| !r.op.as_deref().unwrap_or("").trim().is_empty()
                && !r.op.as_deref().unwrap_or("").ends_with("::")),
        "{:?}",
        p.rows.iter().map(|r| &r.op).collect::<Vec<_>>()
    );
    // 3 + 2 samples in the blank-named frames: theirs, 5 of 10; train_step keeps its own 5
    assert_eq!(samples_of(&p, UNSYMBOLISED), 5);
    assert_eq!(samples_of(&p, "mlp::train_step"), 5);
}

#[test]
fn no_sample_inside_the_region_gives_no_estimate_and_says_why() {
    let stacks = [r#"{"kind":"stack","id":0,"frames":[9]}"#];
    // the region is [0, 10 ms]; both samples come after it
    let samples = [(12_000_000, 0), (15_000_000, 0)];
    let doc = trace_schema::load_str(&trace(&[TRAIN_STEP], &stacks, &samples, 2)).unwrap();
    let why = OpProfile::from_document(&doc)
        .map(|p| p.rows.len())
        .expect_err("no share of 0 with an interval [0, 0]");
    assert_eq!(
        why.reason,
        "no sample lies inside the measured region [0, 10.00 ms] (0 ns to 10000000 ns since the \
         session start): 2 samples, 0 before it and 2 after it, so no estimate is given"
    );
}

#[test]
fn bad_samples_are_dropped_counted_and_named_and_bias_flags_past_five_percent() {
    let stacks = [
        r#"{"kind":"stack","id":0,"frames":[9]}"#,
        r#"{"kind":"stack","id":1,"frames":[0,9]}"#,
    ];
    let frames = [
        r#"{"kind":"frame","id":0,"function":"candle_core::tensor::Tensor::matmul"}"#,
        TRAIN_STEP,
    ];
    // 15 in train_step, 5 in matmul, then one sample naming stack 7, which no line defines
    let mut samples = on(0, 15, 1_000_000);
    samples.extend(on(1, 5, 3_000_000));
    samples.push((4_000_000, 7));
    let text = trace(&frames, &stacks, &samples, 21);
    // lines: meta, span_start, span_end, 2 frames, 2 stacks: the samples start at line 8;
    // the bad one is the 21st sample, line 28
    let doc = trace_schema::load_str(&text).unwrap();
    assert_eq!(doc.samples.dropped_sample_lines, vec![28]);
    // today's main refused the whole estimate ("the samples break their rules")
    let p = OpProfile::from_document(&doc).expect("the valid samples are kept");
    assert_eq!((p.totals.samples, p.totals.counted), (20, 20));
    let d = &p.totals.dropped;
    assert_eq!(
        (d.samples, d.lines.clone(), d.missing, d.biased),
        (1, vec![28], 0, false),
        "1 of 21 = 4.8%: under 5%"
    );
    // matmul: 5 of the 20 kept samples of 10 ms = 25%, 2.5 ms
    let matmul = p
        .rows_by(GroupBy::Op)
        .into_iter()
        .find(|r| r.op.as_deref() == Some("matmul"))
        .unwrap();
    assert_eq!(
        (matmul.samples, matmul.share, matmul.self_ns),
        (5, 0.25, Some(2_500_000))
    );
    assert_eq!(
        d.describe(20).unwrap(),
        "1 of 21 samples dropped (line 28: they name an undefined stack, `check` lists them): \
         the figures rest on the kept samples"
    );
    // a second bad sample: 2 of 22 = 9.1%, past 5%: biased
    samples.push((4_100_000, 8));
    let doc = trace_schema::load_str(&trace(&frames, &stacks, &samples, 22)).unwrap();
    let p = OpProfile::from_document(&doc).unwrap();
    let d = &p.totals.dropped;
    assert_eq!(
        (d.samples, d.lines.clone(), d.missing, d.biased),
        (2, vec![28, 29], 0, true)
    );
    assert_eq!(
        d.describe(20).unwrap(),
        "2 of 22 samples dropped (lines 28, 29: they name an undefined stack, `check` lists \
         them): more than 5% of the samples: the shares may be biased"
    );
    // the account counts 30 written: 8 more are missing from the file, 10 of 30 lacking
    let doc = trace_schema::load_str(&trace(&frames, &stacks, &samples, 30)).unwrap();
    let d = OpProfile::from_document(&doc).unwrap().totals.dropped;
    assert_eq!((d.samples, d.missing, d.biased), (2, 8, true));
    assert_eq!(
        d.describe(20).unwrap(),
        "2 of 30 samples dropped (lines 28, 29: they name an undefined stack, `check` lists \
         them); 8 of 30 samples the sampler's account counts are missing from the trace: more \
         than 5% of the samples: the shares may be biased"
    );
}
