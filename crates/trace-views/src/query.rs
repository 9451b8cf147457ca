//! `candle-graph query TRACE --kind K [--label L | --label-prefix P]`: JSON slices for scripts,
//! always in the `candle-graph/query/1` envelope: `{schema, tool, input, kind, filter, result}`
//! (plus `refused` when a graph-based kind cannot be answered for this trace).
//!
//! Kinds and filters:
//! - `spans` (graph nodes and edges; filter on the span name, edges dropped when filtered);
//! - `slowest` (outer wall time and spans by host self time in the measured region);
//! - `heaviest` (spans by direct allocated bytes and subtree peak; ops by allocated bytes);
//! - `memory` (the full memory profile: logical and physical planes);
//! - `tensors` (filter on the label, or the tensor id when unlabelled);
//! - `tensor-stats` (filter on the label);
//! - `gradients` (filter on `key` or `root/key`);
//! - `capabilities`, `findings`.
//!
//! A filtered result is `{total, matched, rows}`. Kinds without a filter reject one.
//!
//! The JSON is written as it is produced (what is held is the analysis, never the output), and
//! `--limit N` / `--fields a,b` slice it where a kind can be huge (`memory`, `spans`, `tensors`):
//! every array of the result keeps its first `N` elements and the objects that are array
//! elements keep the named fields only (see [`crate::slice`]); the envelope echoes both.

use crate::error::{Error, Result};

use serde::Serialize;
use serde_json::{json, Value};
use trace_graph::{Analysis, NodeKind};
use trace_schema::TraceDocument;

use crate::slice::{Slice, Sliced};
use crate::summary::findings;

/// What to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum QueryKind {
    /// Graph nodes and edges.
    Spans,
    /// Outer wall time and the slowest spans by host self time.
    Slowest,
    /// Spans and ops ranked by allocated bytes.
    Heaviest,
    /// The memory profile.
    Memory,
    /// Tensor facts.
    Tensors,
    /// Tensor statistics.
    TensorStats,
    /// Gradient verdicts.
    Gradients,
    /// The capability matrix.
    Capabilities,
    /// Findings with advice.
    Findings,
}

/// A label filter.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    /// Exact match.
    Label(String),
    /// Prefix match.
    LabelPrefix(String),
}

impl Filter {
    fn matches(&self, s: &str) -> bool {
        match self {
            Filter::Label(l) => s == l,
            Filter::LabelPrefix(p) => s.starts_with(p.as_str()),
        }
    }
}

/// The payload of the envelope.
#[derive(Serialize)]
pub struct QueryReport<'a> {
    /// The kind asked for.
    pub kind: QueryKind,
    /// The filter, or null.
    pub filter: Option<Filter>,
    /// `--limit`: every array of the result keeps this many elements at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `--fields`: the fields kept of the objects that are array elements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
    /// The result (sliced as `limit` and `fields` say), or null when refused.
    #[serde(serialize_with = "sliced_result")]
    pub result: (QueryResult<'a>, Slice),
    /// Why a graph-based kind has no result for this trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<Vec<String>>,
}

fn sliced_result<S: serde::Serializer>(
    (result, slice): &(QueryResult<'_>, Slice),
    s: S,
) -> Result<S::Ok, S::Error> {
    Sliced::new(result, slice).serialize(s)
}

/// A result, borrowed from the analysis where it can be large.
pub enum QueryResult<'a> {
    /// A small result built for the answer.
    Value(Value),
    /// The memory profile as analysed.
    Memory(&'a trace_memory::MemoryProfile),
    /// The span nodes and the edges of the graph.
    Spans {
        /// Span nodes (operation and tensor nodes left out).
        nodes: Vec<&'a trace_graph::GraphNode>,
        /// Every edge.
        edges: &'a [trace_graph::GraphEdge],
    },
    /// Tensor facts, each row made as it is written (`filter` applied).
    Tensors {
        /// The document.
        doc: &'a TraceDocument,
        /// The filter.
        filter: Option<Filter>,
    },
}

impl Serialize for QueryResult<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            QueryResult::Value(v) => v.serialize(s),
            QueryResult::Memory(m) => m.serialize(s),
            QueryResult::Spans { nodes, edges } => {
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("nodes", nodes)?;
                map.serialize_entry("edges", edges)?;
                map.end()
            }
            QueryResult::Tensors { doc, filter } => {
                let keep = |row: &Value| {
                    filter.as_ref().is_none_or(|f| {
                        f.matches(
                            row["label"]
                                .as_str()
                                .or(row["tensor_id"].as_str())
                                .unwrap_or(""),
                        )
                    })
                };
                let rows = || doc.tensors.iter().map(|t| tensor_row(doc, t)).filter(keep);
                struct Rows<F>(F);
                impl<F: Fn() -> I, I: Iterator<Item = Value>> Serialize for Rows<F> {
                    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut seq = s.serialize_seq(None)?;
                        for row in (self.0)() {
                            seq.serialize_element(&row)?;
                        }
                        seq.end()
                    }
                }
                match filter {
                    None => Rows(rows).serialize(s),
                    Some(_) => {
                        let mut map = s.serialize_map(Some(3))?;
                        map.serialize_entry("total", &doc.tensors.len())?;
                        map.serialize_entry("matched", &rows().count())?;
                        map.serialize_entry("rows", &Rows(rows))?;
                        map.end()
                    }
                }
            }
        }
    }
}

