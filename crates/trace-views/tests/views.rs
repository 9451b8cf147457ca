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
        .contains("held at the peak (top 10 rows, 24 of 61 storages; identical storages merged"));
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

/// A tiny training step whose activation is `[batch, 64] f32` and whose comparison identity
/// declares the batch: parameters 4 KiB and a 4 KiB gradient at the (backward) peak whatever
/// the batch.
fn tiny_step(batch: u64) -> TraceDocument {
    let lines = [
        format!(
            r#"{{"kind":"meta","schema":"candle-graph/trace/11","run_id":"run-{batch}","correlation_id":"c","entrypoint":"tiny::train_step","phase":"train","timestamp":"2026-11-29T08:00:00.000Z","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","capture_contract":{{"logical_memory":"complete"}},"comparison_identity":{{"workload_id":"w","model_id":"m","config_id":"c","data_id":"d","seed_policy":"fixed","physical_batch":{batch},"accumulation_steps":1,"precision":"f32","device_state":"warm"}}}}"#
        ),
        r#"{"kind":"span_start","id":"s1","name":"train_step","start_ns":0,"span_kind":"function","measured":true}"#.to_string(),
        r#"{"kind":"memory","timestamp_ns":0,"action":"alloc","device":"cpu","storage_id":"st1","bytes":4096,"category":"parameter","label":"fc.weight","pre_existing":true,"source":"registry"}"#.to_string(),
        r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":10,"span_kind":"function","step":"forward"}"#.to_string(),
        format!(
            r#"{{"kind":"memory","timestamp_ns":20,"action":"alloc","device":"cpu","storage_id":"st2","bytes":{},"span_id":"s2","shape":[{batch},64],"dtype":"f32","category":"activation","source":"allocator"}}"#,
            batch * 64 * 4
        ),
        r#"{"kind":"span_end","id":"s2","duration_ns":40}"#.to_string(),
        r#"{"kind":"span_start","id":"s3","parent_id":"s1","name":"backward","start_ns":50,"span_kind":"function","step":"backward"}"#.to_string(),
        r#"{"kind":"memory","timestamp_ns":60,"action":"alloc","device":"cpu","storage_id":"st3","bytes":4096,"span_id":"s3","shape":[64,16],"dtype":"f32","category":"gradient","source":"allocator"}"#.to_string(),
        r#"{"kind":"memory","timestamp_ns":70,"action":"free","device":"cpu","storage_id":"st2","span_id":"s3","source":"allocator"}"#.to_string(),
        r#"{"kind":"span_end","id":"s3","duration_ns":30}"#.to_string(),
        r#"{"kind":"span_start","id":"s4","parent_id":"s1","name":"optimizer","start_ns":90,"span_kind":"function","step":"optimizer"}"#.to_string(),
        r#"{"kind":"memory","timestamp_ns":95,"action":"free","device":"cpu","storage_id":"st3","span_id":"s4","source":"allocator"}"#.to_string(),
        r#"{"kind":"span_end","id":"s4","duration_ns":10}"#.to_string(),
        r#"{"kind":"span_end","id":"s1","duration_ns":100}"#.to_string(),
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":100}"#.to_string(),
    ];
    trace_schema::load_str(&(lines.join("\n") + "\n")).expect("tiny trace loads")
}

/// The diff of the tiny step at batch 8 (baseline) against batch 16 (candidate).
fn batch_8_against_16() -> trace_diff::TraceDiff {
    let (b, c) = (tiny_step(8), tiny_step(16));
    let (ab, ac) = (trace_views::analyze(&b), trace_views::analyze(&c));
    let run = |doc, analysis, label| trace_diff::Run {
        doc,
        analysis,
        label,
    };
    trace_diff::compare(
        &[run(&b, &ab, "batch-8")],
        &[run(&c, &ac, "batch-16")],
        &trace_diff::DiffOptions::default(),
    )
    .expect("comparable")
}

#[test]
fn a_batch_change_is_headlined_as_its_batch_scaled_and_fixed_parts() {
    let diff = batch_8_against_16();
    let text = trace_views::diff_text(&diff, 10);
    // the peak grew by the activation only: 2 KiB → 4 KiB; 8 KiB fixed on both sides
    let headline = "batch 8 → 16: fixed (parameters, gradients, optimizer state) 8.00 KiB → 8.00 KiB (=) · batch-scaled (activations) 2.00 KiB → 4.00 KiB (+2.00 KiB)";
    assert!(text.contains(headline), "{text}");
    assert!(
        text.contains("the run's peak 10.00 KiB → 12.00 KiB"),
        "{text}"
    );
    // the same split on the page
    let html = trace_views::diff_html(&diff, 10);
    assert!(
        html.contains("batch-scaled (activations) 2.00 KiB → 4.00 KiB"),
        "page"
    );
}

