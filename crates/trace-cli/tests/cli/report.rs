//! `report` through the binary: one self-contained file on the golden fixtures, a cut-short
//! trace and the injection trace; the headline figure is the analyser's. What the page does in
//! a browser is checked by .ci/browser-test.

use crate::util::{run, s, write};

fn report(trace: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    let r = run(&["report", trace, "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.is_empty());
    // line-break opportunities are markup, not text
    let html = std::fs::read_to_string(&out).unwrap().replace("<wbr>", "");
    (dir, html)
}

fn peak_of(trace: &str) -> u64 {
    let v: serde_json::Value =
        serde_json::from_str(&run(&["summary", trace, "--json"]).stdout).unwrap();
    v["memory_peak"]["live_bytes"].as_u64().unwrap()
}

#[test]
fn fixtures_give_one_offline_file_with_the_analysers_peak() {
    for name in ["mlp", "llama"] {
        let f = format!("../../examples/fixtures/{name}");
        let (_dir, html) = report(&f);
        let peak = peak_of(&f);
        assert!(
            html.contains(&format!("data-peak-bytes=\"{peak}\"")),
            "{name}: peak {peak}"
        );
        assert!(html.contains(r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-"#));
        // nothing to fetch: no URL the browser would load
        for needle in ["http://", "https://", "src=", "@import", "url("] {
            let hits: Vec<_> = html.match_indices(needle).collect();
            // the SVG namespace string and the chart's clip-path (`url(#clip0)`, a fragment of
            // the page itself) are not loads
            let loads = hits
                .iter()
                .filter(|(i, _)| !html[*i..].starts_with("http://www.w3.org/2000/svg"))
                .filter(|(i, _)| !html[*i..].starts_with("url(#"))
                .count();
            assert_eq!(loads, 0, "{name}: {needle}");
        }
        for section in [
            "summary",
            "memory",
            "held",
            "time",
            "gradients",
            "tensors",
            "health",
            "findings",
        ] {
            assert!(
                html.contains(&format!("<section id=\"{section}\"")),
                "{section}"
            );
        }
    }
}

#[test]
fn the_llama_fixture_report_states_the_summary() {
    let (_dir, html) = report("../../examples/fixtures/llama");
    // the CLI's own words for the headline, the health line and a finding
    assert!(html.contains(
        "5.72 MiB on cpu at 62.00 ms, in the optimizer pass (llama::train_step/optimizer)"
    ));
    assert!(html.contains("valid, complete (0 errors, 0 warnings)"));
    // the answer first: what held the peak and the replayed advice on the first screen
    assert!(html.contains("data-held-by=\"categories\""));
    assert!(html.contains("data-finding=\"activations_retained_into_optimizer\""));
    assert!(html.contains("activations_retained_into_optimizer"));
    // 259 storages live at the peak: identical ones merged, 151 rows hold them all (AdamW's
    // moments each name their parameter: no two merge)
    assert!(html.contains(
        "held at the peak (151 rows for all 259 storages, identical storages merged with their count;"
    ));
    assert!(!html.contains("more storages, each at most"));
}

#[test]
fn a_cut_short_trace_and_a_hostile_one_still_report() {
    let text = std::fs::read("../../examples/fixtures/llama/trace.jsonl").unwrap();
    let (_d, path) = write("trace.jsonl", &text[..text.len() * 2 / 3]);
    let (_dir, html) = report(s(&path));
    assert!(html.contains("trace truncated at line"));
    let (_dir, html) = report("../trace-report/tests/browser/injection.jsonl");
    assert_eq!(html.matches("<script").count(), 2);
    assert!(!html.contains('\u{1}') && !html.contains('\u{202e}'));
    assert!(html.contains("&lt;/script&gt;&lt;script&gt;window.__pwned=1"));
}

const SAMPLED: &str = "../trace-report/tests/browser/sampled.jsonl";

#[test]
fn a_sampled_trace_gets_the_operations_section_and_its_flame_data() {
    let (_dir, html) = report(SAMPLED);
    assert!(html.contains("<section id=\"ops\""));
    assert!(html.contains("Operations (sampled)"));
    assert!(html.contains("<div class=\"flame\">"));
    assert!(html.contains(
        "1000 Hz wall clock (1.00 ms period) · 299 samples (299 in the measured region) · 2 lost"
    ));
    // the op table: trace-ops's rows, the largest first, with the estimate and its interval
    let profile = trace_ops::OpProfile::from_document(
        &trace_schema::load_path(std::path::Path::new(SAMPLED)).unwrap(),
    )
    .unwrap();
    assert!(html.contains("<table class=\"sortable cards\" id=\"ops-table\">"));
    let top = &profile.rows[0];
    let lo = trace_format::duration(top.self_ns_low.unwrap());
    let hi = trace_format::duration(top.self_ns_high.unwrap());
    assert!(html.contains(&format!("{lo} – {hi}")), "{lo} – {hi}");
    let table = &html[html.find("id=\"ops-table\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(
        table.matches("<tr>").count(),
        profile.rows.len() + 1,
        "a row each, and the header"
    );
    // the file I/O inside matmul (get_num_threads reading a file), found by the analysis
    assert!(html.contains("std::fs::read_to_string"));
    assert!(html.contains("data-samples=\"299\""));
    assert!(!html.contains("operations: unavailable"));
    // the data block: one tree per pass, roots adding up to every sample
    assert_eq!(html.matches("<script").count(), 2);
    let start = html
        .find("<script id=\"cg-data\" type=\"application/json\">")
        .unwrap();
    let body = &html[start..];
    let json = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let trees = v["flame"]["trees"].as_array().unwrap();
    let passes: Vec<&str> = trees.iter().map(|t| t["label"].as_str().unwrap()).collect();
    assert_eq!(
        passes,
        ["forward", "backward", "optimizer", "outside passes"]
    );
    let total: u64 = trees.iter().map(|t| t["value"][0].as_u64().unwrap()).sum();
    assert_eq!(total, 299);
    // the markup frame name cannot end the data block
    assert!(json.contains("\\u003c/title\\u003e\\u003cscript\\u003ewindow.__pwned=3"));
}

#[test]
fn a_trace_without_samples_says_operations_were_not_captured() {
    for trace in [
        "../../examples/fixtures/mlp",
        "../trace-report/tests/browser/injection.jsonl",
    ] {
        let (_dir, html) = report(trace);
        assert!(html.contains("<section id=\"ops\""), "{trace}");
        assert!(
            html.contains("operations: unavailable — not captured"),
            "{trace}"
        );
        assert!(!html.contains("<div class=\"flame\">"), "{trace}");
    }
}

#[test]
fn a_trace_with_few_samples_says_so_above_its_op_table() {
    let (_dir, html) = report("../trace-schema/tests/data/trace_12.jsonl");
    assert!(html.contains("<table class=\"sortable cards\" id=\"ops-table\">"));
    assert!(html.contains("few samples ("), "the ops command's line");
    assert!(html.contains("— few samples</caption>"));
}
