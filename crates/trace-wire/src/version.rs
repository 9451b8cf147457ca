//! Schema versions this crate reads and writes.

use std::fmt;

/// Declares [`SchemaVersion`] from one list of `Variant = "schema string"` rows, oldest first:
/// the enum, [`SUPPORTED_SCHEMAS`] (newest first), `parse` and `as_str`.
macro_rules! schema_versions {
    ($( $(#[$doc:meta])* $v:ident = $schema:literal, )+) => {
        /// A supported `candle-graph/trace/N` version.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        pub enum SchemaVersion {
            $( $(#[$doc])* $v, )+
        }

        impl SchemaVersion {
            /// Every supported version, oldest first.
            pub const ALL: &'static [SchemaVersion] = &[$(SchemaVersion::$v),+];

            /// Parses a `schema` string; `None` when unsupported.
            pub fn parse(schema: &str) -> Option<Self> {
                match schema {
                    $($schema => Some(Self::$v),)+
                    _ => None,
                }
            }

            /// The `schema` string.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$v => $schema,)+
                }
            }
        }

        /// Every supported schema string, newest first.
        pub const SUPPORTED_SCHEMAS: &[&str] = &{
            let oldest_first = [$($schema),+];
            let mut newest_first = oldest_first;
            let mut i = 0;
            while i < oldest_first.len() {
                newest_first[i] = oldest_first[oldest_first.len() - 1 - i];
                i += 1;
            }
            newest_first
        };
    };
}

schema_versions! {
    /// `candle-graph/trace/6`: no terminal, no storage ids, legacy byte field names.
    V6 = "candle-graph/trace/6",
    /// `candle-graph/trace/7`: capture contract, device intervals, terminal.
    V7 = "candle-graph/trace/7",
    /// `candle-graph/trace/8`: the current meta shape.
    V8 = "candle-graph/trace/8",
    /// `candle-graph/trace/9`: gradient contracts, tensor labels.
    V9 = "candle-graph/trace/9",
    /// `candle-graph/trace/10`: tensor_stats (the original tool's latest).
    V10 = "candle-graph/trace/10",
    /// `candle-graph/trace/11`: storage capture, dropped-event counts.
    V11 = "candle-graph/trace/11",
    /// `candle-graph/trace/12`: sampled call stacks (`frame`, `stack`, `sample`, `sampler`)
    /// and the `sampled` coverage level.
    V12 = "candle-graph/trace/12",
    /// `candle-graph/trace/13`: allocation sites (`site`, `alloc_sites`; `site` and `thread`
    /// on memory events); this project's write version.
    V13 = "candle-graph/trace/13",
}

/// The version this crate writes (the newest).
pub const WRITE_VERSION: SchemaVersion = SchemaVersion::V13;

impl SchemaVersion {
    /// Whether this version ends with a `terminal` event (trace/7 and later).
    pub fn has_terminal(self) -> bool {
        self >= Self::V7
    }

    /// Whether `memory` events carry a storage identity (`storage_id`).
    pub fn has_storage_id(self) -> bool {
        self >= Self::V7
    }

    /// Whether an event kind exists in this version: `kind`'s row of
    /// [`crate::event::EVENT_KIND_SINCE`] is this version or older. A kind this crate does not
    /// know is allowed here (the loader reports it as unknown, not as out of version).
    pub fn allows_kind(self, kind: &str) -> bool {
        crate::event::EVENT_KIND_SINCE
            .iter()
            .find(|(k, _)| *k == kind)
            .is_none_or(|(_, since)| self >= *since)
    }
}

impl fmt::Display for SchemaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
