//! `cargo xtask workspace-map [--check]`: the README's workspace map, drawn from the Cargo.toml
//! files (`cargo metadata --no-deps`) instead of kept by hand, and the layering rules checked on
//! the same graph.
//!
//! The map is the block between `<!-- workspace-map:start -->` and `<!-- workspace-map:end -->`
//! in README.md: one row per workspace package in layer order (a package's layer is one above
//! its highest workspace dependency), with its path, the workspace packages it depends on
//! (normal dependencies; dev-only ones are not layers), its `description` and its README when it
//! has one. `--check` fails when the block differs from what the manifests say.
//!
//! Rules checked on every run (and by the tests below, so `cargo test --workspace` keeps them):
//! - only the capture side touches Candle: no package outside [`CANDLE_SIDE`] depends on a
//!   `candle-*` crate, directly or through a workspace package;
//! - every package has a `description`, and every library crate under `crates/` a README.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// Packages allowed to depend on Candle: the probe, the real training loops, the binary (for
/// `demo` and `device-check`) and the project tasks.
pub const CANDLE_SIDE: &[&str] = &["trace-probe", "candle-graph-examples", "trace-cli", "xtask"];

const START: &str = "<!-- workspace-map:start -->";
const END: &str = "<!-- workspace-map:end -->";

/// One workspace package, as its manifest says.
#[derive(Debug, Clone)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// Folder relative to the workspace root (`crates/trace-ops`).
    pub path: String,
    /// The manifest's `description` (empty when missing).
    pub description: String,
    /// Workspace packages it depends on (normal and build dependencies).
    pub uses: BTreeSet<String>,
    /// Whether it depends on a `candle-*` crate directly.
    pub candle: bool,
    /// Whether a README.md sits beside its manifest.
    pub readme: bool,
}

/// Reads the workspace's packages with `cargo metadata --no-deps` run in `root`.
pub fn packages(root: &Path) -> Result<Vec<Package>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout).context("reading cargo metadata")?;
    let root_dir = PathBuf::from(meta["workspace_root"].as_str().unwrap_or("."));
    let list = meta["packages"].as_array().cloned().unwrap_or_default();
    let names: BTreeSet<String> = list
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    let mut packages = Vec::new();
    for p in &list {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().unwrap_or(Path::new("."));
        let path = dir
            .strip_prefix(&root_dir)
            .unwrap_or(dir)
            .to_string_lossy()
            .replace('\\', "/");
        let mut uses = BTreeSet::new();
        let mut candle = false;
        for d in p["dependencies"].as_array().into_iter().flatten() {
            if d["kind"].as_str() == Some("dev") {
                continue;
            }
            let dep = d["name"].as_str().unwrap_or_default();
            if names.contains(dep) {
                uses.insert(dep.to_string());
            }
            candle |= dep.starts_with("candle-") && !names.contains(dep);
        }
        packages.push(Package {
            name,
            path,
            description: p["description"].as_str().unwrap_or_default().to_string(),
            uses,
            candle,
            readme: dir.join("README.md").is_file(),
        });
    }
    Ok(packages)
}

/// Each package's layer: 0 for one with no workspace dependency, else one above its highest.
/// Iterative (a cycle, which cargo refuses anyway, is reported instead of looping).
pub fn layers(packages: &[Package]) -> Result<BTreeMap<String, usize>> {
    let mut layer: BTreeMap<String, usize> = BTreeMap::new();
    while layer.len() < packages.len() {
        let before = layer.len();
        for p in packages {
            if layer.contains_key(&p.name) {
                continue;
            }
            let deps: Option<Vec<usize>> = p.uses.iter().map(|u| layer.get(u).copied()).collect();
            if let Some(deps) = deps {
                let l = deps.iter().max().map_or(0, |m| m + 1);
                layer.insert(p.name.clone(), l);
            }
        }
        if layer.len() == before {
            bail!("the workspace's dependencies form a cycle");
        }
    }
    Ok(layer)
}

/// Where the layering rules are broken (empty: none).
pub fn violations(packages: &[Package]) -> Vec<String> {
    let by_name: BTreeMap<&str, &Package> = packages.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut out = Vec::new();
    for p in packages {
        if p.description.trim().is_empty() {
            out.push(format!("{}: no `description` in its Cargo.toml", p.name));
        }
        if p.path.starts_with("crates/") && !p.readme {
            out.push(format!("{}: no README.md in {}", p.name, p.path));
        }
        if CANDLE_SIDE.contains(&p.name.as_str()) {
            continue;
        }
        // Depth-first over workspace dependencies with an explicit stack (no recursion).
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(p.name.as_str(), vec![p.name.as_str()])];
        let mut seen = BTreeSet::new();
        while let Some((name, chain)) = stack.pop() {
            if !seen.insert(name) {
                continue;
            }
            let Some(q) = by_name.get(name) else {
                continue;
            };
            if q.candle {
                out.push(format!(
                    "{} depends on Candle through {} (only {} may)",
                    p.name,
                    chain.join(" → "),
                    CANDLE_SIDE.join(", ")
                ));
                break;
            }
            for u in &q.uses {
                let mut next = chain.clone();
                next.push(u.as_str());
                stack.push((u.as_str(), next));
            }
        }
    }
    out
}