fn tensor_row(doc: &TraceDocument, t: &trace_schema::TensorRecord) -> Value {
    json!({
        "tensor_id": doc.str(t.tensor_id),
        "label": t.label.map(|l| doc.str(l)),
        "span_id": doc.str(t.span),
        "shape": doc.shape(t.shape),
        "dtype": doc.str(t.dtype),
        "device": doc.str(t.device),
        "requires_grad": t.requires_grad,
        "dense_bytes": t.dense_bytes,
        "storage_bytes": t.storage_bytes,
        "storage_id": t.storage_id.map(|s| doc.str(s)),
        "category": t.category,
    })
}

/// Top rows of the ranking kinds.
pub const TOP: usize = 8;

fn filtered<T: Serialize>(
    all: Vec<T>,
    filter: &Option<Filter>,
    key: impl Fn(&T) -> Vec<String>,
) -> Value {
    match filter {
        None => json!(all),
        Some(f) => {
            let total = all.len();
            let rows: Vec<T> = all
                .into_iter()
                .filter(|r| key(r).iter().any(|k| f.matches(k)))
                .collect();
            json!({"total": total, "matched": rows.len(), "rows": rows})
        }
    }
}

/// Answers a query; `slice` is applied when the report is serialized.
///
/// # Errors
/// A filter on a kind that takes none.
pub fn run<'a>(
    doc: &'a TraceDocument,
    analysis: &'a Analysis,
    kind: QueryKind,
    filter: Option<Filter>,
    slice: Slice,
) -> Result<QueryReport<'a>> {
    let filterable = matches!(
        kind,
        QueryKind::Spans | QueryKind::Tensors | QueryKind::TensorStats | QueryKind::Gradients
    );
    if filter.is_some() && !filterable {
        return Err(Error::FilterNotApplicable {
            kind: serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        });
    }
    let needs_graph = matches!(
        kind,
        QueryKind::Spans | QueryKind::Slowest | QueryKind::Heaviest
    );
    if needs_graph && analysis.graph.is_none() {
        return Ok(QueryReport {
            kind,
            filter,
            limit: slice.limit,
            fields: slice.fields.clone(),
            result: (QueryResult::Value(Value::Null), slice),
            refused: Some(
                analysis
                    .graph_refusal
                    .as_ref()
                    .map(|r| r.reasons.clone())
                    .unwrap_or_default(),
            ),
        });
    }
    let result = match kind {
        QueryKind::Spans => {
            let g = analysis.graph.as_ref().expect("checked above");
            let spans: Vec<_> = g
                .nodes
                .iter()
                .filter(|n| !matches!(n.kind, NodeKind::Operation | NodeKind::Tensor))
                .collect();
            match &filter {
                None => QueryResult::Spans {
                    nodes: spans,
                    edges: &g.edges,
                },
                Some(_) => {
                    QueryResult::Value(filtered(spans, &filter, |n| vec![n.name.to_string()]))
                }
            }
        }
        QueryKind::Slowest => {
            let g = analysis.graph.as_ref().expect("checked above");
            let rows: Vec<Value> = g
                .rankings
                .measured
                .slowest_by_self_time
                .iter()
                .take(TOP)
                .map(|c| {
                    let mut v = json!(c);
                    v["path"] = json!(analysis.spans.indexed_path_of_id(doc, &c.id));
                    v
                })
                .collect();
            QueryResult::Value(json!({
                "time_origin_ns": analysis.time_origin_ns,
                "outer_wall_time_ns": g.outer_wall_time_ns,
                "incomplete_capture": g.incomplete_capture,
                "measured_span": g.measured_span,
                "spans": rows,
            }))
        }
        QueryKind::Heaviest => {
            let g = analysis.graph.as_ref().expect("checked above");
            let mut ops: Vec<_> = g
                .nodes
                .iter()
                .filter(|n| n.kind == NodeKind::Operation)
                .filter_map(|n| n.memory.direct_allocated_bytes.map(|b| (b, n)))
                .collect();
            ops.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
            let ops: Vec<Value> = ops
                .into_iter()
                .take(TOP)
                .map(|(b, n)| json!({"id": n.id, "name": n.name, "allocated_bytes": b}))
                .collect();
            let m = &g.rankings.measured;
            QueryResult::Value(json!({
                "spans_by_direct_allocated": m.heaviest_by_direct_allocated.iter().take(TOP).collect::<Vec<_>>(),
                "spans_by_subtree_peak": m.heaviest_by_subtree_peak.iter().take(TOP).collect::<Vec<_>>(),
                "ops_by_allocated": ops,
            }))
        }
        QueryKind::Memory => QueryResult::Memory(&analysis.memory),
        QueryKind::Tensors => QueryResult::Tensors {
            doc,
            filter: filter.clone(),
        },
        QueryKind::TensorStats => {
            QueryResult::Value(filtered(doc.tensor_stats.clone(), &filter, |s| {
                vec![s.label.clone()]
            }))
        }
        QueryKind::Gradients => QueryResult::Value(match &filter {
            None => json!(analysis.gradients),
            Some(_) => filtered(analysis.gradients.parameters.clone(), &filter, |p| {
                vec![p.key.clone(), format!("{}/{}", p.root, p.key)]
            }),
        }),
        QueryKind::Capabilities => QueryResult::Value(json!(analysis.capabilities)),
        QueryKind::Findings => QueryResult::Value(json!(findings(analysis))),
    };
    Ok(QueryReport {
        kind,
        filter,
        limit: slice.limit,
        fields: slice.fields.clone(),
        result: (result, slice),
        refused: None,
    })
}
