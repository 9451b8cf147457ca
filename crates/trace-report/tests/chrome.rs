//! The Chrome export parsed back with a JSON parser and checked against the format's rules
//! (Perfetto's trace processor cannot run here: it downloads itself at first use): object form,
//! nesting of complete slices per thread as a viewer rebuilds it, unique async ids, counters
//! equal to trace-memory's timeline at every point, names with control characters intact.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;
use trace_report::chrome::{write_chrome, ChromeOptions, Window, CATEGORY_COUNTER, TOTAL_COUNTER};
use trace_schema::{MemoryCategory, TraceDocument};

/// A slice of a thread: start, end (`None`: open), index of its event.
type SliceAt = (u64, Option<u64>, usize);
/// A counter point: time, total, value per category.
type CounterPoint = (u64, u64, BTreeMap<String, u64>);

fn export(doc: &TraceDocument, opts: &ChromeOptions) -> (Value, trace_report::chrome::ExportStats) {
    let analysis = trace_graph::analyze(doc);
    let mut buf = Vec::new();
    let stats = write_chrome(doc, &analysis, opts, &mut buf).unwrap();
    let v: Value = serde_json::from_slice(&buf).expect("the export is JSON");
    assert_eq!(
        v["traceEvents"].as_array().unwrap().len() as u64,
        stats.events
    );
    (v, stats)
}

fn opts() -> ChromeOptions {
    ChromeOptions {
        tool: ("candle-graph".into(), "test".into()),
        ..ChromeOptions::default()
    }
}

fn events(v: &Value) -> &Vec<Value> {
    v["traceEvents"].as_array().unwrap()
}

fn ns(x: &Value) -> u64 {
    // exact decimal: parse the text, not a float
    let t = x.to_string();
    let (us, frac) = t.split_once('.').unwrap_or((&t, ""));
    us.parse::<u64>().unwrap() * 1000 + format!("{frac:0<3}").parse::<u64>().unwrap()
}

