//! Span lookups for display: the `/`-joined path of a span and the training step it belongs to
//! (its own, or the nearest ancestor's). Memoised, so each span is walked once.

use std::collections::HashMap;

use trace_schema::{ExecutionStep, TraceDocument};

/// Memoised span paths and steps of one document.
pub struct SpanPaths<'a> {
    doc: &'a TraceDocument,
    paths: HashMap<usize, String>,
}

impl<'a> SpanPaths<'a> {
    /// An empty cache over `doc`.
    pub fn new(doc: &'a TraceDocument) -> Self {
        Self {
            doc,
            paths: HashMap::new(),
        }
    }

    fn index(&self, span_id: &str) -> Option<usize> {
        self.doc.span_index(self.doc.sym(span_id)?)
    }

    /// Names from the root to the span, joined by `/`; `None` for an unknown span id.
    pub fn path(&mut self, span_id: &str) -> Option<String> {
        let index = self.index(span_id)?;
        Some(self.path_of(index))
    }

    fn path_of(&mut self, index: usize) -> String {
        if let Some(p) = self.paths.get(&index) {
            return p.clone();
        }
        // iterative walk up to a cached ancestor or the root (depth-bounded against cycles)
        let mut chain = vec![index];
        let mut prefix = String::new();
        let mut current = index;
        while chain.len() <= self.doc.spans.len() {
            let Some(parent) = self.doc.spans[current]
                .parent
                .and_then(|p| self.doc.span_index(p))
            else {
                break;
            };
            if let Some(p) = self.paths.get(&parent) {
                prefix = p.clone();
                break;
            }
            chain.push(parent);
            current = parent;
        }
        for &i in chain.iter().rev() {
            let name = self.doc.str(self.doc.spans[i].name);
            prefix = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            self.paths.insert(i, prefix.clone());
        }
        prefix
    }

    /// The step of the span or of its nearest ancestor with one.
    pub fn step(&self, span_id: &str) -> Option<ExecutionStep> {
        let mut current = self.index(span_id)?;
        for _ in 0..=self.doc.spans.len() {
            let span = &self.doc.spans[current];
            if let Some(step) = span.pass {
                return Some(step);
            }
            current = self.doc.span_index(span.parent?)?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_inherited_steps() {
        let doc = trace_schema::load_str(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#, "\n",
            r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
            r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":1,"span_kind":"function","step":"forward"}"#, "\n",
            r#"{"kind":"span_start","id":"s3","parent_id":"s2","name":"linear","start_ns":2,"span_kind":"module"}"#, "\n",
        ))
        .unwrap();
        let mut paths = SpanPaths::new(&doc);
        assert_eq!(paths.path("s3").as_deref(), Some("step/forward/linear"));
        assert_eq!(paths.path("s2").as_deref(), Some("step/forward"));
        assert_eq!(paths.path("nope"), None);
        assert_eq!(paths.step("s3"), Some(ExecutionStep::Forward));
        assert_eq!(paths.step("s1"), None);
    }
}
