//! A run directory whose `run.json` or `.captures` is not what its run wrote: names read from
//! the log are elided and escaped as every other name is (`\x1b`, never Rust's `\u{1b}`), and
//! a message about them stays a bounded line.

use std::path::Path;

use crate::run_dir::demo_run;
use crate::util::{assert_stderr_has, run, s};

/// `run.json` of `dir`, edited by `edit` and written back.
fn edit_log(dir: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let path = dir.join("run.json");
    let mut log: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut log);
    std::fs::write(&path, serde_json::to_vec_pretty(&log).unwrap()).unwrap();
}

/// An entrypoint of 5,000 characters with a terminal escape in `run.json`: every bundle is left
/// out as another run's, and the error naming them quotes the name elided and escaped the way
/// `summary` does (a new user's trial saw one error line of 12,468 characters).
#[test]
fn names_from_run_json_are_elided_and_escaped_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    let hostile = format!("<b>\u{1b}[31m{}", "Q".repeat(5_000));
    edit_log(&ours, |log| log["entrypoint"] = hostile.clone().into());
    let r = run(&["series", s(&ours)]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_stderr_has(&r, "holds no bundle of its run");
    assert_stderr_has(&r, r#"the run's is "<b>\x1b[31mQQQ"#);
    assert!(!r.stderr.contains("\\u{1b}"), "{}", r.stderr);
    assert!(!r.stderr.contains('\u{1b}'), "{}", r.stderr);
    assert_stderr_has(&r, "Q…Q");
    // two bundles left out, each quoting the name in at most NAME_COLUMNS columns
    let longest = r.stderr.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(
        longest < 800,
        "a line of {longest} characters: {}",
        r.stderr
    );
}

/// A `.captures` that is a symbolic link is not read through (the run writes its own in place),
/// and one that is a regular file is named as one, not as the raw `Not a directory (os error
/// 20)`: both refuse the story naming the path and what it is.
#[test]
fn a_captures_entry_that_is_not_the_runs_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    let captures = ours.join(".captures");
    if captures.exists() {
        std::fs::remove_dir_all(&captures).unwrap();
    }
    #[cfg(unix)]
    {
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("step-00000006.jsonl"), "x").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &captures).unwrap();
        let r = run(&["series", s(&ours)]);
        assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
        assert_stderr_has(
            &r,
            ".captures: a symbolic link, not the run's directory of captures",
        );
        assert!(!r.stdout.contains("step-00000006.jsonl"), "{}", r.stdout);
        std::fs::remove_file(&captures).unwrap();
    }
    std::fs::write(&captures, "not a directory").unwrap();
    let r = run(&["series", s(&ours)]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_stderr_has(
        &r,
        ".captures: a regular file, not the run's directory of captures",
    );
    assert!(!r.stderr.contains("os error"), "{}", r.stderr);
}

/// Figures of 2^64 − 1 in `run.json` (a step, a byte count, a duration, the schedule's `every`)
/// are no measurement: the log is refused naming the field, not read as real figures (a new
/// user's trial saw "every 18446744073709551615 steps" and such peaks accepted silently).
#[test]
fn impossible_figures_in_run_json_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    let original = std::fs::read(ours.join("run.json")).unwrap();
    for (field, edit) in [
        (
            "captures[1].heap_end_bytes",
            &(|log: &mut serde_json::Value| log["captures"][1]["heap_end_bytes"] = u64::MAX.into())
                as &dyn Fn(&mut serde_json::Value),
        ),
        ("captures[0].step", &|log| {
            log["captures"][0]["step"] = u64::MAX.into()
        }),
        ("schedule.every", &|log| {
            log["schedule"]["every"] = u64::MAX.into()
        }),
    ] {
        std::fs::write(ours.join("run.json"), &original).unwrap();
        edit_log(&ours, edit);
        let r = run(&["series", s(&ours)]);
        assert_eq!(r.code, 2, "{field}: {}{}", r.stdout, r.stderr);
        assert_stderr_has(
            &r,
            &format!("run.json: {field} is 18446744073709551615: past 2^63 − 1"),
        );
    }
}

/// A value of 10,000 characters where `run.json` wants a capture's state or a step: serde's
/// error quotes the value whole, and the refusal (of `series` and of `report`) quoted it on one
/// line of 10,000 characters and more (a new user's trial); each long word is elided now.
#[test]
fn a_long_bad_value_in_run_json_is_elided_in_the_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    let original = std::fs::read(ours.join("run.json")).unwrap();
    let long = "S".repeat(10_000);
    for (what, field) in [("unknown variant", "state"), ("invalid type", "step")] {
        std::fs::write(ours.join("run.json"), &original).unwrap();
        edit_log(&ours, |log| log["captures"][0][field] = long.clone().into());
        for command in ["series", "report"] {
            let r = run(&[command, s(&ours)]);
            assert_eq!(r.code, 2, "{command} {field}: {}{}", r.stdout, r.stderr);
            assert_stderr_has(&r, "not a run log: ");
            assert_stderr_has(&r, what);
            assert_stderr_has(&r, "S…S");
            let longest = r.stderr.lines().map(|l| l.chars().count()).max().unwrap();
            assert!(
                longest < 600,
                "{command} {field}: a line of {longest} characters"
            );
        }
    }
}

/// A run directory whose 32 `step-*` entries are all left out (two bundles of another run, 30
/// entries that are no bundle): the refusal names the first three, bounded, and counts the rest
/// (a new user's trial saw one line of 5,144 characters naming every entry).
#[test]
fn a_run_directory_without_its_bundles_names_a_few_left_out_entries() {
    let dir = tempfile::tempdir().unwrap();
    let ours = demo_run(dir.path(), "ours", "4");
    edit_log(&ours, |log| log["entrypoint"] = "another".into());
    for i in 0..30 {
        let name = format!("step-{}{}", "0".repeat(200), 100 + i);
        std::fs::write(ours.join(name), "not a bundle").unwrap();
    }
    let r = run(&["series", s(&ours)]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert_stderr_has(&r, "holds no bundle of its run; left out: ");
    assert_stderr_has(&r, "; and 29 more");
    assert_stderr_has(&r, "step-0000");
    assert_stderr_has(&r, "0…0");
    let longest = r.stderr.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(
        longest < 800,
        "a line of {longest} characters: {}",
        r.stderr
    );
}