/// Checks the format's rules; returns (nested slices, async pairs).
fn validate(v: &Value) -> (usize, usize) {
    assert_eq!(v["displayTimeUnit"], "ms");
    assert_eq!(v["otherData"]["format"], "candle-graph/chrome/1");
    assert!(v["otherData"]["run_id"].is_string());
    let evs = events(v);
    for e in evs {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["name"].is_string() && e["pid"].is_u64(), "{e}");
        assert!(
            ["M", "X", "B", "b", "e", "C", "i"].contains(&ph),
            "phase {ph}"
        );
        if ph != "M" {
            assert!(e["ts"].is_number(), "{e}");
        }
        if ph == "X" {
            assert!(e["dur"].is_number(), "{e}");
        }
        if ph == "i" {
            assert!(["g", "p", "t"].contains(&e["s"].as_str().unwrap()));
        }
    }
    // Nesting per thread, rebuilt the way a viewer does: sorted by start, longer first, file
    // order; a slice closes when the next starts at or after its end.
    let mut threads: BTreeMap<(u64, u64), Vec<SliceAt>> = BTreeMap::new();
    for (i, e) in evs.iter().enumerate() {
        let ph = e["ph"].as_str().unwrap();
        if ph == "X" || ph == "B" {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().expect("tid"));
            let start = ns(&e["ts"]);
            let end = (ph == "X").then(|| start + ns(&e["dur"]));
            threads.entry(key).or_default().push((start, end, i));
        }
    }
    let mut nested = 0;
    let nested_ids: std::collections::HashSet<&str> = evs
        .iter()
        .filter(|e| (e["ph"] == "X" || e["ph"] == "B") && e["cat"] == "span")
        .filter_map(|e| e["args"]["id"].as_str())
        .collect();
    for slices in threads.values_mut() {
        slices.sort_by_key(|&(s, e, i)| (s, std::cmp::Reverse(e.unwrap_or(u64::MAX)), i));
        let mut stack: Vec<SliceAt> = Vec::new();
        for &(s, e, i) in slices.iter() {
            while stack
                .last()
                .is_some_and(|&(_, te, _)| te.is_some_and(|te| te <= s))
            {
                stack.pop();
            }
            let ev = &evs[i];
            let parent = stack.last().map(|&(_, _, p)| &evs[p]);
            if let Some(&(_, te, _)) = stack.last() {
                let fits = match (e, te) {
                    (_, None) => true,
                    (None, Some(_)) => false,
                    (Some(e), Some(te)) => e <= te,
                };
                assert!(fits, "{ev} does not fit in {}", parent.unwrap());
            }
            // The parent the viewer sees is the real one.
            let want = match ev["cat"].as_str() {
                Some("span") => ev["args"]["parent_id"].as_str(),
                Some("op") => ev["args"]["span_id"].as_str(),
                // a samples track is flat: each sample on its own
                Some("sample") => None,
                c => panic!("category {c:?}"),
            };
            let seen = parent.and_then(|p| p["args"]["id"].as_str());
            let expected = want.filter(|w| nested_ids.contains(*w));
            assert_eq!(seen, expected, "{ev} nests under {parent:?}");
            stack.push((s, e, i));
            nested += 1;
        }
    }
    // Async slices: one begin and at most one end per id, the end not before the begin.
    let mut ids: HashMap<String, (Option<u64>, Option<u64>)> = HashMap::new();
    for e in evs {
        match e["ph"].as_str().unwrap() {
            "b" => {
                let slot = ids
                    .entry(e["id"].as_str().unwrap().to_string())
                    .or_default();
                assert!(slot.0.is_none(), "id reused: {e}");
                slot.0 = Some(ns(&e["ts"]));
                assert!(e["args"]["not_nested"].is_string(), "{e}");
            }
            "e" => {
                let slot = ids
                    .entry(e["id"].as_str().unwrap().to_string())
                    .or_default();
                assert!(slot.1.is_none(), "end reused: {e}");
                slot.1 = Some(ns(&e["ts"]));
            }
            _ => {}
        }
    }
    for (id, (b, e)) in &ids {
        let b = b.unwrap_or_else(|| panic!("end without begin: {id}"));
        if let Some(e) = e {
            assert!(*e >= b);
        }
    }
    (nested, ids.len())
}

/// The counters of each device equal trace-memory's change-list timeline after every change.
fn check_counters(doc: &TraceDocument, v: &Value) {
    let analysis = trace_graph::analyze(doc);
    let Some(l) = analysis.memory.logical.as_ref() else {
        return;
    };
    let tl = &l.timeline;
    let nd = tl.devices.len();
    // expected per device: (ts, total, {category: bytes})
    let mut seen = vec![[false; 5]; nd];
    for ch in &tl.changes {
        let k = MemoryCategory::ALL
            .iter()
            .position(|&c| c == ch.category)
            .unwrap();
        seen[ch.device as usize][k] = true;
    }
    let mut cells = vec![[0u64; 5]; nd];
    let mut want: Vec<Vec<CounterPoint>> = vec![Vec::new(); nd];
    for (i, ch) in tl.changes.iter().enumerate() {
        let d = ch.device as usize;
        let k = MemoryCategory::ALL
            .iter()
            .position(|&c| c == ch.category)
            .unwrap();
        cells[d][k] = ch.live_bytes;
        let cats: BTreeMap<String, u64> = MemoryCategory::ALL
            .iter()
            .enumerate()
            .filter(|(k, _)| seen[d][*k])
            .map(|(k, c)| (c.as_str().to_string(), cells[d][k]))
            .collect();
        want[d].push((ch.timestamp_ns, cells[d].iter().sum(), cats));
        // the analyser's global total is the sum of the device totals after each change
        let all: u64 = cells.iter().map(|row| row.iter().sum::<u64>()).sum();
        assert_eq!(all, tl.totals[i].live_bytes);
    }
    let pid_of: HashMap<String, u64> = events(v)
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["args"]["name"].as_str().unwrap().to_string(),
                e["pid"].as_u64().unwrap(),
            )
        })
        .collect();
    for (d, name) in tl.devices.iter().enumerate() {
        let pid = pid_of[&format!("device {name}")];
        let got_total: Vec<(u64, u64)> = events(v)
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == pid && e["name"] == TOTAL_COUNTER)
            .map(|e| (ns(&e["ts"]), e["args"]["total"].as_u64().unwrap()))
            .collect();
        let got_cats: Vec<BTreeMap<String, u64>> = events(v)
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == pid && e["name"] == CATEGORY_COUNTER)
            .map(|e| {
                e["args"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                    .collect()
            })
            .collect();
        assert_eq!(got_total.len(), want[d].len(), "device {name}");
        for (i, w) in want[d].iter().enumerate() {
            assert_eq!(got_total[i], (w.0, w.1), "device {name}, change {i}");
            assert_eq!(got_cats[i], w.2, "device {name}, change {i}");
        }
        // the device's peak is the highest counter value
        let peak = l.device(name).unwrap().peak.as_ref().unwrap().live_bytes;
        assert_eq!(got_total.iter().map(|x| x.1).max(), Some(peak));
    }
}

