//! Reads the resolved candle-core version from the nearest `Cargo.lock` above this crate (the
//! workspace's, or the user's when built as a path/git dependency) and exports it as
//! `TRACE_PROBE_CANDLE_VERSION`. When no lock file names candle-core (e.g. built from a registry
//! tarball outside a workspace), the variable is empty and the meta's `candle_version` is absent.
//!
//! It also sets the cfg `stack_sampler` on the targets the wall-clock stack sampler supports
//! (Linux on x86_64 and aarch64: POSIX timers with `SIGEV_THREAD_ID`, and a known place of the
//! interrupted program counter in the signal's `ucontext`); elsewhere the sampler declares
//! `operations` unavailable with the reason.

use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let version = find_lock(&manifest_dir)
        .and_then(|lock| {
            println!("cargo:rerun-if-changed={}", lock.display());
            std::fs::read_to_string(lock).ok()
        })
        .and_then(|text| candle_core_version(&text))
        .unwrap_or_default();
    println!("cargo:rustc-env=TRACE_PROBE_CANDLE_VERSION={version}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(stack_sampler)");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    // `TRACE_PROBE_NO_SAMPLER=1` builds the fallback on a supported target too (to check that
    // the other platforms' code compiles: `cargo check` with it set).
    println!("cargo:rerun-if-env-changed=TRACE_PROBE_NO_SAMPLER");
    let forced_off = std::env::var_os("TRACE_PROBE_NO_SAMPLER").is_some();
    if os == "linux" && (arch == "x86_64" || arch == "aarch64") && !forced_off {
        println!("cargo:rustc-cfg=stack_sampler");
    }
}

fn find_lock(start: &Path) -> Option<PathBuf> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        let candidate = d.join("Cargo.lock");
        if candidate.is_file() {
            return Some(candidate);
        }
        dir = d.parent();
    }
    None
}

/// The `version` of the `[[package]]` whose `name` is `candle-core`.
fn candle_core_version(lock: &str) -> Option<String> {
    let mut in_candle = false;
    for line in lock.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            in_candle = false;
        } else if line == "name = \"candle-core\"" {
            in_candle = true;
        } else if in_candle {
            if let Some(rest) = line.strip_prefix("version = \"") {
                return rest.strip_suffix('"').map(str::to_string);
            }
        }
    }
    None
}
