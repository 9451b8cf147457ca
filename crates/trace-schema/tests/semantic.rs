//! The original's semantic rules are kept in the document as issues, never load errors, so a
//! broken trace still gets a health report and a memory profile.

use trace_schema::{load_str, SemanticCode, TraceDocument};

const META_11: &str = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#;
const SPAN: &str = r#"{"kind":"span_start","id":"s1","name":"root","start_ns":0,"span_kind":"function","measured":true}"#;
const END: &str = r#"{"kind":"span_end","id":"s1","duration_ns":10}"#;
const TERMINAL: &str = r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10}"#;

fn load(lines: &[&str]) -> TraceDocument {
    let mut text = lines.join("\n");
    text.push('\n');
    load_str(&text).expect("semantic problems never fail a load")
}

/// The `(code, line)` pairs of the document's issues.
fn issues(doc: &TraceDocument) -> Vec<(SemanticCode, u64)> {
    doc.semantic_issues
        .iter()
        .map(|i| (i.code, i.line))
        .collect()
}

#[test]
fn clean_trace_has_no_issue() {
    let doc = load(&[META_11, SPAN, END, TERMINAL]);
    assert_eq!(issues(&doc), vec![]);
}

#[test]
fn duplicate_span_id_keeps_the_first() {
    let again = r#"{"kind":"span_start","id":"s1","name":"other","start_ns":5,"span_kind":"op"}"#;
    let doc = load(&[META_11, SPAN, again, END, TERMINAL]);
    assert_eq!(issues(&doc), vec![(SemanticCode::DuplicateSpanId, 3)]);
    assert_eq!(doc.spans.len(), 1);
    assert_eq!(doc.str(doc.spans[0].name), "root");
}

#[test]
fn unknown_and_repeated_span_end() {
    let unknown = r#"{"kind":"span_end","id":"s9","duration_ns":1}"#;
    let doc = load(&[META_11, SPAN, unknown, END, END, TERMINAL]);
    assert_eq!(
        issues(&doc),
        vec![
            (SemanticCode::UnknownSpanEnd, 3),
            (SemanticCode::RepeatedSpanEnd, 5)
        ]
    );
    assert_eq!(doc.spans[0].duration_ns, Some(10), "the first end is kept");
    // A span_end naming a string that exists but is not a span (here a device) is unknown too.
    let alloc = r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a.1","bytes":4}"#;
    let cpu_end = r#"{"kind":"span_end","id":"cpu","duration_ns":1}"#;
    let doc = load(&[META_11, alloc, cpu_end, TERMINAL]);
    assert_eq!(issues(&doc), vec![(SemanticCode::UnknownSpanEnd, 3)]);
}

#[test]
fn terminal_reason_rules() {
    let complete_with_reason =
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10,"reason":"oops"}"#;
    let doc = load(&[META_11, SPAN, END, complete_with_reason]);
    assert_eq!(
        issues(&doc),
        vec![(SemanticCode::CompleteWithFailureReason, 4)]
    );
    let failed = r#"{"kind":"terminal","outcome":"failed","timestamp_ns":10}"#;
    let doc = load(&[META_11, SPAN, END, failed]);
    assert_eq!(issues(&doc), vec![(SemanticCode::FailedWithoutReason, 4)]);
    let failed_empty = r#"{"kind":"terminal","outcome":"failed","timestamp_ns":10,"reason":"  "}"#;
    let doc = load(&[META_11, SPAN, END, failed_empty]);
    assert_eq!(issues(&doc), vec![(SemanticCode::FailedWithoutReason, 4)]);
}