fn fixture(name: &str) -> TraceDocument {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/fixtures")
        .join(name)
        .join("trace.jsonl");
    trace_schema::load_path(&path).unwrap()
}

#[test]
fn golden_fixtures_export_nest_and_count_like_the_analyser() {
    for name in ["mlp", "llama"] {
        let doc = fixture(name);
        let (v, stats) = export(&doc, &opts());
        let (nested, _) = validate(&v);
        assert_eq!(nested as u64, stats.nested_spans + stats.ops);
        assert_eq!(stats.nested_spans as usize, doc.spans.len(), "{name}");
        assert_eq!(v["otherData"]["truncated"], false);
        assert_eq!(v["otherData"]["filtered"], false);
        assert_eq!(v["otherData"]["run_id"], doc.meta.run_id.as_str());
        check_counters(&doc, &v);
        // gradients as instants with their facts
        let grads: Vec<&Value> = events(&v)
            .iter()
            .filter(|e| e["cat"] == "gradient")
            .collect();
        assert_eq!(grads.len(), doc.gradients.len());
        assert!(grads.iter().all(|g| g["args"]["state"].is_string()));
    }
}

#[test]
fn a_synthetic_trace_with_ops_and_two_devices() {
    let config = trace_synth::SynthConfig {
        memory_events: 20_000,
        spans: 400,
        ops: 3_000,
        devices: 2,
        device_memory_samples: 50,
        ..trace_synth::SynthConfig::default()
    };
    let doc = TraceDocument::from_events(trace_synth::synth_events(&config));
    let (v, stats) = export(&doc, &opts());
    validate(&v);
    check_counters(&doc, &v);
    assert_eq!(stats.ops as usize, doc.ops.len());
    assert!(stats.nested_spans > 0);
    // samples as their own counters on the device processes
    assert!(events(&v)
        .iter()
        .any(|e| e["ph"] == "C" && e["name"] == "device used"));
}

fn line_doc(lines: &[String]) -> TraceDocument {
    let mut text = String::from(
        r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
    );
    text.push('\n');
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    trace_schema::load_str(&text).unwrap()
}

fn span(id: &str, parent: Option<&str>, name: &str, start: u64) -> String {
    let mut v = serde_json::json!({"kind":"span_start","id":id,"name":name,"start_ns":start,"span_kind":"function"});
    if let Some(p) = parent {
        v["parent_id"] = p.into();
    }
    if parent.is_none() {
        v["measured"] = true.into();
    }
    v.to_string()
}

