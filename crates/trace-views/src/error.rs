//! The errors a view can return: bad requests (an unknown device, a filter on a query kind that
//! takes none) and serialisation failures. Each names what was asked for.

/// Why a view could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A device the trace has no memory event for (the message lists the known ones).
    #[error(transparent)]
    Memory(#[from] trace_memory::MemoryQueryError),
    /// A device was asked for but the trace has no logical memory events at all.
    #[error("device `{device}` has no memory events: this trace has no logical memory events")]
    NoMemoryEvents {
        /// The device asked for.
        device: String,
    },
    /// A label filter on a query kind that has no labels.
    #[error(
        "--label/--label-prefix apply to spans, tensors, tensor-stats and gradients, not {kind}"
    )]
    FilterNotApplicable {
        /// The query kind's name (`memory`, `slowest`, ...).
        kind: String,
    },
    /// A JSON serialisation failure (non-string map keys: never expected for these types).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// A view's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
