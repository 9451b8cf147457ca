//! Symbolisation after the captured step: each unique address is resolved once, with the
//! `backtrace` crate's `resolve` (gimli reading the binary's DWARF line tables; the symbol table
//! when there are none), inline frames expanded innermost first, names demangled without their
//! hash, and the object file named with `dladdr`.
//!
//! Return addresses point after their call instruction, so they are looked up at `addr - 1`
//! (which `backtrace::resolve` does itself); the interrupted program counter is exact, so it is
//! passed as `pc + 1`.

use std::ffi::CStr;

use crate::resolved::Resolved;

/// Resolves `addr`: `exact` for an interrupted program counter, otherwise a return address.
/// Innermost (inlined) frame first; one frame without a name when nothing is known about it.
pub(crate) fn resolve(addr: u64, exact: bool) -> Vec<Resolved> {
    let Ok(addr) = usize::try_from(addr) else {
        return vec![Resolved::default()];
    };
    let lookup = if exact { addr.wrapping_add(1) } else { addr };
    let module = module_of(if exact { addr } else { addr.wrapping_sub(1) });
    let mut frames = Vec::new();
    backtrace::resolve(lookup as *mut std::ffi::c_void, |symbol| {
        frames.push(Resolved {
            function: symbol.name().map(|n| format!("{n:#}")),
            file: symbol.filename().map(|p| p.to_string_lossy().into_owned()),
            line: symbol.lineno(),
            module: module.clone(),
        });
    });
    if frames.is_empty() {
        frames.push(Resolved {
            module,
            ..Resolved::default()
        });
    }
    frames
}

/// The file name of the object mapped at `addr`, if the dynamic loader knows it.
fn module_of(addr: usize) -> Option<String> {
    // SAFETY: a zeroed Dl_info is a valid out-parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; `info` is valid.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: a non-null dli_fname is a NUL-terminated string owned by the loader.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
    let path = if path.is_empty() {
        std::env::current_exe().ok()?.to_string_lossy().into_owned()
    } else {
        path.into_owned()
    };
    let name = path.rsplit('/').next().unwrap_or(&path);
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn here() -> usize {
        let mut buf = [0usize; 4];
        let n = trace_alloc::walk::dwarf::capture(&mut buf);
        assert!(n > 0);
        buf[0]
    }

    #[test]
    fn a_return_address_resolves_to_its_caller_with_file_and_line() {
        let addr = here() as u64;
        let frames = resolve(addr, false);
        let f = frames
            .iter()
            .find(|f| {
                f.function
                    .as_deref()
                    .is_some_and(|n| n.ends_with("tests::here"))
            })
            .unwrap_or_else(|| panic!("{frames:?}"));
        let last = f.function.as_deref().and_then(|n| n.rsplit("::").next());
        let hashed = last.is_some_and(|l| {
            l.len() == 17 && l.starts_with('h') && l[1..].chars().all(|c| c.is_ascii_hexdigit())
        });
        assert!(!hashed, "hash dropped: {f:?}");
        assert!(
            f.file.as_deref().is_some_and(|p| p.ends_with("symbols.rs")),
            "{f:?}"
        );
        assert!(f.line.is_some_and(|l| l > 0));
        assert!(f.module.is_some(), "{f:?}");
    }

    #[test]
    fn an_unknown_address_gives_one_unnamed_frame() {
        let frames = resolve(8, true);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].function, None);
    }
}
