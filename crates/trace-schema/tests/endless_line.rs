//! Input without a line break (`/dev/zero`, a binary file, one huge JSON document) is refused
//! once it passes `MAX_LINE_BYTES`, naming where the line starts, instead of filling memory.

use std::io::Read;

use trace_schema::load::MAX_LINE_BYTES;
use trace_schema::{load_reader, LoadError};

const META_13: &str = r#"{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}"#;

/// `head`, then bytes `b` forever (bounded here at twice the limit, so a loader that reads on
/// still ends; it must stop at the limit).
fn endless(head: &str, b: u8) -> impl Read {
    std::io::Cursor::new(head.as_bytes().to_vec())
        .chain(std::io::repeat(b).take(2 * MAX_LINE_BYTES as u64))
}

#[test]
fn zeros_from_the_first_byte_are_refused_at_the_limit() {
    let e = load_reader(endless("", 0)).expect_err("not a trace");
    assert_eq!(e.line(), 0, "the line never ended: no line number");
    assert!(
        e.to_string()
            .starts_with("no line break in the 64 MiB from byte 0: not a candle-graph trace"),
        "{e}"
    );
    assert!(
        matches!(e, LoadError::LineTooLong { offset: 0, limit } if limit == 64 << 20),
        "{e:?}"
    );
}

#[test]
fn an_endless_line_after_the_meta_names_its_start() {
    // The meta line and its `\n`, then `x` forever: the long line starts right after them.
    let head = format!("{META_13}\n");
    let e = load_reader(endless(&head, b'x')).expect_err("an endless line");
    match e {
        LoadError::LineTooLong { offset, .. } => assert_eq!(offset, head.len() as u64),
        other => panic!("expected LineTooLong, got {other}"),
    }
}
