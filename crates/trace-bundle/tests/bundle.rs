//! Bundles of synthetic traces: publish, verify, and each tampering caught with the file named;
//! series across three captures and their typed refusals.

use std::path::{Path, PathBuf};

use trace_bundle::{
    build_series, figures_file, publish, semantic_problems, verify, DerivedFile, Problem,
    RunIdentity, SeriesError, FIGURES_FILE, MANIFEST_FILE, TRACE_FILE,
};
use trace_synth::{write_synth_trace, SynthConfig};

/// A synthetic trace at `dir/name.jsonl` capturing `step` (its meta line rewritten).
fn trace(dir: &Path, name: &str, step: u64, run_id: &str) -> PathBuf {
    let path = dir.join(format!("{name}.jsonl"));
    let config = SynthConfig {
        memory_events: 400,
        spans: 40,
        ops: 100,
        ..SynthConfig::default()
    };
    write_synth_trace(&path, &config).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let (meta, rest) = text.split_once('\n').unwrap();
    let mut meta: serde_json::Value = serde_json::from_str(meta).unwrap();
    meta["capture_step"] = step.into();
    meta["warmup_steps"] = (step - 1).into();
    meta["run_id"] = run_id.into();
    std::fs::write(&path, format!("{meta}\n{rest}\n")).unwrap();
    path
}

/// What the CLI derives, made here from the library alone: the figures and a stand-in
/// `summary.json` (its exact bytes are what is checked).
fn derive(trace: &Path) -> (RunIdentity, Vec<DerivedFile>) {
    let doc = trace_schema::load_path(trace).unwrap();
    let analysis = trace_graph::analyze(&doc);
    let figures = trace_graph::StepFigures::of(&doc, &analysis);
    let summary = DerivedFile {
        path: "summary.json".into(),
        bytes: serde_json::to_vec(&figures.logical_peak_bytes).unwrap(),
    };
    (
        RunIdentity::of(&doc.meta),
        vec![figures_file(&figures).unwrap(), summary],
    )
}

fn bundle(dir: &Path, name: &str, step: u64, run_id: &str) -> PathBuf {
    let t = trace(dir, name, step, run_id);
    let (run, derived) = derive(&t);
    let out = dir.join(format!("{name}.bundle"));
    let v = publish(&t, &run, &derived, &out).unwrap();
    assert!(v.is_valid(), "{:?}", v.problems);
    assert_eq!(v.files_verified, 3);
    out
}

fn problems(dir: &Path) -> Vec<Problem> {
    verify(dir).unwrap().problems
}

#[test]
fn a_published_bundle_verifies_and_rederives_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bundle(tmp.path(), "a", 2, "run-a");
    let v = verify(&b).unwrap();
    assert!(v.is_valid(), "{:?}", v.problems);
    assert_eq!(v.run.as_ref().unwrap().run_id, "run-a");
    let manifest = v.manifest.unwrap();
    let paths: Vec<&str> = manifest.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, [FIGURES_FILE, "summary.json", TRACE_FILE]);
    let (_, again) = derive(&b.join(TRACE_FILE));
    assert_eq!(semantic_problems(&b, &manifest, &again), vec![]);
    // no staging directory is left beside it
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".tmp-")), "{names:?}");
    // a second publish into the same place is refused
    let t = tmp.path().join("a.jsonl");
    let (run, derived) = derive(&t);
    assert!(publish(&t, &run, &derived, &b).is_err());
}

#[test]
fn a_tampered_byte_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bundle(tmp.path(), "a", 2, "run-a");
    let path = b.join(TRACE_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let p = problems(&b);
    assert!(
        matches!(p.as_slice(), [Problem::DigestMismatch { path, .. }] if path == TRACE_FILE),
        "{p:?}"
    );
    assert!(p[0].to_string().starts_with("trace.jsonl: sha256 "));
}

#[test]
fn a_missing_and_an_extra_file_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bundle(tmp.path(), "a", 2, "run-a");
    std::fs::remove_file(b.join("summary.json")).unwrap();
    std::fs::create_dir(b.join("more")).unwrap();
    std::fs::write(b.join("more/notes.txt"), "x").unwrap();
    let p = problems(&b);
    assert_eq!(
        p,
        vec![
            Problem::Extra {
                path: "more/notes.txt".into()
            },
            Problem::Missing {
                path: "summary.json".into()
            }
        ]
    );
    assert_eq!(
        p[1].to_string(),
        "summary.json: listed in the manifest but missing"
    );
}

