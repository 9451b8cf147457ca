//! The speedscope export parsed back and checked against speedscope's file format
//! (src/lib/file-format-spec.ts of jlfwong/speedscope): required keys, one sampled profile per
//! thread, frame indices in range, stacks outermost first, weights the period in ns, strings
//! unchanged.

mod common;

use serde_json::Value;
use trace_report::speedscope::{write_speedscope, SpeedscopeError, SCHEMA};

fn export(doc: &trace_schema::TraceDocument) -> Value {
    let mut buf = Vec::new();
    let stats = write_speedscope(doc, "candle-graph@test", &mut buf).unwrap();
    let v: Value = serde_json::from_slice(&buf).expect("the export is JSON");
    check_structure(&v);
    assert_eq!(
        stats.profiles as usize,
        v["profiles"].as_array().unwrap().len()
    );
    assert_eq!(
        stats.frames as usize,
        v["shared"]["frames"].as_array().unwrap().len()
    );
    v
}

/// The file format's rules.
fn check_structure(v: &Value) {
    assert_eq!(v["$schema"], SCHEMA);
    assert_eq!(v["exporter"], "candle-graph@test");
    assert!(v["name"].is_string());
    assert_eq!(v["activeProfileIndex"], 0);
    let frames = v["shared"]["frames"].as_array().unwrap();
    for f in frames {
        assert!(f["name"].is_string(), "{f}");
        if let Some(line) = f.get("line") {
            assert!(line.is_u64());
        }
        if let Some(file) = f.get("file") {
            assert!(file.is_string());
        }
    }
    let profiles = v["profiles"].as_array().unwrap();
    assert!(!profiles.is_empty());
    for p in profiles {
        assert_eq!(p["type"], "sampled");
        assert!(p["name"].is_string());
        assert!(["nanoseconds", "none"].contains(&p["unit"].as_str().unwrap()));
        let (start, end) = (
            p["startValue"].as_u64().unwrap(),
            p["endValue"].as_u64().unwrap(),
        );
        assert!(start <= end);
        let samples = p["samples"].as_array().unwrap();
        let weights = p["weights"].as_array().unwrap();
        assert_eq!(samples.len(), weights.len());
        for s in samples {
            for i in s.as_array().unwrap() {
                assert!((i.as_u64().unwrap() as usize) < frames.len());
            }
        }
        assert!(weights.iter().all(|w| w.as_u64().unwrap() > 0));
    }
}

fn frame_name(v: &Value, i: &Value) -> String {
    v["shared"]["frames"][i.as_u64().unwrap() as usize]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_browser_trace_is_one_profile_with_stacks_outermost_first() {
    let doc = common::browser_sampled();
    let v = export(&doc);
    let p = &v["profiles"][0];
    assert_eq!(v["profiles"].as_array().unwrap().len(), 1);
    assert_eq!(p["unit"], "nanoseconds");
    assert_eq!(p["name"], "thread 1 (main) · llama::train_step");
    let samples = p["samples"].as_array().unwrap();
    assert_eq!(samples.len(), doc.samples.samples.len());
    assert!(p["weights"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w == 1_000_000));
    for (s, rec) in samples.iter().zip(&doc.samples.samples) {
        let names: Vec<String> = s
            .as_array()
            .unwrap()
            .iter()
            .map(|i| frame_name(&v, i))
            .collect();
        let mut want: Vec<String> = doc
            .samples
            .stack_frames(rec.stack)
            .map(|f| f.function.clone().or(f.address.clone()).unwrap())
            .collect();
        want.reverse();
        assert_eq!(names, want);
        assert_eq!(names[0], "main", "outermost first");
    }
    // the timer window of the thread
    assert_eq!(p["startValue"], 0);
    assert_eq!(p["endValue"], 301_000_000);
    // frames are unique by content and carry file and line
    let frames = v["shared"]["frames"].as_array().unwrap();
    assert_eq!(frames.len(), doc.samples.frames.len());
    assert_eq!(
        frames[3]["file"].as_str().unwrap().rsplit('/').next(),
        Some("tensor.rs")
    );
    assert_eq!(frames[3]["line"], 1250);
    // markup and a bidi override come back unchanged (speedscope draws text on a canvas)
    assert!(frames.iter().any(|f| f["name"]
        == "</title><script>window.__pwned=3</script><img src=x onerror=\"window.__pwned=4\">\u{202e}"));
    // an address-only frame is named by its address
    assert!(frames
        .iter()
        .any(|f| f["name"] == "0x7f00dead" && f.get("file").is_none()));
}

#[test]
fn two_threads_give_two_profiles_and_long_names_are_elided() {
    let long = "x".repeat(5000);
    let frames = ["main", "a\u{1}b\"\\", long.as_str(), "main"];
    let stacks = vec![vec![1, 0], vec![2, 0], vec![1, 3]];
    let samples = [
        (3_000_000, 2, 1, Some("s2")),
        (1_000_000, 2, 0, Some("s2")),
        (2_000_000, 9, 2, None),
    ];
    let doc = common::sampled_doc(
        &frames,
        &stacks,
        &samples,
        &[(2, Some("loader")), (9, None)],
        500_000,
    );
    let v = export(&doc);
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    assert_eq!(profiles[0]["name"], "thread 2 (loader) · e</script>");
    assert_eq!(profiles[1]["name"], "thread 9 · e</script>");
    // samples of a profile in time order: the 1 ms one first
    let first: Vec<String> = profiles[0]["samples"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| frame_name(&v, i))
        .collect();
    assert_eq!(first, ["main", "a\u{1}b\"\\"]);
    assert_eq!(profiles[0]["weights"][0], 500_000);
    let frames_out = v["shared"]["frames"].as_array().unwrap();
    let elided = frames_out
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .find(|n| n.starts_with("xxx"))
        .unwrap();
    assert_eq!(elided.chars().count(), trace_report::speedscope::NAME_CHARS);
    assert!(elided.contains('…'));
    // frames with other files are distinct: two `main` frames (src/f0.rs, src/f3.rs)
    assert_eq!(frames_out.iter().filter(|f| f["name"] == "main").count(), 2);
}

#[test]
fn a_trace_without_samples_is_an_error() {
    let text = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        "\n"
    );
    let doc = trace_schema::load_str(text).unwrap();
    let mut buf = Vec::new();
    let err = write_speedscope(&doc, "x", &mut buf).unwrap_err();
    assert!(matches!(err, SpeedscopeError::NoSamples(_)));
    assert_eq!(
        err.to_string(),
        "the trace has no sampled call stacks (operations were not sampled), so there is no profile to export"
    );
    assert!(buf.is_empty());
}

