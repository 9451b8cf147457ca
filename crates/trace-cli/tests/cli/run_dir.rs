//! A run directory read back as its run wrote it: `series RUN_DIR` leaves out (naming each, in
//! the text and in `--json`) the `step-*` entries that are not the run's bundles — a bundle of
//! another run copied in, a symbolic link — and says which captures `.captures` holds that were
//! never bundled; a `run.json` that records a step twice is refused naming both records;
//! `series b1 b2` refuses bundles of different runs naming both; a failed Parquet export leaves
//! nothing behind and removes nothing that was there before.

use std::path::{Path, PathBuf};

use crate::util::{assert_stderr_has, run, s, SMALL_TRACE};

/// `demo --every 2 --steps <steps>` into `dir/name` (captures 2, 4, …, all kept).
pub(crate) fn demo_run(dir: &Path, name: &str, steps: &str) -> PathBuf {
    let out = dir.join(name);
    let r = run(&[
        "demo",
        "--every",
        "2",
        "--steps",
        steps,
        "--model",
        "mlp",
        "--out",
        s(&out),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    out
}

pub(crate) fn story(dir: &Path) -> (String, serde_json::Value) {
    let text = run(&["series", s(dir)]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    let json = run(&["series", s(dir), "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    (text.stdout, serde_json::from_str(&json.stdout).unwrap())
}

pub(crate) fn steps(v: &serde_json::Value) -> Vec<u64> {
    v["captures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["step"].as_u64().unwrap())
        .collect()
}

pub(crate) fn left_out(v: &serde_json::Value) -> Vec<(String, String)> {
    v["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_string(),
                l["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A bundle of another run put in place of one of the run's bundles, and a symbolic link to a
/// bundle of another run, are left out of the story (named, with why, in the text and in
/// `--json`): the captures are the run's own, and the replaced step is said once — left out,
/// not also missing.
#[test]
fn bundles_the_run_did_not_write_are_left_out_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "6");
    let theirs = demo_run(dir.path(), "theirs", "8");
    // step 6 replaced by the other run's capture of step 6; step 8 a link to theirs
    std::fs::remove_dir_all(ours.join("step-00000006")).unwrap();
    copy_dir(&theirs.join("step-00000006"), &ours.join("step-00000006"));
    #[cfg(unix)]
    std::os::unix::fs::symlink(theirs.join("step-00000008"), ours.join("step-00000008")).unwrap();

    let (text, v) = story(&ours);
    assert_eq!(steps(&v), [2, 4], "{text}");
    let left = left_out(&v);
    let names: Vec<&str> = left.iter().map(|(n, _)| n.as_str()).collect();
    #[cfg(unix)]
    assert_eq!(names, ["step-00000006", "step-00000008"], "{left:?}");
    assert!(
        left[0].1.contains("a bundle of another run: run id"),
        "{left:?}"
    );
    #[cfg(unix)]
    assert!(left[1].1.contains("a symbolic link"), "{left:?}");
    assert!(
        text.contains("left out     step-00000006: a bundle of another run"),
        "{text}"
    );
    #[cfg(unix)]
    assert!(
        text.contains("left out     step-00000008: a symbolic link"),
        "{text}"
    );
    // the run's own capture of step 6 (and of 8) is not in the directory: said once, where
    // the entry in its place is left out, not a second time as missing
    assert!(
        left[0]
            .1
            .ends_with("; the run's own capture of step 6 is not in the directory"),
        "{left:?}"
    );
    assert_eq!(v["not_kept"], serde_json::json!([]), "{text}");
    assert!(!text.contains("missing"), "{text}");
    assert!(!text.contains("not kept"), "{text}");
    assert_eq!(v["unbundled_captures"], serde_json::json!([]));
    assert!(!text.contains("unbundled"), "{text}");

    // the Parquet export of the run leaves them out too, with a warning naming each
    let tables = dir.path().join("tables");
    let r = export(&[&ours], &tables);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_stderr_has(&r, "step-00000006: not exported: a bundle of another run");
    let mut exported: Vec<String> = std::fs::read_dir(tables.join("runs").join("run=ours"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    exported.sort();
    assert_eq!(exported, ["step=2", "step=4"]);
}

/// Traces in `.captures` (a run killed before bundling them) are named: how many, which files.
#[test]
fn captures_never_bundled_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    let captures = ours.join(".captures");
    std::fs::create_dir_all(&captures).unwrap();
    // what kill -9 leaves: the trace of the capture being written or bundled
    std::fs::copy(
        ours.join("step-00000004").join("trace.jsonl"),
        captures.join("step-00000006.jsonl"),
    )
    .unwrap();
    std::fs::write(captures.join("step-00000008.jsonl"), "").unwrap();
    let (text, v) = story(&ours);
    assert_eq!(steps(&v), [2, 4], "{text}");
    assert!(
        text.contains(
            "unbundled    2 captures in .captures were never bundled (the process ended before \
             bundling them, or it is still running): step-00000006.jsonl ("
        ),
        "{text}"
    );
    assert!(text.contains("step-00000008.jsonl (0 B)"), "{text}");
    let u = v["unbundled_captures"].as_array().unwrap();
    assert_eq!(u.len(), 2, "{v}");
    assert_eq!(u[0]["file"], "step-00000006.jsonl");
    assert_eq!(u[0]["step"], 6);
    assert!(u[0]["bytes"].as_u64().is_some_and(|b| b > 0), "{v}");
    assert_eq!(u[1]["bytes"], 0);
}

/// A run directory whose `run.json` is gone is still read (its bundles verify themselves), with
/// a warning that the schedule and the captures not kept are unknown.
#[test]
fn a_run_directory_without_its_log_is_read_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    let (_, with_log) = story(&ours);
    assert!(with_log["schedule"].is_object(), "{with_log}");
    std::fs::remove_file(ours.join("run.json")).unwrap();
    let r = run(&["series", s(&ours)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_stderr_has(&r, "has no run.json (the run log)");
    let (_, v) = story(&ours);
    assert_eq!(steps(&v), [2, 4], "{v}");
    assert!(v.get("schedule").is_none(), "{v}");
}

/// A run log that records one step twice (kept, then failed) is refused naming the file, the
/// step and both records: the step has no one meaning.
#[test]
fn a_run_log_recording_a_step_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    let log_path = ours.join("run.json");
    let mut log: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&log_path).unwrap()).unwrap();
    let captures = log["captures"].as_array_mut().unwrap();
    captures.push(serde_json::json!({"step": 4, "state": "failed", "reason": "bundling failed"}));
    std::fs::write(&log_path, serde_json::to_vec_pretty(&log).unwrap()).unwrap();
    for json in [false, true] {
        let mut args = vec!["series", s(&ours)];
        if json {
            args.push("--json");
        }
        let r = run(&args);
        assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
        assert_stderr_has(&r, "run.json");
        assert_stderr_has(
            &r,
            "captures[1] (kept) and captures[2] (failed) both record step 4",
        );
    }
}

/// The small trace as another capture: `meta` edited by `edit`, bundled into `dir/name`.
fn small_bundle(dir: &Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let (meta, rest) = SMALL_TRACE.split_once('\n').unwrap();
    let mut meta: serde_json::Value = serde_json::from_str(meta).unwrap();
    edit(&mut meta);
    let trace = dir.join(format!("{name}.jsonl"));
    std::fs::write(&trace, format!("{meta}\n{rest}")).unwrap();
    let out = dir.join(name);
    let r = run(&["bundle", s(&trace), "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    out
}

/// `series b1 b2` refuses two bundles of different runs (entrypoint, phase, device, rank or
/// world size) naming both and the field; an undeclared value is not a value spelled "none".
#[test]
fn bundles_of_different_runs_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set =
        |k: &'static str, v: serde_json::Value| move |m: &mut serde_json::Value| m[k] = v.clone();
    let undeclared = |m: &mut serde_json::Value| {
        m.as_object_mut().unwrap().remove("device");
    };
    let first = small_bundle(d, "first", |_| {});
    let no_device = small_bundle(d, "no-device", undeclared);
    // (the first bundle, the field that differs, the second bundle's edit, what the text says
    // of the first's value)
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&PathBuf, &str, Edit, &str)> = vec![
        (
            &first,
            "entrypoint",
            Box::new(set("entrypoint", "other::train_step".into())),
            "\"tiny::train_step\"",
        ),
        (
            &first,
            "phase",
            Box::new(set("phase", "infer".into())),
            "\"train\"",
        ),
        (
            &first,
            "device",
            Box::new(set("device", "cuda:0".into())),
            "\"cpu\"",
        ),
        (
            &first,
            "rank",
            Box::new(set("rank", 1.into())),
            "not declared",
        ),
        (
            &first,
            "world_size",
            Box::new(set("world_size", 4.into())),
            "not declared",
        ),
        // a device labelled "none" is not an undeclared device
        (
            &no_device,
            "device",
            Box::new(set("device", "none".into())),
            "not declared",
        ),
    ];
    for (i, (a, field, edit, says)) in cases.iter().enumerate() {
        let b = small_bundle(d, &format!("other{i}"), |m| {
            m["capture_step"] = 3.into();
            m["run_id"] = format!("run-other-{i}").into();
            if *a == &no_device {
                undeclared(m);
            }
            edit(m);
        });
        let r = run(&["series", s(a), s(&b)]);
        assert_eq!(r.code, 1, "{field}: {}{}", r.stdout, r.stderr);
        let (a, b) = (a.display(), b.display());
        assert!(
            r.stdout.contains(&format!(
                "{a} and {b} are different runs: {field} is {says} in {a} and "
            )),
            "{field}: {}",
            r.stdout
        );
        assert!(
            r.stdout.trim_end().ends_with(&format!(" in {b}")),
            "{}",
            r.stdout
        );
    }
    // --json: the code, the field, both bundles; an undeclared value is null, not a string
    let other = d.join("other3");
    let r = run(&["series", s(&first), s(&other), "--json"]);
    assert_eq!(r.code, 1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let refused = &v["refused"];
    assert_eq!(refused["code"], "different_runs", "{v}");
    assert_eq!(refused["field"], "rank", "{v}");
    assert_eq!(refused["first_bundle"], s(&first));
    assert_eq!(refused["second_bundle"], s(&other));
    assert_eq!(refused["first"], serde_json::Value::Null, "{v}");
    assert_eq!(refused["second"], "1", "{v}");
}

/// Every path under `dir` (relative) with each file's bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if p.is_dir() {
                out.push((rel, None));
                stack.push(p);
            } else {
                out.push((rel, Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

fn export(inputs: &[&Path], out: &Path) -> crate::util::Run {
    let mut args = vec!["export", "--format", "parquet"];
    args.extend(inputs.iter().map(|p| s(p)));
    args.extend(["-o", s(out)]);
    run(&args)
}

/// A Parquet export of run directories that fails part-way (a bundle that does not verify, a
/// partition exported already) leaves no partition behind, and removes nothing that was there.
#[test]
fn a_failed_parquet_export_of_run_directories_leaves_the_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ours = demo_run(d, "ours", "4");
    let theirs = demo_run(d, "theirs", "4");
    let broken = d.join("broken");
    copy_dir(&theirs, &broken);
    std::fs::write(broken.join("step-00000004").join("figures.json"), "{}").unwrap();

    // one input does not verify: nothing is written, not even the output directory
    let fresh = d.join("out").join("fresh");
    let r = export(&[&ours, &broken], &fresh);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_stderr_has(&r, "fails verification");
    assert!(!d.join("out").exists(), "{:?}", tree(d));

    // a partition exported already: the other run's partitions are not left beside it, and
    // what the output held stays as it was
    let tables = d.join("tables");
    let r = export(&[&theirs], &tables);
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::write(tables.join("notes.txt"), "mine").unwrap();
    let before = tree(&tables);
    let r = export(&[&ours, &theirs], &tables);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_stderr_has(&r, "exists already");
    assert_eq!(tree(&tables), before);
    let beside: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert_eq!(beside, Vec::<String>::new());

    // and a whole export still lands
    let r = export(&[&ours], &tables);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(tables
        .join("runs")
        .join("run=ours")
        .join("step=4")
        .join("part-0.parquet")
        .is_file());
}

/// A Parquet export of traces with one unreadable input writes nothing and keeps the tables an
/// earlier export left.
#[test]
fn a_failed_parquet_export_of_traces_leaves_the_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = d.join("good.jsonl");
    std::fs::write(&good, SMALL_TRACE).unwrap();
    let bad = d.join("bad.jsonl");
    std::fs::write(&bad, "not a trace\n").unwrap();
    let fresh = d.join("fresh");
    let r = export(&[&good, &bad], &fresh);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_stderr_has(&r, "bad.jsonl");
    assert!(!fresh.exists(), "{:?}", tree(&fresh));

    let tables = d.join("tables");
    let r = export(&[&good], &tables);
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::write(tables.join("notes.txt"), "mine").unwrap();
    let before = tree(&tables);
    let r = export(&[&good, &bad], &tables);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_eq!(tree(&tables), before);
    assert_eq!(
        tree(d)
            .iter()
            .filter(|(p, _)| p.to_string_lossy().starts_with('.'))
            .count(),
        0
    );
}

/// A run directory's name becomes its `run` partition made path-safe, and the export says so;
/// two directories whose names give one partition are refused naming both.
#[test]
fn run_partition_names_are_explained_and_a_clash_names_both_directories() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let first = demo_run(d, "run a=1", "4");
    let r = export(&[&first], &d.join("tables"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_stderr_has(
        &r,
        "run a=1 is the partition run=run_a_1 (its name made path-safe",
    );
    assert!(d.join("tables/runs/run=run_a_1").is_dir());
    let second = d.join("run_a_1");
    copy_dir(&first, &second);
    let r = export(&[&first, &second], &d.join("clash"));
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_stderr_has(
        &r,
        &format!(
            "the run directories {} and {} both give the partition run=run_a_1",
            first.display(),
            second.display()
        ),
    );
    assert!(!d.join("clash").exists(), "nothing is left behind");

    // a name of 240 characters: the note elides it (it ran past 500 characters)
    let long = demo_run(d, &format!("a={}", "Q".repeat(238)), "2");
    let r = export(&[&long], &d.join("long"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let note = r
        .stderr
        .lines()
        .find(|l| l.contains("note: the run directory"))
        .unwrap_or_else(|| panic!("no note: {}", r.stderr));
    assert!(note.contains("/a=QQQ"), "{note}");
    assert!(note.contains("Q…Q"), "{note}");
    assert!(note.contains("QQ is the partition run=a_QQQ"), "{note}");
    assert!(note.contains("(its name made path-safe"), "{note}");
    assert!(
        note.chars().count() < 500,
        "{} characters: {note}",
        note.len()
    );
}
