//! Module names shared by the sampled profile and the allocation sites: each distinct module
//! path interned once (ids in order of first sight), and each span's pass and module — the
//! `module_path` of the span itself or of its nearest ancestor that has one — computed in one
//! pass over the spans, parents before children (linear in the spans whatever their depth).

use std::collections::HashMap;

use serde::Serialize;
use trace_memory::SpanIndex;
use trace_schema::{Pass, Sym, TraceDocument};

/// Where a row's module comes from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ModuleSource {
    /// A module span around the sample (the probe's or the model's).
    Span,
    /// The stack's `forward` frames of model types (no module span).
    Stack,
}

impl ModuleSource {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Interned module names and the module of every span.
#[derive(Debug, Default)]
pub(crate) struct Modules {
    /// Module names by id.
    pub(crate) names: Vec<String>,
    ids: HashMap<String, u32>,
    /// Per span (index like `doc.spans`): its module's id.
    of_span: Vec<Option<u32>>,
}

impl Modules {
    /// The modules of `doc`'s spans.
    pub(crate) fn new(doc: &TraceDocument, spans: &SpanIndex) -> Self {
        let mut m = Self {
            of_span: vec![None; doc.spans.len()],
            ..Self::default()
        };
        for &i in &spans.preorder {
            let i = i as usize;
            m.of_span[i] = match doc.spans[i].module_path {
                Some(path) => Some(m.intern(doc.str(path))),
                None => spans.parent[i].and_then(|p| m.of_span[p as usize]),
            };
        }
        // spans on a parent cycle are not in the preorder: their own module path only
        for (i, s) in doc.spans.iter().enumerate() {
            if spans.in_cycle[i] {
                m.of_span[i] = s.module_path.map(|path| m.intern(doc.str(path)));
            }
        }
        m
    }

    /// The id of `name`, interning it.
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), i);
        i
    }

    /// The pass and module id of the span `sym` (both `None` for an id that is not a span).
    pub(crate) fn of(
        &self,
        doc: &TraceDocument,
        spans: &SpanIndex,
        sym: Sym,
    ) -> (Option<Pass>, Option<u32>) {
        match doc.span_index(sym) {
            Some(i) => (spans.pass[i], self.of_span[i]),
            None => (None, None),
        }
    }
}
