//! Where the gradient stops (`parameters_without_gradient`'s module and op) and the optimizer
//! state kept for parameters without a gradient (`optimizer_state_without_gradient`).

use trace_graph::{analyze, Finding, FindingCode};

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn finding(doc: &trace_schema::TraceDocument, code: FindingCode) -> Option<Finding> {
    analyze(doc).findings.into_iter().find(|f| f.code == code)
}

/// The MLP demo's step with the gradients of `keys` reported missing.
fn mlp_without(keys: &[&str]) -> trace_schema::TraceDocument {
    trace_schema::load_str(&mlp_text_without(keys)).unwrap()
}

/// The MLP demo's trace text with the gradients of `keys` reported missing (no norm).
fn mlp_text_without(keys: &[&str]) -> String {
    let mut text = fixture("examples/fixtures/mlp/trace.jsonl");
    for key in keys {
        let from = text
            .find(&format!("\"key\":\"{key}\",\"state\":\"present\""))
            .unwrap_or_else(|| panic!("{key}'s gradient"));
        let end = from + text[from..].find('}').unwrap();
        text.replace_range(
            from..end,
            &format!("\"key\":\"{key}\",\"state\":\"missing\""),
        );
    }
    text
}

#[test]
fn the_gradient_stops_at_the_last_module_whose_parameters_got_none() {
    // fc1 and fc2 get no gradient, fc3 a gradient for its weight: the cut is fc2, the last
    // module of the forward whose parameters all lack one
    let doc = mlp_without(&["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]);
    let f = finding(&doc, FindingCode::ParametersWithoutGradient).expect("the finding");
    assert_eq!(f.evidence.module.as_deref(), Some("fc2"), "{}", f.summary);
    assert_eq!(f.evidence.node_ids.len(), 1);
    assert_eq!((f.evidence.count, f.evidence.of_count), (Some(4), Some(6)));
    assert!(
        f.summary.ends_with("; the gradient stops at module fc2 (the last module of the forward whose parameters got none)"),
        "{}",
        f.summary
    );
    // no allocation sites: no op named
    assert_eq!(f.evidence.operation, None);
    // AdamW's state is exactly twice the parameters: two moments each for the four
    let s = finding(&doc, FindingCode::OptimizerStateWithoutGradient).expect("the state");
    let lacking: u64 = 2048 + 1_605_632 + 2048 + 1_048_576;
    assert_eq!(s.evidence.bytes, Some(2 * lacking), "{}", s.summary);
    assert_eq!(s.evidence.of_bytes, Some(5_357_648));
    assert_eq!((s.evidence.count, s.evidence.of_count), (Some(4), Some(6)));
    assert!(
        s.summary.starts_with("the optimizer keeps 5.07 MiB of state for the 4 parameters that received no gradient (two moments per parameter"),
        "{}",
        s.summary
    );
}

#[test]
fn a_detached_bias_is_not_a_cut_but_its_moments_are_kept() {
    // fc3.bias detached: fc3's weight trains, so no module is where the gradient stops
    let doc = trace_schema::load_str(&fixture("examples/fixtures/mlp-detached-bias/trace.jsonl"))
        .unwrap();
    let f = finding(&doc, FindingCode::ParametersWithoutGradient).expect("the finding");
    assert_eq!(f.evidence.module, None, "{}", f.summary);
    assert!(!f.summary.contains("stops at"), "{}", f.summary);
    let s = finding(&doc, FindingCode::OptimizerStateWithoutGradient).expect("the state");
    assert_eq!(s.evidence.bytes, Some(80), "two moments of fc3.bias's 40 B");
    assert!(
        s.summary.contains("for the 1 parameter that received"),
        "{}",
        s.summary
    );
    // every parameter trained: neither finding
    let clean = trace_schema::load_str(&fixture("examples/fixtures/mlp/trace.jsonl")).unwrap();
    assert!(finding(&clean, FindingCode::ParametersWithoutGradient).is_none());
    assert!(finding(&clean, FindingCode::OptimizerStateWithoutGradient).is_none());
}

/// `text` with every optimizer-state label plain (a producer that could not tie the state to
/// its parameters).
fn untied(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let tied = "\"label\":\"optimizer state · ";
    while let Some(at) = rest.find(tied) {
        out.push_str(&rest[..at]);
        out.push_str("\"label\":\"optimizer state\"");
        let after = &rest[at + tied.len()..];
        rest = &after[after.find('"').expect("closing quote") + 1..];
    }
    out.push_str(rest);
    out
}

/// `text` with the first optimizer-state storage tied to `label`'s parameter `8` bytes larger.
fn state_grown(text: &str, label: &str) -> String {
    let at = text
        .find(&format!("\"label\":\"{label}\""))
        .unwrap_or_else(|| panic!("{label}"));
    let line_start = text[..at].rfind('\n').unwrap() + 1;
    let line_end = at + text[at..].find('\n').unwrap();
    let line = &text[line_start..line_end];
    assert!(line.contains("\"category\":\"optimizer\""), "{line}");
    let bytes: u64 = line
        .split("\"bytes\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let bigger = line.replace(
        &format!("\"bytes\":{bytes},"),
        &format!("\"bytes\":{},", bytes + 8),
    );
    format!("{}{bigger}{}", &text[..line_start], &text[line_end..])
}

#[test]
fn state_tied_by_its_labels_gives_the_exact_figure() {
    // the probe labels AdamW's moments with their parameter: fc1.bias's m 8 B larger is
    // counted as it is (no ratio needed), and the other parameters' state is not
    let text = mlp_text_without(&["fc1.bias"]);
    let text = state_grown(&text, "optimizer state · fc1.bias (m)");
    let doc = trace_schema::load_str(&text).unwrap();
    let s = finding(&doc, FindingCode::OptimizerStateWithoutGradient).expect("the state");
    assert_eq!(s.evidence.bytes, Some(2 * 2048 + 8), "{}", s.summary);
    assert_eq!(s.evidence.of_bytes, Some(5_357_648 + 8));
    assert!(
        s.summary.contains("(two moments per parameter"),
        "{}",
        s.summary
    );
}

#[test]
fn state_that_is_not_a_whole_number_of_moments_ties_nothing() {
    // state not labelled with its parameters, one storage 8 B larger: 2× the parameters plus
    // 8 B ties no state to a parameter, so no figure is given
    let text = untied(&mlp_text_without(&["fc1.bias"]));
    assert!(!text.contains("optimizer state ·"));
    // untied but a whole ratio: the figure from the ratio
    let doc = trace_schema::load_str(&text).unwrap();
    let s = finding(&doc, FindingCode::OptimizerStateWithoutGradient).expect("the state");
    assert_eq!(s.evidence.bytes, Some(2 * 2048), "{}", s.summary);
    let text = state_grown(&text, "optimizer state");
    let doc = trace_schema::load_str(&text).unwrap();
    assert!(finding(&doc, FindingCode::ParametersWithoutGradient).is_some());
    assert!(finding(&doc, FindingCode::OptimizerStateWithoutGradient).is_none());
}

#[test]
fn the_op_without_a_backward_is_named_from_the_allocation_sites() {
    // trace-ops' hand-made step, fc1's norm allocating through candle-nn's fused layer_norm
    // and fc1's parameters without a gradient
    let mut text = fixture("crates/trace-ops/tests/data/sites.jsonl");
    let params = concat!(
        r#"{"kind":"memory","timestamp_ns":0,"action":"alloc","device":"cpu","storage_id":"p1","bytes":4096,"category":"parameter","source":"registry","pre_existing":true,"label":"fc1.weight"}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":0,"action":"alloc","device":"cpu","storage_id":"p2","bytes":4096,"category":"parameter","source":"registry","pre_existing":true,"label":"fc2.weight"}"#,
        "\n",
    );
    let first_span = text.find("{\"kind\":\"span_start\"").unwrap();
    text.insert_str(first_span, params);
    let norm = r#"{"kind":"memory","timestamp_ns":240,"action":"alloc","device":"cpu","storage_id":"n1","bytes":8192,"span_id":"s3","category":"activation","source":"allocator","site":4,"thread":1}"#;
    let end_s3 = text.find("{\"kind\":\"span_end\",\"id\":\"s3\"").unwrap();
    text.insert_str(end_s3, &format!("{norm}\n"));
    let frames = concat!(
        r#"{"kind":"frame","id":9,"function":"candle_nn::ops::layer_norm","file":"/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-nn-0.11.1/src/ops.rs","line":700}"#,
        "\n",
        r#"{"kind":"frame","id":10,"function":"candle_nn::layer_norm::LayerNorm::forward","file":"/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-nn-0.11.1/src/layer_norm.rs","line":150}"#,
        "\n",
        r#"{"kind":"stack","id":4,"frames":[0,9,10,4]}"#,
        "\n",
        r#"{"kind":"site","id":4,"stack_id":4}"#,
        "\n",
        r#"{"kind":"gradient","event_id":"g1","root":"model","key":"fc1.weight","state":"missing"}"#,
        "\n",
        r#"{"kind":"gradient","event_id":"g2","root":"model","key":"fc2.weight","state":"present","norm":1.0}"#,
        "\n",
    );
    let summary = text.find("{\"kind\":\"alloc_sites\"").unwrap();
    text.insert_str(summary, frames);
    let text = text.replace("\"sites\":4}", "\"sites\":5}");
    let doc = trace_schema::load_str(&text).unwrap();
    let f = finding(&doc, FindingCode::ParametersWithoutGradient).expect("the finding");
    assert_eq!(f.evidence.module.as_deref(), Some("fc1"), "{}", f.summary);
    assert_eq!(
        f.evidence.operation.as_deref(),
        Some("layer_norm"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.ends_with("the gradient stops at module fc1 (the last module of the forward whose parameters got none), whose op layer_norm has no backward in Candle"),
        "{}",
        f.summary
    );
}