#[test]
fn terminal_before_evidence() {
    let early = r#"{"kind":"terminal","outcome":"complete","timestamp_ns":9}"#;
    let doc = load(&[META_11, SPAN, END, early]);
    assert_eq!(
        issues(&doc),
        vec![(SemanticCode::TerminalPrecedesEvidence, 4)]
    );
    // Evidence includes op end, memory and device_memory timestamps.
    let op = r#"{"kind":"op","span_id":"s1","op_name":"add","dtype":"f32","device":"cpu","duration_ns":5,"timestamp_ns":8}"#;
    let doc = load(&[META_11, SPAN, END, op, TERMINAL]);
    assert_eq!(
        issues(&doc),
        vec![(SemanticCode::TerminalPrecedesEvidence, 5)]
    );
    let sample = r#"{"kind":"device_memory","timestamp_ns":11,"device":"cpu","used_bytes":1}"#;
    let doc = load(&[META_11, SPAN, END, sample, TERMINAL]);
    assert_eq!(
        issues(&doc),
        vec![(SemanticCode::TerminalPrecedesEvidence, 5)]
    );
}

#[test]
fn tensor_stats_rules() {
    let cases = [
        // shape product differs from elements
        r#"{"kind":"tensor_stats","span_id":"s1","label":"x","shape":[2,3],"dtype":"f32","elements":5,"non_finite":0,"rms":1.0,"abs_max":1.0,"mean":0.0}"#,
        // non_finite > elements
        r#"{"kind":"tensor_stats","span_id":"s1","label":"x","shape":[2],"dtype":"f32","elements":2,"non_finite":3}"#,
        // negative rms
        r#"{"kind":"tensor_stats","span_id":"s1","label":"x","shape":[2],"dtype":"f32","elements":2,"non_finite":0,"rms":-1.0,"abs_max":1.0,"mean":0.0}"#,
        // empty label
        r#"{"kind":"tensor_stats","span_id":"s1","label":" ","shape":[2],"dtype":"f32","elements":2,"non_finite":0,"rms":1.0,"abs_max":1.0,"mean":0.0}"#,
        // min > max
        r#"{"kind":"tensor_stats","span_id":"s1","label":"x","shape":[2],"dtype":"f32","elements":2,"non_finite":0,"min":2.0,"max":1.0}"#,
    ];
    for case in cases {
        let doc = load(&[META_11, SPAN, case, END, TERMINAL]);
        assert_eq!(
            issues(&doc),
            vec![(SemanticCode::InvalidTensorStats, 3)],
            "{case}"
        );
        assert_eq!(doc.tensor_stats.len(), 1, "kept for the health check");
    }
}

#[test]
fn gradient_state_and_norm() {
    let cases = [
        r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"present"}"#,
        r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"present","norm":0.0}"#,
        r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"zero","norm":0.5}"#,
        r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"zero","norm":-0.0}"#,
        r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"missing","norm":1.0}"#,
        r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"non_finite","norm":1.0}"#,
    ];
    for case in cases {
        let doc = load(&[META_11, case, TERMINAL]);
        assert_eq!(
            issues(&doc),
            vec![(SemanticCode::GradientStateNormInconsistent, 2)],
            "{case}"
        );
    }
    let fine =
        r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"zero","norm":0.0}"#;
    assert_eq!(issues(&load(&[META_11, fine, TERMINAL])), vec![]);
}

