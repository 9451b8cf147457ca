//! `cargo xtask pytorch-fixtures`: the real PyTorch profiler traces under
//! `crates/trace-import/tests/data/pytorch/`.
//!
//! Makes (or reuses) a virtual environment with `torch` from PyPI — about 3 GB: PyPI's Linux
//! wheel is the CUDA build and pulls its CUDA libraries (the CPU-only index is not reachable
//! from the project's machines); pip runs with `--no-cache-dir`, so the wheels are not kept
//! twice on a small disk — then runs
//! `xtask/pytorch/profile_fixtures.py`, which profiles the MLP and a transformer encoder layer on
//! the CPU and writes gzipped Kineto traces. Not part of `.ci/run`: CI reads the committed
//! traces.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The torch release the committed traces were made with.
pub const TORCH_VERSION: &str = "2.15.0";

/// Where the traces go, relative to the workspace root.
pub const OUT_DIR: &str = "crates/trace-import/tests/data/pytorch";

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

fn torch_version(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .args(["-c", "import torch; print(torch.__version__)"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Makes the environment under `venv` (default `target/pytorch-fixtures/venv`) when it has no
/// torch of [`TORCH_VERSION`], then writes the traces.
pub fn pytorch_fixtures(root: &Path, venv: Option<PathBuf>, python: &str) -> Result<()> {
    let venv = venv.unwrap_or_else(|| root.join("target").join("pytorch-fixtures").join("venv"));
    let venv_python = venv.join("bin").join("python");
    if !venv_python.exists() {
        eprintln!("xtask: creating {}", venv.display());
        run(
            Command::new(python).args(["-m", "venv"]).arg(&venv),
            "python -m venv",
        )?;
    }
    let wanted = format!("torch=={TORCH_VERSION}");
    match torch_version(&venv_python) {
        Some(v) if v.split('+').next() == Some(TORCH_VERSION) => {
            eprintln!("xtask: using torch {v} in {}", venv.display());
        }
        _ => {
            eprintln!("xtask: installing {wanted} from PyPI (several GB)");
            run(
                Command::new(&venv_python).args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-cache-dir",
                    &wanted,
                    "numpy",
                ]),
                "pip install torch",
            )?;
        }
    }
    let out = root.join(OUT_DIR);
    run(
        Command::new(&venv_python)
            .arg(
                root.join("xtask")
                    .join("pytorch")
                    .join("profile_fixtures.py"),
            )
            .arg(&out)
            .current_dir(root),
        "profile_fixtures.py",
    )?;
    eprintln!("xtask: wrote the traces into {}", out.display());
    Ok(())
}
