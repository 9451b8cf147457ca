//! The trace's one symbol table: raw address stacks from the sampler's samples and from the
//! allocation sites become `frame` and `stack` events with shared ids (stacks interned as
//! frames and stacks, each unique address resolved once, after the step). The probe's session
//! owns one [`SessionStacks`]; its plug-ins add their stacks at finish, the session writes
//! every frame and stack once, then the plug-ins write what refers to them.
//!
//! | module | job |
//! |---|---|
//! | `table` | dedup of frames and stacks, ids, symbol quality |
//! | (platform) `symbols` | symbolisation (`backtrace::resolve`, inline frames, `dladdr`; Linux) |

mod table;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use trace_wire::{SymbolQuality, TraceEvent};

use crate::platform;
use crate::resolved::Resolved;
use table::SymbolTable;

/// What the written table says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableFigures {
    /// How well its frames were named (`None`: no frame).
    pub symbols: Option<SymbolQuality>,
    /// Frames without a function name.
    pub unresolved_frames: u64,
    /// Unique addresses resolved.
    pub unique_addresses: u64,
}

type Resolver = fn(u64, bool) -> Vec<Resolved>;

/// A session's symbol table (see the module docs). Thread-safe: plug-ins add stacks from any
/// thread.
pub struct SessionStacks {
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

/// Heap bytes the symboliser kept across its calls (see [`symbol_cache_bytes`]).
static SYMBOL_CACHE_BYTES: AtomicI64 = AtomicI64::new(0);

/// Heap bytes the symboliser keeps in its own cache (`backtrace`'s parsed debug information of
/// each object, filled lazily as new addresses are resolved and kept for the process's life):
/// measured around every resolution on the resolving thread
/// ([`trace_alloc::thread_heap_net_bytes`] after, less before, less the frames handed back).
/// `None` unless the tracking allocator counts ([`trace_alloc::Tracking::counting`]). It is the
/// probe's memory, not the program's: the probe reports the process heap less it.
pub fn symbol_cache_bytes() -> Option<u64> {
    trace_alloc::heap_live_bytes()?;
    Some(SYMBOL_CACHE_BYTES.load(Ordering::Relaxed).max(0) as u64)
}

/// Heap bytes the frames of one resolution own (what the resolver hands back, not keeps).
fn frames_heap_bytes(frames: &[Resolved], capacity: usize) -> i64 {
    let strings: usize = frames
        .iter()
        .flat_map(|f| [&f.function, &f.file, &f.module])
        .map(|s| s.as_ref().map_or(0, String::capacity))
        .sum();
    let vec = if capacity == 0 {
        0
    } else {
        capacity.saturating_mul(std::mem::size_of::<Resolved>())
    };
    i64::try_from(strings.saturating_add(vec)).unwrap_or(i64::MAX)
}

fn resolve(address: u64, exact: bool) -> Vec<Resolved> {
    let before = trace_alloc::thread_heap_net_bytes();
    let frames = platform::resolve(address, exact);
    if let (Some(before), Some(after)) = (before, trace_alloc::thread_heap_net_bytes()) {
        let kept = after
            .wrapping_sub(before)
            .saturating_sub(frames_heap_bytes(&frames, frames.capacity()));
        SYMBOL_CACHE_BYTES.fetch_add(kept, Ordering::Relaxed);
    }
    frames
}

/// Whether the return address `addr` lies in the allocator hook's own code (the `trace-alloc`
/// crate: the tracking allocator, the stack walk; the `__rust_alloc` shims; the unwinder): the
/// frames an allocation site's walk starts with, dropped before the stack enters the table
/// (every site would otherwise read as the probe's). Judged by `trace_alloc::sites::
/// is_hook_frame_name` on each frame the address resolves to (inlined ones too).
pub fn is_hook_frame(addr: u64) -> bool {
    resolve(addr, false)
        .iter()
        .any(|f| trace_alloc::sites::is_hook_frame_name(f.function.as_deref(), f.file.as_deref()))
}

/// The symbol quality of this build, from the probe's own code (for a table without frames).
pub fn build_quality() -> SymbolQuality {
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
    pub fn add(&self, addresses: &[u64], first_exact: bool) -> u32 {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table
            .get_or_insert_with(|| SymbolTable::new(resolve as Resolver))
            .stack_id(addresses, first_exact)
    }

    /// Unique addresses resolved so far (while the table is being filled).
    pub fn unique_addresses(&self) -> u64 {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table.as_ref().map_or(0, |t| t.unique_addresses())
    }

    /// Writes every frame, then every stack, once; later calls write nothing. Returns the
    /// table's figures.
    pub fn write(&self, emit: impl Fn(TraceEvent)) -> Option<TableFigures> {
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
    pub fn figures(&self) -> Option<TableFigures> {
        *self.written.lock().unwrap_or_else(|e| e.into_inner())
    }
}