fn end(id: &str, d: u64) -> String {
    format!(r#"{{"kind":"span_end","id":"{id}","duration_ns":{d}}}"#)
}

#[test]
fn names_with_control_characters_and_markup_survive() {
    let evil = "a\u{1}b\n\t</script><script>alert(1)</script>\"\\\u{202e}";
    let doc = line_doc(&[
        span("s1", None, "root", 0),
        span("s2", Some("s1"), evil, 10),
        end("s2", 5),
        end("s1", 100),
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":100}"#.to_string(),
    ]);
    let (v, _) = export(&doc, &opts());
    validate(&v);
    let found = events(&v)
        .iter()
        .find(|e| e["cat"] == "span" && e["args"]["id"] == "s2")
        .unwrap();
    assert_eq!(found["name"].as_str(), Some(evil));
    assert_eq!(
        found["args"]["path"].as_str(),
        Some(&*format!("root/{evil}"))
    );
}

#[test]
fn spans_that_do_not_nest_become_async_slices_with_unique_ids() {
    let doc = line_doc(&[
        span("s1", None, "root", 0),
        span("s2", Some("s1"), "a", 10),
        end("s2", 20), // [10, 30]
        span("s3", Some("s1"), "overlaps_a", 20),
        end("s3", 20), // [20, 40]: overlaps a
        span("s4", Some("s1"), "outlives_root", 50),
        end("s4", 100), // [50, 150] past the root's end
        span("s5", Some("s4"), "under_outliver", 60),
        end("s5", 1),
        end("s1", 100),
        r#"{"kind":"terminal","outcome":"complete","timestamp_ns":200}"#.to_string(),
    ]);
    let (v, stats) = export(&doc, &opts());
    let (_, asyncs) = validate(&v);
    assert_eq!((stats.nested_spans, stats.async_spans), (2, 3));
    assert_eq!(asyncs, 3);
    let reason = |id: &str| {
        events(&v)
            .iter()
            .find(|e| e["ph"] == "b" && e["args"]["id"] == id)
            .map(|e| e["args"]["not_nested"].as_str().unwrap().to_string())
    };
    assert_eq!(reason("s3").as_deref(), Some("overlaps_sibling"));
    assert_eq!(reason("s4").as_deref(), Some("outside_parent"));
    assert_eq!(reason("s5").as_deref(), Some("parent_not_nested"));
    assert_eq!(v["otherData"]["not_nested_spans"], 3);
}

#[test]
fn a_truncated_trace_exports_open_spans_as_begin_events() {
    let doc = fixture("llama");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fixtures/llama/trace.jsonl"),
    )
    .unwrap();
    // cut in the middle of a line, two thirds in
    let cut = &text[..text.len() * 2 / 3];
    let truncated = trace_schema::load_str(cut).unwrap();
    assert!(truncated.is_truncated() && doc.spans.len() >= truncated.spans.len());
    let (v, _) = export(&truncated, &opts());
    validate(&v);
    check_counters(&truncated, &v);
    assert_eq!(v["otherData"]["truncated"], true);
    let open: Vec<&Value> = events(&v).iter().filter(|e| e["ph"] == "B").collect();
    assert!(!open.is_empty());
    assert!(open.iter().all(|e| e["args"]["open"] == true));
}

