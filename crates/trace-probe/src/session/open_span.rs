//! The plain facts of a span being opened or held open: [`SpanExtras`] (what a module span
//! carries beyond its name) and [`OpenSpan`] (a span recorded outside a guard).

/// The optional fields of a `span_start`.
#[derive(Debug, Default)]
pub(crate) struct SpanExtras {
    /// Module instance key.
    pub(crate) instance_key: Option<String>,
    /// Module kind (e.g. `linear`).
    pub(crate) module_kind: Option<String>,
    /// The module path, when not the enclosing module span's path plus the name.
    pub(crate) module_path: Option<String>,
    /// The forward module span a backward module span mirrors.
    pub(crate) forward_span: Option<u64>,
    /// The step number of a multi-step capture's step span.
    pub(crate) step_index: Option<u64>,
}

/// An open span recorded outside of a guard (the tracing layer keeps these in span extensions).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenSpan {
    pub(crate) id: u64,
    pub(crate) start_ns: u64,
}
