//! Every trace queryable by an existing engine: candle-graph traces written as typed Parquet
//! tables (arrow-rs's `parquet` crate, Snappy-compressed) that DuckDB, Polars, DataFusion,
//! Spark, Trino or BigQuery read — one file per table, rows of any number of traces keyed by
//! `run_id` and `rank`:
//!
//! | file | one row per |
//! |------|-------------|
//! | `runs.parquet` | trace: identity, rank, device, schema, capture contract, step time, peak |
//! | `spans.parquet` | span |
//! | `storages.parquet` | storage lifetime: alloc and free time, bytes, category, span, op |
//! | `memory_events.parquet` | memory event, with the live-bytes change the analyzer applied |
//! | `ops.parquet` | op × pass × module of the sampled profile (estimates with intervals) |
//! | `gradients.parquet` | gradient fact |
//! | `findings.parquet` | finding |
//!
//! The columns, their types, units and meanings: [`schema_markdown`] (the README's table).
//! Unobserved is null, never 0. Output is linear in the input: rows are buffered
//! [`table::BATCH_ROWS`] at a time and written as record batches; each file is written under a
//! temporary name and renamed into place by [`ParquetExport::finish`].
//!
//! ```no_run
//! # fn main() -> Result<(), trace_export::ExportError> {
//! let doc = trace_schema::load_path("out/demo/trace.jsonl").unwrap();
//! let analysis = trace_graph::analyze(&doc);
//! let mut export = trace_export::ParquetExport::create("out/tables".as_ref())?;
//! export.add("out/demo/trace.jsonl", &doc, &analysis)?;
//! let written = export.finish()?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod error;
pub mod partitioned;
pub mod staged;
pub mod table;
pub mod tables;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use trace_graph::Analysis;
use trace_schema::{MemoryAction, MemoryOrder, TraceDocument};

pub use crate::error::ExportError;
pub use crate::partitioned::{export_partition, partition_value, PART_FILE};
pub use crate::staged::Staging;
use crate::table::{TableWriter, Value};
use crate::tables::TABLES;

/// The schema of every table as Markdown (a section per table: column, type, unit, meaning).
pub fn schema_markdown() -> String {
    let mut out = String::new();
    for t in TABLES {
        out.push_str(&format!(
            "`{}.parquet` — one row per {}:\n\n| column | type | unit | meaning |\n|---|---|---|---|\n",
            t.name, t.row
        ));
        for c in t.columns {
            out.push_str(&format!(
                "| `{}` | {}{} | {} | {} |\n",
                c.name,
                c.kind.name(),
                if c.nullable { ", null" } else { "" },
                c.unit,
                c.meaning.replace('|', "\\|")
            ));
        }
        out.push('\n');
    }
    out
}

/// What an export wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// Each table's file and rows.
    pub tables: Vec<(PathBuf, u64)>,
    /// Traces exported.
    pub traces: u64,
}

/// An export in progress: one writer per table (see the module docs).
pub struct ParquetExport {
    writers: Vec<TableWriter>,
    traces: u64,
    /// `(run id, rank)` of every trace exported, with its source.
    exported: std::collections::HashMap<(String, Option<u32>), String>,
}