#[test]
fn a_renamed_run_is_a_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bundle(tmp.path(), "a", 2, "run-a");
    let path = b.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"run-a\"", "\"run-b\"")).unwrap();
    let p = problems(&b);
    assert!(
        matches!(p.as_slice(), [Problem::IdentityMismatch { field: "run_id", manifest, trace }] if manifest == "run-b" && trace == "run-a"),
        "{p:?}"
    );
}

#[test]
fn an_unsafe_path_or_a_link_in_the_bundle_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bundle(tmp.path(), "a", 2, "run-a");
    let path = b.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"summary.json\"", "\"../summary.json\""),
    )
    .unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc/hostname", b.join("link")).unwrap();
    let p = problems(&b);
    assert!(
        p.iter()
            .any(|x| matches!(x, Problem::UnsafePath { path, .. } if path == "../summary.json")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|x| matches!(x, Problem::Extra { path } if path == "summary.json")),
        "{p:?}"
    );
    #[cfg(unix)]
    assert!(
        p.iter().any(
            |x| matches!(x, Problem::NotRegular { path, what: "symbolic link" } if path == "link")
        ),
        "{p:?}"
    );
}

#[test]
fn a_changed_derived_output_fails_semantic_verification() {
    let tmp = tempfile::tempdir().unwrap();
    let b = bundle(tmp.path(), "a", 2, "run-a");
    let manifest = verify(&b).unwrap().manifest.unwrap();
    let (_, mut again) = derive(&b.join(TRACE_FILE));
    again[1].bytes.push(b' ');
    assert_eq!(
        semantic_problems(&b, &manifest, &again),
        vec![Problem::Rederived {
            path: "summary.json".into()
        }]
    );
    again.pop();
    assert_eq!(
        semantic_problems(&b, &manifest, &again),
        vec![Problem::NotRederived {
            path: "summary.json".into()
        }]
    );
}

#[test]
fn a_series_of_three_captures_is_sorted_by_step() {
    let tmp = tempfile::tempdir().unwrap();
    let b4 = bundle(tmp.path(), "s4", 4, "run-4");
    let b2 = bundle(tmp.path(), "s2", 2, "run-2");
    let b3 = bundle(tmp.path(), "s3", 3, "run-3");
    let series = build_series(&[b4, b2.clone(), b3]).unwrap();
    let steps: Vec<u64> = series.steps.iter().map(|s| s.step).collect();
    assert_eq!(steps, [2, 3, 4]);
    assert_eq!(series.steps[0].bundle, b2);
    assert_eq!(series.steps[0].run_id, "run-2");
    for s in &series.steps {
        assert!(s.figures.logical_peak_bytes.is_some_and(|b| b > 0));
        assert_eq!(s.figures.capture_step, Some(s.step));
    }
}

#[test]
fn a_series_refuses_repeats_other_runs_and_unverified_bundles() {
    let tmp = tempfile::tempdir().unwrap();
    let a = bundle(tmp.path(), "a", 2, "run-a");
    let b = bundle(tmp.path(), "b", 2, "run-b");
    let err = build_series(&[a.clone(), b]).unwrap_err();
    assert!(
        matches!(&err, SeriesError::RepeatedStep { step: 2, .. }),
        "{err}"
    );
    // another entrypoint is another run
    let t = trace(tmp.path(), "c", 3, "run-c");
    let text = std::fs::read_to_string(&t).unwrap();
    std::fs::write(
        &t,
        text.replacen("\"entrypoint\":\"", "\"entrypoint\":\"other::", 1),
    )
    .unwrap();
    let (run, derived) = derive(&t);
    let c = tmp.path().join("c.bundle");
    publish(&t, &run, &derived, &c).unwrap();
    let err = build_series(&[a.clone(), c]).unwrap_err();
    assert!(
        matches!(
            &err,
            SeriesError::DifferentRuns {
                field: "entrypoint",
                ..
            }
        ),
        "{err}"
    );
    let d = bundle(tmp.path(), "d", 4, "run-d");
    std::fs::write(d.join(FIGURES_FILE), "{}").unwrap();
    let err = build_series(&[a, d]).unwrap_err();
    assert!(matches!(&err, SeriesError::Unverified { .. }), "{err}");
    assert!(err.to_string().contains("figures.json: "), "{err}");
    assert!(matches!(build_series(&[]), Err(SeriesError::Empty)));
}
