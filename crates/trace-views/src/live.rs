//! Display rows for storages (live at a peak, live at the end): bytes, category with an
//! inferred mark, allocating span path and pass (from the analysis' span index), shape/dtype,
//! label, and — when the trace has allocation sites (trace/13) — the allocating operation and
//! module ([`trace_ops::SiteProfile`]). Rows that read the same but for their op (same shape,
//! dtype, category, pass, bytes, module, span path and label, whatever their allocation sites)
//! are merged into one with a count, the number of sites and the tally of ops ([`merge`]).

use std::collections::HashMap;

use serde::Serialize;
use trace_memory::{SpanIndex, StorageLifetime};
use trace_ops::SiteProfile;
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
    /// The allocating operation read from the storage's allocation site (trace/13): `matmul`,
    /// `matmul.backward`, or a non-op function's path; absent without a site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// The module of the allocation (its module span, else the stack's model type); absent
    /// when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The allocation site's index (storages of one site were allocated at one call stack).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<u32>,
    /// For a merged row: the number of identical storages it stands for (same shape, dtype,
    /// category, pass, bytes, module, span path and label, whatever their allocation sites —
    /// see [`merge`]); `bytes` is per storage. Absent for a single storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// For a merged row: how many distinct allocation sites its storages came from (`site` is
    /// then absent when more than one). Absent for a single storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sites: Option<u64>,
    /// For a merged row of storages allocated by several ops: each op with its count, most
    /// first (`op` is then absent). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<OpCount>>,
}

impl StorageRow {
    /// Resolves a lifetime with the analysis' span index and, when the trace has them, its
    /// allocation site.
    pub fn of(
        l: &StorageLifetime,
        doc: &TraceDocument,
        spans: &SpanIndex,
        sites: Option<&SiteProfile>,
    ) -> Self {
        let span = l.span_id.as_deref();
        let site = sites.and_then(|s| s.of_memory(l.alloc_event?));
        Self {
            bytes: l.bytes,
            category: l.category,
            category_inferred: l.category_source == Some(CategorySource::Inferred),
            device: l.device.to_string(),
            span_path: span.and_then(|s| spans.indexed_path_of_id(doc, s)),
            pass: span.and_then(|s| spans.pass_of_id(doc, s)),
            op_name: l.op_name.as_deref().map(str::to_string),
            shape: l.shape.as_deref().map(<[u64]>::to_vec),
            dtype: l.dtype.as_deref().map(str::to_string),
            label: l.label.as_deref().map(str::to_string),
            pre_existing: l.pre_existing,
            storage_id: l.storage_id.as_deref().map(str::to_string),
            start_ns: l.start_ns,
            end_ns: l.end_ns,
            op: site.map(|x| x.op.to_string()),
            module: site.and_then(|x| x.module.map(str::to_string)),
            site: site.map(|x| x.site),
            count: None,
            sites: None,
            ops: None,
        }
    }

    /// Storages this row stands for (1, or a merged row's count).
    pub fn storages(&self) -> u64 {
        self.count.unwrap_or(1)
    }

    /// Bytes of every storage the row stands for (`bytes × count`, saturating).
    pub fn total_bytes(&self) -> u64 {
        self.bytes.saturating_mul(self.storages())
    }

    /// `op · module · pass` of the allocation, absent parts left out; `None` without an op.
    pub fn operation(&self) -> Option<String> {
        let tally;
        let op = match (&self.op, &self.ops) {
            (Some(op), _) => op.as_str(),
            (None, Some(ops)) => {
                let mut shown: Vec<String> = ops
                    .iter()
                    .take(2)
                    .map(|o| {
                        if o.count > 1 {
                            format!("{} ×{}", o.op, o.count)
                        } else {
                            o.op.clone()
                        }
                    })
                    .collect();
                if ops.len() > 2 {
                    shown.push(format!("+{} ops", ops.len() - 2));
                }
                tally = shown.join(", ");
                tally.as_str()
            }
            (None, None) => return None,
        };
        let mut parts = vec![op];
        parts.extend(self.module.as_deref());
        parts.extend(self.pass.map(Pass::as_str));
        Some(parts.join(" · "))
    }

    /// The BYTES cell: `1.53 MiB`, or `14 × 1.53 MiB = 21.44 MiB` for a merged row.
    pub fn bytes_cell(&self) -> String {
        match self.count {
            Some(n) if n > 1 => format!(
                "{n} × {} = {}",
                trace_format::bytes(self.bytes),
                trace_format::bytes(self.total_bytes())
            ),
            _ => trace_format::bytes(self.bytes),
        }
    }
}

