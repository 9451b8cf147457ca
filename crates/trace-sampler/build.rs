//! Sets the cfg `stack_sampler` on the targets the wall-clock stack sampler supports (Linux on
//! x86_64 and aarch64: POSIX timers with `SIGEV_THREAD_ID`, and a known place of the interrupted
//! program counter in the signal's `ucontext`); elsewhere `src/fallback.rs` stands in and says
//! why. `TRACE_PROBE_NO_SAMPLER=1` builds the fallback on a supported target too (to check that
//! the other platforms' code compiles: `cargo check` with it set).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(stack_sampler)");
    println!("cargo:rerun-if-env-changed=TRACE_PROBE_NO_SAMPLER");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let forced_off = std::env::var_os("TRACE_PROBE_NO_SAMPLER").is_some();
    if os == "linux" && (arch == "x86_64" || arch == "aarch64") && !forced_off {
        println!("cargo:rustc-cfg=stack_sampler");
    }
}
