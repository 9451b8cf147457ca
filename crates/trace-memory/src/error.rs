//! Errors of profile queries.

/// A query the profile cannot answer from the evidence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryQueryError {
    /// The trace has no memory event on this device (this is not a zero).
    #[error("no memory events for device `{device}` (devices with events: {known})")]
    UnknownDevice {
        /// The device asked for.
        device: String,
        /// Devices that do have events, comma-separated.
        known: String,
    },
}
