//! The two declaration macros of the wire format: `wire_enum!` for unit enums (one list of
//! variants and their wire names gives serde's names, `as_str`, `ALL` and `FromStr`) and
//! `trace_events!` for the event kinds (see [`crate::event`]).

/// Declares a unit enum whose wire names are written once, beside each variant:
///
/// ```text
/// wire_enum! {
///     /// doc
///     #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
///     pub enum Pass { /// doc
///         Forward = "forward", … }
/// }
/// ```
///
/// It adds `Serialize`/`Deserialize` (each variant renamed to its wire name), `as_str()`,
/// `ALL` (every variant in declaration order), `index()` (the position in `ALL`), `From<Self> for &'static str` and `FromStr`
/// (error [`crate::UnknownName`]).
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $( $(#[$vmeta])* #[serde(rename = $wire)] $variant, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($wire),+].len()] = [$($name::$variant),+];

            /// Position in [`Self::ALL`] (declaration order).
            pub const fn index(self) -> usize {
                self as usize
            }

            /// The wire name (the string serde writes).
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)+
                }
            }
        }

        impl From<$name> for &'static str {
            fn from(value: $name) -> Self {
                value.as_str()
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err($crate::UnknownName {
                        type_name: stringify!($name),
                        name: s.to_string(),
                    }),
                }
            }
        }
    };
}

/// Declares [`crate::event::TraceEvent`] from one table of `Variant(Body) = "kind", since V;`
/// rows: the enum (serde tag `kind`, each variant renamed to its kind), `kind_name`,
/// `visit_body`, [`crate::event::EVENT_KINDS`] and [`crate::event::EVENT_KIND_SINCE`].
///
/// Exported (hidden) only so `tests/adding_a_kind.rs` can declare a table with a toy kind in
/// its own scope; nothing else should declare event kinds.
#[macro_export]
#[doc(hidden)]
macro_rules! trace_events {
    (
        $(#[$meta:meta])*
        pub enum TraceEvent {
            $( $(#[$vmeta:meta])* $variant:ident($body:ty) = $kind:literal, since $since:ident; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "kind")]
        pub enum TraceEvent {
            $( $(#[$vmeta])* #[serde(rename = $kind)] $variant($body), )+
        }

        impl TraceEvent {
            /// The `kind` tag of this event as written on the wire.
            pub fn kind_name(&self) -> &'static str {
                match self {
                    $(TraceEvent::$variant(_) => $kind,)+
                }
            }

            /// Calls `visitor` with the body type of `kind` (e.g. [`crate::MemoryEvent`] for
            /// `memory`), so a reader can act per kind without its own list of kinds; `None`
            /// for a kind this crate does not know.
            pub fn visit_body<V: $crate::event::BodyVisitor>(
                kind: &str,
                visitor: V,
            ) -> Option<V::Output> {
                match kind {
                    $($kind => Some(visitor.visit::<$body>($kind)),)+
                    _ => None,
                }
            }
        }

        /// Every `kind` this crate reads, in declaration order.
        pub const EVENT_KINDS: &[&str] = &[$($kind),+];

        /// Every `kind` with the first schema version it exists in (the same order as
        /// [`EVENT_KINDS`]); read by [`crate::SchemaVersion::allows_kind`].
        pub const EVENT_KIND_SINCE: &[(&str, $crate::version::SchemaVersion)] =
            &[$(($kind, $crate::version::SchemaVersion::$since)),+];
    };
}
