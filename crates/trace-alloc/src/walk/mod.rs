//! The stack walkers, shared by the allocation sites (inside the allocator hook) and the stack
//! sampler (inside its signal handler, in the `trace-sampler` crate): nothing here allocates,
//! locks or formats on the walking path.
//!
//! | module | job |
//! |---|---|
//! | [`frame_chain`] | the bounds-checked frame-pointer walk, the thread's stack bounds, the executable's code range |
//! | [`dwarf`] | the DWARF walk through libgcc's `_Unwind_Backtrace` (Linux on x86_64 and aarch64; elsewhere a stand-in that writes nothing) |

#[cfg_attr(not(dwarf_walk), path = "no_dwarf.rs")]
pub mod dwarf;
pub mod frame_chain;