impl ParquetExport {
    /// Creates `dir` (and its parents) and the table files in it.
    ///
    /// # Errors
    /// I/O and Parquet errors naming the file.
    pub fn create(dir: &Path) -> Result<Self, ExportError> {
        std::fs::create_dir_all(dir).map_err(|source| ExportError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut writers = Vec::with_capacity(TABLES.len());
        for def in TABLES {
            match TableWriter::create(dir, def) {
                Ok(w) => writers.push(w),
                Err(e) => {
                    writers.into_iter().for_each(TableWriter::abandon);
                    return Err(e);
                }
            }
        }
        Ok(Self {
            writers,
            traces: 0,
            exported: std::collections::HashMap::new(),
        })
    }

    /// Appends the rows of one trace (`source` names it in `runs.source` and in errors); the
    /// analysis must be of full detail.
    ///
    /// # Errors
    /// [`ExportError::SummaryDetail`], [`ExportError::DuplicateRun`] (nothing of the trace is
    /// written), [`ExportError::DeltaOverflow`], [`ExportError::SpilledLog`] (the tables before
    /// `memory_events` already hold the trace's rows: abandon the export), writer errors.
    pub fn add(
        &mut self,
        source: &str,
        doc: &TraceDocument,
        analysis: &Analysis,
    ) -> Result<(), ExportError> {
        if analysis.detail != trace_graph::Detail::Full {
            return Err(ExportError::SummaryDetail(source.to_string()));
        }
        let run_key = (doc.meta.run_id.clone(), doc.meta.rank);
        if let Some(first) = self.exported.get(&run_key) {
            return Err(ExportError::DuplicateRun {
                trace: source.to_string(),
                run_id: run_key.0,
                rank: run_key.1,
                first: first.clone(),
            });
        }
        self.exported.insert(run_key, source.to_string());
        let [runs, spans, storages, memory, ops, gradients, findings] = &mut self.writers[..]
        else {
            unreachable!("one writer per table");
        };
        write_run(runs, source, doc, analysis)?;
        write_spans(spans, doc, analysis)?;
        write_storages(storages, doc, analysis)?;
        write_memory(memory, source, doc, analysis)?;
        write_ops(ops, doc, analysis)?;
        write_gradients(gradients, doc)?;
        write_findings(findings, doc, analysis)?;
        self.traces += 1;
        Ok(())
    }

    /// Closes every table and renames it into place.
    ///
    /// # Errors
    /// Writer errors naming the file (the tables not yet closed are removed).
    pub fn finish(self) -> Result<Written, ExportError> {
        let mut tables = Vec::with_capacity(self.writers.len());
        let mut writers = self.writers.into_iter();
        while let Some(w) = writers.next() {
            match w.finish() {
                Ok(t) => tables.push(t),
                Err(e) => {
                    writers.for_each(TableWriter::abandon);
                    return Err(e);
                }
            }
        }
        Ok(Written {
            tables,
            traces: self.traces,
        })
    }

    /// Removes every temporary file (after a failure).
    pub fn abandon(self) {
        self.writers.into_iter().for_each(TableWriter::abandon);
    }
}

fn key(doc: &TraceDocument) -> [Value<'_>; 2] {
    [Value::Text(&doc.meta.run_id), doc.meta.rank.into()]
}

fn name<T: Into<&'static str>>(v: T) -> Value<'static> {
    Value::Text(v.into())
}

fn opt_name<T: Into<&'static str>>(v: Option<T>) -> Value<'static> {
    v.map_or(Value::Null, |x| Value::Text(x.into()))
}

fn write_run(
    w: &mut TableWriter,
    source: &str,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<(), ExportError> {
    let m = &doc.meta;
    let peak = analysis
        .memory
        .logical
        .as_ref()
        .and_then(|l| l.peak.as_ref());
    let c = m.capture_contract.as_ref();
    let level =
        |f: fn(&trace_schema::CaptureContract) -> trace_schema::CoverageLevel| opt_name(c.map(f));
    let [run_id, rank] = key(doc);
    w.push(&[
        run_id,
        rank,
        m.local_rank.into(),
        m.world_size.into(),
        Value::Text(source),
        Value::Text(doc.version.as_str()),
        Value::Text(&m.entrypoint),
        opt_name(m.phase),
        m.capture_step.into(),
        m.warmup_steps.into(),
        m.device.as_deref().into(),
        Value::Text(&m.timestamp),
        m.candle_version.as_deref().into(),
        m.probe_version.as_deref().into(),
        Value::Bool(doc.is_truncated()),
        Value::Bool(analysis.health.structurally_valid),
        Value::Bool(analysis.health.capture_complete),
        analysis
            .graph
            .as_ref()
            .and_then(|g| g.outer_wall_time_ns)
            .into(),
        peak.map(|p| p.live_bytes).into(),
        peak.map(|p| p.timestamp_ns).into(),
        Value::U64(doc.memory_len() as u64),
        Value::U64(doc.spans.len() as u64),
        opt_name(c.map(|c| c.measurement_scope)),
        level(|c| c.operations),
        level(|c| c.tensors),
        level(|c| c.gradients),
        level(|c| c.logical_memory),
        level(|c| c.physical_memory),
        level(|c| c.tensor_stats),
        analysis
            .memory
            .logical
            .as_ref()
            .map(|l| l.live_at_end.bytes)
            .into(),
        doc.device_memory
            .iter()
            .rev()
            .find_map(|d| d.used_bytes)
            .into(),
    ])
}

fn write_spans(
    w: &mut TableWriter,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<(), ExportError> {
    let index = &analysis.spans;
    for (i, s) in doc.spans.iter().enumerate() {
        let path = index.path(doc, i);
        let [run_id, rank] = key(doc);
        w.push(&[
            run_id,
            rank,
            Value::Text(doc.str(s.id)),
            s.parent.map(|p| doc.str(p)).into(),
            Value::Text(doc.str(s.name)),
            Value::Text(&path),
            name(s.kind),
            opt_name(s.pass),
            opt_name(index.pass.get(i).copied().flatten()),
            Value::Bool(s.measured),
            Value::U64(s.start_ns),
            s.end_ns().into(),
            s.duration_ns.into(),
            Value::U32(index.depth.get(i).copied().unwrap_or(0)),
            s.module_path.map(|p| doc.str(p)).into(),
        ])?;
    }
    Ok(())
}

fn shape_text(dims: &[u64]) -> String {
    let inner: Vec<String> = dims.iter().map(u64::to_string).collect();
    format!("[{}]", inner.join(", "))
}

fn write_storages(
    w: &mut TableWriter,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<(), ExportError> {
    let Some(logical) = analysis.memory.logical.as_ref() else {
        return Ok(());
    };
    let index = &analysis.spans;
    // span path and pass once per span, not once per storage
    let mut span_info: HashMap<&str, (Option<String>, Option<trace_schema::Pass>)> = HashMap::new();
    for (i, l) in logical.lifetimes.iter().enumerate() {
        let (path, pass) = match l.span_id.as_deref() {
            Some(id) => span_info
                .entry(id)
                .or_insert_with(|| {
                    let i = doc.sym(id).and_then(|s| doc.span_index(s));
                    (
                        i.map(|i| index.path(doc, i)),
                        i.and_then(|i| index.pass.get(i).copied().flatten()),
                    )
                })
                .clone(),
            None => (None, None),
        };
        let shape = l.shape.as_deref().map(shape_text);
        let [run_id, rank] = key(doc);
        w.push(&[
            run_id,
            rank,
            Value::U64(i as u64),
            l.storage_id.as_deref().into(),
            Value::Text(&l.device),
            Value::U64(l.bytes),
            name(l.category),
            Value::U64(l.start_ns),
            l.end_ns.into(),
            Value::Bool(l.pre_existing),
            l.span_id.as_deref().into(),
            path.as_deref().into(),
            opt_name(pass),
            l.op_name.as_deref().into(),
            l.label.as_deref().into(),
            shape.as_deref().into(),
            l.dtype.as_deref().into(),
        ])?;
    }
    Ok(())
}

/// The live-bytes change of each memory event (by index) as the analyzer applied it: the
/// differences of its timeline's totals, in apply order; `None` without a logical timeline
/// (overflowed live bytes, no logical memory): unobserved, never 0.
fn live_deltas(
    source: &str,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<Option<Vec<i64>>, ExportError> {
    let Some(logical) = analysis.memory.logical.as_ref() else {
        return Ok(None);
    };
    let mut deltas = vec![0i64; doc.memory_len()];
    let mut previous = 0u64;
    for t in &logical.timeline.totals {
        let i = t.event_index as usize;
        let overflow = || ExportError::DeltaOverflow {
            trace: source.to_string(),
            event_index: i,
        };
        let change = i128::from(t.live_bytes) - i128::from(previous);
        previous = t.live_bytes;
        let slot = deltas.get_mut(i).ok_or_else(overflow)?;
        let sum = i128::from(*slot) + change;
        *slot = i64::try_from(sum).map_err(|_| overflow())?;
    }
    Ok(Some(deltas))
}

fn write_memory(
    w: &mut TableWriter,
    source: &str,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<(), ExportError> {
    let deltas = live_deltas(source, doc, analysis)?;
    // In file order, from memory or from the spilled log alike (the CLI spills: the export then
    // holds one compact copy of the events, not the decoded records).
    let mut written = Ok(());
    let read = doc.try_for_each_memory(MemoryOrder::File, |e| {
        if written.is_err() {
            return;
        }
        let i = e.index as usize;
        let delta = deltas.as_ref().map_or(Value::Null, |d| Value::I64(d[i]));
        let action: &'static str = match e.action {
            MemoryAction::Alloc => "alloc",
            MemoryAction::Free => "free",
        };
        let [run_id, rank] = key(doc);
        written = w.push(&[
            run_id,
            rank,
            Value::U64(i as u64),
            Value::U64(e.timestamp_ns),
            Value::Text(action),
            Value::Text(doc.str(e.device)),
            e.storage.into(),
            e.bytes.into(),
            name(e.category),
            e.span.map(|s| doc.str(s)).into(),
            e.op_name.map(|s| doc.str(s)).into(),
            Value::Bool(e.pre_existing),
            delta,
        ]);
    });
    // A row the writer refused comes first: after it the log was read on only to skip rows.
    written?;
    read.map_err(|source_err| ExportError::SpilledLog {
        trace: source.to_string(),
        source: source_err,
    })
}

fn write_ops(
    w: &mut TableWriter,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<(), ExportError> {
    let Ok(profile) = &analysis.operations else {
        return Ok(());
    };
    for r in profile.rows_by(trace_ops::GroupBy::OpPassModule) {
        let [run_id, rank] = key(doc);
        w.push(&[
            run_id,
            rank,
            r.op.as_deref().into(),
            opt_name(r.kind),
            opt_name(r.pass),
            r.module.as_deref().into(),
            Value::U64(r.thread),
            Value::U64(r.samples),
            Value::F64(r.share),
            Value::F64(r.share_low),
            Value::F64(r.share_high),
            r.self_ns.into(),
            r.self_ns_low.into(),
            r.self_ns_high.into(),
            r.calls.into(),
        ])?;
    }
    Ok(())
}

fn write_gradients(w: &mut TableWriter, doc: &TraceDocument) -> Result<(), ExportError> {
    for g in &doc.gradients {
        let [run_id, rank] = key(doc);
        w.push(&[
            run_id,
            rank,
            Value::Text(&g.root),
            Value::Text(&g.key),
            name(g.state),
            g.norm.into(),
            Value::Bool(g.parameter),
            g.bytes.into(),
            g.non_finite_elements.into(),
        ])?;
    }
    Ok(())
}

fn write_findings(
    w: &mut TableWriter,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<(), ExportError> {
    for (i, f) in analysis.findings.iter().enumerate() {
        let [run_id, rank] = key(doc);
        w.push(&[
            run_id,
            rank,
            Value::U32(u32::try_from(i).unwrap_or(u32::MAX)),
            name(f.severity),
            name(f.code),
            Value::Text(&f.summary),
            f.evidence.timestamp_ns.into(),
        ])?;
    }
    Ok(())
}