/// Merges rows that read the same but for their op — same shape, dtype, category, pass,
/// bytes, module, span path and label, **whatever their allocation sites** (the one rule, said
/// in the CLI README: storages of different sites merge when every other column reads the
/// same; the row says how many sites, `sites`, and keeps `site` only when there is one); rows
/// without a site are never merged — into one row each
/// with a count and the tally of its ops (`affine ×6, add ×3, …`), keeping the first row's
/// other fields (rows arrive largest first, then by alloc time). An optimizer-pass temporary
/// whose bytes equal exactly one parameter's among the rows is first tied to it (`update of
/// fc1.weight (by size)` as its module: the stack names the op, not the parameter). Ordered by
/// total bytes descending, then first appearance. O(n).
pub fn merge(mut rows: Vec<StorageRow>) -> Vec<StorageRow> {
    tie_to_parameters(&mut rows);
    /// Everything a row shows but its storage id, times and op.
    #[derive(PartialEq, Eq, Hash)]
    struct Key {
        shape: Option<Vec<u64>>,
        dtype: Option<String>,
        category: MemoryCategory,
        pass: Option<Pass>,
        bytes: u64,
        module: Option<String>,
        span_path: Option<String>,
        label: Option<String>,
    }
    let mut index: HashMap<Key, usize> = HashMap::new();
    // per merged row (its index in `out`): the distinct sites, O(1) each
    let mut sites: HashMap<usize, std::collections::HashSet<u32>> = HashMap::new();
    let mut out: Vec<StorageRow> = Vec::with_capacity(rows.len());
    for r in rows {
        if r.site.is_none() {
            out.push(r);
            continue;
        }
        let key = Key {
            shape: r.shape.clone(),
            dtype: r.dtype.clone(),
            category: r.category,
            pass: r.pass,
            bytes: r.bytes,
            module: r.module.clone(),
            span_path: r.span_path.clone(),
            label: r.label.clone(),
        };
        match index.get(&key) {
            Some(&i) => {
                let m = &mut out[i];
                m.count = Some(m.storages() + 1);
                let seen = sites
                    .entry(i)
                    .or_insert_with(|| m.site.into_iter().collect());
                seen.extend(r.site);
                m.sites = Some(seen.len() as u64);
                if seen.len() > 1 {
                    m.site = None;
                }
                let op = r.op.clone().unwrap_or_else(|| "-".to_string());
                let tally = m.ops.get_or_insert_with(|| {
                    vec![OpCount {
                        op: m.op.clone().unwrap_or_else(|| "-".to_string()),
                        count: 1,
                    }]
                });
                match tally.iter_mut().find(|t| t.op == op) {
                    Some(t) => t.count += 1,
                    None => tally.push(OpCount { op, count: 1 }),
                }
            }
            None => {
                index.insert(key, out.len());
                out.push(r);
            }
        }
    }
    for r in &mut out {
        if let Some(tally) = &mut r.ops {
            if tally.len() == 1 {
                r.ops = None;
            } else {
                // most frequent first, then by name
                tally.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.op.cmp(&b.op)));
                r.op = None;
            }
        }
    }
    // stable: equal totals keep their first-appearance order
    out.sort_by_key(|r| std::cmp::Reverse(r.total_bytes()));
    out
}

/// Ties optimizer-pass temporaries to the parameter of their size (see [`merge`]).
fn tie_to_parameters(rows: &mut [StorageRow]) {
    let mut by_bytes: HashMap<u64, Option<String>> = HashMap::new();
    for r in rows
        .iter()
        .filter(|r| r.category == MemoryCategory::Parameter)
    {
        if let Some(label) = &r.label {
            by_bytes
                .entry(r.bytes)
                .and_modify(|e| *e = None)
                .or_insert_with(|| Some(label.clone()));
        }
    }
    for r in rows.iter_mut() {
        let temporary = r.pass == Some(Pass::Optimizer)
            && !r.pre_existing
            && r.site.is_some()
            && r.module.is_none()
            && r.label.is_none()
            && r.category != MemoryCategory::Parameter;
        if temporary {
            if let Some(Some(p)) = by_bytes.get(&r.bytes) {
                r.module = Some(format!("update of {p} (by size)"));
            }
        }
    }
}

/// One op of a merged row and how many of its storages it allocated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpCount {
    /// The op (trace text: escape before display).
    pub op: String,
    /// Storages.
    pub count: u64,
}

