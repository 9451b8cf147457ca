//! The run's metadata with any profiler schedule: a side file beside the trace, or the
//! recorded `ProfilerStep#N` for the warm-up.

#[path = "common/annotation.rs"]
mod annotation;
mod common;

use annotation::*;
use common::*;

#[test]
fn the_recorded_step_number_gives_the_warm_up_when_nothing_declares_it() {
    let (_, doc) = import(vec![
        ann("ProfilerStep#2", 10.0, 100.0),
        op("aten::add", 20.0, 5.0),
    ]);
    assert_eq!(doc.meta.warmup_steps, Some(2));
    assert!(doc.meta.tags["import.warmup_source"].starts_with("ProfilerStep#2"));
    let (_, doc) = import(vec![op("aten::add", 20.0, 5.0)]);
    assert_eq!(doc.meta.warmup_steps, None, "no step: unknown, not 0");
}

#[test]
fn a_side_file_beside_the_trace_is_read_and_a_bad_one_names_its_line() {
    let dir = std::env::temp_dir().join(format!("side-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("step.json");
    std::fs::write(&trace, kineto(vec![ann("ProfilerStep#1", 10.0, 100.0)])).unwrap();
    let side = dir.join("step.candle-graph.json");
    std::fs::write(&side, br#"{"warmup_steps": 4, "intra_op_threads": 1}"#).unwrap();
    let doc = trace_import::import_path(&trace).unwrap().document();
    assert_eq!(doc.meta.warmup_steps, Some(4), "the side file wins");
    assert_eq!(doc.meta.tags["torch.intra_op_threads"], "1");
    std::fs::write(&side, b"{\n  \"warmup_steps\": ,\n}").unwrap();
    let err = trace_import::import_path(&trace).unwrap_err().to_string();
    assert!(
        err.contains("step.candle-graph.json") && err.contains("line 2"),
        "{err}"
    );
    std::fs::remove_file(&side).unwrap();
    let doc = trace_import::import_path(&trace).unwrap().document();
    assert_eq!(doc.meta.warmup_steps, Some(1), "without it: ProfilerStep#1");
    let _ = std::fs::remove_dir_all(&dir);
}
