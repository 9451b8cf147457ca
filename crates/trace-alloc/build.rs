//! Sets the cfg `dwarf_walk` on the targets where the DWARF stack walk (libgcc's
//! `_Unwind_Backtrace` through the `backtrace` crate) is used for allocation sites: Linux on
//! x86_64 and aarch64, the targets of the stack sampler. Elsewhere sites are off (the walk
//! writes nothing). `TRACE_PROBE_NO_SAMPLER=1` builds the fallback on a supported target too.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(dwarf_walk)");
    println!("cargo:rerun-if-env-changed=TRACE_PROBE_NO_SAMPLER");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let forced_off = std::env::var_os("TRACE_PROBE_NO_SAMPLER").is_some();
    if os == "linux" && (arch == "x86_64" || arch == "aarch64") && !forced_off {
        println!("cargo:rustc-cfg=dwarf_walk");
    }
}
