//! The trace's one symbol table: raw address stacks from the sampler's samples and from the
//! allocation sites become `frame` and `stack` events with shared ids. The session owns it;
//! plug-ins add their stacks at finish ([`crate::plugin::CapturePlugin::on_finish`]), the
//! session writes every frame and stack once, then the plug-ins write what refers to them
//! ([`crate::plugin::CapturePlugin::after_stacks`]).
//!
//! | module | job |
//! |---|---|
//! | `symbols` | symbolisation (`backtrace::resolve`, inline frames, `dladdr`) |
//! | `table` | dedup of frames and stacks, ids, symbol quality |

#[cfg(stack_sampler)]
pub(crate) mod symbols;
pub(crate) mod table;

use std::sync::Mutex;

use trace_schema::{SymbolQuality, TraceEvent};

use table::{Resolved, SymbolTable};

/// What the written table says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableFigures {
    /// How well its frames were named (`None`: no frame).
    pub(crate) symbols: Option<SymbolQuality>,
    /// Frames without a function name.
    pub(crate) unresolved_frames: u64,
    /// Unique addresses resolved.
    pub(crate) unique_addresses: u64,
}

type Resolver = fn(u64, bool) -> Vec<Resolved>;

/// The session's symbol table (see the module docs).
pub(crate) struct SessionStacks {
    table: Mutex<Option<SymbolTable<Resolver>>>,
    written: Mutex<Option<TableFigures>>,
}

impl Default for SessionStacks {
    fn default() -> Self {
        Self {
            table: Mutex::new(None),
            written: Mutex::new(None),
        }
    }
}

impl std::fmt::Debug for SessionStacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStacks").finish_non_exhaustive()
    }
}

#[cfg(stack_sampler)]
fn resolve(address: u64, exact: bool) -> Vec<Resolved> {
    symbols::resolve(address, exact)
}

#[cfg(not(stack_sampler))]
fn resolve(_address: u64, _exact: bool) -> Vec<Resolved> {
    vec![Resolved::default()]
}

/// Whether the return address `addr` lies in the allocator hook's own code (the probe's
/// `alloc` module, the tracking allocator, the stack walk, the `__rust_alloc` shims): the frames an allocation
/// site's walk starts with, dropped before the stack enters the table (every site would
/// otherwise read as the probe's). A frame is the hook's by its name or, for the inlined
/// frames a `debug = "line-tables-only"` build names only by their short name (`walk`,
/// `capture`), by its source file.
pub(crate) fn is_hook_frame(addr: u64) -> bool {
    resolve(addr, false).iter().any(|f| {
        f.file.as_deref().is_some_and(is_hook_file)
            || f.function.as_deref().is_some_and(|n| {
                n.starts_with("trace_probe::alloc::")
                    || n.starts_with("<trace_probe::alloc::")
                    || n.starts_with("trace_probe::sampler::unwind::")
                    || n.starts_with("backtrace::")
                    || n.starts_with("<backtrace::")
                    || n.starts_with("__rust_alloc")
                    || n.starts_with("__rustc::__rust_")
                    || n.starts_with("__rust_realloc")
                    || n.starts_with("__rg_")
            })
    })
}

/// Whether `file` is one of the hook's source files: this crate's `src/alloc/` or its stack
/// walk (`src/sampler/unwind.rs`), in a workspace checkout (`trace-probe/src/…`) or a registry
/// one (`trace-probe-0.1.0/src/…`).
fn is_hook_file(file: &str) -> bool {
    let file = file.replace('\\', "/");
    let Some(at) = file.rfind("/src/") else {
        return false;
    };
    let (krate, inner) = (&file[..at], &file[at + "/src/".len()..]);
    let krate = krate.rsplit('/').next().unwrap_or("");
    (krate == "trace-probe" || krate.starts_with("trace-probe-"))
        && (inner.starts_with("alloc/") || inner == "sampler/unwind.rs")
}

/// The symbol quality of this build, from the probe's own code (for a table without frames).
pub(crate) fn build_quality() -> SymbolQuality {
    let here = build_quality as fn() -> SymbolQuality as usize as u64;
    let frames = resolve(here, true);
    match frames.first() {
        Some(f) if f.function.is_some() && f.line.is_some() => SymbolQuality::LineTables,
        Some(f) if f.function.is_some() => SymbolQuality::NamesOnly,
        _ => SymbolQuality::None,
    }
}

impl SessionStacks {
    /// The stack id of a raw stack (innermost first; `first_exact`: an interrupted program
    /// counter first, otherwise return addresses only). Resolves its new addresses now.
    pub(crate) fn add(&self, addresses: &[u64], first_exact: bool) -> u32 {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table
            .get_or_insert_with(|| SymbolTable::new(resolve as Resolver))
            .stack_id(addresses, first_exact)
    }

    /// Unique addresses resolved so far (while the table is being filled).
    #[cfg_attr(not(stack_sampler), allow(dead_code))] // the sampler's figure
    pub(crate) fn unique_addresses(&self) -> u64 {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table.as_ref().map_or(0, |t| t.unique_addresses())
    }

    /// Writes every frame, then every stack, once; later calls write nothing. Returns the
    /// table's figures.
    pub(crate) fn write(&self, emit: impl Fn(TraceEvent)) -> Option<TableFigures> {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(table) = table.filter(|t| !t.is_empty()) else {
            return self.figures();
        };
        let built = table.finish();
        let figures = TableFigures {
            symbols: built.symbols,
            unresolved_frames: built.unresolved_frames,
            unique_addresses: built.unique_addresses,
        };
        for f in built.frames {
            emit(TraceEvent::Frame(f));
        }
        for s in built.stacks {
            emit(TraceEvent::Stack(s));
        }
        *self.written.lock().unwrap_or_else(|e| e.into_inner()) = Some(figures);
        Some(figures)
    }

    /// The figures of the written table (`None` before [`Self::write`] or without stacks).
    pub(crate) fn figures(&self) -> Option<TableFigures> {
        *self.written.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::is_hook_file;

    #[test]
    fn the_hooks_files_are_known_in_a_checkout_and_a_registry() {
        assert!(is_hook_file("/w/crates/trace-probe/src/alloc/sites.rs"));
        assert!(is_hook_file(
            "/h/.cargo/registry/src/index/trace-probe-0.1.0/src/alloc/hook.rs"
        ));
        assert!(is_hook_file("/w/crates/trace-probe/src/sampler/unwind.rs"));
        assert!(!is_hook_file("/w/crates/trace-probe/src/sampler/mod.rs"));
        assert!(!is_hook_file("/w/crates/trace-probe/src/run.rs"));
        assert!(!is_hook_file("/w/my-trace-probe/src/alloc/mine.rs"));
        assert!(!is_hook_file(
            "/rustc/59807616e1fa/library/alloc/src/alloc.rs"
        ));
        assert!(!is_hook_file("sites.rs"));
    }
}