#[test]
fn invalid_meta_and_contract() {
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":" ","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":2}"#;
    let doc = load(&[meta, TERMINAL]);
    assert_eq!(
        issues(&doc),
        vec![
            (SemanticCode::InvalidMeta, 1),
            (SemanticCode::InvalidMeta, 1)
        ]
    );
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_step":0}"#;
    assert_eq!(
        issues(&load(&[meta, TERMINAL])),
        vec![(SemanticCode::InvalidMeta, 1)]
    );
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_contract":{"gradients":"complete"}}"#;
    assert_eq!(
        issues(&load(&[meta, TERMINAL])),
        vec![(SemanticCode::InvalidCaptureContract, 1)]
    );
    // A tampered gradient manifest: the digest no longer matches.
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_contract":{"gradients":"complete","gradient_contract":{"manifest_sha256":"sha256:48050776e7f1553f97446b89ac00c2399e958fe29852dfdafa3085f50a0a4ff3","expected":[{"root":"model","key":"fc2.bias","family":"model"},{"root":"model","key":"fc1.weight","family":"model"}],"families":[{"family":"model","expectation":"active","min_present":2}]}}}"#;
    let doc = load(&[meta, TERMINAL]);
    assert_eq!(
        issues(&doc),
        vec![(SemanticCode::InvalidCaptureContract, 1)]
    );
    assert!(doc.semantic_issues[0].message.contains("digest"));
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","comparison_identity":{"workload_id":"w","model_id":"m","config_id":"c","data_id":"d","seed_policy":"s","physical_batch":0,"accumulation_steps":1,"precision":"f32","device_state":"warm"}}"#;
    assert_eq!(
        issues(&load(&[meta, TERMINAL])),
        vec![(SemanticCode::InvalidMeta, 1)]
    );
}

#[test]
fn broken_trace_still_has_its_evidence() {
    let again = r#"{"kind":"span_start","id":"s1","name":"other","start_ns":5,"span_kind":"op"}"#;
    let alloc = r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a.1","bytes":4,"span_id":"s1"}"#;
    let early = r#"{"kind":"terminal","outcome":"failed","timestamp_ns":0}"#;
    let doc = load(&[META_11, SPAN, again, alloc, END, END, early]);
    assert_eq!(doc.memory.len(), 1);
    assert_eq!(doc.spans.len(), 1);
    assert_eq!(doc.semantic_issues.len(), 4);
}

const META_12: &str = r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#;

#[test]
fn sample_ids_must_be_defined_before_use_and_unique() {
    let frame = r#"{"kind":"frame","id":7,"function":"f"}"#;
    let stack = r#"{"kind":"stack","id":1,"frames":[7]}"#;
    let sample = r#"{"kind":"sample","timestamp_ns":3,"thread":1,"stack_id":1}"#;
    let sampler = r#"{"kind":"sampler","hz":1000,"period_ns":1000000,"clock":"wall","unwinder":"libgcc","symbols":"none","threads":[{"thread":1,"start_ns":0,"end_ns":10,"ticks":1,"samples":1,"lost_overrun":0,"lost_buffer":0}]}"#;
    let clean = load(&[META_12, SPAN, frame, stack, sample, sampler, END, TERMINAL]);
    assert_eq!(issues(&clean), vec![]);
    assert_eq!(clean.samples.samples.len(), 1);

    // a stack before its frame, a sample of an unknown stack, repeated ids, a second sampler
    // (the dropped stack of the first case also drops its sample)
    let cases: [(&[&str], &[u64]); 6] = [
        (&[stack, frame, sample], &[3, 5]),
        (
            &[
                frame,
                stack,
                r#"{"kind":"sample","timestamp_ns":3,"thread":1,"stack_id":9}"#,
            ],
            &[5],
        ),
        (&[frame, frame, stack, sample], &[4]),
        (&[frame, stack, stack, sample], &[5]),
        (&[frame, stack, sample, sampler, sampler], &[7]),
        // the account disagrees with the samples (one sample, none claimed): at the end
        (
            &[
                frame,
                stack,
                sample,
                r#"{"kind":"sampler","hz":1000,"period_ns":1000000,"clock":"wall","unwinder":"u","symbols":"none","threads":[{"thread":1,"start_ns":0,"end_ns":10,"ticks":1,"samples":0,"lost_overrun":0,"lost_buffer":0}]}"#,
            ],
            &[6],
        ),
    ];
    for (body, lines_expected) in cases {
        let mut lines = vec![META_12, SPAN];
        lines.extend_from_slice(body);
        lines.extend([END, TERMINAL]);
        let doc = load(&lines);
        let expected: Vec<_> = lines_expected
            .iter()
            .map(|&l| (SemanticCode::InvalidSamples, l))
            .collect();
        assert_eq!(issues(&doc), expected, "{body:?}");
        // every kept reference resolves
        for s in &doc.samples.samples {
            assert!(doc.samples.stack_frames(s.stack).count() > 0);
        }
    }
}

