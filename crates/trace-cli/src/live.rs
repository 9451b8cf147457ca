//! Display rows for storages (live at a peak, live at the end): bytes, category with an
//! inferred mark, allocating span path and pass (from the analysis' span index), shape/dtype,
//! label.

use serde::Serialize;
use trace_memory::{SpanIndex, StorageLifetime};
use trace_schema::{CategorySource, MemoryCategory, Pass, TraceDocument};

use crate::table::{Align, Table};

/// One storage, resolved for display.
#[derive(Debug, Clone, Serialize)]
pub struct StorageRow {
    /// Storage bytes.
    pub bytes: u64,
    /// Category.
    pub category: MemoryCategory,
    /// True when the probe inferred the category from the pass (shown with a `*`).
    pub category_inferred: bool,
    /// Device label.
    pub device: String,
    /// Path of the allocating span (`root/forward/linear`), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_path: Option<String>,
    /// Pass of the allocating span (inherited from ancestors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Allocating operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_name: Option<String>,
    /// Shape, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    /// Dtype, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Caller label (e.g. a parameter name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Existed before capture began.
    pub pre_existing: bool,
    /// Storage id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_id: Option<String>,
    /// Alloc time (capture start for pre-existing storages), ns since session start.
    pub start_ns: u64,
    /// Free time, ns; absent when live at the end of the trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
}

impl StorageRow {
    /// Resolves a lifetime with the analysis' span index.
    pub fn of(l: &StorageLifetime, doc: &TraceDocument, spans: &SpanIndex) -> Self {
        let span = l.span_id.as_deref();
        Self {
            bytes: l.bytes,
            category: l.category,
            category_inferred: l.category_source == Some(CategorySource::Inferred),
            device: l.device.to_string(),
            span_path: span.and_then(|s| spans.path_of_id(doc, s)),
            pass: span.and_then(|s| spans.pass_of_id(doc, s)),
            op_name: l.op_name.as_deref().map(str::to_string),
            shape: l.shape.as_deref().map(<[u64]>::to_vec),
            dtype: l.dtype.as_deref().map(str::to_string),
            label: l.label.as_deref().map(str::to_string),
            pre_existing: l.pre_existing,
            storage_id: l.storage_id.as_deref().map(str::to_string),
            start_ns: l.start_ns,
            end_ns: l.end_ns,
        }
    }
}

/// `[2, 3] f32` style shape/dtype cell.
fn shape_dtype(row: &StorageRow) -> String {
    let shape = row.shape.as_ref().map(|s| {
        let dims: Vec<String> = s.iter().map(u64::to_string).collect();
        format!("[{}]", dims.join(", "))
    });
    match (shape, &row.dtype) {
        (Some(s), Some(d)) => format!("{s} {d}"),
        (Some(s), None) => s,
        (None, Some(d)) => d.clone(),
        (None, None) => "-".to_string(),
    }
}

/// A table of storage rows; `*` marks an inferred category, `before capture` a pre-existing
/// storage. Trace text is escaped and elided.
pub fn table(rows: &[StorageRow]) -> Table {
    let mut t = Table::new(&[
        ("BYTES", Align::Right),
        ("CATEGORY", Align::Left),
        ("PASS", Align::Left),
        ("SPAN", Align::Left),
        ("SHAPE/DTYPE", Align::Left),
        ("LABEL", Align::Left),
    ]);
    for r in rows {
        let mut category = r.category.as_str().to_string();
        if r.category_inferred {
            category.push('*');
        }
        let span = r.span_path.clone().unwrap_or_else(|| "-".to_string());
        let label = match (&r.label, &r.op_name) {
            (Some(l), _) => l.clone(),
            (None, Some(op)) => format!("op {op}"),
            (None, None) => "-".to_string(),
        };
        t.row([
            trace_format::bytes(r.bytes),
            category,
            match (r.pass, r.pre_existing) {
                (Some(p), _) => p.as_str().to_string(),
                (None, true) => "before capture".to_string(),
                (None, false) => "-".to_string(),
            },
            Table::text(&span),
            Table::text(&shape_dtype(r)),
            Table::text(&label),
        ]);
    }
    t
}

/// Legend line printed under storage tables.
pub const LEGEND: &str = "* category inferred from the pass it was allocated in";
