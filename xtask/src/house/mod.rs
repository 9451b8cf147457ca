//! `cargo xtask house [--check]`: the house rules that are kept by a tool, not by hand.
//!
//! Over every workspace package's `src/` (tests and benches are not library code; `#[test]` and
//! `#[cfg(test)]` items inside `src/` are left out of the function and import counts, not of
//! the file's length):
//! - a file is at most [`MAX_FILE_LINES`] lines, unless one of its first 40 lines says
//!   `house: long file` with the reason (a data table, generated code);
//! - a function, from its `fn` keyword to its closing brace, is at most [`MAX_FN_LINES`] lines,
//!   unless the comments and attributes just above it say `house: long fn` with the reason;
//! - no two files of one crate import each other in a circle. An import is a path in the file's
//!   code that names another file's module: `use crate::a::b`, `super::x`, `child::y`. A `pub
//!   use` is a facade, not a dependency, and does not count.
//!
//! Without `--check` it prints the table and succeeds; with it, it fails when a file or function
//! is over and on a circle in a crate not on [`KNOWN_CIRCLES`] (a ratchet that only shrinks).

mod graph;
mod scan;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The most lines a library file may have without a stated reason.
pub const MAX_FILE_LINES: usize = 800;
/// The most lines a function may have without a stated reason.
pub const MAX_FN_LINES: usize = 150;

/// Crates whose files still import each other in a circle (issue #44: the analysis crates'
/// parent ↔ child modules). A ratchet: `--check` fails on a circle in any other crate, and on a
/// crate listed here that has none left (take it off the list). The capture side (trace-probe,
/// trace-alloc, trace-sampler, trace-wire, trace-schema) is never listed.
pub const KNOWN_CIRCLES: &[&str] = &[];

/// What the walk found that breaks a rule.
#[derive(Debug, Default)]
pub struct Findings {
    /// `(lines, path)` of files over the limit without a reason.
    pub long_files: Vec<(usize, String)>,
    /// `(lines, path:line, name)` of functions over the limit without a reason.
    pub long_fns: Vec<(usize, String, String)>,
    /// `(crate, files)` of each circle of imports.
    pub circles: Vec<(String, Vec<String>)>,
    /// Files and functions over a limit with a stated reason (counted, not failed).
    pub excused: usize,
}

impl Findings {
    /// Circles in crates not on [`KNOWN_CIRCLES`], and listed crates without one.
    pub fn ratchet_breaks(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .circles
            .iter()
            .filter(|(krate, _)| !KNOWN_CIRCLES.contains(&krate.as_str()))
            .map(|(krate, files)| format!("{krate}: {}", files.join(" ↔ ")))
            .collect();
        for known in KNOWN_CIRCLES {
            if !self.circles.iter().any(|(krate, _)| krate == known) {
                out.push(format!(
                    "{known} has no circle left: take it off KNOWN_CIRCLES"
                ));
            }
        }
        out
    }

    /// Whether nothing breaks a rule (circles as [`Findings::ratchet_breaks`] counts them).
    pub fn is_clean(&self) -> bool {
        self.long_files.is_empty() && self.long_fns.is_empty() && self.ratchet_breaks().is_empty()
    }
}

/// Runs the task over the workspace at `root`.
///
/// # Errors
/// When a package's sources cannot be read or parsed, or, with `check`, when a rule is broken.
pub fn run(root: &Path, check: bool) -> Result<()> {
    let findings = walk(root)?;
    print!("{}", render(&findings));
    if check && !findings.is_clean() {
        bail!("the house rules are broken (see above)");
    }
    Ok(())
}