#[test]
fn the_span_filter_takes_the_indexed_path_the_views_show() {
    // llama's two layers, `model/model.layers.0` and `model/model.layers.1` as the probe names
    // them (an older trace's two `block`s read `block` and `block#2` by call order:
    // trace-memory's `indexed_paths_number_repeated_siblings_in_call_order`): each path keeps
    // its own layer
    let doc = fixture("llama");
    let kept = |path: &str| {
        let mut o = opts();
        o.span_path = Some(path.into());
        let (v, _) = export(&doc, &o);
        events(&v)
            .iter()
            .filter(|e| {
                e["cat"] == "span"
                    && e["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(".self_attn"))
            })
            .count()
    };
    // each path keeps one layer's attention
    assert_eq!(
        kept("llama::train_step/forward/model/model.layers.0/model.layers.0.self_attn"),
        1
    );
    assert_eq!(
        kept("llama::train_step/forward/model/model.layers.1/model.layers.1.self_attn"),
        1
    );
}

#[test]
fn span_and_window_filters_keep_a_subtree_and_a_range() {
    let doc = fixture("llama");
    let analysis = trace_graph::analyze(&doc);
    let origin = analysis.time_origin_ns;
    let mut o = opts();
    o.span_path = Some("llama::train_step/backward".into());
    let (v, stats) = export(&doc, &o);
    validate(&v);
    assert_eq!(v["otherData"]["filtered"], true);
    assert_eq!(
        v["otherData"]["filter"]["span"],
        "llama::train_step/backward"
    );
    let paths: Vec<&str> = events(&v)
        .iter()
        .filter(|e| e["cat"] == "span")
        .map(|e| e["args"]["path"].as_str().unwrap())
        .collect();
    assert!(!paths.is_empty() && stats.nested_spans as usize == paths.len());
    assert!(paths
        .iter()
        .all(|p| p.starts_with("llama::train_step/backward")));
    // counters inside the span's range, starting with the value it began with
    let b = doc
        .spans
        .iter()
        .find(|s| doc.str(s.name) == "backward")
        .unwrap();
    let (lo, hi) = (b.start_ns, b.end_ns().unwrap());
    let counters: Vec<(u64, u64)> = events(&v)
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == TOTAL_COUNTER)
        .map(|e| (ns(&e["ts"]), e["args"]["total"].as_u64().unwrap()))
        .collect();
    assert!(counters.iter().all(|&(t, _)| t >= lo && t <= hi));
    let tl = &analysis.memory.logical.as_ref().unwrap().timeline;
    assert_eq!(counters[0], (lo, tl.live_bytes_entering(lo)));

    // an unknown path names candidates
    let mut o = opts();
    o.span_path = Some("nope/backward".into());
    let analysis = trace_graph::analyze(&doc);
    let err = write_chrome(&doc, &analysis, &o, Vec::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("no span has the path `nope/backward` (paths: llama::train_step/backward)"),
        "{err}"
    );

    // a window relative to the measured region
    let mut o = opts();
    o.window = Some("1ms..3ms".parse::<Window>().unwrap());
    let (v, _) = export(&doc, &o);
    validate(&v);
    for e in events(&v).iter().filter(|e| e["ph"] == "C") {
        let t = ns(&e["ts"]);
        assert!(t >= origin + 1_000_000 && t <= origin + 3_000_000);
    }
    for e in events(&v).iter().filter(|e| e["ph"] == "X") {
        let (s, d) = (ns(&e["ts"]), ns(&e["dur"]));
        assert!(
            s <= origin + 3_000_000 && s + d >= origin + 1_000_000,
            "{e}"
        );
    }
}

#[test]
fn samples_are_a_track_per_thread_named_by_their_op() {
    let doc = common::browser_sampled();
    let (v, stats) = export(&doc, &opts());
    validate(&v);
    assert_eq!(stats.samples as usize, doc.samples.samples.len());
    let samples: Vec<&Value> = events(&v).iter().filter(|e| e["cat"] == "sample").collect();
    assert_eq!(samples.len(), 299);
    let tid = samples[0]["tid"].as_u64().unwrap();
    assert!(samples.iter().all(|e| e["ph"] == "X" && e["tid"] == tid));
    let name = events(&v)
        .iter()
        .find(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == tid)
        .unwrap();
    assert_eq!(name["args"]["name"], "samples · thread 1 (main)");
    // no span lane shares the track
    assert!(!events(&v)
        .iter()
        .any(|e| e["cat"] == "span" && e["tid"] == tid));
    let profile = trace_ops::OpProfile::from_document(&doc).unwrap();
    let mut ops = std::collections::BTreeSet::new();
    for (k, (e, s)) in samples.iter().zip(&doc.samples.samples).enumerate() {
        assert_eq!(ns(&e["ts"]), s.timestamp_ns);
        assert_eq!(ns(&e["dur"]), 1_000_000, "one period");
        let inner = doc.samples.stack_frames(s.stack).next().unwrap();
        let inner_name = inner.function.as_deref().or(inner.address.as_deref());
        // named by the op trace-ops counts it in, with its kind and pass
        let row = profile
            .row_of_sample(k)
            .expect("every sample is in the region");
        assert_eq!(e["name"].as_str(), row.op.as_deref());
        assert_eq!(e["args"]["op"].as_str(), row.op.as_deref());
        assert_eq!(e["args"]["op_kind"].as_str(), row.kind.map(|k| k.as_str()));
        assert_eq!(e["args"]["pass"].as_str(), row.pass.map(|p| p.as_str()));
        ops.insert(e["name"].as_str().unwrap().to_string());
        let stack = e["args"]["stack"].as_array().unwrap();
        assert_eq!(stack.len(), doc.samples.stack_frames(s.stack).count());
        assert!(stack[0].as_str().unwrap().starts_with(inner_name.unwrap()));
        assert_eq!(e["args"]["span_id"].as_str(), s.span.map(|sp| doc.str(sp)));
    }
    assert!(
        ops.contains("matmul") && ops.contains("softmax_last_dim"),
        "{ops:?}"
    );
    // the frame name full of markup comes back unchanged in the stacks
    assert!(samples.iter().any(|e| e["args"]["stack"][0]
        .as_str()
        .unwrap()
        .starts_with("</title><script>window.__pwned=3")));
}

