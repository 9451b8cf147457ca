//! Long names from a trace in the text outputs: a span path of thousands of characters is
//! elided in the middle in a finding's line (the JSON keeps the sentence whole).

use crate::util::{run, s, write, SMALL_TRACE};

/// The backward span named by 900 characters (under the loader's 1 KiB, so the JSON has it
/// whole): the `memory_peak` finding says its path (the peak and the largest storage are in it)
/// — a new user's trial saw a line of 5,024 characters, the path repeated.
#[test]
fn a_long_span_path_is_elided_in_the_finding_line_and_whole_in_json() {
    let long = format!("{}{}", "F".repeat(450), "G".repeat(450));
    let trace = SMALL_TRACE.replace(r#""name":"backward""#, &format!(r#""name":"{long}""#));
    let (_dir, path) = write("long.jsonl", trace.as_bytes());
    let r = run(&["summary", s(&path)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("memory_peak:"))
        .unwrap_or_else(|| panic!("no memory_peak finding: {}", r.stdout));
    assert!(line.contains("(in train_step/FFF"), "{line}");
    assert!(line.contains("F…G"), "{line}");
    assert!(
        line.chars().count() < 700,
        "{} characters: {line}",
        line.len()
    );

    let r = run(&["summary", s(&path), "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let peak = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "memory_peak")
        .expect("memory_peak in JSON");
    let summary = peak["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("(in train_step/{long})")),
        "{summary}"
    );
    // the whole sentence (what the line used to be) is past the bound
    assert!(summary.chars().count() > 1_500, "{summary}");
}