/// Reads every workspace package's `src/`.
///
/// # Errors
/// When a file cannot be read or is not valid Rust.
pub fn walk(root: &Path) -> Result<Findings> {
    let mut findings = Findings::default();
    for package in crate::workspace_map::packages(root)? {
        let src = root.join(&package.path).join("src");
        if src.is_dir() {
            check_crate(root, &package.name, &src, &mut findings)?;
        }
    }
    findings.long_files.sort_by(|a, b| b.cmp(a));
    findings.long_fns.sort_by(|a, b| b.cmp(a));
    Ok(findings)
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let path = e.path();
        if path.is_dir() {
            rs_files(&path, out)?;
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module path of a file under `src` (`a/mod.rs` and `a.rs` are `a`; `lib.rs` and
/// `main.rs` the root), or `None` for a file that is a crate root of its own (`src/bin/`).
fn module_of(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.first().map(String::as_str) == Some("bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?.to_string();
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem);
    }
    Some(parts)
}

fn excused_above(lines: &[&str], fn_line: usize) -> bool {
    let mut i = fn_line.saturating_sub(1);
    while i > 0 {
        i -= 1;
        let t = lines[i].trim_start();
        if t.contains("house: long fn") {
            return true;
        }
        if !(t.starts_with("//") || t.starts_with("#[") || t.starts_with("#!") || t.is_empty()) {
            return false;
        }
    }
    false
}

fn check_crate(root: &Path, name: &str, src: &Path, findings: &mut Findings) -> Result<()> {
    let mut files = Vec::new();
    rs_files(src, &mut files)?;
    let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .filter_map(|(i, f)| module_of(f.strip_prefix(src).ok()?).map(|m| (m, i)))
        .collect();
    let mut edges = vec![Vec::new(); files.len()];
    for (i, file) in files.iter().enumerate() {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > MAX_FILE_LINES {
            if lines
                .iter()
                .take(40)
                .any(|l| l.contains("house: long file"))
            {
                findings.excused += 1;
            } else {
                findings.long_files.push((lines.len(), rel(file)));
            }
        }
        let Some(module) = file.strip_prefix(src).ok().and_then(module_of) else {
            continue;
        };
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(&module))
            .filter_map(|m| m.last().cloned())
            .collect();
        let facts = scan::scan(&text, &module, &children)
            .map_err(|e| anyhow::anyhow!("{}: {e}", rel(file)))?;
        for f in &facts.fns {
            if f.lines() > MAX_FN_LINES {
                if excused_above(&lines, f.start_line) {
                    findings.excused += 1;
                } else {
                    let at = format!("{}:{}", rel(file), f.start_line);
                    findings.long_fns.push((f.lines(), at, f.name.clone()));
                }
            }
        }
        let mut targets = BTreeSet::new();
        for path in &facts.paths {
            let target = (0..=path.len())
                .rev()
                .find_map(|k| modules.get(&path[..k]).copied());
            if let Some(t) = target.filter(|&t| t != i) {
                targets.insert(t);
            }
        }
        edges[i] = targets.into_iter().collect();
    }
    for circle in graph::circles(&edges) {
        let names = circle
            .iter()
            .map(|&i| rel(files[i].strip_prefix(src).unwrap_or(&files[i])))
            .collect();
        findings.circles.push((name.to_string(), names));
    }
    Ok(())
}

/// The table `run` prints.
pub fn render(f: &Findings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "files over {MAX_FILE_LINES} lines: {}",
        f.long_files.len()
    );
    for (n, path) in &f.long_files {
        let _ = writeln!(out, "  {n:>5}  {path}");
    }
    let _ = writeln!(
        out,
        "functions over {MAX_FN_LINES} lines: {}",
        f.long_fns.len()
    );
    for (n, at, name) in &f.long_fns {
        let _ = writeln!(out, "  {n:>5}  {at}  {name}");
    }
    let _ = writeln!(out, "circles of imports between files: {}", f.circles.len());
    for (krate, files) in &f.circles {
        let _ = writeln!(out, "  {krate}: {}", files.join(" ↔ "));
    }
    let _ = writeln!(out, "over a limit with a stated reason: {}", f.excused);
    let breaks = f.ratchet_breaks();
    if !KNOWN_CIRCLES.is_empty() {
        let _ = writeln!(
            out,
            "circles known and not yet failed (KNOWN_CIRCLES): {}",
            KNOWN_CIRCLES.join(", ")
        );
    }
    if !breaks.is_empty() {
        let _ = writeln!(out, "circles that fail --check: {}", breaks.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workspace itself keeps the house rules (`cargo xtask house` lists what breaks them).
    #[test]
    fn the_workspace_keeps_the_house_rules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask lives in the workspace root");
        let findings = walk(root).unwrap();
        assert!(findings.is_clean(), "{}", render(&findings));
    }

    #[test]
    fn module_paths_follow_rusts_file_rules() {
        let m = |s: &str| module_of(Path::new(s));
        assert_eq!(m("lib.rs"), Some(vec![]));
        assert_eq!(m("a/mod.rs"), Some(vec!["a".to_string()]));
        assert_eq!(m("a/b.rs"), Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(m("bin/tool.rs"), None);
    }

    #[test]
    fn a_reason_above_a_long_function_excuses_it_and_code_above_does_not() {
        let lines = [
            "let x = 1;",
            "// house: long fn: a data table",
            "/// doc",
            "fn f() {",
        ];
        assert!(excused_above(&lines, 4));
        let lines = [
            "// house: long fn: for g",
            "fn g() {}",
            "/// doc",
            "fn f() {",
        ];
        assert!(!excused_above(&lines, 4));
    }

    #[test]
    fn a_circle_of_two_files_is_found_and_a_facade_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("lib.rs"),
            "mod a;\nmod b;\nmod c;\npub use a::A;\n",
        )
        .unwrap();
        std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
        std::fs::write(src.join("b.rs"), "pub struct B(super::a::A);\n").unwrap();
        std::fs::write(src.join("c.rs"), "use crate::a::A;\n").unwrap();
        let mut f = Findings::default();
        check_crate(dir.path(), "toy", &src, &mut f).unwrap();
        assert_eq!(
            f.circles,
            vec![("toy".to_string(), vec!["a.rs".into(), "b.rs".into()])]
        );
    }
}