#[test]
fn sample_slices_never_overlap_and_long_stacks_are_cut() {
    let frames: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
    let names: Vec<&str> = frames.iter().map(String::as_str).collect();
    let stacks = vec![(0..100).collect::<Vec<u32>>(), vec![5, 99]];
    // thread 7: a sample 0.3 ms after the previous one (a late signal), thread 8 unnamed
    let samples = [
        (1_000_000, 7, 0, Some("s2")),
        (2_000_000, 7, 1, Some("s2")),
        (2_300_000, 7, 1, Some("s2")),
        (6_000_000_000, 8, 1, Some("s3")),
        (1_500_000, 8, 0, None),
    ];
    let doc = common::sampled_doc(
        &names,
        &stacks,
        &samples,
        &[(7, Some("main")), (8, None)],
        1_000_000,
    );
    let (v, stats) = export(&doc, &opts());
    validate(&v); // nesting per thread as a viewer rebuilds it: no partial overlap
    assert_eq!(stats.samples, 5);
    let of = |tid: u64| -> Vec<&Value> {
        events(&v)
            .iter()
            .filter(|e| e["cat"] == "sample" && e["tid"] == tid)
            .collect()
    };
    let tids: Vec<u64> = events(&v)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter(|e| e["args"]["name"].as_str().unwrap().starts_with("samples"))
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(tids.len(), 2);
    let a = of(tids[0]);
    assert_eq!(a.len(), 3);
    assert_eq!(ns(&a[1]["dur"]), 300_000, "cut at the next sample");
    assert_eq!(ns(&a[2]["dur"]), 1_000_000);
    let deep = &a[0]["args"];
    assert_eq!(
        deep["stack"].as_array().unwrap().len(),
        trace_report::chrome::SAMPLE_STACK_FRAMES
    );
    assert_eq!(
        deep["frames_omitted"],
        100 - trace_report::chrome::SAMPLE_STACK_FRAMES
    );
    assert_eq!(deep["stack"][0], "f0");
    assert_eq!(deep["at"], "src/f0.rs:1");
    assert_eq!(deep["stack_id"], 0);
    let b = of(tids[1]);
    assert_eq!(b.len(), 2);
    assert!(ns(&b[0]["ts"]) < ns(&b[1]["ts"]), "sorted by time");
    assert!(b[0]["args"].get("span_id").is_none());
    // a window keeps the samples inside it; a span filter those of its subtree
    let windowed = ChromeOptions {
        window: Some("..3ms".parse::<Window>().unwrap()),
        ..opts()
    };
    let (_, s) = export(&doc, &windowed);
    assert_eq!(s.samples, 4);
    let spanned = ChromeOptions {
        span_path: Some("step/backward".into()),
        ..opts()
    };
    let (_, s) = export(&doc, &spanned);
    assert_eq!(s.samples, 1);
}