/// Issue 46, class 8: a sampled capture cut short before its samples were written (a producer
/// writes them after the step) says so, not "operations were not sampled".
#[test]
fn a_cut_short_sampled_trace_says_it_was_cut_short() {
    let text = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_contract":{"operations":"sampled"}}"#,
        "\n",
        r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
    );
    let doc = trace_schema::load_str(text).unwrap();
    assert!(doc.truncation.is_some(), "no terminal event: cut short");
    let err = write_speedscope(&doc, "x", Vec::new()).unwrap_err();
    let text = err.to_string();
    assert_eq!(
        text,
        "the trace has no sampled call stacks (declared sampled, but the trace was cut short \
         before any sample was written (a producer writes the samples after the captured step)), \
         so there is no profile to export"
    );
    assert!(!text.contains("not sampled"), "{text}");
}

/// Issue 46, class 7: every sample dropped (each names an undefined stack) is said as such.
#[test]
fn a_trace_whose_samples_were_all_dropped_says_so() {
    let text = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t","capture_contract":{"operations":"sampled"}}"#,
        "\n",
        r#"{"kind":"sample","timestamp_ns":5,"thread":1,"stack_id":9}"#,
        "\n",
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":10}"#,
        "\n",
    );
    let doc = trace_schema::load_str(text).unwrap();
    let err = write_speedscope(&doc, "x", Vec::new()).unwrap_err();
    assert!(
        err.to_string().contains(
            "its one sample was dropped (it names an undefined stack, at line 2; `check` lists it)"
        ),
        "{err}"
    );
}

#[test]
fn a_deep_stack_is_written_with_its_ends_and_one_elision_frame() {
    use trace_report::speedscope::{ELIDED_FRAMES, MAX_STACK_FRAMES};
    let names: Vec<String> = (0..10_000).map(|i| format!("f{i}")).collect();
    let frames: Vec<&str> = names.iter().map(String::as_str).collect();
    // innermost first: f0 is the interrupted function, f9999 the outermost
    let stacks = vec![(0..10_000u32).collect::<Vec<_>>()];
    let doc_of = |n: u64| {
        let samples: Vec<_> = (0..n)
            .map(|i| (1_000_000 + i * 1000, 2, 0, Some("s2")))
            .collect();
        common::sampled_doc(&frames, &stacks, &samples, &[(2, None)], 1000)
    };
    let size = |doc: &trace_schema::TraceDocument| {
        let mut buf = Vec::new();
        write_speedscope(doc, "candle-graph@test", &mut buf).unwrap();
        buf.len()
    };
    // each sample adds at most 256 indices (up to 5 digits and a comma) and a weight,
    // not the 10,000 frames of its stack
    let per_sample = (size(&doc_of(100)) - size(&doc_of(50))) / 50;
    assert!(per_sample <= MAX_STACK_FRAMES * 6 + 16, "{per_sample}");
    let doc = doc_of(50);
    let v = export(&doc);
    let stack: Vec<String> = v["profiles"][0]["samples"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| frame_name(&v, i))
        .collect();
    assert_eq!(stack.len(), MAX_STACK_FRAMES);
    assert_eq!(stack[0], "f9999", "outermost first");
    assert_eq!(
        stack[MAX_STACK_FRAMES - 1],
        "f0",
        "the interrupted function last"
    );
    assert_eq!(stack.iter().filter(|n| *n == ELIDED_FRAMES).count(), 1);
}