/// The share of bytes allocated inside the capture (not pre-existing) among `lives` that
/// carry an op: `(with an op, allocated inside)`, bytes. Storages older than the step keep
/// their labels (parameter names, optimizer state, the batch) and are not counted.
pub fn op_coverage(lives: &[&StorageLifetime], sites: &SiteProfile) -> (u64, u64) {
    let mut with_op = 0u64;
    let mut inside = 0u64;
    for l in lives.iter().filter(|l| !l.pre_existing) {
        inside = inside.saturating_add(l.bytes);
        if l.alloc_event.and_then(|e| sites.of_memory(e)).is_some() {
            with_op = with_op.saturating_add(l.bytes);
        }
    }
    (with_op, inside)
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// The allocating operation and pass from the allocation site (`matmul · forward`; `-`
    /// without a site, `(before capture)` for pre-existing storages).
    Op,
    /// The allocation site: one call stack (`#3 sqr · optimizer`).
    Site,
}

impl GroupBy {
    /// Column title of the group key.
    pub fn title(self) -> &'static str {
        match self {
            GroupBy::Span => "SPAN",
            GroupBy::Shape => "SHAPE/DTYPE",
            GroupBy::Category => "CATEGORY",
            GroupBy::Op => "OPERATION",
            GroupBy::Site => "SITE",
        }
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Span => "span",
            GroupBy::Shape => "shape",
            GroupBy::Category => "category",
            GroupBy::Op => "op",
            GroupBy::Site => "site",
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
    sites: Option<&SiteProfile>,
    by: GroupBy,
) -> Vec<HeldGroup> {
    let mut paths: HashMap<&str, String> = HashMap::new();
    let mut groups: HashMap<String, (u64, u64, u64)> = HashMap::new();
    for l in lives {
        let key = match by {
            GroupBy::Span => match l.span_id.as_deref() {
                Some(id) => paths
                    .entry(id)
                    .or_insert_with(|| {
                        spans
                            .indexed_path_of_id(doc, id)
                            .unwrap_or_else(|| id.to_string())
                    })
                    .clone(),
                None if l.pre_existing => "(before capture)".to_string(),
                None => "-".to_string(),
            },
            GroupBy::Shape => shape_dtype_of(l.shape.as_deref(), l.dtype.as_deref()),
            GroupBy::Category => l.category.as_str().to_string(),
            GroupBy::Op | GroupBy::Site => {
                match sites.and_then(|s| Some((s, s.of_memory(l.alloc_event?)?))) {
                    Some((_, label)) if by == GroupBy::Op => {
                        let mut parts = vec![label.op.to_string()];
                        parts.extend(label.pass.map(|p| p.as_str().to_string()));
                        parts.join(" · ")
                    }
                    Some((_, label)) => format!("#{} {}", label.site, label.display()),
                    None if l.pre_existing => "(before capture)".to_string(),
                    None => "-".to_string(),
                }
            }
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
    // the OPERATION column (op · module · pass) only when some row has a site
    let ops = rows.iter().any(|r| r.op.is_some());
    let mut columns = vec![
        ("BYTES", Align::Right),
        ("CATEGORY", Align::Left),
        ("PASS", Align::Left),
        ("SPAN", Align::Left),
    ];
    if ops {
        columns.push(("OPERATION", Align::Left));
    }
    columns.extend([("SHAPE/DTYPE", Align::Left), ("LABEL", Align::Left)]);
    let mut t = Table::new(&columns);
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
        let mut cells = vec![
            r.bytes_cell(),
            category,
            match (r.pass, r.pre_existing) {
                (Some(p), _) => p.as_str().to_string(),
                (None, true) => "before capture".to_string(),
                (None, false) => "-".to_string(),
            },
            Table::path(&span),
        ];
        if ops {
            // elided in the middle: the op and the module/pass at the end both stay readable
            cells.push(trace_format::path_cell(
                &r.operation().unwrap_or_else(|| "-".to_string()),
                OPERATION_WIDTH,
            ));
        }
        cells.extend([Table::text(&shape_dtype(r)), Table::text(&label)]);
        t.row(cells);
    }
    t
}

/// Widest OPERATION cell (`op · module · pass`, or a merged row's op tally): wider than other
/// cells, since it joins three names.
pub const OPERATION_WIDTH: usize = 72;

/// Legend line printed under storage tables.
pub const LEGEND: &str = "* category inferred from the pass it was allocated in";
