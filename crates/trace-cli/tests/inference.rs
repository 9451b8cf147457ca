//! The inference figures of `demo --inference` from a real generation, in a process of its own:
//! the capture contract it checks counts the Candle tensors created before the profiler
//! started, and a test of the same binary that ran Candle first would make them nonzero
//! (it did, in the order the test harness picked on a CI run).

// The probe's allocator, as the `candle-graph` binary installs it: storage lifetimes are exact.
#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

/// The real generation (llama2_c, tiny, seeded): one prefill, a decode per further token,
/// the cache live at the end with its exact bytes, growth per token exactly one position of
/// keys and values in every layer.
#[test]
fn inference_figures_from_a_real_generation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = candle_graph_examples::infer::generate(dir.path(), 4, 16).expect("generate");
    let doc = trace_schema::load_path(&report.trace_path).expect("trace");
    let f = trace_views::inference::InferenceFigures::of(&doc);
    assert!(f.prefill_ns.is_some(), "{f:?}");
    assert_eq!(f.decode_ns.len(), 15, "{f:?}");
    let cfg = candle_graph_examples::infer::tiny_config();
    let head_dim = cfg.dim / cfg.n_heads;
    // One position of keys and values, f32, in every layer.
    let per_token = (2 * cfg.n_layers * cfg.n_kv_heads * head_dim * 4) as u64;
    // The cache holds every position but the last generated token's (never fed back).
    let positions = (4 + 16 - 1) as u64;
    let mask = 4 * 4; // the prefill's causal mask, u8
    assert_eq!(
        f.live_at_end,
        (2 * cfg.n_layers as u64 + 1, per_token * positions + mask),
        "{f:?}"
    );
    assert_eq!(f.growth_per_token_bytes(), Some(per_token as f64), "{f:?}");
    // The weights are made after the profiler started and declared on the session: no
    // tensor older than the session, so logical memory is complete (not `partial`).
    let contract = doc.meta.capture_contract.as_ref().expect("contract");
    assert_eq!(
        contract.logical_memory,
        trace_schema::CoverageLevel::Complete,
        "{:?}",
        contract.reasons
    );
    let text = f.render();
    assert!(text.contains("prefill"), "{text}");
    assert!(text.contains("15 calls"), "{text}");
}
