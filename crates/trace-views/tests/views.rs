//! The library's front door on the committed golden fixtures: the summary and the report built
//! here carry the fixtures' headline figures, and the summary's text is byte for byte the CLI's
//! reviewed snapshot (`crates/trace-cli/tests/cli/snapshots`), so the library is what the CLI
//! prints.

use trace_schema::TraceDocument;

fn fixture(name: &str) -> String {
    // the path the CLI's snapshot tests pass, so the `trace` line reads the same
    format!("../../examples/fixtures/{name}/trace.jsonl")
}

fn load(name: &str) -> TraceDocument {
    trace_schema::load_path(fixture(name)).expect("fixture loads")
}

/// The body of a committed insta snapshot of the CLI.
fn cli_snapshot(name: &str) -> String {
    let path = format!("../trace-cli/tests/cli/snapshots/cli__snapshots__{name}.snap");
    let text = std::fs::read_to_string(&path).expect("snapshot exists");
    // `---` header `---` body
    let body = text.splitn(3, "---\n").nth(2).expect("insta header");
    body.to_string()
}

#[test]
fn summary_headline_figures() {
    // (fixture, peak bytes, peak time in the measured region, pass, wall time)
    for (name, bytes, at_ns, pass, wall_ns) in [
        (
            "mlp",
            33_410_952_u64,
            14_000_046_u64,
            "optimizer",
            16_000_000_u64,
        ),
        ("llama", 6_000_648, 62_000_106, "optimizer", 64_000_000),
    ] {
        let doc = load(name);
        let analysis = trace_views::analyze(&doc);
        let s = trace_views::summary(&doc, &analysis);
        let peak = s.memory_peak().expect("memory peak");
        assert_eq!(peak.live_bytes, bytes, "{name} peak bytes");
        assert_eq!(
            peak.timestamp_ns - s.time_origin_ns,
            at_ns,
            "{name} peak time"
        );
        assert_eq!(peak.pass.map(|p| p.as_str()), Some(pass), "{name} pass");
        assert_eq!(s.outer_wall_time_ns, Some(wall_ns), "{name} wall time");
        let json = serde_json::to_value(&s).unwrap();
        let categories: u64 = json["memory_peak"]["by_category"]
            .as_object()
            .unwrap()
            .values()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(categories, bytes, "{name} categories sum to the peak");
    }
}

#[test]
fn summary_text_is_what_the_cli_prints() {
    for name in ["mlp", "llama"] {
        let doc = load(name);
        let analysis = trace_views::analyze(&doc);
        let text = trace_views::summary(&doc, &analysis).render_text(&fixture(name));
        let expected = cli_snapshot(&format!("summary_{name}"));
        assert_eq!(text.trim_end(), expected.trim_end(), "{name}");
        assert!(
            text.contains("peak         31.86 MiB") || name != "mlp",
            "{text}"
        );
    }
}

#[test]
fn memory_text_is_what_the_cli_prints() {
    let doc = load("mlp");
    let analysis = trace_views::analyze(&doc);
    // the default view: every device, the CLI's 10 rows
    let memory = trace_views::memory(&doc, &analysis).expect("memory");
    assert!(memory
        .render_text()
        .contains("held at the peak (top 10 of 61)"));
    // the snapshot's `memory --top 6`
    let memory = trace_views::memory::build(&doc, &analysis, None, 6, None, false).expect("memory");
    let text = memory.render_text();
    assert_eq!(text.trim_end(), cli_snapshot("memory_mlp").trim_end());
}

#[test]
fn report_page_headline() {
    let doc = load("llama");
    let analysis = trace_views::analyze(&doc);
    let html = trace_views::report_html(&doc, &analysis, "llama");
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..40]);
    // the page states the summary's peak (5.72 MiB) and its pass
    assert!(html.contains("5.72 MiB"), "peak on the page");
    let page = trace_views::report(&doc, &analysis, "llama");
    let ids: Vec<&str> = page.sections.iter().map(|s| s.id.as_str()).collect();
    assert!(
        ids.contains(&"summary") && ids.contains(&"memory"),
        "{ids:?}"
    );
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "section ids are unique: {ids:?}");
}

#[test]
fn unknown_device_is_a_typed_error_naming_it() {
    let doc = load("mlp");
    let analysis = trace_views::analyze(&doc);
    let err = trace_views::memory::build(&doc, &analysis, Some("cuda:7"), 10, None, false)
        .expect_err("no such device");
    assert!(err.to_string().contains("cuda:7"), "{err}");
}
