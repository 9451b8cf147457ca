//! Issue 46 (hostile input, fourth round), the loader's classes: a lone surrogate escape is
//! named as one (class 9), and a mistyped field of a `site` or `alloc_sites` line names its
//! line, field and expected type as a `stack` line's does (class 5).

use trace_schema::{load_str, LoadError};

const META_13: &str = r#"{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}"#;

fn err(lines: &[&str]) -> LoadError {
    let mut text = lines.join("\n");
    text.push('\n');
    load_str(&text).expect_err("must fail")
}

#[test]
fn a_lone_surrogate_is_named_with_its_column() {
    // `"name":"a\ud800"`: the escape starts at byte 40 of line 2 (38 bytes of keys, the opening quote, `a`): column 41
    let line = r#"{"kind":"span_start","id":"s1","name":"a\ud800","start_ns":0,"span_kind":"function","measured":true}"#;
    assert_eq!(line.find("\\ud800"), Some(40));
    let text = err(&[META_13, line]).to_string();
    assert_eq!(
        text,
        "line 2: malformed JSON: lone surrogate `\\ud800` at column 41: a high (leading) \
         surrogate without its low half; a string's \\u escapes must pair \\ud800-\\udbff \
         with \\udc00-\\udfff (the text is not Unicode)"
    );
    assert!(!text.contains("end of hex escape"), "{text}");
    // a trailing half alone, after a valid pair
    let line = r#"{"kind":"span_start","id":"s1","name":"\ud83d\ude00\udc00","start_ns":0,"span_kind":"function","measured":true}"#;
    let text = err(&[META_13, line]).to_string();
    assert!(
        text.contains("lone surrogate `\\udc00` at column 52: a low (trailing)"),
        "{text}"
    );
}

fn assert_field(e: &LoadError, want: (u64, &str, &str), expected: &str) {
    match e {
        LoadError::Field {
            line,
            kind,
            field,
            message,
        } => {
            assert_eq!((*line, kind.as_str(), field.as_str()), want, "{e}");
            assert!(message.contains(expected), "{e}");
        }
        other => panic!("expected a field error, got {other:?}"),
    }
    let text = e.to_string();
    assert!(!text.contains("unknown event kind"), "{text}");
}

#[test]
fn mistyped_site_fields_name_line_field_and_type() {
    // the same mistake on a `stack` line: the reference wording
    let e = err(&[META_13, r#"{"kind":"stack","id":0,"frames":"x"}"#]);
    assert_field(&e, (2, "stack", "frames"), "expected a sequence");
    let e = err(&[META_13, r#"{"kind":"site","id":0,"stack_id":"zero"}"#]);
    assert_field(&e, (2, "site", "stack_id"), "expected u32");
    let e = err(&[META_13, r#"{"kind":"site","id":-1,"stack_id":0}"#]);
    assert_field(&e, (2, "site", "id"), "expected u32");
    let e = err(&[META_13, r#"{"kind":"site","id":0}"#]);
    assert_field(&e, (2, "site", "stack_id"), "missing field `stack_id`");
    let sites = r#"{"kind":"alloc_sites","threshold_bytes":"4 KiB","unwinder":"frame_pointers","symbols":"line_tables","captured":8,"lost":0,"small_allocs":0,"small_bytes":0,"sites":4}"#;
    let e = err(&[META_13, sites]);
    assert_field(&e, (2, "alloc_sites", "threshold_bytes"), "expected u64");
    let sites = r#"{"kind":"alloc_sites","threshold_bytes":4096,"unwinder":"frame_pointers","symbols":"line_tables","captured":8,"lost":0,"small_allocs":0,"small_bytes":0,"sites":4,"capture_ns":1.5}"#;
    let e = err(&[META_13, sites]);
    assert_field(&e, (2, "alloc_sites", "capture_ns"), "expected u64");
}
