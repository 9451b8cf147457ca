//! A tracking global allocator whose hook never locks and never allocates, and everything that
//! runs **inside** it: the hook, the event ring, the watch table, the process-wide flags and
//! counters, the held-free park, the allocation-site stack pool and the stack walkers it shares
//! with the stack sampler, and the process clock.
//!
//! This crate knows nothing of Candle: the probe (`trace-probe`) measures Candle's storage
//! layout and sets it here ([`layout`]), arms the hook around the captured step ([`arm`],
//! [`disarm`]), drains the ring ([`ring::drain_into`]) and joins the records to tensors.
//!
//! Install in two lines (the probe re-exports [`Tracking`] as `trace_probe::Tracking`):
//! ```
//! #[global_allocator]
//! static ALLOC: trace_alloc::Tracking = trace_alloc::Tracking::system();
//! # fn main() {
//! let v = vec![0u8; 4096]; // served by the system allocator through the hook
//! assert!(trace_alloc::is_installed() && !trace_alloc::is_armed());
//! # drop(v);
//! # }
//! ```
//!
//! # Why nothing locks or allocates
//! The hook runs *inside* the global allocator, so it must never allocate (that would recurse
//! into itself), never take a lock (the lock may be held by the thread being interrupted
//! mid-allocation, or may itself allocate), and never touch a lazily initialised or
//! `Drop`-carrying thread-local (their first access registers a destructor, which allocates).
//! Everything it touches is a `static` atomic or a `const`-initialised thread-local `Cell`
//! without a destructor; const thread-locals of `Cell<Copy>` compile to a plain TLS slot access.
//!
//! | module | job |
//! |---|---|
//! | `hook` | [`Tracking`], the `GlobalAlloc` wrapper; arming and disarming |
//! | [`ring`] | the preallocated many-producer event ring between the hook and the drain |
//! | [`watch`] | the lock-free exact-address table of registered storage blocks |
//! | [`hold`] | held frees: blocks parked instead of freed while the probe reads them |
//! | [`layout`] | the watched block sizes and offsets (set by the probe's calibration) |
//! | [`sites`] | allocation-site stacks captured inside the hook into a static pool |
//! | [`walk`] | the frame-pointer and DWARF stack walkers (shared with `trace-sampler`) |
//! | [`clock`] | the process clock base and the session clock |
//! | `state`, `thread` | the flags the hook reads; [`thread_key`] |
//! | `counters` | the hook's counters, per thread, written with plain stores |
//! | `line` | a value alone on its cache line |

pub mod clock;
mod counters;
pub mod hold;
mod hook;
pub mod layout;
mod line;
pub mod ring;
pub mod sites;
mod state;
mod thread;
pub mod walk;
pub mod watch;

pub use hold::leaked_blocks;
pub use hook::{arm, disarm, disarm_and_hold, hold_armed, Tracking};
pub use ring::{dropped_events, pending_events, ring_capacity, set_ring_capacity, RING_CAPACITY};
pub use state::{
    armed_alloc_calls, armed_net_bytes, heap_live_bytes, is_armed, is_installed, mark_probe_thread,
    probe_threads_heap_bytes, thread_heap_net_bytes, IgnoreAllocs,
};
pub use thread::thread_key;
pub use watch::{occupied_slots, WATCH_SLOTS};