#[test]
fn sample_kinds_need_trace_12() {
    let frame = r#"{"kind":"frame","id":7,"function":"f"}"#;
    let mut text = [META_11, SPAN, frame, END, TERMINAL].join("\n");
    text.push('\n');
    let err = load_str(&text).unwrap_err().to_string();
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn frame_names_are_held_bounded() {
    let name = "x".repeat(2_000_000);
    let frame = format!(r#"{{"kind":"frame","id":1,"function":"{name}","file":"{name}"}}"#);
    let doc = load(&[META_12, SPAN, &frame, END, TERMINAL]);
    let f = &doc.samples.frames[0];
    for s in [f.function.as_deref().unwrap(), f.file.as_deref().unwrap()] {
        assert!(
            s.len() <= 2 * trace_schema::intern::MAX_STRING_BYTES,
            "{}",
            s.len()
        );
        assert!(s.contains("2000000 bytes"), "the full length is stated");
    }
}

#[test]
fn a_malformed_sample_field_names_its_field() {
    for (line, field) in [
        (
            r#"{"kind":"sample","timestamp_ns":"abc","thread":1,"stack_id":1}"#,
            "timestamp_ns",
        ),
        (r#"{"kind":"stack","id":1,"frames":"x"}"#, "frames"),
        (r#"{"kind":"frame","id":1,"line":-3}"#, "line"),
        (
            r#"{"kind":"sampler","hz":-1,"period_ns":1,"clock":"wall","unwinder":"u","symbols":"none","threads":[]}"#,
            "hz",
        ),
    ] {
        let mut text = [META_12, SPAN, line, END, TERMINAL].join("\n");
        text.push('\n');
        let err = load_str(&text).unwrap_err().to_string();
        assert!(
            err.contains("line 3") && err.contains(field) && !err.contains("unknown event kind"),
            "{err}"
        );
    }
}

#[test]
fn an_impossible_sampler_account_is_named() {
    let thread = |start: u64, end: u64, ticks: u64, samples: u64, lost: u64| {
        format!(
            r#"{{"thread":1,"start_ns":{start},"end_ns":{end},"ticks":{ticks},"samples":{samples},"lost_overrun":{lost},"lost_buffer":0}}"#
        )
    };
    let sampler = |hz: u64, period: u64, threads: &[String]| {
        format!(
            r#"{{"kind":"sampler","hz":{hz},"period_ns":{period},"clock":"wall","unwinder":"u","symbols":"none","threads":[{}]}}"#,
            threads.join(",")
        )
    };
    let ok = thread(0, 10, 3, 0, 1);
    let cases = [
        (sampler(0, 1, std::slice::from_ref(&ok)), "`hz` is 0"),
        (sampler(1, 0, std::slice::from_ref(&ok)), "`period_ns` is 0"),
        (sampler(1, 1, &[ok.clone(), ok.clone()]), "twice"),
        (sampler(1, 1, &[thread(9, 1, 3, 0, 1)]), "after its end"),
        (sampler(1, 1, &[thread(0, 10, 3, 0, u64::MAX)]), "exceed"),
    ];
    for (line, what) in cases {
        let doc = load(&[META_12, SPAN, &line, END, TERMINAL]);
        let found = doc.semantic_issues.iter().any(|i| {
            i.code == SemanticCode::InvalidSamples && i.line == 3 && i.message.contains(what)
        });
        assert!(found, "{what}: {:?}", doc.semantic_issues);
    }
}

const META_13: &str = r#"{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#;

#[test]
fn a_trace_cut_short_before_its_site_table_says_so_in_one_issue() {
    let alloc = |i: u32| {
        format!(
            r#"{{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"s{i}","bytes":8192,"site":{i},"thread":1}}"#
        )
    };
    let allocs: Vec<String> = (0..50).map(alloc).collect();
    let mut lines = vec![META_13, SPAN];
    lines.extend(allocs.iter().map(String::as_str));
    // Cut inside the first line after the step: no terminal, no site table.
    let mut text = lines.join("\n");
    text.push_str("\n{\"kind\":\"site\",\"id");
    let doc = load_str(&text).expect("a cut-short trace loads");
    assert!(doc.truncation.is_some());
    let sites: Vec<_> = doc
        .semantic_issues
        .iter()
        .filter(|i| i.code == SemanticCode::InvalidSites)
        .collect();
    assert_eq!(sites.len(), 1, "{sites:#?}");
    assert_eq!(sites[0].line, 3);
    assert!(
        sites[0]
            .message
            .contains("50 memory events name 50 allocation sites"),
        "{sites:?}"
    );
    assert!(sites[0].message.contains("cut short"), "{sites:?}");
}

#[test]
fn site_ids_must_be_defined_and_unique_and_belong_to_allocs() {
    let frame = r#"{"kind":"frame","id":7,"function":"candle_core::tensor::Tensor::matmul"}"#;
    let stack = r#"{"kind":"stack","id":1,"frames":[7]}"#;
    let site = r#"{"kind":"site","id":0,"stack_id":1}"#;
    let alloc = r#"{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"a","bytes":8192,"site":0,"thread":1}"#;
    let account = r#"{"kind":"alloc_sites","threshold_bytes":4096,"unwinder":"frame_pointers","symbols":"line_tables","captured":1,"lost":0,"small_allocs":0,"small_bytes":0,"sites":1}"#;
    let clean = load(&[
        META_13, SPAN, alloc, END, frame, stack, site, account, TERMINAL,
    ]);
    assert_eq!(issues(&clean), vec![]);
    assert_eq!(clean.sites.storages.len(), 1);

    let undefined = r#"{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"b","bytes":8192,"site":4000000000,"thread":1}"#;
    let no_thread = r#"{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"a","bytes":8192,"site":0}"#;
    let on_free = r#"{"kind":"memory","timestamp_ns":3,"action":"free","device":"cpu","storage_id":"a","site":0}"#;
    let bad_account = r#"{"kind":"alloc_sites","threshold_bytes":0,"unwinder":"","symbols":"none","captured":0,"lost":0,"small_allocs":0,"small_bytes":0,"sites":1}"#;
    // (body after SPAN, lines of the issues expected)
    let cases: [(&[&str], &[u64]); 7] = [
        // a site id no `site` defines: named at its memory line, found at the end of the load
        (&[alloc, undefined, END, frame, stack, site], &[4]),
        // a site before its stack: the site is dropped, so the alloc naming it is too
        (&[alloc, END, frame, site, stack], &[6, 3]),
        // a repeated site id
        (&[alloc, END, frame, stack, site, site], &[8]),
        // a site on an alloc without its thread: said, and the site kept (its op is named)
        (&[no_thread, END, frame, stack, site], &[3]),
        // a site on a free event
        (&[alloc, on_free, END, frame, stack, site], &[4]),
        // a second account
        (&[alloc, END, frame, stack, site, account, account], &[9]),
        // an account that breaks its own rules (3 problems) and miscounts nothing else
        (&[alloc, END, frame, stack, site, bad_account], &[8, 8, 8]),
    ];
    for (body, expected) in cases {
        let mut lines = vec![META_13, SPAN];
        lines.extend_from_slice(body);
        lines.push(TERMINAL);
        let doc = load(&lines);
        let expected: Vec<_> = expected
            .iter()
            .map(|&l| (SemanticCode::InvalidSites, l))
            .collect();
        assert_eq!(
            issues(&doc),
            expected,
            "{body:?}: {:?}",
            doc.semantic_issues
        );
        // every kept site resolves to a stack with frames
        for s in &doc.sites.storages {
            let stack = doc.sites.stack_of(s.site).unwrap();
            assert!(doc.samples.stack_frames(stack).count() > 0);
        }
    }
}

#[test]
fn a_site_id_beyond_u32_names_its_field_and_site_kinds_need_trace_13() {
    let huge = r#"{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"b","bytes":8192,"site":4294967296}"#;
    let mut text = [META_13, SPAN, huge, END, TERMINAL].join("\n");
    text.push('\n');
    let err = load_str(&text).unwrap_err().to_string();
    assert!(err.contains("line 3") && err.contains("site"), "{err}");

    let site = r#"{"kind":"site","id":0,"stack_id":1}"#;
    let mut text = [META_12, SPAN, site, END, TERMINAL].join("\n");
    text.push('\n');
    let err = load_str(&text).unwrap_err().to_string();
    assert!(err.contains("line 3"), "{err}");
}

/// Step spans numbered twice, or out of order, are said with their lines; the spans are kept.
#[test]
fn a_repeated_or_reversed_step_index_is_an_issue_with_its_line() {
    let step = |id: &str, n: u32| {
        format!(
            r#"{{"kind":"span_start","id":"{id}","parent_id":"s1","name":"step {n}","start_ns":1,"span_kind":"function","step_index":{n}}}"#
        )
    };
    let end = |id: &str| format!(r#"{{"kind":"span_end","id":"{id}","end_ns":2}}"#);
    let (a, b, c, d) = (step("a", 2), step("b", 3), step("c", 3), step("d", 1));
    let (ea, eb, ec, ed) = (end("a"), end("b"), end("c"), end("d"));
    let doc = load(&[
        META_13, SPAN, &a, &ea, &b, &eb, &c, &ec, &d, &ed, END, TERMINAL,
    ]);
    assert_eq!(
        issues(&doc),
        vec![
            (SemanticCode::InvalidStepIndex, 7),
            (SemanticCode::InvalidStepIndex, 9)
        ],
        "{:?}",
        doc.semantic_issues
    );
    assert!(doc.semantic_issues[0]
        .message
        .starts_with("step_index 3 repeats the step span of line 5"));
    assert!(doc.semantic_issues[1]
        .message
        .starts_with("step_index 1 starts after step 3"));
    assert_eq!(
        doc.spans.iter().filter(|s| s.step_index.is_some()).count(),
        4
    );
    // Numbered up once each: no issue.
    let clean = load(&[META_13, SPAN, &a, &ea, &b, &eb, END, TERMINAL]);
    assert_eq!(issues(&clean), vec![]);
}

/// A step span whose `step_index` names no step (0, or past `u32::MAX`) is kept as a span and
/// said, with its line: it is not counted as a step, and nothing else about the trace changes.
#[test]
fn a_step_index_that_names_no_step_is_an_issue_with_its_line() {
    let step = |id: &str, n: &str| {
        format!(
            r#"{{"kind":"span_start","id":"{id}","parent_id":"s1","name":"step","start_ns":1,"span_kind":"function","step_index":{n}}}"#
        )
    };
    let (zero, big, good) = (step("a", "0"), step("b", "4294967296"), step("c", "3"));
    let doc = load(&[META_13, SPAN, &zero, &big, &good, END, TERMINAL]);
    assert_eq!(
        issues(&doc),
        vec![
            (SemanticCode::InvalidStepIndex, 3),
            (SemanticCode::InvalidStepIndex, 4)
        ],
        "{:?}",
        doc.semantic_issues
    );
    assert!(doc.semantic_issues[0]
        .message
        .contains("step_index 0 names no step"));
    let kept: Vec<Option<u32>> = doc
        .spans
        .iter()
        .map(|s| s.step_index.map(|n| n.get()))
        .collect();
    assert_eq!(kept, vec![None, None, None, Some(3)]);
}
