//! `cargo xtask conformance [FAMILY ...]`: issue 43's conformance suite, re-recorded — runs
//! `scripts/conformance/run.sh` (the Candle models of `examples/src/conformance/` and their
//! PyTorch twins, each side recorded with its own profiler on one thread, and each op timed
//! alone with a clock) and writes `crates/trace-diff/tests/data/conformance/`. Needs torch (a
//! virtual environment from PyPI: about 3 GB with the CUDA libraries PyPI's wheel pulls; see
//! `scripts/conformance/README.md`). Not part of `.ci/run`: CI reads the committed files
//! (`cargo test -p trace-diff --test conformance`).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs the suite's driver for `families` (none: all four) from the workspace root.
pub fn conformance(root: &Path, families: &[String]) -> Result<()> {
    let script = root.join("scripts").join("conformance").join("run.sh");
    let status = Command::new("bash")
        .arg(&script)
        .args(families)
        .current_dir(root)
        .status()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    Ok(())
}
