//! The capture window: the process-wide state that turns allocator-hook events and
//! registrations into `memory` events.
//!
//! # How storages reach the trace
//! - **Registered before capture start** (parameters, labelled tensors, optimizer state found at
//!   construction): one `alloc` at capture start marked `pre_existing`, `source: registry`.
//! - **Live at capture start, allocated since the session was created** (an input batch, model
//!   buffers, tensors kept from an earlier step; see `tracker`): one `alloc` at capture start
//!   marked `pre_existing`, `source: allocator`, heap bytes from the logged data-buffer
//!   allocation, category `other` (inferred) unless a registration in the window names it (a
//!   labelled input: its label, category, shape and dtype). Written when freed or when the
//!   window ends, so that naming is in it.
//! - **Registered during the window** (graph nodes after forward, gradients after backward): one
//!   `alloc` written at registration, with the exact time of the data buffer's logged
//!   allocation (`source: allocator`); when its block predates the window, a `pre_existing`
//!   alloc at capture start instead.
//! - **Unregistered CPU storages** (backward intermediates, optimizer temporaries, forward
//!   temporaries): recognised at their free by the drop signature; the `alloc` (exact data
//!   buffer time and bytes) and the `free` are written together when the free is drained. A
//!   storage still alive when the window ends (or when the step crashes) cannot be identified:
//!   the capture counts the block-sized allocations of the window that are still live and
//!   unidentified and reports them (see [`CaptureSummary::unidentified_live_blocks`]); an upper
//!   bound of what is missing, never silently zero.
//! - **Frees** of registered storages are written when drained (`source: allocator`).
//!
//! # The capture window
//! It opens when the session arms (right after the root span opened) and closes when the root
//! span is about to close (`end`): the hook is disarmed, the ring drained a last time. Frees
//! after that are **not observed**: a storage registered or allocated in the window and still
//! live then has no `free` event, which analyzers read as "live at the end of the trace"
//! (`live_at_end`). Drop the loss and gradients inside the step guard to see their frees.

//!
//! | file | job |
//! |---|---|
//! | `state` | [`CaptureState`], the process-wide lock, accessors, [`last_summary`] |
//! | `summary` | [`CaptureSummary`] and the coverage it says was lost |
//! | `contract` | [`availability`] and the logical-memory coverage to declare |
//! | `open` | capture start: arming, `pre_existing` allocs, site settings |
//! | `delivery` | pumping the ring into the join, spilling, handing events to the sink |
//! | `freed` | registered and unregistered (drop-signature) frees |
//! | `close` | draining, the window's end, storages live at the end |
//! | `adoption` | the session tracker and the storages adopted at capture start |
//! | `drainer` | the background thread that drains the ring while a window is open |

mod adoption;
mod close;
mod contract;
mod delivery;
mod drainer;
mod freed;
mod open;
mod state;
mod summary;

pub use contract::{availability, logical_memory_contract_with, Availability};
pub(crate) use drainer::drainer_delivers;
pub(crate) use open::Begun;
pub(crate) use state::Sink;
pub use state::{declare_unknown_pre_existing, last_summary, lock, CaptureState};
pub use summary::CaptureSummary;
