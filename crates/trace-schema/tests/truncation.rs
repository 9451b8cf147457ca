//! The truncation rule: a final line without `\n` that does not parse is the partial line of a
//! crash (dropped, document truncated); one that parses is accepted; a `\n`-terminated line that
//! does not parse is an error, even the last one. A version with a terminal but none found is
//! truncated; trace/6 has no terminal and is not.

use trace_schema::{load_str, LoadError, Truncation};

const META_11: &str = r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#;
const META_6: &str = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#;
const SPAN: &str = r#"{"kind":"span_start","id":"s1","name":"root","start_ns":0,"span_kind":"function","measured":true}"#;
const ALLOC: &str = r#"{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a.1","bytes":64,"span_id":"s1"}"#;
const TERMINAL: &str = r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10}"#;

#[test]
fn unparsable_final_line_without_newline_is_dropped() {
    let partial = &TERMINAL[..20];
    let text = format!("{META_11}\n{SPAN}\n{ALLOC}\n{partial}");
    let doc = load_str(&text).unwrap();
    assert_eq!(
        doc.truncation,
        Some(Truncation {
            partial_line: Some(4),
            dropped_bytes: 20,
            terminal_missing: true,
        })
    );
    assert!(doc.is_truncated());
    assert_eq!(doc.event_count, 3, "the partial line is not an event");
    assert_eq!(doc.spans.len(), 1);
    assert_eq!(doc.memory.len(), 1);
    assert!(doc.terminal.is_none());
}

#[test]
fn parsable_final_line_without_newline_is_accepted() {
    let text = format!("{META_11}\n{SPAN}\n{TERMINAL}");
    let doc = load_str(&text).unwrap();
    assert_eq!(doc.truncation, None);
    assert_eq!(doc.event_count, 3);
    assert!(doc.terminal.is_some());
}

#[test]
fn newline_terminated_bad_last_line_is_an_error() {
    let partial = &TERMINAL[..20];
    let text = format!("{META_11}\n{SPAN}\n{partial}\n");
    let e = load_str(&text).unwrap_err();
    assert!(matches!(e, LoadError::Malformed { line: 3, .. }), "{e:?}");
}

#[test]
fn missing_terminal_is_truncation() {
    let text = format!("{META_11}\n{SPAN}\n{ALLOC}\n");
    let doc = load_str(&text).unwrap();
    assert_eq!(
        doc.truncation,
        Some(Truncation {
            partial_line: None,
            dropped_bytes: 0,
            terminal_missing: true,
        })
    );
}

#[test]
fn trace_6_has_no_terminal_and_is_not_truncated() {
    let text = format!("{META_6}\n{SPAN}\n");
    let doc = load_str(&text).unwrap();
    assert_eq!(doc.truncation, None);
    // ...unless its last line is partial.
    let text = format!("{META_6}\n{SPAN}\n{{\"kind\":\"span_e");
    let doc = load_str(&text).unwrap();
    assert_eq!(
        doc.truncation,
        Some(Truncation {
            partial_line: Some(3),
            dropped_bytes: 15,
            terminal_missing: false,
        })
    );
}

#[test]
fn partial_first_line_is_missing_meta() {
    let e = load_str(&META_11[..30]).unwrap_err();
    assert!(matches!(e, LoadError::MissingMeta { line: 1, .. }), "{e:?}");
}

#[test]
fn blank_lines_and_crlf_are_ignored() {
    let text = format!("{META_11}\r\n\r\n{SPAN}\r\n\n{TERMINAL}\r\n");
    let doc = load_str(&text).unwrap();
    assert_eq!(doc.event_count, 3);
    assert_eq!(doc.spans[0].line, 3);
    assert!(!doc.is_truncated());
}
