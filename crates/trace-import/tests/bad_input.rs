//! Bad input: clear errors for what is not a trace, and an import of what is there otherwise.

#[path = "common/annotation.rs"]
mod annotation;
mod common;
#[path = "common/cpu_memory.rs"]
mod cpu_memory;
#[path = "common/memory_event.rs"]
mod memory_event;

use std::io::Write;

use annotation::*;
use common::*;
use cpu_memory::*;
use trace_import::{import_bytes, ImportError};

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn error(bytes: &[u8]) -> String {
    import_bytes(bytes).unwrap_err().to_string()
}

#[test]
fn json_that_is_not_a_trace() {
    assert_eq!(
        error(br#"{"name": "package.json", "version": "1"}"#),
        "not a PyTorch profiler (Chrome) trace: a JSON object without `traceEvents` (keys: name, version)"
    );
    assert!(error(b"42").starts_with("not a PyTorch profiler (Chrome) trace: invalid type"));
    assert!(error(br#"{"traceEvents": 5}"#).contains("expected an array of trace events"));
    assert_eq!(
        error(b"{\n  \"traceEvents\": [\n    {\"ph\": \"X\",, }\n"),
        "not valid JSON at line 3, column 16: key must be a string"
    );
    assert!(matches!(
        import_bytes(b"[1, 2, {}]"),
        Err(ImportError::NoEvents { read: 3, .. })
    ));
    let e = error(b"[1]");
    assert!(e.contains("traceEvents[0]: not an event object"), "{e}");
}

#[test]
fn unknown_and_unsupported_phases_are_counted() {
    let (imported, doc) = import(vec![
        op("aten::add", 0.0, 1.0),
        serde_json::json!({"ph": "C", "name": "counter", "pid": 1, "tid": 1, "ts": 1, "args": {"v": 1}}),
        serde_json::json!({"ph": "Z", "name": "?", "pid": 1, "tid": 1, "ts": 1}),
        serde_json::json!({"ph": "B", "name": "begin", "pid": 1, "tid": 1, "ts": 1}),
        serde_json::json!({"name": "no phase", "ts": 1}),
    ]);
    let r = &imported.report;
    assert_eq!(r.skipped["phase `C` (counter) events"], 1);
    assert_eq!(r.skipped["phase `B` (duration begin) events"], 1);
    assert_eq!(r.skipped["unknown phase `Z` events"], 1);
    assert!(r.warnings[0].contains("1 events could not be read"));
    assert!(r.warnings[0].contains("traceEvents[4]: no `ph` (phase)"));
    assert_eq!(doc.spans.len(), 2, "what could be read is imported");
}

#[test]
fn unpaired_flows_are_reported() {
    let flow = |ph: &str, id: i64, cat: &str| serde_json::json!({"ph": ph, "id": id, "pid": 1, "tid": 1, "ts": 1, "cat": cat, "name": cat});
    let (imported, _) = import(vec![
        op("aten::add", 0.0, 2.0),
        flow("s", 1, "fwdbwd"),
        flow("f", 1, "fwdbwd"),
        flow("s", 2, "fwdbwd"),
        flow("f", 3, "ac2g"),
    ]);
    let f = &imported.report.flows;
    assert_eq!(
        (f.paired, f.unpaired_starts, f.unpaired_finishes),
        (1, 1, 1)
    );
    let w = imported.report.warnings.join("\n");
    assert!(w.contains("2 flow ids have a start without a finish or a finish without a start (1 `ac2g`, 1 `fwdbwd`)"), "{w}");
}

#[test]
fn bad_fields_name_the_event() {
    let mut bad_ts = op("aten::bad", 0.0, 1.0);
    bad_ts["ts"] = "soon".into();
    let mut bad_bytes = cpu_mem(1.0, 1, 8, 8);
    bad_bytes["args"]["Bytes"] = "8".into();
    let (imported, doc) = import(vec![op("aten::ok", 0.0, 1.0), bad_ts, bad_bytes]);
    let w = &imported.report.warnings[0];
    assert!(
        w.starts_with("2 events could not be read and were skipped (first: traceEvents[1]: `X` event `aten::bad`: `ts` \"soon\" is not a JSON number)"),
        "{w}"
    );
    assert_eq!(doc.spans.len(), 2);
}

fn mlp_like() -> Vec<u8> {
    let mut events = vec![ann("ProfilerStep#1", 0.0, 1000.0)];
    for i in 0..50 {
        let t = 1.0 + f64::from(i) * 10.0;
        events.push(op("aten::empty", t, 2.0));
        events.push(cpu_mem(t + 1.0, 0x100 + i as u64, 64, 64 * (i + 1) as i64));
    }
    kineto(events)
}

#[test]
fn a_gzip_cut_short_keeps_what_was_read() {
    let whole = mlp_like();
    let packed = gz(&whole);
    let full = import_bytes(&packed).unwrap();
    assert!(full.report.gzip && full.report.cut_short.is_none());
    let cut = &packed[..packed.len() * 2 / 3];
    let imported = import_bytes(cut).unwrap();
    let r = &imported.report;
    assert_eq!(r.cut_short.as_deref(), Some("the gzip stream is cut short"));
    assert!(
        r.trace_events > 10 && r.trace_events < 101,
        "{}",
        r.trace_events
    );
    let doc = imported.document();
    assert!(doc.is_truncated() && doc.terminal.is_none());
    assert!(!doc.memory.is_empty(), "the analysis has what was read");
    assert!(r
        .warnings
        .iter()
        .any(|w| w.starts_with("the gzip stream is cut short: ") && w.contains("lower bounds")));
    assert!(matches!(
        import_bytes(&packed[..6]),
        Err(ImportError::Gzip(_))
    ));
}

#[test]
fn a_plain_file_cut_short_keeps_what_was_read() {
    let whole = mlp_like();
    let imported = import_bytes(&whole[..whole.len() / 2]).unwrap();
    assert_eq!(
        imported.report.cut_short.as_deref(),
        Some("the file ends before the trace does (cut short)")
    );
    assert!(imported.document().is_truncated());
}

#[test]
fn text_after_the_trace_is_a_warning() {
    let mut bytes = kineto(vec![op("aten::add", 0.0, 1.0)]);
    bytes.extend_from_slice(b"\ngarbage");
    let imported = import_bytes(&bytes).unwrap();
    assert!(imported.report.warnings[0].starts_with("text after the end of the trace"));
}

#[test]
fn host_names_are_not_copied() {
    let mut text = String::from_utf8(kineto(vec![op("aten::add", 0.0, 1.0)])).unwrap();
    text = text.replacen('{', "{\"host_name\": \"secret-box\",", 1);
    let imported = import_bytes(text.as_bytes()).unwrap();
    let mut out = Vec::new();
    imported.write_jsonl(&mut out).unwrap();
    assert!(!String::from_utf8(out).unwrap().contains("secret-box"));
}

#[test]
fn trace_text_in_messages_is_escaped() {
    let e = error(br#"{"\u001b[2Jname": 1}"#);
    assert!(e.contains("keys: \\x1b[2Jname"), "{e}");
    let mut evil = op("aten::x", 0.0, 1.0);
    evil["name"] = "\u{202e}evil".into();
    evil["ts"] = "x".into();
    let (imported, _) = import(vec![op("aten::ok", 0.0, 1.0), evil]);
    assert!(
        imported.report.warnings[0]
            .contains("`X` event `\\u{202e}evil`: `ts` \"x\" is not a JSON number"),
        "{:?}",
        imported.report.warnings
    );
}