/// The map's Markdown (the block between the markers, markers excluded).
pub fn render(packages: &[Package]) -> Result<String> {
    let layer = layers(packages)?;
    let mut rows: Vec<&Package> = packages.iter().collect();
    rows.sort_by(|a, b| (layer[&a.name], &a.name).cmp(&(layer[&b.name], &b.name)));
    let mut s = String::from(
        "Generated from the Cargo.toml files by `cargo xtask workspace-map` (checked by \
         `cargo test -p xtask`). A package's layer is one above its highest workspace \
         dependency; dependencies point down only, and only ",
    );
    let side: Vec<String> = CANDLE_SIDE.iter().map(|c| format!("`{c}`")).collect();
    s.push_str(&side.join(", "));
    s.push_str(" may depend on Candle (marked \"(Candle)\" where they do).\n\n| layer | path | package | uses | what it is |\n|---|---|---|---|---|\n");
    for p in rows {
        let uses: Vec<String> = p.uses.iter().map(|u| format!("`{u}`")).collect();
        let readme = if p.readme {
            format!(" ([README]({}/README.md))", p.path)
        } else {
            String::new()
        };
        s.push_str(&format!(
            "| {} | `{}` | `{}` | {} | {}{}{} |\n",
            layer[&p.name],
            p.path,
            p.name,
            if uses.is_empty() {
                "—".to_string()
            } else {
                uses.join(", ")
            },
            p.description.replace('|', "\\|"),
            if p.candle { " (Candle)" } else { "" },
            readme
        ));
    }
    Ok(s)
}

/// `readme` with its map block replaced by `map`.
pub fn splice(readme: &str, map: &str) -> Result<String> {
    let (Some(a), Some(b)) = (readme.find(START), readme.find(END)) else {
        bail!("README.md has no `{START}` … `{END}` block");
    };
    if b < a {
        bail!("README.md's `{END}` comes before `{START}`");
    }
    Ok(format!("{}{START}\n{map}{}", &readme[..a], &readme[b..]))
}

/// Runs the task in `root`: writes the map into README.md, or with `check` fails when it is
/// stale; fails on any layering violation either way.
pub fn run(root: &Path, check: bool) -> Result<()> {
    let packages = packages(root)?;
    let broken = violations(&packages);
    if !broken.is_empty() {
        bail!("layering rules broken:\n  {}", broken.join("\n  "));
    }
    let path = root.join("README.md");
    let readme =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let updated = splice(&readme, &render(&packages)?)?;
    if check {
        if updated != readme {
            bail!("README.md's workspace map is stale: run `cargo xtask workspace-map`");
        }
        println!(
            "workspace map: README.md is current ({} packages)",
            packages.len()
        );
    } else {
        std::fs::write(&path, updated).with_context(|| format!("writing {}", path.display()))?;
        println!(
            "workspace map: wrote {} packages into README.md",
            packages.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn pkg(name: &str, uses: &[&str], candle: bool) -> Package {
        Package {
            name: name.into(),
            path: format!("crates/{name}"),
            description: format!("the {name}"),
            uses: uses.iter().map(|u| u.to_string()).collect(),
            candle,
            readme: true,
        }
    }

    #[test]
    fn the_readme_map_is_what_the_manifests_say() {
        let packages = packages(&root()).unwrap();
        assert!(packages.iter().any(|p| p.name == "trace-schema"));
        let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
        let want = splice(&readme, &render(&packages).unwrap()).unwrap();
        assert!(
            want == readme,
            "README.md's workspace map is stale: run `cargo xtask workspace-map`"
        );
    }

    #[test]
    fn the_workspace_keeps_its_layering_rules() {
        let packages = packages(&root()).unwrap();
        assert_eq!(violations(&packages), Vec::<String>::new());
        let layer = layers(&packages).unwrap();
        assert_eq!(layer["trace-wire"], 0);
        assert_eq!(layer["trace-schema"], 1);
        assert!(layer["trace-cli"] > layer["trace-views"]);
    }

    #[test]
    fn an_analysis_crate_reaching_candle_through_another_is_named() {
        let ps = vec![
            pkg("trace-schema", &[], false),
            pkg("trace-probe", &["trace-schema"], true),
            pkg("trace-ops", &["trace-probe"], false),
            pkg("trace-views", &["trace-ops"], false),
        ];
        assert_eq!(
            violations(&ps),
            vec![
                "trace-ops depends on Candle through trace-ops → trace-probe (only trace-probe, \
                 candle-graph-examples, trace-cli, xtask may)"
                    .to_string(),
                "trace-views depends on Candle through trace-views → trace-ops → trace-probe \
                 (only trace-probe, candle-graph-examples, trace-cli, xtask may)"
                    .to_string(),
            ]
        );
        let l = layers(&ps).unwrap();
        assert_eq!(
            (l["trace-schema"], l["trace-probe"], l["trace-views"]),
            (0, 1, 3)
        );
    }

    #[test]
    fn a_cycle_is_an_error_not_a_loop() {
        let ps = vec![pkg("a", &["b"], false), pkg("b", &["a"], false)];
        assert!(layers(&ps).is_err());
    }
}
