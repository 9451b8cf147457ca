//! Bad input: each load error names its variant, line and (where there is one) field.
//! Nothing else fails a load.

use trace_schema::{load_reader, load_str, LoadError, SUPPORTED_SCHEMAS};

const META_11: &str = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}"#;
const SPAN: &str = r#"{"kind":"span_start","id":"s1","name":"root","start_ns":0,"span_kind":"function","measured":true}"#;
const TERMINAL: &str = r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10}"#;

fn doc(lines: &[&str]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

fn err(lines: &[&str]) -> LoadError {
    load_str(&doc(lines)).expect_err("must fail")
}

fn assert_field(e: LoadError, want_line: u64, want_kind: &str, want_field: &str) {
    match e {
        LoadError::Field {
            line, kind, field, ..
        } => {
            assert_eq!(
                (line, kind.as_str(), field.as_str()),
                (want_line, want_kind, want_field)
            );
        }
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn malformed_json_names_its_line() {
    let e = err(&[META_11, r#"{"kind":"span_start","id":"#, TERMINAL]);
    assert!(matches!(e, LoadError::Malformed { line: 2, .. }), "{e:?}");
    assert!(e.to_string().starts_with("line 2: malformed JSON"), "{e}");
    let e = err(&[META_11, "[1, 2]"]);
    assert!(matches!(e, LoadError::Malformed { line: 2, .. }), "{e:?}");
    // a raw control character: the position is a column of that line, not serde's "line 1"
    let e = err(&[
        META_11,
        "{\"kind\":\"span_start\",\"id\":\"a\u{0}b\"}",
        TERMINAL,
    ]);
    let text = e.to_string();
    assert!(
        text.starts_with("line 2: malformed JSON: control character"),
        "{text}"
    );
    assert!(text.ends_with("at column 29"), "{text}");
    assert!(!text.contains("line 1"), "{text}");
}

#[test]
fn unknown_kind() {
    let e = err(&[META_11, SPAN, r#"{"kind":"span_middle","id":"s1"}"#]);
    match &e {
        LoadError::UnknownKind { line: 3, kind } => assert_eq!(kind, "span_middle"),
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string().contains("span_start"),
        "lists known kinds: {e}"
    );
}

#[test]
fn missing_kind_is_a_field_error() {
    assert_field(err(&[META_11, r#"{"id":"s1"}"#]), 2, "?", "kind");
}

#[test]
fn missing_required_field() {
    let e = err(&[
        META_11,
        r#"{"kind":"span_start","id":"s1","name":"root","span_kind":"function"}"#,
    ]);
    assert_field(e, 2, "span_start", "start_ns");
    // A memory alloc needs its bytes (a free may omit them in trace/11).
    let e = err(&[
        META_11,
        r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a.1"}"#,
    ]);
    assert_field(e, 2, "memory", "bytes");
    // Meta without run_id.
    let e = err(&[
        r#"{"kind":"meta","schema":"candle-graph/trace/11","entrypoint":"e","phase":"train","timestamp":"t"}"#,
    ]);
    assert_field(e, 1, "meta", "run_id");
}

#[test]
fn mistyped_field() {
    let e = err(&[
        META_11,
        r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a.1","bytes":"lots"}"#,
    ]);
    assert_field(e, 2, "memory", "bytes");
    let e = err(&[
        META_11,
        r#"{"kind":"memory","timestamp_ns":1,"action":"realloc","device":"cpu","storage_id":"a.1","bytes":1}"#,
    ]);
    assert_field(e, 2, "memory", "action");
    let e = err(&[
        META_11,
        SPAN,
        r#"{"kind":"op","span_id":"s1","op_name":"add","shape":[2,-1],"dtype":"f32","device":"cpu","duration_ns":1}"#,
    ]);
    assert_field(e, 3, "op", "shape[1]");
    let e = err(&[
        META_11,
        r#"{"kind":"edge","edge_kind":"call","from_span":"s1","to_span":"s2","host_duration_ns":true}"#,
    ]);
    assert_field(e, 2, "edge", "host_duration_ns");
}

#[test]
fn mistyped_nested_meta_field_names_its_path() {
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_contract":{"gradients":"maybe"}}"#;
    let e = err(&[meta]);
    match &e {
        LoadError::Field {
            line: 1,
            kind,
            field,
            ..
        } => {
            assert_eq!(kind, "meta");
            assert_eq!(field, "capture_contract.gradients");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn version_specific_required_fields() {
    // trace/10 memory events need storage_id, tensor_id, span_id and bytes.
    let meta_10 = r#"{"kind":"meta","schema":"candle-graph/trace/10","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu"}"#;
    let e = err(&[
        meta_10,
        r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","bytes":4,"tensor_id":"t1","span_id":"s1"}"#,
    ]);
    assert_field(e, 2, "memory", "storage_id");
    // trace/10 tensor_stats need rms, abs_max and mean.
    let e = err(&[
        meta_10,
        r#"{"kind":"tensor_stats","span_id":"s1","label":"x","shape":[1],"dtype":"f32","elements":1,"non_finite":0,"abs_max":1.0,"mean":1.0}"#,
    ]);
    assert_field(e, 2, "tensor_stats", "rms");
    // trace/8 meta needs correlation_id.
    let e = err(&[
        r#"{"kind":"meta","schema":"candle-graph/trace/8","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu"}"#,
    ]);
    assert_field(e, 1, "meta", "correlation_id");
    // trace/6 device_memory needs used_bytes and free_bytes.
    let meta_6 = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#;
    let e = err(&[
        meta_6,
        r#"{"kind":"device_memory","timestamp_ns":1,"device":"cpu","used_bytes":1}"#,
    ]);
    assert_field(e, 2, "device_memory", "free_bytes");
    // trace/6 edges are untagged call edges; a missing endpoint is named.
    let e = err(&[
        meta_6,
        r#"{"kind":"edge","from_span":"s1","duration_ns":1}"#,
    ]);
    assert_field(e, 2, "edge", "to_span");
}

#[test]
fn meta_without_schema_or_with_bad_edge_kind() {
    let e =
        err(&[r#"{"kind":"meta","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#]);
    assert_field(e, 1, "meta", "schema");
    let e = err(&[
        META_11,
        r#"{"kind":"edge","edge_kind":"control","from_span":"a"}"#,
    ]);
    assert_field(e, 2, "edge", "edge_kind");
    let e = err(&[
        META_11,
        r#"{"kind":"edge","from_tensor":"a","to_tensor":"b"}"#,
    ]);
    assert_field(e, 2, "edge", "edge_kind");
}

#[test]
fn trace_8_meta_requires_its_fields_but_trace_11_does_not() {
    let e = err(&[
        r#"{"kind":"meta","schema":"candle-graph/trace/10","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","warmup_steps":1,"device":"cpu"}"#,
    ]);
    assert_field(e, 1, "meta", "capture_step");
    let doc = load_str(&doc(&[META_11, TERMINAL])).unwrap();
    assert_eq!(doc.meta.capture_step, None);
}

#[test]
fn kind_anywhere_in_the_object_is_accepted() {
    let end_first = r#"{"id":"s1","duration_ns":3,"kind":"span_end"}"#;
    let spaced = r#"{ "kind" : "memory", "timestamp_ns":1,"action":"free","device":"cpu","storage_id":"a.1"}"#;
    let doc = load_str(&doc(&[META_11, SPAN, end_first, spaced, TERMINAL])).unwrap();
    assert_eq!(doc.spans[0].duration_ns, Some(3));
    assert_eq!(doc.memory.len(), 1);
}

#[test]
fn missing_meta() {
    let e = err(&[SPAN, TERMINAL]);
    assert!(matches!(e, LoadError::MissingMeta { line: 1, .. }), "{e:?}");
    // Blank lines before the first event do not count as events but do count as lines.
    let e = load_str(&format!("\n\n{SPAN}\n")).unwrap_err();
    assert!(matches!(e, LoadError::MissingMeta { line: 3, .. }), "{e:?}");
}

#[test]
fn second_meta() {
    let e = err(&[META_11, SPAN, META_11]);
    assert!(
        matches!(
            e,
            LoadError::DuplicateMeta {
                line: 3,
                first_line: 1
            }
        ),
        "{e:?}"
    );
}

#[test]
fn event_after_terminal() {
    let e = err(&[META_11, TERMINAL, SPAN]);
    match e {
        LoadError::EventAfterTerminal {
            line: 3,
            kind,
            terminal_line: 2,
        } => assert_eq!(kind, "span_start"),
        other => panic!("{other:?}"),
    }
    // Also when the offending last line has no newline.
    let e = load_str(&format!("{META_11}\n{TERMINAL}\n{TERMINAL}")).unwrap_err();
    assert!(
        matches!(e, LoadError::EventAfterTerminal { line: 3, .. }),
        "{e:?}"
    );
}

#[test]
fn unsupported_schema_lists_supported_versions() {
    let e = err(&[
        r#"{"kind":"meta","schema":"candle-graph/trace/5","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
    ]);
    match &e {
        LoadError::UnsupportedSchema {
            line: 1, schema, ..
        } => {
            assert_eq!(schema, "candle-graph/trace/5")
        }
        other => panic!("{other:?}"),
    }
    let message = e.to_string();
    for supported in SUPPORTED_SCHEMAS {
        assert!(message.contains(supported), "{message}");
    }
}

#[test]
fn trace_9_with_tensor_stats_is_rejected() {
    let meta_9 = r#"{"kind":"meta","schema":"candle-graph/trace/9","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu"}"#;
    let stats = r#"{"kind":"tensor_stats","span_id":"s1","label":"x","shape":[1],"dtype":"f32","elements":1,"non_finite":0,"rms":1.0,"abs_max":1.0,"mean":1.0}"#;
    let e = err(&[meta_9, SPAN, stats]);
    match &e {
        LoadError::UnsupportedSchema {
            line: 3,
            schema,
            detail,
        } => {
            assert_eq!(schema, "candle-graph/trace/9");
            assert!(detail.contains("tensor_stats"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // dropped_events is trace/11 only.
    let dropped = r#"{"kind":"dropped_events","timestamp_ns":1,"dropped_events":2}"#;
    let e = err(&[meta_9, dropped]);
    assert!(
        matches!(e, LoadError::UnsupportedSchema { line: 2, .. }),
        "{e:?}"
    );
}

#[test]
fn non_utf8_line_is_malformed() {
    let mut bytes = doc(&[META_11]).into_bytes();
    bytes.extend_from_slice(b"{\"kind\":\"span_start\",\"id\":\"s\xff1\"}\n");
    bytes.extend_from_slice(TERMINAL.as_bytes());
    let e = load_reader(bytes.as_slice()).unwrap_err();
    match &e {
        LoadError::Malformed { line: 2, message } => {
            assert!(message.contains("UTF-8"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn empty_file() {
    for text in ["", "\n\n  \n"] {
        let e = load_str(text).unwrap_err();
        assert!(matches!(e, LoadError::MissingMeta { line: 1, .. }), "{e:?}");
        assert_eq!(e.line(), 1, "lines are 1-based, even in an empty file");
    }
}

#[test]
fn unreadable_path_is_an_io_error_naming_the_path() {
    let e = trace_schema::load_path("/nonexistent/trace.jsonl").unwrap_err();
    assert!(matches!(e, LoadError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/trace.jsonl"), "{e}");
}

/// Issue 32: a `kind` key given twice is read by serde with the first, by other readers with
/// the last: the event would depend on the reader, so it is an error naming line and key —
/// on the loader's fast kinds and the others alike.
#[test]
fn a_duplicate_kind_is_an_error_naming_line_and_key() {
    let mem = r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a","bytes":8,"kind":"op"}"#;
    let op = r#"{"kind":"op","span_id":"s1","op_name":"x","dtype":"f32","device":"cpu","duration_ns":1,"kind":"memory"}"#;
    let grad = r#"{"kind":"gradient","event_id":"g","root":"m","key":"k","state":"missing","kind":"terminal"}"#;
    let later = r#"{"event_id":"g","kind":"gradient","root":"m","key":"k","state":"missing","kind":"terminal"}"#;
    for line in [mem, op, grad, later] {
        for e in [
            err(&[META_11, SPAN, line]),
            load_reader(doc(&[META_11, SPAN, line]).as_bytes()).unwrap_err(),
        ] {
            assert_field(e, 3, "?", "kind");
        }
    }
    let e = err(&[META_11, SPAN, mem]);
    assert!(
        e.to_string().contains("the key `kind` appears 2 times"),
        "{e}"
    );
    // the word in a value is no key
    let fine = r#"{"kind":"gradient","event_id":"\"kind\"","root":"kind","key":"\"kind\":","state":"missing"}"#;
    assert!(load_str(&doc(&[META_11, SPAN, fine])).is_ok());
}

/// A field given twice names the field (it said `?`).
#[test]
fn a_duplicate_field_names_the_field() {
    let line = r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a","bytes":8,"bytes":9}"#;
    let e = err(&[META_11, SPAN, line]);
    assert!(e.to_string().contains("duplicate field `bytes`"), "{e}");
    assert_field(e, 3, "memory", "bytes");
}

/// A UTF-8 byte order mark before the first line is skipped by both loaders.
#[test]
fn a_byte_order_mark_is_skipped() {
    let text = format!("\u{feff}{}", doc(&[META_11, SPAN]));
    let parallel = load_str(&text).expect("loads");
    let sequential = load_reader(text.as_bytes()).expect("loads");
    assert_eq!(parallel.spans.len(), 1);
    assert_eq!(sequential.spans.len(), 1);
    // only at the start
    let inner = doc(&[
        META_11,
        SPAN,
        "\u{feff}{\"kind\":\"span_end\",\"id\":\"s1\"}",
    ]);
    assert!(matches!(
        load_str(&inner).unwrap_err(),
        LoadError::Malformed { line: 3, .. }
    ));
}

/// CR-only line endings make the file one line: the error names the line endings.
#[test]
fn carriage_return_only_line_endings_are_named() {
    let text = doc(&[META_11, SPAN, TERMINAL]).replace('\n', "\r");
    for with_lf in [false, true] {
        let text = if with_lf {
            format!("{text}\n")
        } else {
            text.clone()
        };
        let e = load_str(&text).unwrap_err();
        assert!(matches!(e, LoadError::Malformed { line: 1, .. }), "{e:?}");
        assert!(
            e.to_string().contains(
                "carriage return only (CR, classic Mac OS line endings: 3 lines read as one)"
            ),
            "{e}"
        );
    }
    // CRLF is fine
    assert!(load_str(&doc(&[META_11, SPAN]).replace('\n', "\r\n")).is_ok());
}

/// A string longer than `MAX_STRING_BYTES` (a 100 MB name) is held bounded, with its full
/// length and a hash; ids that refer to a long id still resolve.
#[test]
fn long_strings_are_held_bounded() {
    let long = "n".repeat(300_000);
    let id = format!("{}x{}", "i".repeat(5000), "i".repeat(5000));
    let other = format!("{}y{}", "i".repeat(5000), "i".repeat(5000));
    let lines = [
        format!(
            r#"{{"kind":"span_start","id":"{id}","name":"{long}","start_ns":0,"span_kind":"function","measured":true}}"#
        ),
        format!(
            r#"{{"kind":"span_start","id":"{other}","parent_id":"{id}","name":"b","start_ns":1,"span_kind":"function"}}"#
        ),
        format!(r#"{{"kind":"span_end","id":"{other}","duration_ns":1}}"#),
    ];
    let mut refs: Vec<&str> = vec![META_11];
    refs.extend(lines.iter().map(String::as_str));
    let d = load_str(&doc(&refs)).expect("loads");
    let name = d.str(d.spans[0].name);
    assert!(name.len() < 1024 + 64, "{}", name.len());
    assert!(
        name.starts_with("nnnn") && name.contains("…") && name.contains("[300000 bytes, fnv "),
        "{name}"
    );
    assert_ne!(
        d.spans[0].id, d.spans[1].id,
        "ids differing in the middle stay apart"
    );
    assert_eq!(d.spans[1].parent, Some(d.spans[0].id));
    assert_eq!(d.spans[1].duration_ns, Some(1));
    assert!(d.sym(&id).is_some(), "a long id is found by its full text");
    assert_eq!(trace_schema::intern::bounded("short"), "short");
}