#[test]
fn llama_layers_are_two_span_rows_with_their_own_bytes() {
    // llama's two decoder layers: the probe names each block after the prefix its layers
    // share (`model.layers.0`, `model.layers.1`, learned in the warm-up step), so grouping by
    // span keeps them apart: 27 storages and 648 KiB each (not one merged 54-storage, 1.27 MiB
    // row)
    let doc = load("llama");
    let analysis = trace_views::analyze(&doc);
    let report = trace_views::memory::build(
        &doc,
        &analysis,
        None,
        8,
        Some(trace_views::live::GroupBy::Span),
        false,
    )
    .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let groups = json["memory_peak"]["held_groups"]["groups"]
        .as_array()
        .expect("groups");
    let row = |key: &str| {
        groups.iter().find(|g| g["key"] == key).map(|g| {
            (
                g["storages"].as_u64().unwrap(),
                g["bytes"].as_u64().unwrap(),
            )
        })
    };
    assert_eq!(
        row("llama::train_step/forward/model/model.layers.0/model.layers.0.self_attn"),
        Some((27, 648 * 1024))
    );
    assert_eq!(
        row("llama::train_step/forward/model/model.layers.1/model.layers.1.self_attn"),
        Some((27, 648 * 1024))
    );
    assert!(groups.iter().all(|g| g["storages"].as_u64() != Some(54)));

    // the summary and the report page name the layers the same way
    let summary = trace_views::summary(&doc, &analysis).render_text(&fixture("llama"));
    assert!(
        // the two layers tie at 648 KiB: either may be the one named, with its own 27
        [
            "model.layers.0/model.layers.0.self_attn (27 storages)",
            "model.layers.1/model.layers.1.self_attn (27 storages)"
        ]
        .iter()
        .any(|l| summary.contains(l)),
        "{summary}"
    );
    let html = trace_views::report_html(&doc, &analysis, "llama");
    for layer in [
        "model/model.layers.0/model.layers.0.self_attn",
        "model/model.layers.1/model.layers.1.self_attn",
    ] {
        assert!(html.contains(layer), "report lacks {layer}");
    }
}

#[test]
fn held_rows_are_collapsed_under_their_groups() {
    // the MLP's peak: 200 rows for the largest storages, shown grouped first (by span, shape,
    // category) with their counts; the rows one by one sit in a closed <details> after them
    let doc = load("mlp");
    let analysis = trace_views::analyze(&doc);
    let html = trace_views::report_html(&doc, &analysis, "mlp");
    let details = html
        .find(r#"<details class="rows" id="held-0-rows">"#)
        .expect("the held rows are collapsed");
    let rows = html.find(r#"id="held-0""#).expect("the held rows");
    let by_span = html.find(r#"id="held-0-by-span""#).expect("by span");
    let by_category = html
        .find(r#"id="held-0-by-category""#)
        .expect("by category");
    assert!(by_span < details && by_category < details && details < rows);
    // closed by default, and its summary counts the rows
    let open_tag = &html[details..details + html[details..].find('>').unwrap()];
    assert!(!open_tag.contains("open"), "{open_tag}");
    let summary = &html[details..rows];
    assert!(summary.contains("One row per storage: "), "{summary}");
    assert!(
        summary.contains(" rows, identical storages merged"),
        "{summary}"
    );
}

#[test]
fn the_diff_page_overlays_both_memory_timelines() {
    // batch 8 peaks at 10 KiB (4 KiB parameter + 2 KiB activation + 4 KiB gradient at 60 ns),
    // batch 16 at 12 KiB; both timelines on one chart, time from each measured start
    let diff = batch_8_against_16();
    let device = &diff.memory.as_ref().expect("memory compared").devices[0];
    let max = |t: &[(i64, u64)]| t.iter().map(|p| p.1).max();
    assert_eq!(max(&device.baseline_timeline), Some(10 * 1024));
    assert_eq!(max(&device.candidate_timeline), Some(12 * 1024));
    // the peak's time is on the series, counted from the measured start (0)
    assert!(
        device.baseline_timeline.contains(&(60, 10 * 1024)),
        "{:?}",
        device.baseline_timeline
    );
    assert!(device.baseline_timeline.iter().all(|p| p.0 >= 0));
    let html = trace_views::diff_html(&diff, 10);
    let chart = html
        .find(r#"<figure class="overlay" id="overlay-0">"#)
        .expect("one overlaid chart");
    let end = chart + html[chart..].find("</figure>").unwrap();
    let fig = &html[chart..end];
    assert_eq!(fig.matches("<path class=\"series").count(), 2, "{fig}");
    assert!(
        fig.contains(r#"data-series="baseline (batch-8)" data-series-max="10240""#),
        "{fig}"
    );
    assert!(
        fig.contains(r#"data-series="candidate (batch-16)" data-series-max="12288""#),
        "{fig}"
    );
    assert!(
        fig.contains("candidate (batch-16): peak 12.00 KiB"),
        "{fig}"
    );
    assert!(
        fig.contains("<span class=\"label\">12.00 KiB</span>"),
        "the y-axis is labelled with the larger peak: {fig}"
    );
}
