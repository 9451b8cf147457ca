//! Display rows for storages (live at a peak, live at the end): bytes, category with an
//! inferred mark, allocating span path and pass (from the analysis' span index), shape/dtype,
//! label.

use std::collections::HashMap;

use clap::ValueEnum;
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
    shape_dtype_of(row.shape.as_deref(), row.dtype.as_deref())
}

/// `[2, 3] f32`, `[2, 3]`, `f32` or `-`.
pub fn shape_dtype_of(shape: Option<&[u64]>, dtype: Option<&str>) -> String {
    let shape = shape.map(|s| {
        let dims: Vec<String> = s.iter().map(u64::to_string).collect();
        format!("[{}]", dims.join(", "))
    });
    match (shape, dtype) {
        (Some(s), Some(d)) => format!("{s} {d}"),
        (Some(s), None) => s,
        (None, Some(d)) => d.to_string(),
        (None, None) => "-".to_string(),
    }
}

/// How storages live at a peak are grouped (`memory --group-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The allocating span's path (`-` when the alloc named none; `(before capture)` for
    /// pre-existing storages without one).
    Span,
    /// Shape and dtype (`[8, 16, 128] f32`).
    Shape,
    /// Category (the `INFERRED` column counts storages whose category was inferred from the
    /// pass).
    Category,
}

impl GroupBy {
    /// Column title of the group key.
    pub fn title(self) -> &'static str {
        match self {
            GroupBy::Span => "SPAN",
            GroupBy::Shape => "SHAPE/DTYPE",
            GroupBy::Category => "CATEGORY",
        }
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Span => "span",
            GroupBy::Shape => "shape",
            GroupBy::Category => "category",
        }
    }
}

/// Storages sharing one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldGroup {
    /// The key (span path, shape/dtype or category), as text.
    pub key: String,
    /// Storages in the group.
    pub storages: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Storages of the group whose category the probe inferred from the pass.
    pub inferred_category: u64,
}

/// Groups `lives` by `by`: largest bytes first, then key. Every storage is in exactly one
/// group. O(L × path depth) with one path per distinct span.
pub fn group(
    lives: &[&StorageLifetime],
    doc: &TraceDocument,
    spans: &SpanIndex,
    by: GroupBy,
) -> Vec<HeldGroup> {
    let mut paths: HashMap<&str, String> = HashMap::new();
    let mut groups: HashMap<String, (u64, u64, u64)> = HashMap::new();
    for l in lives {
        let key = match by {
            GroupBy::Span => match l.span_id.as_deref() {
                Some(id) => paths
                    .entry(id)
                    .or_insert_with(|| spans.path_of_id(doc, id).unwrap_or_else(|| id.to_string()))
                    .clone(),
                None if l.pre_existing => "(before capture)".to_string(),
                None => "-".to_string(),
            },
            GroupBy::Shape => shape_dtype_of(l.shape.as_deref(), l.dtype.as_deref()),
            GroupBy::Category => l.category.as_str().to_string(),
        };
        let g = groups.entry(key).or_insert((0, 0, 0));
        g.0 += 1;
        // Distinct live storages: their sum is bounded by the (checked) peak.
        g.1 += l.bytes;
        g.2 += u64::from(l.category_source == Some(CategorySource::Inferred));
    }
    let mut out: Vec<HeldGroup> = groups
        .into_iter()
        .map(|(key, (storages, bytes, inferred))| HeldGroup {
            key,
            storages,
            bytes,
            inferred_category: inferred,
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
    out
}

/// A table of groups: bytes, share of `total_bytes`, storages, key.
pub fn group_table(groups: &[HeldGroup], by: GroupBy, total_bytes: u64) -> Table {
    let category = by == GroupBy::Category;
    let mut columns = vec![
        ("BYTES", Align::Right),
        ("SHARE", Align::Right),
        ("STORAGES", Align::Right),
    ];
    if category {
        columns.push(("INFERRED", Align::Right));
    }
    columns.push((by.title(), Align::Left));
    let mut t = Table::new(&columns);
    for g in groups {
        let mut row = vec![
            trace_format::bytes(g.bytes),
            share(g.bytes, total_bytes),
            g.storages.to_string(),
        ];
        if category {
            row.push(g.inferred_category.to_string());
        }
        row.push(Table::text(&g.key));
        t.row(row);
    }
    t
}

/// `12.5%` of a total (`-` for a total of 0).
pub fn share(part: u64, total: u64) -> String {
    if total == 0 {
        return "-".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / total as f64)
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
            Table::path(&span),
            Table::text(&shape_dtype(r)),
            Table::text(&label),
        ]);
    }
    t
}

/// Legend line printed under storage tables.
pub const LEGEND: &str = "* category inferred from the pass it was allocated in";
