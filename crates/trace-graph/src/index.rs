//! The span hierarchy ([`trace_memory::SpanIndex`], resolved once for the whole analysis) plus
//! what only the graph needs: ops per span and op ordinals. Shared by health, timing, the graph
//! and the findings so nothing walks the document twice.

use std::ops::Deref;

use trace_memory::SpanIndex;
use trace_schema::TraceDocument;

/// Sentinel for "no index".
pub(crate) const NONE: u32 = u32::MAX;

/// Resolved hierarchy of one document; derefs to the [`SpanIndex`].
#[derive(Debug, Clone)]
pub(crate) struct TraceIndex {
    /// Parents, children, pre-order, passes, paths.
    pub spans: SpanIndex,
    /// Op indices per span, in file order.
    pub ops_by_span: Vec<Vec<u32>>,
    /// Span index of each op (`NONE` when its span is unknown).
    pub op_span: Vec<u32>,
    /// 0-based position of each op among its span's ops (node id `{span}/op/{n}`).
    pub op_ordinal: Vec<u32>,
}

impl Deref for TraceIndex {
    type Target = SpanIndex;
    fn deref(&self) -> &SpanIndex {
        &self.spans
    }
}

/// The op part of a [`TraceIndex`].
#[derive(Debug, Clone)]
pub(crate) struct OpIndex {
    ops_by_span: Vec<Vec<u32>>,
    op_span: Vec<u32>,
    op_ordinal: Vec<u32>,
}

impl OpIndex {
    /// Resolves the ops of `doc` over its spans.
    pub fn build(doc: &TraceDocument) -> Self {
        let n = doc.spans.len();
        let mut ops_by_span: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut op_span = vec![NONE; doc.ops.len()];
        let mut op_ordinal = vec![0u32; doc.ops.len()];
        let mut foreign_ordinals: std::collections::HashMap<trace_schema::Sym, u32> =
            std::collections::HashMap::new();
        for (i, op) in doc.ops.iter().enumerate() {
            match doc.span_index(op.span) {
                Some(si) => {
                    op_ordinal[i] = ops_by_span[si].len() as u32;
                    ops_by_span[si].push(i as u32);
                    op_span[i] = si as u32;
                }
                None => {
                    let next = foreign_ordinals.entry(op.span).or_insert(0);
                    op_ordinal[i] = *next;
                    *next += 1;
                }
            }
        }
        Self {
            ops_by_span,
            op_span,
            op_ordinal,
        }
    }
}

impl TraceIndex {
    /// The index of a document from its span index and op index.
    pub fn new(spans: SpanIndex, ops: OpIndex) -> Self {
        Self {
            spans,
            ops_by_span: ops.ops_by_span,
            op_span: ops.op_span,
            op_ordinal: ops.op_ordinal,
        }
    }

    /// Resolves the ops of `doc` over its span index.
    #[allow(dead_code)]
    pub fn build(doc: &TraceDocument, spans: SpanIndex) -> Self {
        Self::new(spans, OpIndex::build(doc))
    }

    /// Node id of op `i`: `{span}/op/{n}`.
    pub fn op_node_id(&self, doc: &TraceDocument, i: usize) -> String {
        format!("{}/op/{}", doc.str(doc.ops[i].span), self.op_ordinal[i])
    }
}

/// End of a span whose duration was recorded: `None` while open and for a duration of 0,
/// which old traces wrote for "not recorded". `None` too when the end would pass `u64::MAX`
/// (an impossible duration, reported by the health check).
pub(crate) fn recorded_end(span: &trace_schema::SpanRecord) -> Option<u64> {
    span.duration_ns
        .filter(|&d| d > 0)
        .and_then(|d| span.start_ns.checked_add(d))
}
