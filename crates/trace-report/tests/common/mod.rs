//! Sampled traces (trace/12) written by hand for the tests of the sample views.

use std::path::Path;

use serde_json::json;
use trace_schema::TraceDocument;

/// The hand-made sampled trace of the browser test: spans forward (with a module span),
/// backward and optimizer, 299 samples at 1 kHz on thread 1, one frame name full of markup.
pub fn browser_sampled() -> TraceDocument {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/sampled.jsonl");
    trace_schema::load_path(&path).unwrap()
}

/// A sampled trace from parts: `frames` (function names, id = index), `stacks` (frame ids,
/// innermost first), `samples` (timestamp ns, thread, stack id, span id), the sampler's
/// threads (key, name). One root span `s1` (0..10 s) with a forward child `s2` (0..5 s) and a
/// backward child `s3` (5..10 s).
pub fn sampled_doc(
    frames: &[&str],
    stacks: &[Vec<u32>],
    samples: &[(u64, u64, u32, Option<&str>)],
    threads: &[(u64, Option<&str>)],
    period_ns: u64,
) -> TraceDocument {
    let mut lines = vec![
        json!({"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e</script>","phase":"train","timestamp":"t",
               "capture_contract":{"operations":"sampled"}}),
        json!({"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}),
        json!({"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}),
        json!({"kind":"span_end","id":"s2","duration_ns":5_000_000_000u64}),
        json!({"kind":"span_start","id":"s3","parent_id":"s1","name":"backward","start_ns":5_000_000_000u64,"span_kind":"function","step":"backward"}),
        json!({"kind":"span_end","id":"s3","duration_ns":5_000_000_000u64}),
        json!({"kind":"span_end","id":"s1","duration_ns":10_000_000_000u64}),
    ];
    for (i, f) in frames.iter().enumerate() {
        lines.push(
            json!({"kind":"frame","id":i,"function":f,"file":format!("src/f{i}.rs"),"line":i + 1}),
        );
    }
    for (i, s) in stacks.iter().enumerate() {
        lines.push(json!({"kind":"stack","id":i,"frames":s}));
    }
    for &(t, thread, stack, span) in samples {
        let mut v = json!({"kind":"sample","timestamp_ns":t,"thread":thread,"stack_id":stack});
        if let Some(s) = span {
            v["span_id"] = s.into();
        }
        lines.push(v);
    }
    let threads: Vec<_> = threads
        .iter()
        .map(|&(k, name)| {
            let n = samples.iter().filter(|s| s.1 == k).count();
            let mut v = json!({"thread":k,"start_ns":0,"end_ns":10_000_000_000u64,"ticks":n,"samples":n,"lost_overrun":0,"lost_buffer":0});
            if let Some(name) = name {
                v["name"] = name.into();
            }
            v
        })
        .collect();
    lines.push(json!({"kind":"sampler","hz":1_000_000_000 / period_ns,"period_ns":period_ns,"clock":"wall","unwinder":"libgcc","symbols":"line_tables","threads":threads}));
    lines.push(json!({"kind":"terminal","outcome":"complete","timestamp_ns":10_000_000_001u64}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    trace_schema::load_str(&text).unwrap()
}
